"""The profile-set file's schema: the spec's tables for a set, a profile, a provenance and its
sampling, as :mod:`registry_db.inputs.schema` tables, and the rules that span fields.

This module owns every rule of the spec's "Checks" section for profile sets, the storage limits
of what a set stores (docs/decisions.md, "Limits"), and the rule that two profiles of a set may
not share a key. It touches no database: ``registry validate`` runs it alone and ``registry
import`` runs it before writing anything. Inline values and pins live in
:mod:`registry_db.inputs.inline`.

Each rule has a stable ``code``; every problem of every file is reported, not just the first.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
from typing import Any

from registry_db.errors import Finding
from registry_db.inputs.counts import COUNTS, read_counts
from registry_db.inputs.inline import check_inline_value, check_pin
from registry_db.inputs.readers import (
    AL_RANGE,
    K_RANGE,
    RATES_SHAPE,
    THINKING,
    category_check,
    count_check,
    rates,
    rates_sum_off,
)
from registry_db.inputs.schema import (
    NO_CONTROL,
    Check,
    Checker,
    Field,
    Map,
    join,
    name_check,
    type_name,
)
from registry_db.model import (
    COPIED_FROM_RE,
    KIND,
    MAX_LENGTH,
    MAX_SET_NAME_BYTES,
    METHODS,
    PROFILE_KEYS,
    PROFILE_METHODS,
    PROVENANCE_KEYS,
    SAMPLING_KEYS,
    SET_KEYS,
    SUM_TOLERANCE,
    Method,
    MethodRule,
    Profile,
    ProfileSet,
    Provenance,
    Sampling,
    profile_label,
    set_name_problem,
)
from registry_db.yaml.nodes import key_pos, mark, pos

__all__ = ["check_profile_set", "check_inline_value", "check_pin", "YAML_SUFFIXES"]

YAML_SUFFIXES = (".yaml", ".yml")


def check_profile_set(doc: Any, file: str) -> tuple[ProfileSet | None, list[Finding]]:
    """Check one loaded profile-set document; the set comes back only when nothing is an error.

    ``file`` is the name findings carry (and the set's ``file``). A set whose ``name`` differs from
    the file's stem draws the warning ``name_not_file``.
    """
    ck = Checker(file)
    curve = _curve_model(doc)
    if curve is not None:  # four schema errors would not say what the file is
        ck.error(key_pos(doc, curve), "", "inferencex_curve",
                 f"this is an InferenceX golden AL curve ({curve}: {{thinking_on: {{K: AL}}}}), "
                 "not an AcceptanceProfileSet; make it one with `registry ingest inferencex "
                 f"{file} -o acceptance/`, then validate and import what that "
                 "writes")
        return None, ck.findings
    # A top-level scalar (or nothing, after '---') has no position of its own: point at the start.
    got = SET.read(ck, doc, "", mark(doc) if isinstance(doc, list) else (1, 1))
    if got is None or ck.errors:
        return None, ck.findings
    return ProfileSet(name=got["name"], caveats=got["caveats"] or (), profiles=got["profiles"],
                      file=file), ck.findings


def _curve_model(doc: Any) -> str | None:
    """The model key of a document shaped as InferenceX's golden curves are (``MODEL:
    {thinking_on: {K: AL}}`` beside an optional ``_metadata``), or None."""
    if not isinstance(doc, dict) or "kind" in doc:
        return None
    models = [k for k in doc if k != "_metadata"]
    if len(models) != 1 or not isinstance(models[0], str):
        return None
    modes = doc[models[0]]
    if isinstance(modes, dict) and modes and set(modes) <= {"thinking_on", "thinking_off"}:
        return models[0]
    return None


# --- provenance.sampling -------------------------------------------------------------------------

def _count(key: str) -> Field:
    """A count: an integer that is not negative."""
    return Field(key, "integer", checks=(count_check(key),))


SAMPLING = Map("sampling", keys=SAMPLING_KEYS, compiled=True, steps=(
    Field("temperature", "number", required=True, missing="missing_temperature",
          missing_message="sampling has no temperature; give it (0 is greedy)",
          checks=(Check("negative_temperature", lambda v, got: None if v >= 0 else
                        f"temperature is {v!r}; it is not negative (0 is greedy)",
                        {"minimum": 0}),)),
    Field("top_p", "number", checks=(Check("top_p_out_of_range", lambda v, got: None
                                           if 0 < v <= 1 else
                                           f"top_p is {v!r}; it lies in (0, 1]",
                                           {"exclusiveMinimum": 0, "maximum": 1}),)),
    Field("top_k", "integer", checks=(Check("top_k_out_of_range", lambda v, got: None
                                            if v >= -1 else f"top_k is {v}; it is at least -1 "
                                            "(-1 and 0 disable it)", {"minimum": -1}),)),
    _count("max_tokens"),
), build=lambda g: Sampling(temperature=float(g["temperature"]),
                            top_p=None if g["top_p"] is None else float(g["top_p"]),
                            top_k=g["top_k"], max_tokens=g["max_tokens"]))


# --- provenance ----------------------------------------------------------------------------------

def _settings(ck: Checker, raw: dict, m: dict, sub: str, got: dict) -> tuple[tuple[str, Any], ...]:
    """``provenance.settings``: scalar values by name, kept with their types, in file order."""
    out = []
    for name, value in raw.items():
        where = join(sub, str(name))
        if not isinstance(name, str):
            ck.error(key_pos(raw, name), where, "wrong_type",
                     f"setting name {name!r} must be a string; quote it")
        elif not name.strip():
            ck.error(key_pos(raw, name), where, "empty_setting", "a setting has an empty name")
        elif not ck.text_ok(name, key_pos(raw, name), where, "the setting's name") or (
                isinstance(value, str) and not ck.text_ok(value, pos(raw, name), where,
                                                          f"setting {name!r}")):
            pass
        elif value is None or (isinstance(value, str) and not value.strip()):
            ck.error(pos(raw, name), where, "empty_setting",
                     f"setting {name!r} is empty; give its value or remove it")
        elif isinstance(value, (dict, list)):
            ck.error(pos(raw, name), where, "wrong_type",
                     f"setting {name!r} must be a string, number or boolean, got "
                     f"{type_name(value)}")
        elif isinstance(value, float) and not math.isfinite(value):
            ck.error(pos(raw, name), where, "not_finite",
                     f"setting {name!r} must be finite, got {value!r}")
        elif not ck.length_ok(name, key_pos(raw, name), where, "the setting's name",
                              "setting_name") or (
                isinstance(value, str) and not ck.length_ok(
                    value, pos(raw, name), where, f"setting {name!r}", "setting_value")):
            pass
        else:
            out.append((name, value))
    return tuple(out)


#: What :func:`_settings` reads, as JSON Schema says it.
_SETTINGS_SHAPE = {
    "propertyNames": {"pattern": r"\S", "maxLength": MAX_LENGTH["setting_name"]},
    "additionalProperties": {"type": ["string", "number", "boolean"], "allOf": [
        {"pattern": r"\S"}, {"pattern": "^[^\x00]*$"}],
        "maxLength": MAX_LENGTH["setting_value"]}}


def _text(key: str) -> Field:
    """An optional text field of a provenance: not empty, within its limit."""
    return Field(key, "string", blank="empty_value", limit=key)


PROVENANCE = Map("provenance", keys=PROVENANCE_KEYS, compiled=True, steps=(
    Field("source", "string", required=True, missing="missing_source", blank="missing_source",
          limit="source", missing_message="provenance has no source; give the document the "
                                          "value was read from"),
    _text("run"), _text("benchmark"), _text("hardware"), _text("engine_image"),
    _count("prompts"), _count("tp"),
    Field("sampling", "mapping", shape=SAMPLING,
          content=lambda ck, raw, m, sub, got: SAMPLING.load(ck, raw, sub)),
    Field("settings", "mapping", content=_settings, shape=_SETTINGS_SHAPE),
), build=lambda g: Provenance(settings=g["settings"] or (), **{
    k: g[k] for k in PROVENANCE_KEYS[:8]}))


def _provenance(ck: Checker, raw: dict, m: dict, sub: str, got: dict) -> Provenance | None:
    # A provenance that aliases cite from several profiles is checked (and reported) once. One
    # written out again in full, to the letter (repr: same keys in the same order, and 1, 1.0
    # and True apart), is the first copy's object: checked once, hashed and written once. A
    # refused one (None) is checked again at each copy, so each copy's findings are reported.
    key = ("provenance", id(raw))
    if key not in ck.memo:
        copy = ("provenance", repr(raw))
        found = ck.memo.get(copy)
        if found is None:
            found = ck.memo[copy] = PROVENANCE.load(ck, raw, sub)
        ck.memo[key] = found
    return ck.memo[key]


# --- profile -------------------------------------------------------------------------------------

def _rule(got: dict) -> MethodRule | None:
    """The rule of the profile's method, when the method is one a profile may use."""
    rule = METHODS.get(got["method"]) if isinstance(got.get("method"), str) else None
    return rule if rule is not None and rule.allowed_in_profile else None


