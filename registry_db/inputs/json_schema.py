"""The published JSON Schemas (draft 2020-12) of the inputs, generated from their tables.

Each :class:`~registry_db.inputs.schema.Map` becomes an object schema: its :class:`Field` rows
the properties (type, required, length limit, integer bounds, a blank string refused), each
:class:`Check`'s ``schema`` keywords, each row's ``shape`` (a list's items, a nested mapping)
and the map's ``also`` (what its cross-field ``Rule`` steps check, where JSON Schema can say
it). A rule the tables hold but JSON Schema cannot state is named in :data:`BEYOND` (and,
where JSON Schema states part of it, :data:`PARTLY`): ``registry validate`` stays the judge, the
schema is the editor's help while a file is written. The files under ``schemas/`` ship in the
wheel; a test holds them equal to :func:`schema` and a standard validator to the fixtures.
"""

from __future__ import annotations

import json
from typing import Any

from registry_db.inputs import deployment, layers
from registry_db.inputs.profile_set import SET
from registry_db.inputs.request import POOL_STANDS_IN
from registry_db.inputs.run_files import SCENARIO, WORKLOAD
from registry_db.inputs.schema import PARTLY, Field, Map
from registry_db.model import MAX_LENGTH

__all__ = ["BEYOND", "NAMES", "PARTLY", "schema", "schema_text"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_TYPES = {"string": "string", "integer": "integer", "number": "number", "list": "array",
          "mapping": "object"}
#: Text without NUL, which neither database stores (``bad_character``).
_NO_NUL = "^[^\x00]*$"

#: The rules (finding codes) JSON Schema cannot state, and why: the agreement table of
#: docs/json-schema.md. ``registry validate`` holds them.
BEYOND: dict[str, str] = {
    "yaml_syntax": "YAML's own syntax: the editor's YAML parser reports it",
    "duplicate_key": "a key written twice is gone once YAML is parsed",
    "complex_key": "a key that is a list or mapping is YAML, not JSON",
    "bad_tag": "tags are YAML, not JSON",
    "bad_tagged_value": "tags are YAML, not JSON",
    "unknown_alias": "aliases are YAML, not JSON",
    "recursive_alias": "aliases are YAML, not JSON",
    "alias_bomb": "aliases are YAML, not JSON",
    "multiple_documents": "a schema sees one document",
    "empty_document": "a schema sees one document",
    "not_finite": "JSON has no .inf or .nan",
    "al_not_finite": "JSON has no .inf or .nan",
    "duplicate_profile_key": "two profiles with one key (five of their fields): "
                             "uniqueItems compares whole items",
    "rates_count": "per_position_rates has K entries: a length set by another field",
    "rates_rise": "per_position_rates never rise: a comparison between items",
    "rates_sum": "the rates sum to AL - 1 within 0.01: arithmetic",
    "positions_count": "accepted_per_position has K entries: a length set by another field",
    "positions_rise": "accepted_per_position never rises: a comparison between items",
    "positions_sum": "accepted_per_position sums to accepted_tokens: arithmetic",
    "position_above_drafts": "each accepted_per_position entry is at most drafts: a "
                             "comparison with another field",
    "drafted_above_k": "draft_tokens is at most K x drafts: arithmetic",
    "accepted_above_drafted": "accepted_tokens is at most draft_tokens: a comparison with "
                              "another field",
    "al_disagrees_with_counts": "AL is 1 + accepted_tokens / drafts within 0.01: arithmetic",
    "rates_disagree_with_counts": "each rate is accepted_per_position[i] / drafts within 0.01: "
                                  "arithmetic",
    "duplicate_pool": "each pool's name is its own: a comparison between items",
    "name_not_file": "a set is named by its file (a warning): the schema does not see the "
                     "file's name",
}
#: The rules JSON Schema states only in part, :data:`PARTLY`, live beside the checks in
#: :mod:`registry_db.inputs.schema`, whose compiled pass runs their tests as written.


def _map(m: Map) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for step in m.steps:
        if isinstance(step, Field):
            props[step.key] = _field(step)
    out: dict[str, Any] = {"type": "object", "properties": props}
    required = [s.key for s in m.steps if isinstance(s, Field) and s.required is True]
    if required:
        out["required"] = required
    if m.unknown == "error":
        out["additionalProperties"] = False
        # A key the Rule steps read (a pin's value) is known too.
        for key in m.keys:
            props.setdefault(key, True)
    if m.also:
        out["allOf"] = [_resolve(extra) for extra in m.also]
    return out


def _field(f: Field) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _TYPES[f.want]}
    patterns: list[str] = []
    if f.want == "integer":
        out["minimum"], out["maximum"] = -f.bound, f.bound
    elif f.want == "string":
        patterns.append(_NO_NUL)
        if f.blank is not None:
            patterns.append(r"\S")
        if f.limit is not None:
            out["maxLength"] = MAX_LENGTH[f.limit]
    for check in f.checks:
        if check.schema is not None:
            _merge(out, check.schema, patterns)
    if patterns:
        if len(patterns) == 1:
            out["pattern"] = patterns[0]
        else:
            out.setdefault("allOf", []).extend({"pattern": p} for p in patterns)
    if f.shape is not None:
        shape = _resolve(f.shape)
        if isinstance(f.shape, Map):
            shape.pop("type")
        out.update(shape)
    return out


