"""The published JSON Schemas: generated from the input tables, shipped as files, and in
agreement with ``registry validate`` on every fixture for every rule JSON Schema can state.

A standard validator (``jsonschema``, draft 2020-12) reads each fixture as the editor would;
where ``validate`` refuses a file for a rule outside :data:`BEYOND`, the schema must refuse it
too, at the same key path or above it; every valid fixture passes both. The rules JSON Schema
cannot state are listed in docs/json-schema.md's agreement table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from registry_db.errors import InvalidInput, ResolutionRefused
from registry_db.inputs.deployment import check_deployment
from registry_db.inputs.json_schema import BEYOND, NAMES, PARTLY, schema, schema_text
from registry_db.inputs.request import parse_line
from registry_db.inputs.run_files import load_scenario, load_workload
from registry_db.model import Refusal
from registry_db.sources.profile_set import check_paths
from registry_db.yaml.load import load_file
from tests.helpers import run_cli

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SHIPPED = ROOT / "registry_db" / "inputs" / "schemas"
VALID = sorted((DATA / "valid").glob("*.y*ml"))
INVALID = sorted((DATA / "invalid").glob("*.yaml"))
EXPECT_RE = re.compile(r"# expect: (?P<code>\w+) \d+:\d+ (?P<path>\S+)")
#: Fixtures whose rule JSON Schema states only in part (:data:`PARTLY`), and that part missed.
PARTLY_CASES = {"al-out-of-range.yaml": "al_out_of_range", "k-float.yaml": "wrong_type",
                "counts-float.yaml": "wrong_type", "top-k-float.yaml": "wrong_type",
                "counts-position-float.yaml": "wrong_type",
                "workload-bad-value.yaml": "al_out_of_range"}


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(schema(name))


def path_of(error) -> str:
    """A jsonschema error's location as a finding's key path: ``profiles[0].counts``."""
    out = ""
    for part in error.absolute_path:
        out = f"{out}[{part}]" if isinstance(part, int) else (f"{out}.{part}" if out else part)
    return out


def above_or_at(path: str, expected: str) -> bool:
    expected = "" if expected == "-" else expected
    return expected == path or expected.startswith(path + ".") or expected.startswith(
        path + "[") or path == ""


# --- the files and the command -------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_the_shipped_file_is_the_generated_schema(name):
    """Regenerate with: registry schema NAME > registry_db/inputs/schemas/NAME.schema.json"""
    assert (SHIPPED / f"{name}.schema.json").read_text(encoding="utf-8") == schema_text(name)


@pytest.mark.parametrize("name", NAMES)
def test_each_schema_is_a_valid_draft_2020_12_schema(name):
    Draft202012Validator.check_schema(schema(name))
    assert schema(name)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_registry_schema_prints_the_shipped_file():
    result = run_cli("schema", "workload")
    assert result.exit_code == 0
    assert result.output == (SHIPPED / "workload.schema.json").read_text(encoding="utf-8")
    assert json.loads(run_cli("schema").output)["title"].endswith("AcceptanceProfileSet file")


def test_the_command_names_every_schema():
    from registry_db.cli.schema import NAMES as COMMAND_NAMES

    assert COMMAND_NAMES == NAMES


def test_registry_schema_refuses_an_unknown_name():
    result = run_cli("schema", "profile")
    assert result.exit_code == 2
    assert "profile-set" in result.output


# --- agreement with registry validate ------------------------------------------------------------

@pytest.mark.parametrize("path", VALID, ids=[p.name for p in VALID])
def test_every_valid_fixture_passes_the_schema(path):
    assert not [e for e in check_paths([path])[1] if e.is_error]
    errors = list(validator("profile-set").iter_errors(load_file(path)))
    assert errors == [], [e.message for e in errors]


@pytest.mark.parametrize("path", INVALID, ids=[p.name for p in INVALID])
def test_the_schema_refuses_each_invalid_fixture_it_can_state(path):
    expect = EXPECT_RE.match(path.read_text(encoding="utf-8").splitlines()[0])
    assert expect, path.name
    code = expect["code"]
    try:
        doc = load_file(path)
    except InvalidInput:  # YAML's own rules: the editor's parser reports them
        assert code in BEYOND, f"{code}: a loader rule missing from BEYOND"
        return
    errors = list(validator("profile-set").iter_errors(doc))
    if code in BEYOND:
        return
    if PARTLY_CASES.get(path.name) == code:
        assert code in PARTLY
        return
    where = [path_of(e) for e in errors]
    assert any(above_or_at(w, expect["path"]) for w in where), (
        f"validate: {code} at {expect['path']}; the schema: {where}")


@pytest.mark.parametrize("path", sorted((DATA / "resolve").glob("workload-*.yaml")) + sorted(
    (DATA / "resolve").glob("scenario-*.yaml")), ids=lambda p: p.name)
def test_workload_and_scenario_files_agree(path):
    kind = "workload" if path.name.startswith("workload") else "scenario"
    try:
        (load_workload if kind == "workload" else load_scenario)(path)
        valid = True
    except (InvalidInput, ResolutionRefused):
        valid = False
    try:
        doc = load_file(path)
    except InvalidInput:
        assert not valid
        return
    by_schema = validator(kind).is_valid(doc)
    if path.name in PARTLY_CASES:
        assert (valid, by_schema) == (False, True)
    else:
        assert by_schema == valid


DEPLOYMENTS = [
    {"pools": [{"name": "prefill"},
               {"name": "decode", "engine": {"image": "vllm", "speculative": {
                   "method": "dspark", "num_spec_tokens": 5}}}]},
    {"engine": {"speculative": {"method": "mtp", "num_spec_tokens": 3}}},
    {"pools": []},
    {"pools": [{"engine": {}}]},
    {"pools": [{"name": "a", "engine": {"speculative": {"method": "mtp",
                                                        "num_spec_tokens": 0}}}]},
    {"pools": [{"name": "a", "engine": {"speculative": {"method": "mtp"}}}]},
    {"pools": [{"name": "a", "colour": "red"}]},
    {"pools": [{"name": ""}]},
    {"pools": [{"name": "a\x1b"}]},
    {"name": "one", "engine": {"speculative": {"method": "", "num_spec_tokens": 2}}},
    ["not", "a", "mapping"],
]


@pytest.mark.parametrize("doc", DEPLOYMENTS, ids=range(len(DEPLOYMENTS)))
def test_deployments_agree(doc):
    deployment, _ = check_deployment(doc, "d.yaml")
    assert validator("deployment").is_valid(doc) == (deployment is not None)


LINES = [
    {"model": "m", "method": "mtp", "k": 3},
    {"model": "m", "method": "mtp", "k": 3, "thinking": "off", "category": "coding",
     "sets": ["a"], "hardware": "b300", "id": [1, 2], "as_of": None},
    {"model": "m", "method": "mtp", "k": 3, "acceptance": {"num_spec_tokens": 3,
                                                           "acceptance_length": 2.5}},
    {"model": "m", "method": "mtp", "k": 3, "pin": {"profiles": "golden"}},
    {"model": "m", "method": "mtp", "k": 3, "cli": {"num_spec_tokens": 3,
                                                    "per_position_rates": [0.5, 0.3, 0.2]}},
    {"model": "m", "k": 3},
    {"model": "m", "method": "mtp", "k": 0},
    {"model": "m", "method": "mtp", "k": 65},
    {"model": "m", "method": "mtp", "k": True},
    {"model": "", "method": "mtp", "k": 3},
    {"model": "m", "method": "mtp", "k": 3, "thinking": "maybe"},
    {"model": "m", "method": "mtp", "k": 3, "category": "Coding"},
    {"model": "m", "method": "mtp", "k": 3, "sets": []},
    {"model": "m", "method": "mtp", "k": 3, "colour": "red"},
    {"model": "m", "method": "mtp", "k": 3, "acceptance": {"num_spec_tokens": 3}},
    {"model": "m", "method": "mtp", "k": 3, "cli": {"num_spec_tokens": 3,
                                                    "acceptance_length": 2.5,
                                                    "acceptance_rate": 0.5}},
    {"model": "m", "method": "mtp", "k": 3, "pin": {}},
    {"model": "m", "method": "mtp", "k": 3, "pin": {"profiles": "a", "value": {
        "num_spec_tokens": 3, "acceptance_length": 2.0}}},
    {"model": "m", "method": "mtp", "k": 3, "acceptance": {"num_spec_tokens": 3,
                                                           "acceptance_rate": 1.5}},
    {"model": "m", "thinking": "off", "category": "coding", "deployment": {
        "engine": {"speculative": {"method": "mtp", "num_spec_tokens": 3}}}},
    {"model": "m", "method": "mtp", "thinking": "off", "category": "coding", "deployment": {
        "engine": {"speculative": {"method": "mtp", "num_spec_tokens": 3}}}},
]


@pytest.mark.parametrize("obj", LINES, ids=range(len(LINES)))
def test_batch_lines_agree(obj):
    """A line the schema accepts is one ``--batch`` reads as a run; one it refuses is answered
    ``invalid_request`` or ``invalid_value``."""
    found = parse_line(json.dumps(obj), 1)
    read = not (isinstance(found, Refusal) and found.reason in ("invalid_request",
                                                                "invalid_value"))
    assert validator("batch-line").is_valid(obj) == read, found


# --- the agreement table -------------------------------------------------------------------------

def test_the_docs_table_names_every_rule_beyond_json_schema():
    text = (ROOT / "docs" / "json-schema.md").read_text(encoding="utf-8")
    for code in [*BEYOND, *PARTLY]:
        assert f"`{code}`" in text, code


def test_every_partly_case_names_a_partly_rule():
    assert set(PARTLY_CASES.values()) <= set(PARTLY)
