"""InferenceX's golden AL curves (``golden_al_distribution/*.yaml``) read as profile sets.

A curve file (read by :mod:`registry_db.sources.inferencex.curve`) is a comment header of facts
(:mod:`registry_db.sources.inferencex.forms`) and a body of cells ``MODEL: {thinking_on: {K:
AL}}``, a cell perhaps followed by a counter comment. Each (thinking mode, K) cell becomes one
profile: the AL exactly as written, the counts when given,
``method: measured`` with a provenance per thinking mode built from the header's facts and what
the user says of the file (flags, the map's ``files:`` entry). A header that says the values
were copied makes ``copied`` profiles whose ``copied_from`` names the source curve's profile.

Nothing is invented: a fact the file does not state is left out, or, when the spec requires it
(the image, chip and sampling of a measured profile), the file is refused saying which flag or
map entry gives it. Every problem of every file is reported at once, with ``FILE:LINE:COL``;
any error and nothing is written, unless ``keep_going`` leaves out only the files with errors.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from registry_db.errors import Finding, InvalidInput, UsageError, sort_findings
from registry_db.model import (
    SAMPLING_KEYS,
    SUM_TOLERANCE,
    Counts,
    Profile,
    ProfileSet,
    Provenance,
    Sampling,
    profile_label,
    set_name_problem,
)
from registry_db.sources.inferencex.curve import Cell, Curve, read_curve
from registry_db.sources.inferencex.facts import Fact, Facts, Origin, field_label, shown
from registry_db.sources.inferencex.header import rounds_to
from registry_db.sources.inferencex.map import FLAGS, CurveMap, load_map, user_facts, user_key
from registry_db.sources.inferencex.sets import Built, Where, merge, per_file, spec_say, unused
from registry_db.sources.ingested import Ingested, rendered, safe_name
from registry_db.sources.profile_set import collect_files

__all__ = ["NAME", "DESCRIPTION", "CurveMap", "load_map", "read", "read_inferencex"]

NAME = "inferencex"
DESCRIPTION = "InferenceX golden AL curves (golden_al_distribution/*.yaml), or folders of them"

#: Facts that describe a measurement: a copied curve never takes them from a flag.
MEASURED = ("hardware", "engine_image", "tp", "benchmark", "prompts")
YAML_NAMES = (".yaml", ".yml")


@dataclass
class _Run:
    """One call's inputs and what it has found so far."""

    curve_map: CurveMap
    flags: Mapping[str, Any]
    source_base: str | None
    used: set[tuple[str, str]] = field(default_factory=set)
    curves: list[Curve] = field(default_factory=list)


def read_inferencex(paths: Iterable[str], *, name: str | None = None,
                    curve_map: CurveMap | None = None, engine_image: str | None = None,
                    source_base: str | None = None, hardware: str | None = None,
                    category: str | None = None, tp: int | None = None,
                    benchmark: str | None = None, prompts: int | None = None,
                    keep_going: bool = False,
                    progress: Callable[[str, int, int], None] | None = None) -> Ingested:
    """Read golden AL files (or folders of them) into profile sets, rendered and validated.

    One set per file, named after the file, unless ``name`` merges every file into one set.
    The flags (``engine_image``, ``hardware``, ...) say for every file what its header does
    not; the map's ``files:`` entry says it for one. ``source_base`` makes each file's source
    ``<source_base>/<file name>``. Raises :class:`InvalidInput` carrying every finding when any
    is an error; with ``keep_going``, the files without errors are returned and the others'
    findings are the result's ``refused``. ``progress("read", done, total)`` is called as each
    file is read.
    """
    if name is not None and set_name_problem(name):
        raise UsageError(f"--name {name!r} cannot name a set: {set_name_problem(name)}")
    flags = {"engine_image": engine_image, "hardware": hardware, "category": category,
             "tp": tp, "benchmark": benchmark, "prompts": prompts}
    run = _Run(curve_map or CurveMap(), flags, source_base)
    findings: list[Finding] = []
    files = list(collect_files(paths, findings))
    for done, path in enumerate(files, 1):
        curve = read_curve(path, str(path), findings)
        if curve is not None:
            run.curves.append(curve)
        if progress is not None:
            progress("read", done, len(files))
    built: list[Built] = []
    for curve in run.curves:
        made = _build(curve, run)
        findings.extend(curve.facts.findings)
        if made is not None and not any(f.is_error for f in curve.facts.findings):
            if not spec_say(curve.file, *made, findings):
                built.append((curve.file, *made))
    referred = [c.header.copy_source[0] for c in run.curves if c.header.copy_source]
    findings.extend(unused(run.curve_map, [c.name for c in run.curves] + referred, run.used))
    sets = merge(built, name, findings) if name is not None else per_file(built, findings)
    findings = sort_findings(list(dict.fromkeys(findings)))
    bad = {f.file for f in findings if f.is_error}
    if bad and not keep_going:
        raise InvalidInput(findings)
    result = rendered(sets, [f for f in findings if f.file not in bad])
    return Ingested(result.sets, result.texts, result.warnings,
                    tuple(f for f in findings if f.file in bad))


