"""InferenceX's golden AL curves (``golden_al_distribution/*.yaml``) read as profile sets.

A curve file is a comment header (read by :mod:`registry_db.sources.inferencex_header`) and a
body ``MODEL: {thinking_on: {K: AL}, thinking_off: {K: AL}}``. Each (thinking mode, K) cell
becomes one profile: category from the ``dataset:`` line, method from the "Measured on" line
(lower-cased), the AL exactly as written, ``method: measured``, and a provenance per thinking
mode from the header. A header that says the values were copied or are provisional makes the
file ``copied`` instead, or refuses it when it does not say from where.

Nothing is invented: a value the header does not state is left out, or, when the spec requires
it (the engine image, hardware and sampling of a measured profile), the file is refused with
what to add. Every problem of every file is reported at once, as findings with ``FILE:LINE:COL``;
when any is an error, no set is returned, so nothing is written.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from registry_db.errors import Finding, InvalidInput, UsageError, sort_findings
from registry_db.inputs.readers import al_problem
from registry_db.inputs.schema import category_problem, is_int, is_number
from registry_db.model import (
    Profile,
    ProfileSet,
    Provenance,
    Sampling,
    profile_label,
    set_name_problem,
)
from registry_db.sources.inferencex_header import Header, read_header
from registry_db.sources.output import Ingested, rendered, safe_name, spec_problems
from registry_db.sources.profile_set import collect_files
from registry_db.yaml.load import MAX_FILE_BYTES, key_pos, load_file, load_yaml, mark, pos

NAME = "inferencex"
DESCRIPTION = "InferenceX golden AL curves (golden_al_distribution/*.yaml), or folders of them"

MODES = {"thinking_on": "on", "thinking_off": "off"}
#: Cell values the collectors write for a cell that produced no AL: left out, with a warning.
NOT_MEASURED = ("N/A", None)
METADATA_KEY = "_metadata"


@dataclass(frozen=True)
class CurveMap:
    """``--map``: source model spellings to catalog names, and per-file method names."""

    models: Mapping[str, str] = field(default_factory=dict)
    #: input file name (``minimaxm3_eagle3_gqa.yaml``) -> the method its profiles get
    methods: Mapping[str, str] = field(default_factory=dict)
    file: str | None = None
    #: (line, column) of each entry, so that an entry no input used can be pointed at
    where: Mapping[tuple[str, str], tuple[int, int]] = field(default_factory=dict)


def load_map(path: str) -> CurveMap:
    """Read a ``--map`` file: ``models:`` and ``methods:``, each a mapping of text to text.

    Raises :class:`InvalidInput` with every problem of the file.
    """
    doc = load_file(path, path)
    problems: list[Finding] = []

    def bad(where: tuple[int, int], at: str, code: str, message: str) -> None:
        problems.append(Finding(path, where[0], where[1], at, code, message))

    out: dict[str, dict[str, str]] = {"models": {}, "methods": {}}
    where: dict[tuple[str, str], tuple[int, int]] = {}
    if not isinstance(doc, dict):
        bad(mark(doc) if mark(doc) != (0, 0) else (1, 1), "", "wrong_type",
            "a map file is a mapping with 'models:' and/or 'methods:'")
        raise InvalidInput(problems)
    for section, value in doc.items():
        if section not in out:
            bad(key_pos(doc, section), str(section), "unknown_key",
                f"{section!r} is not a map section; use 'models' (source spelling: catalog "
                "name) or 'methods' (input file name: method name)")
            continue
        if not isinstance(value, dict):
            bad(pos(doc, section), section, "wrong_type",
                f"{section} is a mapping of names to names")
            continue
        for key, target in value.items():
            if not isinstance(key, str) or not isinstance(target, str) or not target.strip():
                bad(pos(value, key), f"{section}.{key}", "wrong_type",
                    f"{section}: {key!r} must map a name to a non-empty name")
                continue
            out[section][key] = target
            where[(section, key)] = key_pos(value, key)
    if problems:
        raise InvalidInput(problems)
    return CurveMap(out["models"], out["methods"], path, where)


def read_inferencex(paths: Iterable[str], *, name: str | None = None,
                    curve_map: CurveMap | None = None, engine_image: str | None = None,
                    source_base: str | None = None) -> Ingested:
    """Read golden AL files (or folders of them) into profile sets, rendered and validated.

    One set per file, named after the file, unless ``name`` merges every file into one set.
    ``engine_image`` is the image the curves were measured with (these files rarely state one);
    ``source_base`` turns each file's path into ``<source_base>/<file name>`` in the provenance.
    Raises :class:`InvalidInput` carrying every finding when any is an error.
    """
    if name is not None and set_name_problem(name):
        raise UsageError(f"--name {name!r} cannot name a set: {set_name_problem(name)}")
    curve_map = curve_map or CurveMap()
    findings: list[Finding] = []
    used: set[tuple[str, str]] = set()
    curves: list[tuple[str, list[Profile], dict[tuple, tuple[int, int]]]] = []
    for path in collect_files(paths, findings):
        file = str(path)
        profiles, where = _read_file(path, file, curve_map, engine_image, source_base,
                                     used, findings)
        curves.append((file, profiles, where))
    for (section, key), at in curve_map.where.items():
        if (section, key) not in used:
            findings.append(Finding(curve_map.file or "", at[0], at[1], f"{section}.{key}",
                                    "unused_map_entry",
                                    f"{key!r} matched no input; check its spelling",
                                    severity="warning"))
    sets = _merge(curves, name, findings) if name is not None else _per_file(curves, findings)
    findings = sort_findings(findings)
    if any(f.is_error for f in findings):
        raise InvalidInput(findings)
    return rendered(sets, findings)


def read(paths: Iterable[str | os.PathLike], **options: Any
         ) -> tuple[list[ProfileSet], list[Finding]]:
    """The source protocol's entry point: :func:`read_inferencex`, refusals as findings."""
    try:
        result = read_inferencex([str(p) for p in paths], **options)
    except InvalidInput as exc:
        return [], exc.findings
    return list(result.sets), list(result.warnings)


