"""The YAML entry point: strict loading with positions, bounded aliases, and a dumper that
round-trips. Every loading test runs on libyaml's parser and on PyYAML's pure-Python one."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry_db.errors import InvalidInput
from registry_db.yaml import load as yamlio
from registry_db.yaml.dump import dump_yaml
from registry_db.yaml.load import YMap, YSeq, key_pos, load_file, load_yaml, mark, pos

PARSER_IDS = [p.__name__ for p in yamlio.PARSERS]


@pytest.fixture(params=yamlio.PARSERS, ids=PARSER_IDS, autouse=True)
def parser(request, monkeypatch):
    """Run each test with each available parser (libyaml first, then pure Python)."""
    monkeypatch.setattr(yamlio, "PARSERS", [request.param])
    return request.param


def problems(data, file="t.yaml"):
    """The findings load_yaml raises, as (code, line, column, path) tuples."""
    with pytest.raises(InvalidInput) as exc:
        load_yaml(data, file)
    return [(f.code, f.line, f.column, f.path) for f in exc.value.findings]


# --- scalars -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("~", None), ("null", None), ("Null", None), ("NULL", None), ("", None),
    ("true", True), ("True", True), ("TRUE", True), ("false", False), ("FALSE", False),
    ("0", 0), ("-0", 0), ("+12", 12), ("4096", 4096),
    ("4.07", 4.07), ("1.", 1.0), (".5", 0.5), ("1e3", 1000.0), ("-2.5E-1", -0.25),
    (".inf", math.inf), ("-.Inf", -math.inf), ("+.INF", math.inf),
    # YAML 1.1 types that YAML 1.2 core (and the contract) keep as text:
    ("on", "on"), ("off", "off"), ("yes", "yes"), ("no", "no"), ("y", "y"), ("n", "n"),
    ("012", "012"), ("-012", "-012"), ("12:30", "12:30"), ("0x1F", "0x1F"), ("0o17", "0o17"),
    ("1_000", "1_000"), ("nan", "nan"), ("inf", "inf"), ("tRUE", "tRUE"), ("<<", "<<"),
])
def test_plain_scalars_resolve_as_yaml_1_2_core(text, expected):
    value = load_yaml(f"v: {text}\n", "t")["v"]
    assert value == expected and type(value) is type(expected)


def _pattern_kind(text):
    """The kind YAML 1.2 core's patterns alone give (the reference for scalar_kind's shortcuts)."""
    if text in ("", "~", "null", "Null", "NULL"):
        return "null"
    if text in ("true", "True", "TRUE", "false", "False", "FALSE"):
        return "bool"
    if yamlio._INT_RE.fullmatch(text):
        return "int"
    if text in yamlio._INF or text in yamlio._NAN:
        return "float"
    if yamlio._FLOAT_RE.fullmatch(text) and not yamlio._DIGITS_RE.fullmatch(text):
        return "float"
    return "str"


@settings(max_examples=3000, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet="0123456789.+-eE_x ٣²atrufalsenNTFI~", max_size=8))
def test_scalar_kind_shortcuts_agree_with_the_patterns(text):
    assert yamlio.scalar_kind(text) == _pattern_kind(text)
    _same_value(text)


def _same_value(text):
    """plain_value gives the value (and type) the patterns' kind converts ``text`` to."""
    try:
        want = yamlio._VALUE_OF[_pattern_kind(text)](text)
    except ValueError:
        with pytest.raises(ValueError):
            yamlio.plain_value(text)
        return
    got = yamlio.plain_value(text)
    assert type(got) is type(want) and (got == want or got != got and want != want)


@pytest.mark.parametrize("text", ["0", "00", "012", "1.", "01.5", "1.5.3", "٣", "²", "1.٣",
                                  "10", "7.25", ".5", "5e3", "-1.5", "true", "nULL", "Null",
                                  "nan", "thinking", "False"])
def test_scalar_kind_shortcuts_on_their_edges(text):
    assert yamlio.scalar_kind(text) == _pattern_kind(text)
    _same_value(text)


