"""``ryaml`` as the first pass, behind its byte guard (:mod:`registry_db.yaml.fast`).

Each rule of the guard has a document that ``ryaml`` 0.5.1 reads otherwise than the loader and
that only this rule sends the long way. The YAML test suite's documents, dumped values and
mutated documents (hypothesis) are read both ways: wherever the rapid pass answers, the loader
gives the same value with no finding, and ``check_paths`` gives the same sets and findings.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import ryaml
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry_db.errors import InvalidInput
from registry_db.sources import profile_set as source
from registry_db.sources.profile_set import check_paths
from registry_db.yaml import fast
from registry_db.yaml.load import load_yaml
from registry_db.yaml.plain import load_plain_bytes
from tests.helpers import typed_value, value_shape

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _positional(data: bytes):
    try:
        return typed_value(load_yaml(data, "f.yaml"))
    except InvalidInput:
        return "refused"


def _ryaml(data: bytes):
    try:
        return typed_value(ryaml.loads(data.decode("utf-8")))
    except ValueError:
        return "refused"


def _agree_or_decline(data: bytes) -> bool:
    """The property: the rapid pass declines, or gives the loader's value (no finding)."""
    rapid = fast.load_rapid(data)
    if rapid is None:
        return False
    assert _positional(data) == typed_value(rapid), data
    return True


def _nested_block(depth: int) -> str:
    return "".join(" " * i + "k:\n" for i in range(depth)) + " " * depth + "x\n"


#: rule -> a document ryaml 0.5.1 reads otherwise than the loader, caught by this rule alone.
RULES = {
    "tag": "a: !foo x\n",                                    # {'a': {'!foo': 'x'}}; bad_tag
    "explicit_key": "? 1\n: a\n? 1.0\n: b\n",                # {1: 'b'}; duplicate_key
    "alias": "x: &a 1\ny: &b 1.0\nm:\n  *a: p\n  *b: q\n",  # keys 1 and 1.0 merge
    "radix": "a: 0x1F\n",                                    # 31; the text 0x1F
    "long_run": "a: 340282366920938463463374607431768211456\n",  # 2**128: a float; an int
    "number_key": "1: a\ntrue: b\n",                         # {1: 'b'}; duplicate_key
    "exponent": "a: 1e400\n",                                # '1e400'; inf
    "flow_nested": "a: " + "[" * 110 + "]" * 110 + "\n",     # accepted; too_deep
    "flow_text": '{a: "]", 1, 1.0}\n',                       # hides the empty entries
    "flow_empty_entry": "{1, 1.0}\n",                        # {1: None}; duplicate_key
}


@pytest.mark.parametrize("rule", RULES)
def test_each_guard_rule_sends_what_ryaml_reads_otherwise_the_long_way(rule):
    data = RULES[rule].encode()
    assert _ryaml(data) != _positional(data), "the rule guards nothing"
    assert fast.risk(data) == rule
    assert fast.load_rapid(data) is None


def test_the_long_run_needle_also_bounds_the_nesting_of_blocks():
    """Blocks nested past 100 levels (ryaml allows 128) are indented past 38 columns."""
    data = _nested_block(105).encode()
    assert _positional(data) == "refused" and _ryaml(data) != "refused"
    assert fast.risk(data) == "long_run" and fast.load_rapid(data) is None
    within = _nested_block(37).encode()  # the deepest the needle lets through, read alike
    assert fast.risk(within) is None and _agree_or_decline(within)


def test_aliases_go_to_libyamls_pass():
    """serde_yaml copies what an alias names and bounds copies by jumps (100 per event), not
    nodes: 1.2M expanded nodes pass it, which the loader refuses. Any ``*`` goes the libyaml
    way, where the value is shared as the loader shares it."""
    text = "a: &a [" + ", ".join(["x"] * 200) + "]\nb: [" + ", ".join(["*a"] * 6_000) + "]\n"
    data = text.encode()
    assert _ryaml(data) != "refused" and _positional(data) == "refused"
    assert fast.risk(data) == "alias" and fast.load_rapid(data) is None
    assert load_plain_bytes(data) is None
    small = b"a: &a [x, y]\nb: [*a, *a]\n"
    assert fast.risk(small) == "alias"
    assert value_shape(load_plain_bytes(small)) == value_shape(load_yaml(small, "f.yaml"))