def read(paths: Iterable[str | os.PathLike], **options: Any
         ) -> tuple[list[ProfileSet], list[Finding]]:
    """The source protocol's entry point: :func:`read_inferencex`, refusals as findings."""
    try:
        result = read_inferencex([str(p) for p in paths], **options)
    except InvalidInput as exc:
        return [], exc.findings
    return list(result.sets), list(result.warnings)


# --- one curve's profiles ------------------------------------------------------------------------

class _Key(NamedTuple):
    """A curve's model, method and category: what its profiles' keys share."""

    model: str
    method: str
    category: str


def _key(curve: Curve, run: _Run, report: Facts) -> _Key | None:
    """The model (map, else the body's), method (map, else the header's) and category (the
    header's, or the user's); what is missing is an error in ``report``."""
    top = Origin(curve.file, 1, 1, "line 1")
    facts, mapped = curve.facts, run.curve_map
    model = mapped.model(curve.name, curve.model)
    if model is not None:
        run.used.add(model[1])
    method = mapped.method(curve.name)
    if method is not None:
        run.used.add(method[1])
    elif (stated := facts.stated("method")) is not None:
        method = (stated.value, ("", ""))
    elif "method" not in facts.unreadable:
        report.error(top, "no_method", "the header names no speculative method ('Measured on "
                     "MODEL (CHIP, vLLM METHOD)', 'method: M', a speculative config); name it "
                     f"in --map (files: {{{curve.name}: {{method: METHOD}}}})")
    user = user_facts(mapped, curve.name, run.flags)
    category = _agreed(curve, "category", None, user, report)
    if category is None and "category" not in facts.unreadable:
        report.error(top, "no_category", "the header states no workload category ('dataset: "
                     "coding'); give --category C, or in --map files: "
                     f"{{{curve.name}: {{category: C}}}}")
    if method is None or category is None:
        return None
    return _Key(model[0] if model else curve.model, method[0], category.value)


def _agreed(curve: Curve, name: str, mode: str | None, user: Mapping[str, Fact],
            report: Facts) -> Fact | None:
    """The header's fact ``name`` for ``mode``, or the user's; both, and they must agree."""
    said = curve.facts.get(name, mode)
    given = (mode and user.get(user_key(name, mode))) or user.get(name)
    if said is None or given is None:
        return said or given
    same = (str(said.value).lower() == str(given.value).lower() if name == "hardware"
            else said.value == given.value)
    if not same:
        report.error(said.origin, "flag_disagrees",
                     f"{given.origin.label} differs from the header's {field_label(name)} "
                     f"{shown(said.value)} ({said.origin.label}); leave it out for "
                     f"{curve.name}, or fix the header")
    return said


