"""The compiled first pass of the checks against the table interpreter: same values, same findings.

A table marked ``compiled`` (a profile, its provenance, sampling and counts) reads a plain
mapping through msgspec first (:class:`registry_db.inputs.schema._Compiled`): its plain fields
typed and bounded in C from the table's rows, the rest by the interpreter's own code. Whatever
it does not accept the interpreter reads, so the findings must be the interpreter's own. Here
every corpus file, a generated registry with aliases, and hypothesis's valid and mutated
documents are checked both ways (``schema.COMPILED`` on and off): the same sets (compared by
``repr``, so 1, 1.0 and True differ), the same shared provenances, the same content hashes, the
same findings; and the compiled pass does accept the valid documents (the test is not vacuous).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry_db.inputs import profile_set as tables
from registry_db.inputs import schema
from registry_db.inputs.counts import COUNTS
from registry_db.inputs.profile_set import PROFILE, PROVENANCE, SAMPLING, check_profile_set
from registry_db.model import Profile
from registry_db.yaml.plain import load_plain_file

pytest.importorskip("msgspec")

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
CORPUS = sorted(p for folder in (DATA, ROOT / "seed") for p in folder.rglob("*")
                if p.suffix in (".yaml", ".yml"))


def _checked(doc: Any, compiled: bool, file: str = "f.yaml") -> tuple:
    """``check_profile_set`` one way: the set's repr, its provenances' sharing, its content
    hash, and the rendered findings."""
    saved = schema.COMPILED
    schema.COMPILED = compiled
    try:
        s, findings = check_profile_set(doc, file)
    finally:
        schema.COMPILED = saved
    if s is None:
        return None, None, None, [f.render() for f in findings]
    shared = [p.provenance for p in s.profiles]
    # Which profiles cite one provenance object: the hash, the pack and the write see it once.
    sharing = [next(i for i, q in enumerate(shared) if q is p) for p in shared]
    return repr(s), sharing, s.content_hash(), [f.render() for f in findings]


def _same_both_ways(doc: Any, file: str = "f.yaml") -> tuple:
    compiled = _checked(doc, True, file)
    assert compiled == _checked(doc, False, file)
    return compiled


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_corpus_file_checks_the_same_both_ways(path):
    doc = load_plain_file(path)
    if doc is None:
        return  # the positional loader reads it: the compiled pass never sees located YAML
    _same_both_ways(doc, str(path))


def _generated(folder: Path) -> list[Path]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import generate
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return generate.write_registry(generate.default_layout(2_000, 4, seed=7), folder)


def test_a_generated_registry_checks_the_same_both_ways(tmp_path):
    """Measured, copied, literature and assumed profiles, rates, anchors and aliases."""
    paths = _generated(tmp_path)
    assert any(b"*" in p.read_bytes() for p in paths)
    for path in paths:
        text, _, digest, findings = _same_both_ways(load_plain_file(path), str(path))
        assert text is not None and digest and findings == []


def _profiles_of(paths: list[Path]) -> list[dict]:
    out = []
    for path in paths:
        doc = load_plain_file(path)
        if isinstance(doc, dict) and isinstance(doc.get("profiles"), list):
            out += [p for p in doc["profiles"] if isinstance(p, dict)]
    return out


def test_the_compiled_pass_accepts_the_valid_profiles(tmp_path):
    """Not vacuous: every profile of the valid files, the seed and a generated registry is
    accepted by the compiled pass itself (the interpreter reads none of its plain fields)."""
    paths = sorted((DATA / "valid").glob("*.yaml")) + sorted((ROOT / "seed").rglob("*.yaml"))
    profiles = _profiles_of(paths + _generated(tmp_path))
    fast = schema._compiled(PROFILE)
    assert fast is not None and len(profiles) > 2_000
    refused = [p for p in profiles if fast.read(schema.Checker("f.yaml"), p, "p", None) is None]
    # The corpus's valid files that hold a finding-free profile the compiled pass refuses:
    # none. (A valid file may still hold a warning, read by the interpreter as always.)
    assert refused == []


@pytest.mark.parametrize("table", [PROFILE, PROVENANCE, SAMPLING, COUNTS],
                         ids=lambda t: t.what)
def test_every_compiled_table_compiles(table):
    assert table.compiled and schema._compiled(table) is not None


def test_a_profile_is_built_as_its_dataclass_builds_it():
    """``_profile`` sets the fields as pickle does: the same object as ``Profile(...)``."""
    fields = {"model": "m", "speculative_method": "mtp", "num_spec_tokens": 2,
              "thinking": "on", "category": "coding", "acceptance_length": 2, "method":
              "assumed", "per_position_rates": (0.6, 0.4), "provenance": None,
              "rationale": "why", "copied_from": None, "counts": None}
    built = tables._profile(fields)
    plain = Profile(**{**fields, "acceptance_length": 2.0})
    assert built == plain and vars(built) == vars(plain)
    assert list(vars(built)) == [f.name for f in dataclasses.fields(Profile)]
    assert type(built.acceptance_length) is float


def test_numbers_takes_floats_as_the_loop_does():
    ck = schema.Checker("f.yaml")
    for seq in ([], [0.5, 0.25], [1, 0.5], [True], [math.inf], [0.5, math.nan], ["x"]):
        fast = ck.numbers(list(seq), "p", "rates")
        assert fast is None or (fast == [float(x) for x in seq]
                                and all(type(x) is float for x in fast))


# --- hypothesis: valid documents, and the same mutated ------------------------------------------

#: Values that sit on an edge of some rule: types, bounds, blanks, control characters, enums.
AWKWARD = [None, True, False, 0, 1, -1, 2, 5, 64, 65, 2**31 - 1, 2**31, 2**53, 2**53 + 1, 2**63,
           2**64, 10**30, 10**400, 0.0, -0.0, 0.5, 1.0, 1.5, 2.5, 65.0, 66.0, 1e-300, 1e308,
           math.inf, -math.inf, math.nan, "", " ", "\t", "a", "on", "off", "On", "measured",
           "literature", "assumed", "copied", "vendor_spec", "not_charged", "coding", "Coding",
           "a\n", "\n", "a\x00", "\x1b", "a\u2028", "\u00a0", "x" * 65, "x" * 201, "x" * 2001,
           "m/s/k1/thinking-on/c", "m/s/k0/thinking-on/c", "m/s/k1/thinking-on/c\n", [], {},
           [0.5], [0.5, 0.25], [1, 0], {"a": 1}, {"temperature": 0}, "AcceptanceProfileSet",
           "https://example.org/x", "b200", "vllm/vllm-openai:v1"]

_awkward = st.sampled_from(AWKWARD)
_k = st.integers(1, 4)


@st.composite
def _provenance(draw: Any, measured: bool) -> dict:
    prov: dict[str, Any] = {"source": draw(st.sampled_from(["https://example.org/a", "doc"]))}
    if measured or draw(st.booleans()):
        prov |= {"hardware": "h200", "engine_image": "vllm/vllm-openai:v0.20.0",
                 "sampling": draw(st.fixed_dictionaries(
                     {"temperature": st.sampled_from([0, 0.7, 1.0])},
                     optional={"top_p": st.sampled_from([0.95, 1]), "top_k": st.just(-1),
                               "max_tokens": st.just(4096)}))}
    for key in draw(st.lists(st.sampled_from(["run", "benchmark", "prompts", "tp", "settings"]),
                             unique=True)):
        prov[key] = {"run": "r1", "benchmark": "MT-Bench", "prompts": 80, "tp": 2,
                     "settings": {"a": 1, "b": True, "c": "x", "d": 0.5}}[key]
    return prov


@st.composite
def _profile_doc(draw: Any, shared: list[dict]) -> dict:
    k = draw(_k)
    method = draw(st.sampled_from(["measured", "literature", "vendor_spec", "copied",
                                   "assumed"]))
    rates = sorted((draw(st.sampled_from([0.25, 0.5, 0.75, 1.0, 0])) for _ in range(k)),
                   reverse=True)
    p: dict[str, Any] = {
        "model": draw(st.sampled_from(["glm-5.2-fp8", "m", "a b"])),
        "speculative_method": draw(st.sampled_from(["mtp", "eagle3"])),
        "num_spec_tokens": k, "thinking": draw(st.sampled_from(["on", "off"])),
        "category": draw(st.sampled_from(["coding", "chat", "x_1-y"])),
        "acceptance_length": 1 + sum(rates) if draw(st.booleans()) else 1,
        "method": method}
    if draw(st.booleans()):
        p["per_position_rates"] = rates
    if method != "assumed" or draw(st.booleans()):
        if shared and draw(st.booleans()):
            p["provenance"] = draw(st.sampled_from(shared))  # one object, as an alias gives
        else:
            p["provenance"] = draw(_provenance(method == "measured"))
            if method == "measured":
                shared.append(p["provenance"])
    if method != "measured":
        p["rationale"] = "why"
    if method == "copied":
        p["copied_from"] = f"glm-5.2-fp8/mtp/k{k}/thinking-on/coding"
    if draw(st.booleans()) and p["acceptance_length"] > 1 and p.get("per_position_rates"):
        drafts = 100
        p["counts"] = {"drafts": drafts, "draft_tokens": drafts * k,
                       "accepted_tokens": round(sum(rates) * drafts),
                       "accepted_per_position": [round(r * drafts) for r in rates]}
    return p


@st.composite
def _set_doc(draw: Any) -> dict:
    shared: list[dict] = []
    profiles = [draw(_profile_doc(shared)) for _ in range(draw(st.integers(1, 4)))]
    return {"kind": "AcceptanceProfileSet", "name": "f", "profiles": profiles}


def _mutate(doc: dict, data: Any) -> dict:
    """``doc`` with one field of a profile, provenance, sampling or counts changed, removed or
    added (an unknown key)."""
    doc = copy.deepcopy(doc)  # deep: a shared provenance stays shared within the copy
    targets: list[dict] = [doc]
    profiles = doc.get("profiles")
    for p in profiles if isinstance(profiles, list) else []:
        if not isinstance(p, dict):
            continue
        targets.append(p)
        for sub in ("provenance", "counts"):
            if isinstance(p.get(sub), dict):
                targets.append(p[sub])
        if isinstance(p.get("provenance"), dict) and isinstance(
                p["provenance"].get("sampling"), dict):
            targets.append(p["provenance"]["sampling"])
    target = data.draw(st.sampled_from(targets))
    keys = sorted(target) + ["unknown", "rationale", "copied_from", "top_p", "per_position_rates"]
    key = data.draw(st.sampled_from(keys))
    if key in target and data.draw(st.booleans()):
        del target[key]
    else:
        target[key] = data.draw(_awkward)
    return doc


@settings(max_examples=300, deadline=None)
@given(_set_doc())
def test_valid_documents_give_the_same_values_both_ways(doc):
    _same_both_ways(doc)


@settings(max_examples=1500, deadline=None)
@given(_set_doc(), st.data())
def test_mutated_documents_give_the_same_values_and_findings_both_ways(doc, data):
    mutated = doc
    for _ in range(data.draw(st.integers(1, 3))):
        mutated = _mutate(mutated, data)
    _same_both_ways(mutated)


#: Valid profiles that between them hold every field of every compiled table.
_BASES = [
    {"model": "glm-5.2-fp8", "speculative_method": "mtp", "num_spec_tokens": 2, "thinking": "on",
     "category": "coding", "acceptance_length": 2.5, "per_position_rates": [0.8, 0.7],
     "counts": {"drafts": 10, "draft_tokens": 20, "accepted_tokens": 15,
                "accepted_per_position": [8, 7]},
     "method": "measured",
     "provenance": {"source": "https://example.org/a", "run": "r", "benchmark": "b",
                    "prompts": 8, "hardware": "h200", "engine_image": "vllm/vllm-openai:v1",
                    "tp": 2, "sampling": {"temperature": 0.7, "top_p": 0.95, "top_k": -1,
                                          "max_tokens": 4096},
                    "settings": {"a": 1}}},
    {"model": "m", "speculative_method": "eagle3", "num_spec_tokens": 1, "thinking": "off",
     "category": "chat", "acceptance_length": 1, "method": "copied", "rationale": "why",
     "copied_from": "glm-5.2-fp8/mtp/k1/thinking-on/coding", "provenance": {"source": "doc"}},
    {"model": "m", "speculative_method": "mtp", "num_spec_tokens": 3, "thinking": "on",
     "category": "x_1-y", "acceptance_length": 4, "method": "assumed", "rationale": "r"},
]


def _places(profile: dict) -> list[dict]:
    """The profile and each mapping of a compiled table inside it."""
    out = [profile]
    prov = profile.get("provenance")
    if isinstance(prov, dict):
        out.append(prov)
        if isinstance(prov.get("sampling"), dict):
            out.append(prov["sampling"])
    if isinstance(profile.get("counts"), dict):
        out.append(profile["counts"])
    return out


def test_each_awkward_value_in_each_field_checks_the_same_both_ways():
    """Every field of every compiled table, in each base profile, set to each awkward value
    and removed: the same sets and findings both ways (the edges hypothesis may not draw)."""
    differ = []
    cases = 0
    for b, base in enumerate(_BASES):
        for where in range(len(_places(base))):
            for key in [*_places(base)[where], "unknown"]:
                for value in [*AWKWARD, "delete"]:
                    profile = copy.deepcopy(base)
                    target = _places(profile)[where]
                    if value == "delete":
                        target.pop(key, None)
                    else:
                        target[key] = value
                    doc = {"kind": "AcceptanceProfileSet", "name": "f", "profiles": [profile]}
                    cases += 1
                    if _checked(doc, True) != _checked(doc, False):
                        differ.append((b, where, key, value))
    assert differ == [] and cases > 2_000