@pytest.mark.parametrize("text", [".nan", ".NaN", ".NAN"])
def test_nan_is_a_float(text):
    assert math.isnan(load_yaml(f"v: {text}", "t")["v"])


@pytest.mark.parametrize("text", ["'true'", '"5"', "'~'", '"012"', "'.inf'", "|\n  5\n"])
def test_quoted_and_block_scalars_are_strings(text):
    assert isinstance(load_yaml(f"v: {text}", "t")["v"], str)


@pytest.mark.parametrize("text, expected", [
    ("!!str 5", "5"), ("!!int '5'", 5), ("!!float 1", 1.0), ("!!bool 'true'", True),
    ("!!null ''", None), ("! 5", "5"), ("!!map {a: 1}", {"a": 1}), ("!!seq [1]", [1]),
])
def test_standard_tags_are_accepted(text, expected):
    value = load_yaml(f"v: {text}", "t")["v"]
    assert value == expected and isinstance(value, type(expected))


@pytest.mark.parametrize("text, code", [
    ("!!python/object/apply:os.system [echo hi]", "bad_tag"),
    ("!!python/name:os.system ''", "bad_tag"),
    ("!local x", "bad_tag"),
    ("!!binary aGk=", "bad_tag"),
    ("!!map [1]", "bad_tag"),
    ("!!int three", "bad_tagged_value"),
    ("!!bool yes", "bad_tagged_value"),
])
def test_other_tags_are_findings(text, code):
    assert problems(f"v: {text}\n") == [(code, 1, 4, "v")]


# --- structure and positions ---------------------------------------------------------------------

def test_positions_are_one_based_and_kept_per_key_and_item():
    doc = load_yaml("a: 1\nlist:\n  - x\n  - {b: 2}\n", "f.yaml")
    assert isinstance(doc, YMap) and isinstance(doc["list"], YSeq)
    assert doc.file == "f.yaml" and mark(doc) == (1, 1)
    assert key_pos(doc, "list") == (2, 1) and pos(doc, "a") == (1, 4)
    assert pos(doc["list"], 0) == (3, 5) and pos(doc["list"], 1) == (4, 5)
    assert pos(doc["list"][1], "b") == (4, 9)
    assert pos(doc, "absent") == (1, 1)  # falls back to the mapping itself


def test_plain_containers_have_unknown_positions():
    assert pos({"a": 1}, "a") == (0, 0) and key_pos({}, "a") == (0, 0) and mark([]) == (0, 0)


def test_columns_count_characters_not_bytes():
    doc = load_yaml("é: [ü, x]\n", "t")
    assert pos(doc["é"], 1) == (1, 8)


def test_duplicate_key_names_both_lines():
    with pytest.raises(InvalidInput) as exc:
        load_yaml("a: 1\nb:\n  c: 1\n  c: 2\na: 3\n", "t")
    found = [(f.code, f.line, f.path, f.message) for f in exc.value.findings]
    assert found == [
        ("duplicate_key", 4, "b.c", "duplicate key 'c' (first at line 3); remove one of them"),
        ("duplicate_key", 5, "a", "duplicate key 'a' (first at line 1); remove one of them"),
    ]


def test_non_scalar_key_is_a_finding():
    assert problems("? [a]\n: 1\nb: 2\n") == [("complex_key", 1, 3, "")]


def test_top_level_may_be_any_node():
    assert load_yaml("- 1\n- 2\n", "t") == [1, 2]
    assert load_yaml("just text", "t") == "just text"
    assert load_yaml("---\n", "t") is None


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "\ufeff"])
def test_a_file_without_a_document_is_a_finding(text):
    assert problems(text) == [("empty_document", 1, 1, "")]


def test_a_second_document_is_a_finding_at_its_start():
    assert problems("a: 1\n---\nb: 2\n") == [("multiple_documents", 2, 1, "")]
    assert problems("a: 1\n...\n--- \nb: [\n") == [("multiple_documents", 3, 1, "")]