def _build(curve: Curve, run: _Run) -> tuple[ProfileSet, Where] | None:
    """The curve's set, and where each profile's facts came from (for the validator's say)."""
    facts = curve.facts
    key = _key(curve, run, facts)
    copied = bool(curve.header.copied)
    user = user_facts(run.curve_map, curve.name, run.flags)
    if copied:
        for f in run.curve_map.facts(curve.name):
            if f.name in ("hardware", "engine_image"):
                facts.error(f.origin, "copy_not_measured",
                            f"{curve.name} says its values were copied, so its {f.name} is its "
                            "source's, which its header states; remove the entry",
                            path=f"files.{curve.name}.{f.name}")
        # flags describe the inputs' measurements, and a copy's chip and image its source's
        user = {n: f for n, f in user.items()
                if not ((n in MEASURED and f.origin.file == "") or n in ("hardware",
                                                                       "engine_image"))}
    stated = facts.stated("model")
    if stated and not copied and stated.value != curve.model:
        facts.warn(stated.origin, "model_mismatch",
                   f"the header measured {stated.value!r} but the values are under "
                   f"{curve.model!r}; the values' key is used")
    _check_declared(curve)
    source = (f"{run.source_base.rstrip('/')}/{curve.name}" if run.source_base else curve.file)
    where: Where = {("cell", c.mode, c.k): Origin(curve.file, *c.where, f"line {c.where[0]}")
                     for c in curve.cells}
    for name, path in (("category", "category"), ("method", "speculative_method")):
        given = facts.stated(name) or user.get(name)
        if given is not None:
            where[(None, path)] = given.origin
    provenances = {}
    for mode in sorted({c.mode for c in curve.cells}):
        provenances[mode], origins = _provenance(curve, mode, source, user, copied)
        where.update(((mode, name), origin) for name, origin in origins.items())
    if key is None:
        return None  # after the provenances, so that everything missing is said at once
    copy = _copy_source(curve, run) if copied else None
    if copied and copy is None:
        return None
    profiles = []
    for cell in curve.cells:
        copied_from = None if copy is None else _copied_from(curve, copy, key, cell)
        counts = facts.counts(cell.mode, cell.k)
        if counts is not None:
            _check_counts(curve, cell, counts)
        profiles.append(Profile(
            model=key.model, speculative_method=key.method, num_spec_tokens=cell.k,
            thinking=cell.mode, category=key.category, acceptance_length=cell.al,
            method="copied" if copied else "measured", provenance=provenances[cell.mode],
            rationale=curve.header.rationale, copied_from=copied_from,
            counts=None if counts is None else counts.value))
    caveats = tuple(dict.fromkeys(f.value for f in facts.caveats))
    return ProfileSet(safe_name(curve.path.stem), caveats, tuple(profiles)), where


def _provenance(curve: Curve, mode: str, source: str, user: Mapping[str, Fact], copied: bool
                ) -> tuple[Provenance, dict[str, Origin]]:
    """Thinking mode ``mode``'s provenance, and where each field of it came from."""
    facts, where = curve.facts, {}
    top = Origin(curve.file, 1, 1, "line 1")

    def value(name: str) -> Any:
        f = _agreed(curve, name, mode, user, facts)
        if f is None:
            return None
        where[name] = f.origin
        return f.value

    fields = {name: value(name) for name in ("run", "benchmark", "prompts", "hardware",
                                              "engine_image", "tp")}
    sampling = {k: value(f"sampling.{k}") for k in SAMPLING_KEYS}
    settings = [(f.name.split(".", 1)[1], f) for f in facts.prefixed("settings.", mode)]
    if (draft := facts.get("draft_model", mode)) is not None:
        settings.append(("draft_model", draft))
    for setting, f in settings:
        where[f"settings.{setting}"] = f.origin
    if not copied:
        for name, code, what in (("engine_image", "missing_engine_image", "IMAGE"),
                                 ("hardware", "no_hardware", "CHIP")):
            if fields[name] is None and name not in facts.unreadable:
                flag = FLAGS[name]
                facts.error(top, code,
                            f"the file states no {name.replace('_', ' ')}, which a measured "
                            f"profile requires; give {flag} {what}, or in --map files: "
                            f"{{{curve.name}: {{{name}: {what}}}}} (it is never guessed)")
    has_temperature = sampling["temperature"] is not None
    if not has_temperature and "sampling.temperature" not in facts.unreadable and (
            not copied or any(v is not None for v in sampling.values())):
        # at the mode's own line when it has one, else where the shared sampling is stated
        said = next((f.origin for f in facts.by_key.values() if f.mode == mode),
                    next((f.origin for f in facts.prefixed("sampling.", mode)), top))
        line = said._replace(column=1)
        message = (f"the file states no temperature for thinking_{mode}; a measured profile "
                   "needs its sampling: add 'temperature: T' to the header, or in --map files: "
                   f"{{{curve.name}: {{sampling: {{temperature: T}}}}}}")
        if copied:
            facts.warn(line, "sampling_left_out", f"thinking_{mode} states sampling but no "
                       "temperature; its sampling is left out")
        else:
            facts.error(line, "no_temperature", message)
    return Provenance(
        source=source, **fields,
        sampling=Sampling(**sampling) if has_temperature else None,
        settings=tuple((n, f.value) for n, f in settings)), where