def _per_file(curves: list, findings: list[Finding]) -> list[ProfileSet]:
    sets: list[ProfileSet] = []
    named: dict[str, str] = {}
    for file, profiles, _ in curves:
        set_name = safe_name(Path(file).stem)
        if set_name in named:
            findings.append(Finding(file, 1, 1, "", "duplicate_set_name",
                                    f"this file's set would be named {set_name!r}, as "
                                    f"{named[set_name]}'s is; give --name to merge them, or "
                                    "rename one file"))
        named[set_name] = file
        if profiles:
            sets.append(ProfileSet(set_name, (), tuple(profiles)))
    return sets


def _merge(curves: list, name: str, findings: list[Finding]) -> list[ProfileSet]:
    profiles: list[Profile] = []
    seen: dict[tuple, tuple[str, tuple[int, int]]] = {}
    for file, file_profiles, where in curves:
        for p in file_profiles:
            if p.key in seen:
                other, (line, _) = seen[p.key]
                here = where[p.key]
                findings.append(Finding(
                    file, here[0], here[1], p.label, "duplicate_profile_key",
                    f"profile {p.label} is in both {other} (line {line}) and {file}; one set "
                    f"holds one value per key: give one curve its own method name with --map "
                    f"(methods: {{{Path(file).name}: {p.speculative_method}-VARIANT}}), or "
                    "leave out --name to make one set per file"))
                continue
            seen[p.key] = (file, where[p.key])
            profiles.append(p)
    return [ProfileSet(name, (), tuple(profiles))] if profiles else []


def _read_file(path: Path, file: str, curve_map: CurveMap, engine_image: str | None,
               source_base: str | None, used: set, findings: list[Finding]
               ) -> tuple[list[Profile], dict[tuple, tuple[int, int]]]:
    """One file's profiles and where each cell was written; problems go to ``findings``."""
    try:
        data = path.read_bytes()[:MAX_FILE_BYTES + 1]
    except OSError as exc:
        findings.append(Finding(file, 0, 0, "", "unreadable_file",
                                f"cannot read the file: {exc.strerror or exc}"))
        return [], {}
    header, problems = read_header(data.decode("utf-8", errors="replace"), file)
    findings.extend(problems)
    try:
        doc = load_yaml(data, file) if len(data) <= MAX_FILE_BYTES else None
    except InvalidInput as exc:
        findings.extend(exc.findings)
        return [], {}
    if doc is None:
        findings.append(Finding(file, 0, 0, "", "file_too_large",
                                f"the file is larger than {MAX_FILE_BYTES} bytes"))
        return [], {}
    errors_before = sum(f.is_error for f in findings)
    body = _body(doc, file, findings)
    if body is None:
        return [], {}
    source_model, cells = body
    modes = sorted({cell[0] for cell in cells})
    fixed = _fixed_fields(header, file, source_model, modes, curve_map, engine_image,
                          source_base, used, findings)
    if fixed is None or sum(f.is_error for f in findings) > errors_before:
        return [], {}
    model, method, category, provenances, copied = fixed
    profiles, where = [], {}
    for mode, k, al, at in cells:
        copied_from = rationale = None
        if copied is not None:
            copied_from = profile_label(copied[0], method, k, mode, category)
            rationale = copied[1]
        p = Profile(model=model, speculative_method=method, num_spec_tokens=k, thinking=mode,
                    category=category, acceptance_length=float(al),
                    method="measured" if copied is None else "copied",
                    provenance=provenances[mode], rationale=rationale, copied_from=copied_from)
        profiles.append(p)
        where[p.key] = at
    if any(f.is_error and f.file == file for f in findings):
        return [], {}  # refused already, at the header line that says why
    refused = False
    for index, what, f in spec_problems(ProfileSet("curve", (), tuple(profiles))):
        # At the cell that made the profile (the dataset line for the category): the user
        # never sees the YAML the finding was made on.
        at = where[profiles[index].key] if index is not None else (1, 1)
        if what == "category" and header.category is not None:
            at = header.category[1]
        findings.append(Finding(file, at[0], at[1], what, f.code, f.message))
        refused = True
    return ([], {}) if refused else (profiles, where)