def test_only_the_release_the_guard_was_proven_against_is_used(monkeypatch):
    """Another ryaml release (0.6 drops serde_yaml) or none at all: the libyaml pass reads."""
    data = (DATA / "valid" / "yml-extension.yml").read_bytes()
    assert fast.load_rapid(data) is not None
    try:
        monkeypatch.setattr(fast, "_VERSION", "0.6.0")
        fast._ryaml_loads.cache_clear()
        assert fast.load_rapid(data) is None
        monkeypatch.setattr(fast, "_VERSION", "0.5.1")
        monkeypatch.setitem(sys.modules, "ryaml", None)  # import ryaml raises ImportError
        fast._ryaml_loads.cache_clear()
        assert fast.load_rapid(data) is None
        assert typed_value(load_plain_bytes(data)) == _positional(data)
    finally:
        fast._ryaml_loads.cache_clear()


#: The YAML test suite's documents (yaml/yaml-test-suite, branch data, commit 6ad3d2c, MIT).
SUITE = {k: v for k, v in json.loads((DATA / "yaml_test_suite.json").read_text("utf-8")).items()
         if not k.startswith("_")}


def test_the_yaml_test_suite_reads_alike_or_goes_the_long_way():
    """Every case of the suite: the rapid pass declines or agrees; unguarded, ryaml disagrees
    with the loader on some (tags, empty documents), so the guard is what makes them agree."""
    answered = [k for k, text in SUITE.items() if _agree_or_decline(text.encode("utf-8"))]
    assert len(answered) > 100
    unguarded = [k for k, text in SUITE.items()
                 if _ryaml(text.encode()) not in ("refused", _positional(text.encode()))]
    assert unguarded and not set(unguarded) & set(answered)


# --- property-based: dumped and mutated documents ---------------------------------------------

_keys = st.one_of(st.sampled_from(["a", "b", "name", "1", "true", "~", ""]), st.integers(-2, 2),
                  st.sampled_from([1.0, 0.0, -0.0, True, False, None]))
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-(10**45), max_value=10**45),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["012", "0x1F", "0o17", "0b1", "1_000", "on", "off", "yes", "no", "True",
                     "NULL", "~", ".nan", ".inf", "-.inf", "1e400", "2001-12-14", "12:30",
                     "<<", "*x", "&x", "!x", "? x", "- x", "a: b", "[a]", "{a: 1}", "#", "",
                     "it's", 'say "hi"', "\u00e9t\u00e9", "\u2028", "\x85", "a\tb"]),
    st.text(alphabet=st.sampled_from(list("ab01.-+_:e, #'\"[]{}!&*?|>\u00e9")), max_size=8))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=20)


@st.composite
def dumped(draw):
    """A value as PyYAML writes it, in block or flow style."""
    value = draw(_values)
    flow = draw(st.sampled_from([None, True, False]))
    return yaml.safe_dump(value, default_flow_style=flow, sort_keys=False,
                          allow_unicode=draw(st.booleans())).encode("utf-8")


#: Tokens a mutation puts in: each a way the two readings have been seen to part.
TOKENS = ["0x1F", "0o7", "3" + "4" * 38, "1e400", "1: a", "1.0: b", "true: c", "? 1", "*a",
          "&a ", "!t ", "[", "]", "{", "}", ", ", ": ", "'", '"', "#", "\n", " " * 41, "- ",
          "<<: ", "---\n", "...\n", "%YAML 1.1\n", "\ufeff", "\t", "~", "012", "-0.0", ".nan",
          "\\", "|\n", ">-\n", "\u2028", "\x85", "\x00"]


@st.composite
def mutated(draw):
    """A document with a few tokens put in, cut out or swapped: most stop being valid YAML or
    start drawing findings, exactly where the readings could part."""
    data = bytearray(draw(st.one_of(dumped(), st.sampled_from(_CORPUS))))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        token = draw(st.sampled_from(TOKENS)).encode("utf-8")
        cut = draw(st.integers(0, 3))
        data[at:at + cut] = token
    return bytes(data)


_CORPUS = [p.read_bytes() for p in sorted((DATA / "valid").iterdir())
           if p.stat().st_size < 4_000]


@settings(max_examples=400, deadline=None)
@given(dumped())
def test_dumped_documents_read_alike_or_go_the_long_way(data):
    _agree_or_decline(data)


@settings(max_examples=600, deadline=None)
@given(mutated())
def test_mutated_documents_read_alike_or_go_the_long_way(data):
    _agree_or_decline(data)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(mutated(), st.sampled_from(_CORPUS)))
def test_sets_and_findings_are_the_same_with_ryaml_or_without(tmp_path, monkeypatch, data):
    """As a set file (the valid corpus, mutated): the same sets and findings, ryaml on or off."""
    path = tmp_path / "f.yaml"
    path.write_bytes(data)
    results = []
    for rapid in (True, False):
        monkeypatch.setattr(fast, "RAPID", rapid)
        monkeypatch.setattr(source, "FAST_PATH", rapid)
        sets, findings = check_paths([path])
        results.append((sets, [f.render() for f in findings]))
    assert results[0] == results[1]