def _check_counts(curve: Curve, cell: Cell, counts: Fact) -> None:
    """The file's rounded AL must be 1 + accepted / drafts to its rounding."""
    c: Counts = counts.value
    exact = 1 + c.accepted_tokens / c.drafts if c.drafts else math.inf
    # Beyond SUM_TOLERANCE the validator's own counts rule refuses it, with its message.
    if not rounds_to(exact, cell.text) and abs(exact - cell.al) <= SUM_TOLERANCE:
        elsewhere = (f" (the counts on {counts.origin.label})"
                     if counts.origin.line != cell.where[0] else "")
        curve.facts.warn(Origin(curve.file, *cell.where, f"line {cell.where[0]}"),
                         "al_disagrees_with_counts",
                         f"AL {cell.text} is not 1 + accepted / drafts = 1 + "
                         f"{c.accepted_tokens} / {c.drafts} = {exact:.6g}{elsewhere} to its "
                         "rounding; the file's AL is kept")


def _check_declared(curve: Curve) -> None:
    """A header that lists the draft lengths or modes it ran (the JSON block's MTP_LIST and
    THINKING_MODES) must list what the body holds."""
    cells = curve.cells
    for name, have in (("ks", {c.k for c in cells}), ("modes", {c.mode for c in cells})):
        said = curve.facts.get(name)
        if said is not None and set(said.value) != have:
            curve.facts.warn(said.origin, "header_body_differ",
                             f"the header lists {' '.join(map(str, said.value))} but the body "
                             f"holds {' '.join(sorted(map(str, have)))}")


# --- copies --------------------------------------------------------------------------------------

class _Source(NamedTuple):
    """What a copy was copied from: its model, and when its curve was read, its key and cells."""

    model: str
    key: _Key | None
    cells: dict[tuple[str, int], Cell] | None
    name: str


def _copy_source(curve: Curve, run: _Run) -> _Source | None:
    """The curve a copy names: among the inputs, beside the copy, or in the map."""
    facts, said = curve.facts, curve.header.copy_source
    if said is None:
        line = curve.header.copied[0]
        facts.error(Origin(curve.file, line.number, 1, f"line {line.number}"),
                    "copied_without_source", "the header says these values are copied or "
                    "provisional, but not from which curve; a copied profile names its source: "
                    "add a header line 'copied from FILE.yaml' (or 'copied from MODEL')")
        return None
    name, origin = said
    if not name.endswith(YAML_NAMES):  # a model, as the header spells it
        mapped = run.curve_map.model(None, name)
        if mapped is not None:
            run.used.add(mapped[1])
        return _Source(mapped[0] if mapped else name, None, None, name)
    inputs = [c for c in run.curves if c.name == name]
    source = next((c for c in inputs if c.path.parent == curve.path.parent),
                  inputs[0] if inputs else None)
    beside = curve.path.parent / name
    if source is None and beside.is_file():
        problems: list[Finding] = []
        source = read_curve(beside, str(beside), problems)
        if source is None:
            first = next(f for f in problems if f.is_error)
            facts.error(origin, "copied_source_unreadable",
                        f"copied from {name}, and {beside} is not a curve it can read: "
                        f"{first.render()}")
            return None
    if source is not None:
        key = _key(source, run, Facts(source.file))
        if key is None:
            facts.error(origin, "copied_source_unreadable",
                        f"copied from {name}, whose curve does not say its method and category; "
                        f"name them in --map (files: {{{name}: {{method: M, category: C}}}})")
            return None
        return _Source(key.model, key, {(c.mode, c.k): c for c in source.cells}, name)
    mapped = run.curve_map.model(name, None)
    if mapped is not None:
        run.used.add(mapped[1])
        return _Source(mapped[0], None, None, name)
    facts.error(origin, "copied_source_unknown",
                f"copied from {name}, which is neither among the inputs nor beside this file, so "
                f"the model it belongs to is unknown; give {name} as an input, or name its model "
                f"in --map (files: {{{name}: {{model: MODEL}}}})")
    return None


def _copied_from(curve: Curve, source: _Source, key: _Key, cell: Cell) -> str:
    """The source profile's label (``model/method/kK/thinking-MODE/category``), never a file."""
    label_key = source.key or _Key(source.model, key.method, key.category)
    label = profile_label(label_key.model, label_key.method, cell.k, cell.mode,
                          label_key.category)
    if source.cells is not None:
        origin = Origin(curve.file, *cell.where, f"line {cell.where[0]}")
        theirs = source.cells.get((cell.mode, cell.k))
        if theirs is None:
            curve.facts.error(origin, "copied_cell_missing",
                              f"copied from {source.name}, which has no thinking_{cell.mode} "
                              f"K={cell.k}; fix the header or the value")
        elif theirs.al != cell.al:
            curve.facts.warn(origin, "copied_value_differs",
                             f"copied from {source.name}, whose thinking_{cell.mode} K={cell.k} "
                             f"is {theirs.text}, but this file says {cell.text}")
    return label