def _body(doc: Any, file: str, findings: list[Finding]
          ) -> tuple[str, list[tuple[str, int, Any, tuple[int, int]]]] | None:
    """``MODEL: {thinking_on: {K: AL}}``: the source's model name and the measured cells."""
    def error(where: tuple[int, int], at: str, code: str, message: str) -> None:
        findings.append(Finding(file, max(where[0], 1), max(where[1], 1), at, code, message))

    shape = "MODEL: {thinking_on: {K: AL}, thinking_off: {K: AL}}"
    if not isinstance(doc, dict):
        error(mark(doc), "", "not_a_curve", f"not an InferenceX golden AL file: the body is "
              f"not a mapping {shape}")
        return None
    models = [k for k in doc if k != METADATA_KEY]
    if len(models) != 1:
        where = key_pos(doc, models[1]) if len(models) > 1 else mark(doc)
        what = (f"{len(models)} model keys ({', '.join(map(repr, models))})" if models
                else "no model key")
        error(where, str(models[1]) if len(models) > 1 else "", "not_one_model",
              f"{what}; a golden AL file holds exactly one model's curve, {shape}")
        return None
    model = models[0]
    modes = doc[model]
    if not isinstance(model, str) or not isinstance(modes, dict) or not modes:
        error(pos(doc, model), str(model), "not_a_curve",
              f"not an InferenceX golden AL file: expected {shape}")
        return None
    cells = []
    for mode_key, values in modes.items():
        at = f"{model}.{mode_key}"
        if mode_key not in MODES:
            error(key_pos(modes, mode_key), at, "unknown_mode",
                  f"{mode_key!r} is not a thinking mode; use thinking_on or thinking_off")
            continue
        if not isinstance(values, dict) or not values:
            error(pos(modes, mode_key), at, "not_a_curve",
                  f"{mode_key} must map each K (num_speculative_tokens) to its AL")
            continue
        for k, al in values.items():
            cell = f"{at}.{k}"
            if not is_int(k) or k < 1:
                error(key_pos(values, k), cell, "bad_k",
                      f"K {k!r} is not a positive integer (num_speculative_tokens)")
            elif al in NOT_MEASURED:
                w = pos(values, k)
                findings.append(Finding(file, w[0], w[1], cell, "cell_not_measured",
                                        f"{mode_key} K={k} has no value ({al!r}); left out, "
                                        "never interpolated", severity="warning"))
            elif not is_number(al):
                error(pos(values, k), cell, "bad_al", f"AL {al!r} is not a number")
            elif not math.isfinite(al):
                error(pos(values, k), cell, "al_not_finite", f"AL {al!r} is not finite")
            elif (problem := al_problem(al, k)) is not None:
                error(pos(values, k), cell, "al_out_of_range", problem)
            else:
                cells.append((MODES[mode_key], k, al, pos(values, k)))
    return model, cells