def _requires(what: str) -> Any:
    """Whether the profile's method requires the field (``_rule``'s answer, by method name:
    asked three times a profile)."""
    needs = {name: bool(getattr(rule, what)) for name, rule in METHODS.items()
             if rule.allowed_in_profile}
    return lambda got: needs.get(got.get("method"), False)


def _method_problem(method: str, got: dict) -> str | None:
    rule = METHODS.get(method)
    if rule is None:
        near = difflib.get_close_matches(method, PROFILE_METHODS, n=1)
        hint = f"did you mean {near[0]!r}?" if near else f"use one of {', '.join(PROFILE_METHODS)}"
        return f"method {method!r} is not recognized; {hint}"
    return None


def _rates_sum(ck: Checker, m: dict, path: str, got: dict) -> None:
    rates_, al = got["per_position_rates"], got["acceptance_length"]
    if rates_ is None or al is None:
        return
    total = rates_sum_off(rates_, al - 1, SUM_TOLERANCE)
    if total is not None:
        ck.error(pos(m, "per_position_rates"), join(path, "per_position_rates"), "rates_sum",
                 f"per_position_rates sum to {total:.4g} but acceptance_length - 1 is "
                 f"{al - 1:.4g}; they must agree within {SUM_TOLERANCE}")


#: The methods whose profiles name how they were measured (``_rule``'s, by name: once a profile).
_MEASURED = frozenset(name for name, rule in METHODS.items()
                      if rule.allowed_in_profile and rule.requires_measurement)