def test_syntax_error_is_one_finding_at_the_problem():
    found = problems("a: 1\nb: [1, 2\nc: 3\n")
    assert len(found) == 1 and found[0][0] == "yaml_syntax" and found[0][1] in (3, 4)


@pytest.mark.parametrize("text, at", [
    ("kind: x\nprofiles:\n\t- model: m\n", (3, 1)),   # "cannot start any token"
    ("a:\n  b: 1\n\tc: 2\n", (3, 1)),                  # "violates indentation"
    ("a:\n  \tb: 1\n", (2, 3)),
])
def test_a_tab_that_indents_is_named_as_a_tab(text, at):
    with pytest.raises(InvalidInput) as exc:
        load_yaml(text, "t.yaml")
    [finding] = exc.value.findings
    assert (finding.code, (finding.line, finding.column)) == ("yaml_syntax", at)
    assert "a tab character indents this line; YAML indents with spaces only" in finding.message


def test_control_characters_are_a_finding_with_position():
    assert problems("a: 1\nbé: x\x07y\n") == [("bad_character", 2, 6, "")]


# --- aliases -------------------------------------------------------------------------------------

def test_alias_is_the_same_object_as_its_anchor():
    doc = load_yaml("a: &p {x: [1, 2]}\nb: *p\nc: &s text\nd: *s\n", "t")
    assert doc["a"] is doc["b"] and doc["d"] == "text"
    assert pos(doc, "b") == (2, 4)  # where the alias is written, not the anchor


def billion_laughs(levels=9, width=9):
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_without_expanding():
    # No timing assert: 9**10 nodes could never be built, so finishing at all is the proof.
    found = problems(billion_laughs())
    assert [f[0] for f in found] == ["alias_bomb"]


def test_expansion_limit_counts_nested_aliases(monkeypatch):
    monkeypatch.setattr(yamlio, "MAX_EXPANDED_NODES", 120)
    # root, 2 keys, a0 (list + 9), a1 (list + 9 aliases of 10 nodes each): 104 nodes
    assert load_yaml(billion_laughs(levels=1, width=9), "t")
    assert [f[0] for f in problems(billion_laughs(levels=2, width=9))] == ["alias_bomb"]


def test_recursive_alias_is_a_finding():
    assert problems("a: &x\n  b: *x\n") == [("recursive_alias", 2, 6, "a.b")]
    assert problems("- &y [1, *y]\n") == [("recursive_alias", 1, 10, "[0][1]")]


def test_unknown_alias_is_a_finding():
    assert problems("a: *nope\nb: &late 1\nc: *late\n") == [("unknown_alias", 1, 4, "a")]


# --- limits --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "[" * 10_000 + "]" * 10_000,
    "{a: " * 10_000 + "}" * 10_000,
    "- " * 10_000 + "x\n",
    "".join("  " * i + "k:\n" for i in range(150)),
])
def test_deep_nesting_is_a_finding_not_a_recursion_error(text):
    assert [f[0] for f in problems(text)] == ["too_deep"]


def test_nesting_up_to_the_limit_loads():
    depth = yamlio.MAX_DEPTH
    assert load_yaml("[" * depth + "]" * depth, "t") is not None


def test_oversize_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("a: " + "x" * 200 + "\n")
    with pytest.raises(InvalidInput) as exc:
        load_file(path, max_bytes=100)
    assert [f.code for f in exc.value.findings] == ["file_too_large"]
    assert load_file(path, max_bytes=1000)["a"] == "x" * 200


def test_unreadable_file_is_a_finding(tmp_path):
    with pytest.raises(InvalidInput) as exc:
        load_file(tmp_path, file="the-folder")
    assert [(f.code, f.file) for f in exc.value.findings] == [("unreadable_file", "the-folder")]


# --- encoding ------------------------------------------------------------------------------------

def test_invalid_utf8_names_the_bad_byte():
    data = "a: 1\nbé: x\xff".encode().replace(b"\xc3\xbf", b"\xff")
    found = problems(data)
    assert found == [("not_utf8", 2, 6, "")]