def _fixed_fields(h: Header, file: str, source_model: str, modes: list[str], curve_map: CurveMap,
                  engine_image: str | None, source_base: str | None, used: set,
                  findings: list[Finding]) -> tuple | None:
    """Model, method, category, a provenance per mode and the copy (model, rationale)."""
    def error(where: tuple[int, int], code: str, message: str) -> None:
        findings.append(Finding(file, where[0], where[1], "header", code, message))

    top = (1, 1)
    model = curve_map.models.get(source_model, source_model)
    if source_model in curve_map.models:
        used.add(("models", source_model))
    # A copied curve's "Measured on" line names the model it was measured on: no mismatch.
    copy_source = h.copied_from[0] if h.copied_lines and h.copied_from else None
    if h.measured_model and h.measured_model[0] not in (source_model, copy_source):
        findings.append(Finding(file, *h.measured_model[1], "header", "model_mismatch",
                                f"the header measured {h.measured_model[0]!r} but the values "
                                f"are under {source_model!r}; the values' key is used",
                                severity="warning"))
    stated = [m for m in (h.method, h.key_method, h.spec_method) if m is not None]
    for other in stated[1:]:
        if other[0] != stated[0][0]:
            error(other[1], "method_mismatch",
                  f"the header names method {other[0]!r} here but {stated[0][0]!r} on line "
                  f"{stated[0][1][0]}; fix the header")
    method = curve_map.methods.get(Path(file).name)
    if method is not None:
        used.add(("methods", Path(file).name))
    elif stated:
        method = stated[0][0]
    else:
        error(top, "no_method", "the header has no 'Measured on MODEL (CHIP, vLLM METHOD)' "
              "line, so the speculative method is unknown; add it, or name the method for "
              f"this file in --map (methods: {{{Path(file).name}: METHOD}})")
    category = None
    if h.category is None:
        error(top, "no_category", "the header has no 'dataset: CATEGORY' line, so the "
              "workload category is unknown; add it")
    elif (problem := category_problem("dataset", h.category[0])) is not None:
        error(h.category[1], "bad_category", problem)
    else:
        category = h.category[0]
    copied = None
    if h.copied_lines:
        line = h.copied_lines[0][0]
        if h.copied_from is None:
            error((line, 1), "copied_without_source",
                  "the header says these values are copied or provisional, but not from which "
                  "curve; a copied profile names its source: add a header line "
                  "'# copied from MODEL' naming the model whose curve was used")
        else:
            source = curve_map.models.get(h.copied_from[0], h.copied_from[0])
            if h.copied_from[0] in curve_map.models:
                used.add(("models", h.copied_from[0]))
            copied = (source, " ".join(text for _, text in h.copied_lines))
    image = engine_image or h.engine_image
    if engine_image and h.engine_image and engine_image != h.engine_image:
        error(top, "engine_image_mismatch", f"--engine-image {engine_image!r} differs from "
              f"the header's image {h.engine_image!r}; leave out --engine-image or fix it")
    if not h.copied_lines:
        if image is None:
            error(top, "missing_engine_image", "the file states no engine image, which a "
                  "measured profile requires; give --engine-image IMAGE, the image the curve "
                  "was measured with (it is never guessed)")
        if h.hardware is None:
            error(top, "no_hardware", "the header names no chip ('Measured on MODEL (CHIP, "
                  "...)'), which a measured profile requires; add it")
    if method is None or category is None:
        return None
    source = f"{source_base.rstrip('/')}/{Path(file).name}" if source_base else file
    provenances = {mode: _provenance(h, mode, source, image, copied is None, file, findings)
                   for mode in modes}
    return model, method, category, provenances, copied


def _provenance(h: Header, mode: str, source: str, image: str | None, measured: bool,
                file: str, findings: list[Finding]) -> Provenance:
    line = h.modes.get(mode)
    sampling = dict(h.sampling, **(line.sampling if line else {}))
    settings: dict[str, Any] = dict(h.settings, **(line.settings if line else {}))
    settings.update(h.spec_settings)
    if h.draft_model:
        settings["draft_model"] = h.draft_model
    where = (line.line, 1) if line else (1, 1)
    if "temperature" not in sampling and sampling:
        findings.append(Finding(file, *where, "header", "no_temperature" if measured else
                                "sampling_left_out",
                                f"thinking_{mode} states sampling but no temperature"
                                + ("; a measured profile needs it: add it to the dataset line "
                                   f"or a thinking_{mode} line" if measured else
                                   "; its sampling is left out"),
                                severity="error" if measured else "warning"))
    elif "temperature" not in sampling and measured:
        findings.append(Finding(file, *where, "header", "no_temperature",
                                f"the header states no temperature for thinking_{mode}; a "
                                "measured profile needs its sampling: add 'temperature: T' to "
                                f"the dataset line or a thinking_{mode} line"))
    return Provenance(
        source=source, run=h.run, benchmark=h.benchmark, hardware=h.hardware,
        engine_image=image, tp=h.tp,
        sampling=Sampling(**sampling) if "temperature" in sampling else None,
        settings=tuple(settings.items()))