def _measurement(ck: Checker, m: dict, path: str, got: dict) -> None:
    """A measured value names its chip, image and decoding configuration in its provenance."""
    if got.get("method") not in _MEASURED:
        return
    raw = m.get("provenance")
    if not isinstance(raw, dict):
        return
    for key, what in (("hardware", "the chip"), ("engine_image", "the engine image"),
                      ("sampling", "the decoding configuration")):
        if key not in raw:  # present but wrong is the provenance's own check to report
            ck.error(mark(raw), join(join(path, "provenance"), key), f"missing_{key}",
                     f"provenance.{key} is required with method {got['method']}; add {what} it "
                     "was measured with")


def _method_schema(name: str, rule: MethodRule) -> dict[str, Any]:
    """What a method requires of its profile (the ``required`` rows and :func:`_measurement`),
    as a JSON Schema ``if``/``then``."""
    keys = [key for key, need in (("provenance", rule.requires_provenance),
                                  ("rationale", rule.requires_rationale),
                                  ("copied_from", rule.requires_copied_from)) if need]
    then: dict[str, Any] = {"required": keys}
    if rule.requires_measurement:
        then["properties"] = {"provenance": {"required": ["hardware", "engine_image",
                                                          "sampling"]}}
    return {"if": {"properties": {"method": {"const": name}}, "required": ["method"]},
            "then": then}


#: A profile's fields, in the order of its dataclass.
_PROFILE_FIELDS = tuple(f.name for f in dataclasses.fields(Profile))