def test_utf16_is_refused():
    assert [f[0] for f in problems("a: 1\n".encode("utf-16"))] == ["not_utf8"]


def test_bom_is_allowed_and_not_counted():
    doc = load_yaml(b"\xef\xbb\xbfa: 1\n", "t")
    assert doc == {"a": 1} and pos(doc, "a") == (1, 4)


def test_lone_surrogate_in_text_is_a_finding():
    assert problems("a: \ud800\n") == [("not_utf8", 1, 4, "")]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text() | st.binary())
def test_arbitrary_input_only_ever_raises_invalid_input(data):
    try:
        load_yaml(data, "fuzz")
    except InvalidInput as exc:
        assert exc.findings and all(f.file == "fuzz" for f in exc.findings)


YAMLISH = st.lists(st.sampled_from(
    list("-:[]{}&*!|>'\"#%@`,?\n \t") + ["a", "1", "&a ", "*a", "!!str ", "!!int ", "---\n",
                                         "...\n", "- ", ": ", "\ufeff", "é", "\x85", "~"]),
    max_size=40).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(YAMLISH)
def test_yaml_shaped_noise_only_ever_raises_invalid_input(text):
    try:
        load_yaml(text, "fuzz")
    except InvalidInput:
        pass


# --- dumping -------------------------------------------------------------------------------------

AMBIGUOUS = ["on", "off", "yes", "no", "y", "N", "012", "12:30", "1.0", "1e5", "true", "null", "~",
             "", " lead", "trail ", "0x1F", "0o17", "1_000", ".nan", ".inf", "<<", "=", "- x",
             "a: b", "# c", "@x", "*a", "&a", "!t", "%p", "multi\nline\n", "nel\x85", "cr\r"]


def test_ambiguous_strings_are_quoted_and_read_back_as_strings():
    text = dump_yaml({"v": AMBIGUOUS})
    assert load_yaml(text, "t") == {"v": AMBIGUOUS}
    assert yaml.safe_load(text) == {"v": AMBIGUOUS}  # YAML 1.1 reads them as strings too
    assert "\n- on\n" not in text and "- '012'" in text


def test_floats_are_written_by_repr_and_non_finite_refused():
    assert dump_yaml({"al": 4.07, "big": 1e16, "int": 5, "f": 5.0}) == \
        "al: 4.07\nbig: 1.0e+16\nint: 5\nf: 5.0\n"
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError):
            dump_yaml({"al": bad})


def test_dump_keeps_key_order_block_style_and_unicode():
    text = dump_yaml({"z": 1, "a": {"é": ["x"]}})
    assert text == "z: 1\na:\n  é:\n  - x\n"


def test_shared_objects_are_written_once_with_named_anchors():
    prov = {"source": "https://example.com", "hardware": "b300"}
    doc = {"profiles": [{"provenance": prov}, {"provenance": prov}]}
    text = dump_yaml(doc, anchors={id(prov): "dsv41"})
    assert text.count("&dsv41") == 1 and text.count("*dsv41") == 1
    loaded = load_yaml(text, "t")
    assert loaded == doc
    assert loaded["profiles"][0]["provenance"] is loaded["profiles"][1]["provenance"]
    assert "&id001" in dump_yaml(doc)  # unnamed: PyYAML's names
    with pytest.raises(ValueError):
        dump_yaml(doc, anchors={id(prov): "bad name"})


def test_loaded_documents_dump_back_unchanged(parser):
    seed = Path(__file__).resolve().parents[2] / "seed" / "acceptance" / "inferencex-golden-al.yaml"
    doc = load_yaml(seed.read_bytes(), "t")
    assert load_yaml(dump_yaml(doc), "t") == doc


JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(JSON_LIKE)
def test_dump_then_load_is_identity(value):
    text = dump_yaml(value)
    assert load_yaml(text, "t") == value
    assert yaml.safe_load(text) == value