def _merge(out: dict[str, Any], keywords: dict[str, Any], patterns: list[str]) -> None:
    """Add a check's keywords: bounds narrow (the larger minimum, the smaller maximum)."""
    for key, value in keywords.items():
        if key == "pattern":
            if value not in patterns:
                patterns.append(value)
        elif key in ("minimum", "exclusiveMinimum") and key in out:
            out[key] = max(out[key], value)
        elif key in ("maximum", "maxLength") and key in out:
            out[key] = min(out[key], value)
        else:
            out[key] = value


def _resolve(value: Any) -> Any:
    """JSON Schema keywords with every :class:`Map` in them replaced by its schema."""
    if isinstance(value, Map):
        return _map(value)
    if isinstance(value, dict):
        return {k: _resolve(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_resolve(v) for v in value]
    return value


def _deployment() -> dict[str, Any]:
    """A deployment (:mod:`registry_db.inputs.deployment`): its pools, or one pool alone."""
    rows = deployment.ROWS
    speculative = {"type": "object", "additionalProperties": False,
                   "properties": {"method": _field(rows["method"]),
                                  "num_spec_tokens": {**_field(rows["num_spec_tokens"]),
                                                      "minimum": 1}},
                   "required": ["method", "num_spec_tokens"]}
    engine = {"type": "object", "properties": {"speculative": {"anyOf": [{"type": "null"},
                                                                         speculative]}}}

    def pool(name: Field) -> dict[str, Any]:
        out = {"type": "object", "additionalProperties": False,
               "properties": {"name": _field(name), "engine": engine}}
        return {**out, "required": ["name"]} if name.required is True else out

    pools = {"type": "object", "additionalProperties": False, "required": ["pools"],
             "properties": {"pools": {"type": "array", "minItems": 1,
                                      "items": pool(rows["name"])}}}
    return {"anyOf": [pools, pool(rows["name_optional"])]}


def _batch_line() -> dict[str, Any]:
    """A ``--batch`` line, from :data:`registry_db.inputs.layers.INPUTS` (null is "not
    given") and a line's ``deployment``."""
    props: dict[str, Any] = {}
    for row in layers.INPUTS:
        value = _resolve(row.schema) if row.schema is not None else {
            **layers.JSON_SCHEMA_TYPES[row.json], **row.keywords}
        props[row.key] = value if row.required else {"anyOf": [{"type": "null"}, value]}
    props["deployment"] = {"anyOf": [{"type": "null"}, _deployment()]}
    # The pools state the method and K of a line with a deployment (POOL_STANDS_IN).
    pooled = list(POOL_STANDS_IN)
    return {"type": "object", "properties": props, "additionalProperties": False,
            "required": [k for k in layers.REQUIRED_KEYS if k not in pooled],
            "if": {"properties": {"deployment": {"type": "object"}},
                   "required": ["deployment"]},
            "then": {"not": {"anyOf": [{"required": [k]} for k in pooled]}},
            "else": {"required": [k for k in layers.REQUIRED_KEYS if k in pooled]}}


def _documents() -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        "profile-set": ("A registry_db AcceptanceProfileSet file", _map(SET)),
        "workload": ("A workload file (registry resolve --workload)", _map(WORKLOAD)),
        "scenario": ("A scenario file (registry resolve --scenario)", _map(SCENARIO)),
        "deployment": ("A deployment file (registry resolve --deployment)", _deployment()),
        "batch-line": ("One line of registry resolve --batch", _batch_line()),
    }


#: The schemas, by the name ``registry schema NAME`` takes.
NAMES: tuple[str, ...] = ("profile-set", "workload", "scenario", "deployment", "batch-line")


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of input ``name`` (one of :data:`NAMES`)."""
    title, body = _documents()[name]
    return {"$schema": DIALECT, "title": title,
            "description": "Generated by `registry schema`; `registry validate` holds every "
                           "rule, this schema those JSON Schema can state.", **body}


def schema_text(name: str) -> str:
    """:func:`schema` as the shipped file holds it."""
    return json.dumps(schema(name), indent=2, ensure_ascii=True) + "\n"
