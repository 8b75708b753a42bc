"""Pure validation: each rule of the spec has a file in tests/data/invalid that breaks it alone.

Each invalid file's first line states the one error it must produce:
``# expect: CODE LINE:COL PATH`` (PATH ``-`` for the document). Removing a rule makes its file
pass and this suite fail, which is how every rule is shown to be tested.
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry_db.errors import InvalidInput
from registry_db.inputs.profile_set import check_inline_value, check_pin, check_profile_set
from registry_db.model import (
    CONTROL_RE,
    PROFILE_METHODS,
    Profile,
    ProfileSet,
    Provenance,
    Sampling,
)
from registry_db.sources.profile_set import check_paths, collect_files
from registry_db.yaml import load as yamlio
from registry_db.yaml.dump import dump_yaml
from registry_db.yaml.load import load_yaml

DATA = Path(__file__).resolve().parents[1] / "data"
VALID = sorted((DATA / "valid").glob("*.y*ml"))
INVALID = sorted((DATA / "invalid").glob("*.yaml"))
EXPECT_RE = re.compile(r"# expect: (?P<code>\w+) (?P<line>\d+):(?P<col>\d+) (?P<path>\S+)")


def errors(findings):
    return [f for f in findings if f.is_error]


# --- the data files ------------------------------------------------------------------------------

@pytest.mark.parametrize("path", INVALID, ids=[p.name for p in INVALID])
def test_each_invalid_file_breaks_exactly_its_rule(path):
    expect = EXPECT_RE.match(path.read_text(encoding="utf-8").splitlines()[0] if
                             path.stat().st_size else "")
    assert expect, f"{path.name} must start with '# expect: CODE LINE:COL PATH'"
    sets, findings = check_paths([path])
    assert sets == []
    got = [(f.code, f.line, f.column, f.path or "-") for f in errors(findings)]
    assert got == [(expect["code"], int(expect["line"]), int(expect["col"]), expect["path"])]
    assert all(f.file == str(path) for f in findings)


@pytest.mark.parametrize("path", VALID, ids=[p.name for p in VALID])
def test_each_valid_file_passes_without_findings(path):
    sets, findings = check_paths([path])
    assert findings == []
    assert [s.name for s in sets] == [path.stem] and sets[0].file == str(path)


def test_the_spec_example_reads_as_the_spec_says():
    (gal,), findings = check_paths([DATA / "valid" / "inferencex-golden-al.yaml"])
    assert findings == [] and len(gal.caveats) == 3
    off, on, glm = gal.profiles
    assert off.key == ("deepseek-v4.1-flash", "dspark", 5, "off", "coding")
    assert off.acceptance_length == 4.07 and on.thinking == "on"
    assert off.provenance is on.provenance  # one provenance, shared by an alias
    assert off.provenance.sampling == Sampling(temperature=1.0, max_tokens=4096)
    assert off.provenance.settings == (("draft_sample_method", "probabilistic"),
                                       ("rejection_sample_method", "block"))
    assert glm.method == "copied" and glm.copied_from == "glm-5.2-fp8/mtp/k3/thinking-on/coding"
    assert glm.rationale.startswith("Provisional.") and glm.provenance.engine_image is None


def test_settings_keep_their_types():
    (s,), _ = check_paths([DATA / "valid" / "settings-types.yaml"])
    values = dict(s.profiles[0].provenance.settings)
    assert values == {"rejection_sample_method": "block", "speculative_eagle_topk": 1,
                      "enable_adaptive_verification": False, "acceptance_threshold": 0.5,
                      "012": "quoted name and a string value"}
    assert type(values["speculative_eagle_topk"]) is int


# --- generated inputs (not kept as files) --------------------------------------------------------

def check_bytes(tmp_path, data: bytes, name="set.yaml"):
    path = tmp_path / name
    path.write_bytes(data)
    return check_paths([path])


def _two_profiles(first: str, second: str) -> bytes:
    """A set of two measured profiles whose provenances are written out in full."""
    def profile(k: int, provenance: str) -> str:
        return (f"  - {{model: m, speculative_method: mtp, num_spec_tokens: {k}, thinking: off, "
                f"category: chat, acceptance_length: 1.5, method: measured, provenance: "
                f"{provenance}}}\n")
    return ("kind: AcceptanceProfileSet\nname: set\nprofiles:\n" + profile(1, first)
            + profile(2, second)).encode()


MEASURED = "{source: s, hardware: h, engine_image: i, sampling: {temperature: 0.0}%s}"


def test_a_provenance_written_twice_is_one_object(tmp_path):
    (s,), findings = check_bytes(tmp_path, _two_profiles(MEASURED % "", MEASURED % ""))
    assert not findings and s.profiles[0].provenance is s.profiles[1].provenance


@pytest.mark.parametrize("first, second", [
    (", settings: {a: 1}", ", settings: {a: 1.0}"), (", settings: {a: 1}", ", settings: {a: true}"),
    (", settings: {a: 1, b: 2}", ", settings: {b: 2, a: 1}"), (", tp: 8", ", tp: 4"),
])
def test_provenances_that_differ_in_type_or_order_stay_apart(tmp_path, first, second):
    (s,), findings = check_bytes(tmp_path, _two_profiles(MEASURED % first, MEASURED % second))
    one, two = (p.provenance for p in s.profiles)
    assert not findings and one is not two and repr(one) != repr(two)


def test_a_bad_provenance_written_twice_is_reported_twice(tmp_path):
    bad = MEASURED % ", run: ''"
    sets, findings = check_bytes(tmp_path, _two_profiles(bad, bad))
    assert not sets
    assert [(f.code, f.line, f.path) for f in findings] == [
        ("empty_value", 4, "profiles[0].provenance.run"),
        ("empty_value", 5, "profiles[1].provenance.run")]


def test_invalid_utf8_is_one_finding(tmp_path):
    sets, findings = check_bytes(tmp_path, b"kind: AcceptanceProfileSet\nname: s\xe9t\n")
    assert [(f.code, f.line, f.column) for f in findings] == [("not_utf8", 2, 8)]


def test_control_character_is_one_finding(tmp_path):
    sets, findings = check_bytes(tmp_path, b"kind: AcceptanceProfileSet\nname: a\x00b\n")
    assert [(f.code, f.line, f.column) for f in findings] == [("bad_character", 2, 8)]


def test_ten_thousand_deep_nesting_is_one_finding(tmp_path):
    sets, findings = check_bytes(tmp_path, b"profiles: " + b"[" * 10_000 + b"]" * 10_000)
    assert [f.code for f in findings] == ["too_deep"]


def test_oversize_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(yamlio, "MAX_FILE_BYTES", 64)
    sets, findings = check_paths([DATA / "valid" / "inferencex-golden-al.yaml"])
    assert [f.code for f in findings] == ["file_too_large"]


def test_every_problem_is_reported_not_just_the_first():
    doc = load_yaml("kind: Other\nname: ''\ncaveats: ['']\nprofiles:\n"
                    "  - {model: m, speculative_method: s, num_spec_tokens: 0, thinking: maybe,\n"
                    "     category: X, acceptance_length: .nan, method: nope, extra: 1}\n",
                    "x.yaml")
    _, findings = check_profile_set(doc, "x.yaml")
    assert sorted(f.code for f in findings) == sorted([
        "wrong_kind", "empty_name", "empty_caveat", "bad_k", "bad_thinking", "bad_category",
        "al_not_finite", "unknown_method", "unknown_key"])


def test_name_differing_from_the_file_is_a_warning_only(tmp_path):
    source = (DATA / "valid" / "assumed-no-provenance.yaml").read_bytes()
    sets, findings = check_bytes(tmp_path, source, "other-name.yaml")
    assert [(f.code, f.severity, f.line) for f in findings] == [("name_not_file", "warning", 2)]
    assert len(sets) == 1


def test_two_files_declaring_one_set_is_an_error_naming_both(tmp_path):
    source = (DATA / "valid" / "assumed-no-provenance.yaml").read_bytes()
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "assumed-no-provenance.yaml").write_bytes(source)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "assumed-no-provenance.yml").write_bytes(source)
    sets, findings = check_paths([tmp_path / "a", tmp_path / "b"])
    (dup,) = errors(findings)
    assert dup.code == "duplicate_set_name" and dup.file.endswith(".yml") and dup.line == 2
    assert str(tmp_path / "a" / "assumed-no-provenance.yaml") in dup.message


def test_collect_files_reads_folders_sorted_skips_hidden_and_dedupes(tmp_path):
    for name in ("b.yaml", "a.yml", ".hidden.yaml", "notes.txt"):
        (tmp_path / name).write_text("x: 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.yaml").write_text("x: 1\n")
    files = collect_files([tmp_path, tmp_path / "b.yaml", tmp_path / "notes.txt"])
    assert [p.name for p in files] == ["a.yml", "b.yaml", "notes.txt"]


def test_collect_files_reports_missing_paths_and_empty_folders(tmp_path):
    (tmp_path / "empty").mkdir()
    found = []
    assert collect_files(["nope.yaml", tmp_path / "empty"], found) == []
    assert [(f.code, f.file) for f in found] == [
        ("no_such_file", "nope.yaml"), ("no_yaml_files", str(tmp_path / "empty"))]
    with pytest.raises(InvalidInput):
        collect_files(["nope.yaml"])


def test_file_names_stay_as_given_and_findings_are_sorted(monkeypatch):
    monkeypatch.chdir(DATA.parent.parent)
    sets, findings = check_paths(["tests/data/invalid/", "tests/data/valid/bom.yaml"])
    assert findings and all(f.file.startswith("tests/data/invalid/") for f in findings)
    keys = [(f.file, f.line, f.column) for f in findings]
    assert keys == sorted(keys) and [s.name for s in sets] == ["bom"]


# --- inline values and pins ----------------------------------------------------------------------

@pytest.mark.parametrize("doc, codes", [
    ({"num_spec_tokens": 3, "acceptance_length": 2.8, "source": "log"}, []),
    ({"num_spec_tokens": 3, "acceptance_rate": 0.6}, []),
    ({"num_spec_tokens": 3, "per_position_rates": [0.9, 0.6, 0.3]}, []),
    ({"num_spec_tokens": 3, "acceptance_length": 2.8, "per_position_rates": [0.9, 0.6, 0.3]}, []),
    ({"num_spec_tokens": 2, "acceptance_rate": 0.5, "per_position_rates": [0.6, 0.4]}, []),
    ({"num_spec_tokens": 3}, ["no_acceptance"]),
    ({"acceptance_length": 2.0}, ["missing_key"]),
    ({"num_spec_tokens": 0, "acceptance_length": 1.0}, ["bad_k"]),
    ({"num_spec_tokens": "3", "acceptance_length": 2.0}, ["wrong_type"]),
    ({"num_spec_tokens": True, "acceptance_length": 2.0}, ["wrong_type"]),
    ({"num_spec_tokens": 3, "acceptance_length": 2.0, "acceptance_rate": 0.3},
     ["length_and_rate"]),
    ({"num_spec_tokens": 3, "acceptance_length": 4.5}, ["al_out_of_range"]),
    ({"num_spec_tokens": 3, "acceptance_length": 0.5}, ["al_out_of_range"]),
    ({"num_spec_tokens": 3, "acceptance_length": math.inf}, ["al_not_finite"]),
    ({"num_spec_tokens": 3, "acceptance_length": 10**400}, ["al_not_finite"]),
    ({"num_spec_tokens": 3, "per_position_rates": [10**400, 0.6, 0.3]}, ["not_finite"]),
    ({"num_spec_tokens": 10**400, "acceptance_rate": 0.5}, ["int_out_of_range"]),
    ({"num_spec_tokens": 3, "acceptance_rate": 1.2}, ["acceptance_rate_out_of_range"]),
    ({"num_spec_tokens": 3, "acceptance_rate": math.nan}, ["not_finite"]),
    ({"num_spec_tokens": 3, "per_position_rates": [0.9, 0.6]}, ["rates_count"]),
    ({"num_spec_tokens": 3, "per_position_rates": [0.9, 1.6, 0.3]},
     ["rate_out_of_range", "rates_rise"]),
    ({"num_spec_tokens": 3, "acceptance_length": 2.5, "per_position_rates": [0.9, 0.6, 0.3]},
     ["rates_sum"]),
    ({"num_spec_tokens": 2, "acceptance_rate": 0.5, "per_position_rates": [0.9, 0.4]},
     ["rates_sum"]),
    ({"num_spec_tokens": 3, "acceptance_lenght": 2.0}, ["no_acceptance", "unknown_key"]),
    ({"num_spec_tokens": 3, "acceptance_length": 2.0, "source": ""}, ["empty_value"]),
    ([1, 2], ["not_a_mapping"]),
])
def test_inline_value_rules(doc, codes):
    value, findings = check_inline_value(doc, "<batch line 1>", "acceptance")
    assert sorted(f.code for f in findings) == sorted(codes)
    assert (value is None) == bool(codes)
    assert all((f.line, f.column) == (0, 0) for f in findings)  # plain dicts: position unknown


def test_inline_value_keeps_what_was_stated():
    value, _ = check_inline_value({"num_spec_tokens": 2, "acceptance_rate": 0.5,
                                   "per_position_rates": [0.6, 0.4], "source": "log"}, "f", "v")
    assert (value.acceptance_length, value.acceptance_rate) == (None, 0.5)
    assert value.per_position_rates == (0.6, 0.4) and value.source == "log"


@pytest.mark.parametrize("doc, codes", [
    ({"profiles": "inferencex-golden-al"}, []),
    ({"profiles": "inferencex-golden-al", "fallback_category": "coding"}, []),
    ({"fallback_category": "coding"}, []),
    ({"value": {"num_spec_tokens": 3, "acceptance_length": 2.8}}, []),
    ({}, ["empty_pin"]),
    ({"profiles": "x", "value": {"num_spec_tokens": 3, "acceptance_length": 2.8}},
     ["profiles_with_value"]),
    ({"fallback_category": "coding", "value": {"num_spec_tokens": 3, "acceptance_length": 2.8}},
     ["fallback_with_value"]),
    ({"value": {"num_spec_tokens": 3}}, ["no_acceptance"]),
    ({"value": "2.8"}, ["not_a_mapping"]),
    ({"profiles": ""}, ["empty_value"]),
    ({"profiles": 5}, ["wrong_type"]),
    ({"fallback_category": "Coding"}, ["bad_category"]),
    ({"profile": "x"}, ["empty_pin", "unknown_key"]),
    (None, ["not_a_mapping"]),
])
def test_pin_rules(doc, codes):
    pin, findings = check_pin(doc, "scenario.yaml", "acceptance")
    assert sorted(f.code for f in findings) == sorted(codes)
    assert (pin is None) == bool(codes)


def test_pin_from_yaml_reports_positions_and_paths():
    doc = load_yaml("acceptance:\n  profiles: x\n  value:\n    num_spec_tokens: 3\n"
                    "    acceptance_length: 9\n", "scenario.yaml")
    _, findings = check_pin(doc["acceptance"], "scenario.yaml", "acceptance")
    assert [(f.code, f.line, f.column, f.path) for f in findings] == [
        ("profiles_with_value", 2, 13, "acceptance.profiles"),
        ("al_out_of_range", 5, 24, "acceptance.value.acceptance_length"),
    ]
    assert findings[1].render() == (
        "scenario.yaml:5:24: acceptance.value.acceptance_length: acceptance_length 9 lies "
        "outside [1, 4] for K = 3; AL counts the bonus token, so it is at least 1 and at most "
        "K + 1")


# --- properties ----------------------------------------------------------------------------------

SCALARS = (st.none() | st.booleans() | st.integers() | st.text(max_size=8)
           | st.floats(allow_nan=False, allow_infinity=False))
YAML_DATA = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                         | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=15)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(YAML_DATA)
def test_any_yaml_data_gives_findings_never_an_exception(data):
    _, findings = check_profile_set(load_yaml(dump_yaml(data), "f.yaml"), "f.yaml")
    assert findings


BASE = load_yaml((DATA / "valid" / "all-optional-keys.yaml").read_bytes(), "base.yaml")


def leaves(node, path=()):
    """Every (path) to a value inside ``node``, containers included."""
    yield path
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for key, child in items:
        yield from leaves(child, path + (key,))


PATHS = list(leaves(BASE))[1:]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(PATHS), YAML_DATA | st.sampled_from([math.nan, math.inf, -1, 0, "", "on"]))
def test_a_valid_set_with_one_value_replaced_never_raises(path, value):
    doc = load_yaml(dump_yaml(BASE), "base.yaml")
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    profile_set, findings = check_profile_set(doc, "all-optional-keys.yaml")
    assert (profile_set is None) == any(f.is_error for f in findings)


# A leading '.' would make a hidden file on export, so the name rule refuses it.
NAME = st.text(string.ascii_lowercase + string.digits + "-._", min_size=1, max_size=12).filter(
    lambda s: not s.startswith("."))
# NUL is refused (databases cannot store it); lone surrogates cannot be written as UTF-8.
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
               min_size=1, max_size=20).filter(str.strip)
# A model or method name holds no control character (registry_db.model.CONTROL_RE).
NAME_TEXT = TEXT.filter(lambda s: CONTROL_RE.search(s) is None)
FINITE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@st.composite
def profiles(draw):
    k = draw(st.integers(1, 8))
    rates = draw(st.none() | st.lists(st.floats(0, 1), min_size=k, max_size=k).map(
        lambda r: tuple(sorted(r, reverse=True))))
    al = 1 + math.fsum(rates) if rates is not None else draw(st.floats(1, k + 1))
    method = draw(st.sampled_from(PROFILE_METHODS))
    sampling = draw(st.none() | st.builds(
        Sampling, temperature=st.floats(0, 2), top_p=st.none() | st.floats(0.01, 1),
        top_k=st.none() | st.integers(-1, 100), max_tokens=st.none() | st.integers(0, 10**6)))
    if method == "measured" and sampling is None:
        sampling = Sampling(temperature=1.0)
    provenance = None if method == "assumed" and draw(st.booleans()) else Provenance(
        source=draw(TEXT), run=draw(st.none() | TEXT), benchmark=draw(st.none() | TEXT),
        prompts=draw(st.none() | st.integers(0, 10**6)),
        hardware=draw(TEXT) if method == "measured" else draw(st.none() | TEXT),
        engine_image=draw(TEXT) if method == "measured" else draw(st.none() | TEXT),
        tp=draw(st.none() | st.integers(0, 64)), sampling=sampling,
        settings=tuple(draw(st.dictionaries(TEXT, TEXT | st.integers() | FINITE | st.booleans(),
                                            max_size=3)).items()))
    return Profile(
        model=draw(NAME_TEXT), speculative_method=draw(NAME_TEXT), num_spec_tokens=k,
        thinking=draw(st.sampled_from(["on", "off"])),
        category=draw(st.from_regex(r"[a-z0-9_-]{1,10}", fullmatch=True)),
        acceptance_length=al, method=method, per_position_rates=rates, provenance=provenance,
        rationale=None if method == "measured" else draw(TEXT),
        copied_from=draw(st.from_regex(r"[a-z0-9.-]{1,8}/[a-z]{1,5}/k[1-8]/thinking-(on|off)"
                                       r"/[a-z]{1,6}", fullmatch=True))
        if method == "copied" else None)


def to_doc(ps: ProfileSet) -> dict:
    """The YAML document a set is written as (the export's job; kept minimal here)."""
    def drop_none(d):
        return {k: v for k, v in d.items() if v is not None}

    written: dict[int, dict] = {}  # one dict per Provenance object, so shared ones get aliases

    def provenance(p):
        if id(p) not in written:
            d = drop_none({**p.__dict__, "sampling": None if p.sampling is None
                           else drop_none(dict(p.sampling.__dict__)), "settings": None})
            if p.settings:
                d["settings"] = dict(p.settings)
            written[id(p)] = d
        return written[id(p)]

    return {"kind": "AcceptanceProfileSet", "name": ps.name, "caveats": list(ps.caveats),
            "profiles": [drop_none({**p.__dict__, "per_position_rates": None
                                    if p.per_position_rates is None
                                    else list(p.per_position_rates),
                                    "provenance": None if p.provenance is None
                                    else provenance(p.provenance)}) for p in ps.profiles]}


def share_provenance(ps, share):
    """Give later profiles the first one's provenance object where ``share`` says so (aliases)."""
    first = ps[0].provenance
    if first is None or first.sampling is None or not (first.hardware and first.engine_image):
        return ps
    return [p if i == 0 or not s else replace(p, provenance=first)
            for i, (p, s) in enumerate(zip(ps, share))]


VALID_SETS = st.builds(
    lambda name, caveats, ps, share: ProfileSet(
        name=name, caveats=tuple(caveats), profiles=tuple(share_provenance(ps, share)),
        file=f"{name}.yaml"),
    NAME, st.lists(TEXT, max_size=3),
    st.lists(profiles(), min_size=1, max_size=4, unique_by=lambda p: p.key),
    st.lists(st.booleans(), min_size=4, max_size=4))


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(VALID_SETS)
def test_valid_sets_survive_dump_load_check_unchanged(original):
    text = dump_yaml(to_doc(original))
    stated = [id(p.provenance) for p in original.profiles if p.provenance is not None]
    aliases = re.findall(r"provenance: \*id\d+$", text, re.M)
    assert len(aliases) == len(stated) - len(set(stated))  # a shared provenance is written once
    checked, findings = check_profile_set(load_yaml(text, original.file), original.file)
    assert findings == []
    assert checked == original
    assert checked.content_hash() == original.content_hash()


def test_a_duplicate_key_does_not_hide_the_files_other_problems(tmp_path):
    """Every problem at once: the rest of a file with a duplicate key is still checked."""
    from registry_db.sources.profile_set import check_paths

    (tmp_path / "team.yaml").write_text(
        "kind: AcceptanceProfileSet\nname: team\nprofiles:\n"
        "  - model: m\n    speculative_method: mtp\n    num_spec_tokens: 3\n"
        "    thinking: off\n    thinking: on\n    category: coding\n"
        "    acceptance_length: 9.5\n    method: assumed\n    rationale: r\n")
    sets, findings = check_paths([tmp_path])
    codes = sorted((f.code, f.line) for f in findings)
    assert codes == [("al_out_of_range", 10), ("duplicate_key", 8)]
    assert sets == []


BIG = "1" + "0" * 400  # an integer no float holds: math.isfinite raises OverflowError on it


@pytest.mark.parametrize("old, new, where", [
    ("acceptance_length: 4.07", f"acceptance_length: {BIG}", "profiles[0].acceptance_length"),
    ("temperature: 1.0", f"temperature: {BIG}", "profiles[0].provenance.sampling.temperature"),
    ("acceptance_length: 4.07", f"acceptance_length: 4.07\n    per_position_rates: [{BIG}, 1]",
     "profiles[0].per_position_rates[0]"),
])
def test_an_integer_beyond_the_floats_is_a_finding_not_a_crash(tmp_path, old, new, where):
    seed = Path(__file__).parents[2] / "seed" / "acceptance" / "inferencex-golden-al.yaml"
    path = tmp_path / "inferencex-golden-al.yaml"
    path.write_text(seed.read_text().replace(old, new, 1))
    (found,) = [f for f in check_paths([path])[1] if f.path == where]
    assert found.severity == "error" and found.message.endswith(
        "finite number, got 1000000000000000000000000000000000000..."), found
