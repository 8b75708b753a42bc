"""The fast first pass fuzzed against the positional loader: same values, same findings.

Hypothesis writes YAML documents from a grammar of awkward scalars (``~`` and ``null`` keys,
anchors, aliases, tags, quoted and empty scalars) and from raw characters. On every one the fast
pass either declines (``None``) or gives the positional loader's value, never raises; and
``check_paths`` reports the same sets and findings with the fast path on and off.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry_db.errors import InvalidInput
from registry_db.sources import profile_set as source
from registry_db.sources.profile_set import check_paths
from registry_db.yaml.load import load_yaml
from registry_db.yaml.plain import load_plain
from tests.helpers import value_shape

#: Scalars that have tripped loaders: null spellings, numbers, bools, quotes, anchors, tags.
SCALARS = ["~", "null", "Null", "", "a", "b", "kind", "name", "profiles", "1", "-1", "0x1F",
           "0o7", "1.5", ".inf", ".nan", "1e3", "true", "False", "'q'", '"d"', '""', "a b",
           "&x a", "*x", "!!str 1", "!!null ''", "[]", "{}", "AcceptanceProfileSet", "'~'"]

_scalar = st.sampled_from(SCALARS)


def _render(node, indent: int) -> str:
    """``node`` as block YAML at ``indent`` spaces: a str is a scalar token as written."""
    pad = " " * indent
    if isinstance(node, str):
        return node
    if isinstance(node, tuple):  # flow style, one line
        kind, items = node
        if kind == "seq":
            return "[" + ", ".join(_render(i, 0) for i in items) + "]"
        return "{" + ", ".join(f"{k}: {_render(v, 0)}" for k, v in items) + "}"
    kind, items = node["kind"], node["items"]
    if not items:
        return "[]" if kind == "seq" else "{}"
    lines = []
    for item in items:
        if kind == "seq":
            head, value = f"{pad}- ", item
        else:
            head, value = f"{pad}{item[0]}:", item[1]
        if isinstance(value, dict) and value["items"]:
            lines.append(head.rstrip() + "\n" + _render(value, indent + 2))
        else:
            lines.append(f"{head.rstrip()} {_render(value, 0)}")
    return "\n".join(lines)


def _nodes():
    flow = st.recursive(
        _scalar,
        lambda inner: st.one_of(
            st.tuples(st.just("seq"), st.lists(inner, max_size=3)),
            st.tuples(st.just("map"), st.lists(st.tuples(_scalar, inner), max_size=3))),
        max_leaves=6)
    return st.recursive(
        flow,
        lambda inner: st.one_of(
            st.fixed_dictionaries({"kind": st.just("seq"), "items": st.lists(inner, max_size=4)}),
            st.fixed_dictionaries({"kind": st.just("map"),
                                   "items": st.lists(st.tuples(_scalar, inner), max_size=4)})),
        max_leaves=12)


documents = st.one_of(
    _nodes().map(lambda n: _render(n, 0) + "\n"),
    st.text(alphabet=":-[]{},&*!~?#'\"\n ab1.", max_size=40),
)


def _positional(text: str):
    try:
        return load_yaml(text, "f.yaml")
    except InvalidInput:
        return None


@settings(max_examples=600, deadline=None)
@given(documents)
def test_fast_pass_gives_the_loaders_value_or_declines(text):
    """Never raises; where it answers, the loader answers the same value without a finding."""
    plain = load_plain(text)
    if plain is None:
        return
    located = _positional(text)
    assert located is not None, "the fast pass read a document the loader refuses"
    assert value_shape(plain) == value_shape(located)


@pytest.mark.parametrize("text", ["~: 1\n", "null: 1\n", "a:\n  ~: [1]\n", "- {~: 1}\n",
                                  "~: 1\n? ~\n: 2\n"])
def test_a_null_key_is_a_value_not_the_list_marker(text):
    """``~`` as a key: the fast pass either equals the loader or declines (it once crashed)."""
    plain = load_plain(text)
    assert plain is None or value_shape(plain) == value_shape(_positional(text))


def test_a_null_key_gets_findings_not_a_traceback(tmp_path, monkeypatch):
    """``~: 1`` as a set file: the same findings both ways (an unknown key among them)."""
    path = tmp_path / "nk.yaml"
    path.write_text("~: 1\n")
    found = []
    for fast in (True, False):
        monkeypatch.setattr(source, "FAST_PATH", fast)
        found.append([f.render() for f in check_paths([path])[1]])
    assert found[0] == found[1]
    assert any("unknown key 'None'" in r for r in found[0])


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(documents)
def test_findings_are_the_same_both_ways(tmp_path, monkeypatch, text):
    """As a set file, each document gets the same sets and findings with the fast path on or off."""
    path = tmp_path / "f.yaml"
    path.write_text(text, encoding="utf-8")
    results = []
    for fast in (True, False):
        monkeypatch.setattr(source, "FAST_PATH", fast)
        sets, findings = check_paths([path])
        results.append((sets, [f.render() for f in findings]))
    assert results[0] == results[1]