def _profile(g: dict) -> Profile:
    # As pickle builds an object (no frozen __init__, which sets each field by a call): the
    # checked fields are the dataclass's own, in its order (a test holds it equal to __init__).
    p = object.__new__(Profile)
    p.__dict__.update(zip(_PROFILE_FIELDS, (
        g["model"], g["speculative_method"], g["num_spec_tokens"], g["thinking"], g["category"],
        float(g["acceptance_length"]), g["method"], g["per_position_rates"], g["provenance"],
        g["rationale"], g["copied_from"], g["counts"])))
    return p


PROFILE = Map("each profile", keys=PROFILE_KEYS, not_a_mapping="wrong_type", compiled=True, steps=(
    Field("model", "string", required=True, missing="missing_model", blank="missing_model",
          limit="model", checks=(name_check("model"),),
          missing_message="the profile has no model; give the catalog model name"),
    Field("speculative_method", "string", required=True, missing="missing_speculative_method",
          blank="missing_speculative_method", limit="speculative_method",
          checks=(name_check("speculative_method"),),
          missing_message="the profile has no speculative_method; give the engine's method "
                          "name, such as mtp"),
    Field("num_spec_tokens", "integer", required=True, checks=(K_RANGE,)),
    Field("thinking", "string", required=True, checks=(THINKING,)),
    Field("category", "string", required=True, limit="category",
          checks=(category_check("category"),)),
    Field("acceptance_length", "number", required=True, nonfinite="al_not_finite",
          checks=(AL_RANGE,)),
    Field("per_position_rates", "list", content=rates, shape=RATES_SHAPE),
    _rates_sum,
    Field("counts", "mapping", content=read_counts, shape=COUNTS),
    Field("method", "string", required=True, drop_on_failure=False, checks=(
        Check("unknown_method", _method_problem, {"enum": list(PROFILE_METHODS)}),
        Check("method_not_charged", lambda v, got: None if v != Method.NOT_CHARGED else (
              "method not_charged is not a value and cannot be a profile's method; leave the "
              "profile out"), {"enum": list(PROFILE_METHODS)}))),
    Field("provenance", "mapping", required=_requires("requires_provenance"),
          missing="missing_provenance", content=_provenance, shape=PROVENANCE,
          missing_message="provenance is required with method {method}; say where the value "
                          "came from"),
    _measurement,
    Field("rationale", "string", required=_requires("requires_rationale"),
          missing="missing_rationale", blank="missing_rationale", limit="rationale",
          missing_message="rationale is required with method {method}; explain the value"),
    Field("copied_from", "string", required=_requires("requires_copied_from"),
          missing="missing_copied_from", blank="missing_copied_from", limit="copied_from",
          missing_message="copied_from is required with method {method}; name the source "
                          "profile as model/method/k<K>/thinking-<mode>/category",
          checks=(Check("bad_copied_from", lambda v, got: None if COPIED_FROM_RE.fullmatch(v)
                        else f"copied_from {v!r} is not model/method/k<K>/thinking-<mode>/"
                             "category, such as glm-5.2-fp8/mtp/k3/thinking-on/coding",
                        {"pattern": re.sub(r"\(\?P<\w+>", "(", COPIED_FROM_RE.pattern)}),)),
), build=_profile, also=tuple(_method_schema(name, rule) for name, rule in METHODS.items()
                              if rule.allowed_in_profile))



# --- the set -------------------------------------------------------------------------------------

def _caveats(ck: Checker, seq: list, m: dict, sub: str, got: dict) -> tuple[str, ...] | None:
    out = []
    for i, item in enumerate(seq):
        where, path = pos(seq, i), join(sub, i)
        if not isinstance(item, str):
            ck.error(where, path, "wrong_type",
                     f"each caveat must be a string, got {type_name(item)}")
        elif not ck.text_ok(item, where, path, "the caveat"):
            pass
        elif not item.strip():
            ck.error(where, path, "empty_caveat",
                     "caveat is empty; say what the set does not cover, or remove the entry")
        elif ck.length_ok(item, where, path, "the caveat", "caveat"):
            out.append(item)
    return tuple(out) if len(out) == len(seq) else None


