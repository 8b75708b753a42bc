"""Pure checks of profile-set files: loaded document in, findings and dataclasses out.

This module owns every rule of the spec's "Checks" section for profile sets, the types and
allowed keys of its tables, and the cross-file rule that two files may not declare one set. It
touches no database: ``registry validate`` runs it alone and ``registry import`` runs it before
writing anything. Inline values and pins live in :mod:`registry_db.inputs.inline`.

Each rule has a stable ``code``; every problem of every file is reported, not just the first.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from typing import Any

from registry_db.errors import Finding
from registry_db.model import (CATEGORY_RE, COPIED_FROM_RE, KIND, METHODS, PROFILE_KEYS,
                              PROFILE_METHODS, PROVENANCE_KEYS, SAMPLING_KEYS, SET_KEYS,
                              SUM_TOLERANCE, Profile, ProfileSet, Provenance, Sampling,
                              profile_label)
from registry_db.inputs.base import Checker, join, rates_sum_off, type_name
from registry_db.inputs.inline import check_inline_value, check_pin
from registry_db.yaml.load import key_pos, mark, pos

__all__ = ["check_profile_set", "check_inline_value", "check_pin", "YAML_SUFFIXES"]

YAML_SUFFIXES = (".yaml", ".yml")
#: A set's name becomes a file name on export, so it may not hold what a file name cannot.
_FILE_NAME_RE = re.compile(r"[^/\\\x00-\x1f]+")


def check_profile_set(doc: Any, file: str) -> tuple[ProfileSet | None, list[Finding]]:
    """Check one loaded profile-set document; the set comes back only when nothing is an error.

    ``file`` is the name findings carry (and the set's ``file``). A set whose ``name`` differs from
    the file's stem draws the warning ``name_not_file``.
    """
    ck = Checker(file)
    # A top-level scalar (or nothing, after '---') has no position of its own: point at the start.
    if not ck.mapping(doc, mark(doc) if isinstance(doc, list) else (1, 1), "", "a profile set"):
        return None, ck.findings
    ck.unknown_keys(doc, SET_KEYS, "")
    kind = ck.field(doc, "kind", "", "string", required=True,
                    missing_message=f"kind is required; add 'kind: {KIND}'")
    if kind is not None and kind != KIND:
        ck.error(pos(doc, "kind"), "kind", "wrong_kind",
                 f"kind is {kind!r}; a profile set has 'kind: {KIND}'")
    name = ck.field(doc, "name", "", "string", required=True, nonempty="empty_name",
                    empty_message="name is empty; a set needs a name (by convention, its "
                                  "file's name)")
    if name is not None:
        _check_name(ck, doc, name, file)
    caveats = _caveats(ck, doc)
    profiles = _profiles(ck, doc)
    if ck.errors or name is None or caveats is None or profiles is None:
        return None, ck.findings
    return ProfileSet(name=name, caveats=caveats, profiles=profiles, file=file), ck.findings


def _check_name(ck: Checker, doc: dict, name: str, file: str) -> None:
    if not _FILE_NAME_RE.fullmatch(name) or name in (".", ".."):
        ck.error(pos(doc, "name"), "name", "bad_name",
                 f"name {name!r} cannot be a file name, which export needs; drop '/', '\\' and "
                 "control characters")
        return
    stem, suffix = os.path.splitext(os.path.basename(file))
    if suffix in YAML_SUFFIXES and stem != name:
        ck.error(pos(doc, "name"), "name", "name_not_file",
                 f"set name {name!r} differs from the file's name {stem!r}; scenarios name sets "
                 f"by file, so rename one of them", severity="warning")


def _caveats(ck: Checker, doc: dict) -> tuple[str, ...] | None:
    seq = ck.field(doc, "caveats", "", "list")
    if seq is None:
        return None if "caveats" in doc else ()
    out = []
    for i, item in enumerate(seq):
        if not isinstance(item, str):
            ck.error(pos(seq, i), join("caveats", i), "wrong_type",
                     f"each caveat must be a string, got {type_name(item)}")
        elif not ck.text_ok(item, pos(seq, i), join("caveats", i), "the caveat"):
            pass
        elif not item.strip():
            ck.error(pos(seq, i), join("caveats", i), "empty_caveat",
                     "caveat is empty; say what the set does not cover, or remove the entry")
        else:
            out.append(item)
    return tuple(out) if len(out) == len(seq) else None


def _profiles(ck: Checker, doc: dict) -> tuple[Profile, ...] | None:
    seq = ck.field(doc, "profiles", "", "list", required=True,
                   missing_message="profiles is required; a set holds at least one profile")
    if seq is None:
        return None
    if not seq:
        ck.error(pos(doc, "profiles"), "profiles", "no_profiles",
                 "profiles is empty; a set holds at least one profile")
        return None
    out: list[Profile | None] = []
    seen: dict[tuple, int] = {}
    provenances: dict[int, Provenance | None] = {}
    for i, item in enumerate(seq):
        path = join("profiles", i)
        if not ck.mapping(item, pos(seq, i), path, "each profile", code="wrong_type"):
            out.append(None)
            continue
        profile, key = _profile(ck, item, path, provenances)
        out.append(profile)
        if key is None:
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


def _profile(ck: Checker, m: dict, path: str,
             provenances: dict[int, Provenance | None]) -> tuple[Profile | None, tuple | None]:
    """One profile; also returns its key when the key's five fields are valid."""
    before = ck.errors
    ck.unknown_keys(m, PROFILE_KEYS, path)
    model = ck.field(m, "model", path, "string", required=True, missing="missing_model",
                     nonempty="missing_model",
                     missing_message="the profile has no model; give the catalog model name")
    spec_method = ck.field(m, "speculative_method", path, "string", required=True,
                           missing="missing_speculative_method",
                           nonempty="missing_speculative_method",
                           missing_message="the profile has no speculative_method; give the "
                                           "engine's method name, such as mtp")
    k = ck.field(m, "num_spec_tokens", path, "integer", required=True)
    if k is not None and k < 1:
        ck.error(pos(m, "num_spec_tokens"), join(path, "num_spec_tokens"), "bad_k",
                 f"num_spec_tokens is {k}; K is at least 1")
        k = None
    thinking = ck.field(m, "thinking", path, "string", required=True)
    if thinking is not None and thinking not in ("on", "off"):
        ck.error(pos(m, "thinking"), join(path, "thinking"), "bad_thinking",
                 f"thinking is {thinking!r}; it is 'on' or 'off'")
        thinking = None
    category = ck.field(m, "category", path, "string", required=True)
    if category is not None and not CATEGORY_RE.fullmatch(category):
        ck.error(pos(m, "category"), join(path, "category"), "bad_category",
                 f"category {category!r} is malformed; use lower-case letters, digits, '_' "
                 "and '-', such as coding")
        category = None
    al = ck.field(m, "acceptance_length", path, "number", required=True,
                  nonfinite="al_not_finite")
    if al is not None and k is not None and not 1 <= al <= k + 1:
        ck.error(pos(m, "acceptance_length"), join(path, "acceptance_length"), "al_out_of_range",
                 f"acceptance_length {al!r} lies outside [1, {k + 1}] for K = {k}; AL counts the "
                 "bonus token, so it is at least 1 and at most K + 1")
        al = None
    rates = ck.rates(m, path, k)
    if rates is not None and al is not None:
        total = rates_sum_off(rates, al - 1, SUM_TOLERANCE)
        if total is not None:
            ck.error(pos(m, "per_position_rates"), join(path, "per_position_rates"), "rates_sum",
                     f"per_position_rates sum to {total:.4g} but acceptance_length - 1 is "
                     f"{al - 1:.4g}; they must agree within {SUM_TOLERANCE}")
    method, provenance, rationale, copied = _method_fields(ck, m, path, provenances)
    fields = (model, spec_method, k, thinking, category)
    key = fields if all(f is not None for f in fields) else None
    if ck.errors > before or key is None or al is None or method is None:
        return None, key
    return Profile(model=model, speculative_method=spec_method, num_spec_tokens=k,
                   thinking=thinking, category=category, acceptance_length=float(al),
                   method=method, per_position_rates=rates, provenance=provenance,
                   rationale=rationale, copied_from=copied), key


def _method_fields(ck: Checker, m: dict, path: str, provenances: dict[int, Provenance | None]
                   ) -> tuple[str | None, Provenance | None, str | None, str | None]:
    """``method`` and what it requires: provenance, rationale, copied_from, the measurement."""
    method = ck.field(m, "method", path, "string", required=True)
    rule = None
    if method is not None:
        rule = METHODS.get(method)
        if rule is None:
            near = difflib.get_close_matches(method, PROFILE_METHODS, n=1)
            hint = (f"did you mean {near[0]!r}?" if near
                    else f"use one of {', '.join(PROFILE_METHODS)}")
            ck.error(pos(m, "method"), join(path, "method"), "unknown_method",
                     f"method {method!r} is not recognized; {hint}")
        elif not rule.allowed_in_profile:
            ck.error(pos(m, "method"), join(path, "method"), "method_not_charged",
                     "method not_charged is not a value and cannot be a profile's method; "
                     "leave the profile out")
            rule = None
    why = f" with method {method}"
    provenance = None
    raw = ck.field(m, "provenance", path, "mapping",
                   required=bool(rule and rule.requires_provenance),
                   missing="missing_provenance",
                   missing_message=f"provenance is required{why}; say where the value came from")
    if raw is not None:
        if id(raw) not in provenances:  # a provenance shared by aliases is checked once
            provenances[id(raw)] = _provenance(ck, raw, join(path, "provenance"))
        provenance = provenances[id(raw)]
        if rule and rule.requires_measurement:
            for key, what in (("hardware", "the chip"), ("engine_image", "the engine image"),
                              ("sampling", "the decoding configuration")):
                if key not in raw:  # present but wrong is the provenance check's to report
                    ck.error(mark(raw), join(join(path, "provenance"), key), f"missing_{key}",
                             f"provenance.{key} is required{why}; add {what} it was measured "
                             "with")
    rationale = ck.field(m, "rationale", path, "string",
                         required=bool(rule and rule.requires_rationale),
                         missing="missing_rationale", nonempty="missing_rationale",
                         missing_message=f"rationale is required{why}; explain the value")
    copied = ck.field(m, "copied_from", path, "string",
                      required=bool(rule and rule.requires_copied_from),
                      missing="missing_copied_from", nonempty="missing_copied_from",
                      missing_message=f"copied_from is required{why}; name the source profile as "
                                      "model/method/k<K>/thinking-<mode>/category")
    if copied is not None and not COPIED_FROM_RE.fullmatch(copied):
        ck.error(pos(m, "copied_from"), join(path, "copied_from"), "bad_copied_from",
                 f"copied_from {copied!r} is not model/method/k<K>/thinking-<mode>/category, "
                 "such as glm-5.2-fp8/mtp/k3/thinking-on/coding")
        copied = None
    return (method if rule else None), provenance, rationale, copied


def _provenance(ck: Checker, m: dict, path: str) -> Provenance | None:
    before = ck.errors
    ck.unknown_keys(m, PROVENANCE_KEYS, path)
    source = ck.field(m, "source", path, "string", required=True, missing="missing_source",
                      nonempty="missing_source",
                      missing_message="provenance has no source; give the document the value "
                                      "was read from")
    text = {key: ck.field(m, key, path, "string", nonempty="empty_value")
            for key in ("run", "benchmark", "hardware", "engine_image")}
    counts = {key: _count(ck, m, key, path) for key in ("prompts", "tp")}
    sampling = None
    raw = ck.field(m, "sampling", path, "mapping")
    if raw is not None:
        sampling = _sampling(ck, raw, join(path, "sampling"))
    settings = _settings(ck, m, path)
    if ck.errors > before or source is None:
        return None
    return Provenance(source=source, sampling=sampling, settings=settings, **text, **counts)


def _count(ck: Checker, m: dict, key: str, path: str) -> int | None:
    value = ck.field(m, key, path, "integer")
    if value is not None and value < 0:
        ck.error(pos(m, key), join(path, key), "negative_count",
                 f"{key} is {value}; a count is not negative")
        return None
    return value


def _sampling(ck: Checker, m: dict, path: str) -> Sampling | None:
    before = ck.errors
    ck.unknown_keys(m, SAMPLING_KEYS, path)
    temperature = ck.field(m, "temperature", path, "number", required=True,
                           missing="missing_temperature",
                           missing_message="sampling has no temperature; give it (0 is greedy)")
    if temperature is not None and temperature < 0:
        ck.error(pos(m, "temperature"), join(path, "temperature"), "negative_temperature",
                 f"temperature is {temperature!r}; it is not negative (0 is greedy)")
    top_p = ck.field(m, "top_p", path, "number")
    if top_p is not None and not 0 < top_p <= 1:
        ck.error(pos(m, "top_p"), join(path, "top_p"), "top_p_out_of_range",
                 f"top_p is {top_p!r}; it lies in (0, 1]")
    top_k = ck.field(m, "top_k", path, "integer")
    if top_k is not None and top_k < -1:
        ck.error(pos(m, "top_k"), join(path, "top_k"), "top_k_out_of_range",
                 f"top_k is {top_k}; it is at least -1 (-1 and 0 disable it)")
    max_tokens = _count(ck, m, "max_tokens", path)
    if ck.errors > before:
        return None
    return Sampling(temperature=float(temperature), top_p=None if top_p is None else float(top_p),
                    top_k=top_k, max_tokens=max_tokens)


def _settings(ck: Checker, m: dict, path: str) -> tuple[tuple[str, Any], ...]:
    raw = ck.field(m, "settings", path, "mapping")
    if raw is None:
        return ()
    sub = join(path, "settings")
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
        else:
            out.append((name, value))
    return tuple(out)