def _profiles(ck: Checker, seq: list, m: dict, sub: str, got: dict
              ) -> tuple[Profile, ...] | None:
    """Each profile by :data:`PROFILE`, and the rule that no two share a key."""
    if not seq:
        ck.error(pos(m, "profiles"), "profiles", "no_profiles",
                 "profiles is empty; a set holds at least one profile")
        return None
    out: list[Profile | None] = []
    seen: dict[tuple, int] = {}
    for i, item in enumerate(seq):
        path = join(sub, i)
        before = ck.errors
        # A mapping's own position is only for "not a mapping": a plain one has none anyway.
        fields = PROFILE.read(ck, item, path, None if type(item) is dict else pos(seq, i))
        if fields is None:
            out.append(None)
            continue
        out.append(_profile(fields) if ck.errors == before else None)
        key = (fields["model"], fields["speculative_method"], fields["num_spec_tokens"],
               fields["thinking"], fields["category"])
        if None in key:  # a key field was absent or invalid: reported already
            continue
        if key in seen:
            first = seen[key]
            ck.error(pos(seq, i), path, "duplicate_profile_key",
                     f"profile {profile_label(*key)} is also profiles[{first}] (line "
                     f"{pos(seq, first)[0]}); two profiles may not share a key, so remove or "
                     "change one")
        else:
            seen[key] = i
    if any(p is None for p in out):
        return None
    return tuple(p for p in out if p is not None)


def _name_not_file(ck: Checker, m: dict, path: str, got: dict) -> None:
    """The spec's convention: a set is named by its file (a warning, not an error)."""
    name = got["name"]
    if name is None:
        return
    stem, suffix = os.path.splitext(os.path.basename(ck.file))
    if suffix in YAML_SUFFIXES and stem != name:
        ck.error(pos(m, "name"), "name", "name_not_file",
                 f"set name {name!r} differs from the file's name {stem!r}; scenarios name sets "
                 f"by file, so rename one of them", severity="warning")


#: The characters :data:`NO_CONTROL` keeps out, as the inside of a regex class.
_CONTROLS = NO_CONTROL[3:-3]


def _name_problem(name: str, got: dict) -> str | None:
    problem = set_name_problem(name)
    if problem is None:
        return None
    if problem.startswith("it holds") or name in (".", ".."):
        return (f"name {name!r} cannot be a file name, which export needs; drop '/', '\\' and "
                "control characters")
    shown = repr(name) if len(name) <= 60 else repr(name[:60]) + "..."
    return f"name {shown} cannot be a file name, which export needs: {problem}; rename the set"


SET = Map("a profile set", keys=SET_KEYS, steps=(
    Field("kind", "string", required=True,
          missing_message=f"kind is required; add 'kind: {KIND}'",
          checks=(Check("wrong_kind", lambda v, got: None if v == KIND else
                        f"kind is {v!r}; a profile set has 'kind: {KIND}'",
                        {"const": KIND}),)),
    Field("name", "string", required=True, blank="empty_name",
          blank_message="name is empty; a set needs a name (by convention, its file's name)",
          # JSON Schema counts characters, not UTF-8 bytes: a name of many-byte characters
          # may pass it and still be too long.
          checks=(Check("bad_name", _name_problem, {
              "pattern": f"^[^./\\\\{_CONTROLS}][^/\\\\{_CONTROLS}]*$",
              "maxLength": MAX_SET_NAME_BYTES}),)),
    _name_not_file,
    Field("caveats", "list", content=_caveats, shape={"items": {
        "type": "string", "allOf": [{"pattern": r"\S"}, {"pattern": "^[^\x00]*$"}],
        "maxLength": MAX_LENGTH["caveat"]}}),
    Field("profiles", "list", required=True, content=_profiles,
          shape={"items": PROFILE, "minItems": 1},
          missing_message="profiles is required; a set holds at least one profile"),
))
