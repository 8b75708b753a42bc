"""One InferenceX golden AL file read: its header's facts and its body's cells.

The body is ``MODEL: {thinking_on: {K: AL}, thinking_off: {K: AL}}`` beside an optional
``_metadata`` mapping; a cell may be followed by a counter comment
(``3: 2.51  # AR=0.50; accepted=126838; proposed=252426; drafts=84142``), whose counts become a
fact of that cell. A body that is not this shape is an error at ``FILE:LINE:COL``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from registry_db.errors import Finding, InvalidInput
from registry_db.inputs.readers import al_problem
from registry_db.inputs.schema import is_finite, is_int, is_number, short_repr
from registry_db.sources.counters.forms import seen
from registry_db.sources.inferencex.facts import Fact, Facts, Origin
from registry_db.sources.inferencex.forms import read_header
from registry_db.sources.inferencex.header import Header, read_counters
from registry_db.yaml.load import MAX_FILE_BYTES, key_pos, load_yaml, mark, pos

MODES = {"thinking_on": "on", "thinking_off": "off"}
#: Cell values the collectors write for a cell that produced no AL: left out, with a warning.
NOT_MEASURED = ("N/A", None)
METADATA_KEY = "_metadata"
#: What a body's ``_metadata`` may say (``draft-model``: ce4e6f073 of InferenceX).
METADATA = {"draft-model": "draft_model"}


class Cell(NamedTuple):
    """One (thinking mode, K) value of a curve, as written."""

    mode: str
    k: int
    al: float
    text: str
    where: tuple[int, int]


@dataclass
class Curve:
    """One curve file, read: its header's facts and the body's cells."""

    path: Path
    file: str
    header: Header
    model: str
    model_where: tuple[int, int]
    cells: list[Cell]

    @property
    def facts(self) -> Facts:
        return self.header.facts

    @property
    def name(self) -> str:
        return self.path.name


def read_curve(path: Path, file: str, findings: list[Finding]) -> Curve | None:
    """One file's header and cells; what is wrong with its body goes to ``findings``."""
    try:
        data = path.read_bytes()[:MAX_FILE_BYTES + 1]
    except OSError as exc:
        findings.append(Finding(file, 1, 1, "", "unreadable_file",
                                f"cannot read the file: {exc.strerror or exc}"))
        return None
    if len(data) > MAX_FILE_BYTES:
        findings.append(Finding(file, 1, 1, "", "file_too_large",
                                f"the file is larger than {MAX_FILE_BYTES} bytes"))
        return None
    try:
        doc = load_yaml(data, file)
    except InvalidInput as exc:
        findings.extend(_named(data, file) or exc.findings)
        return None
    text = data.decode("utf-8").removeprefix("\ufeff")  # load_yaml checked it is UTF-8
    header = read_header(text, file)
    mine: list[Finding] = []
    body = _body(doc, file, text.splitlines(), header.facts, mine)
    if body is None or any(f.is_error for f in mine):
        named = _named(data, file) if body is None else []
        findings.extend(named or mine + header.facts.findings)  # the header's say is heard
        return None
    findings.extend(mine)
    return Curve(path, file, header, *body)


def _named(data: bytes, file: str) -> list[Finding]:
    """A refused file that is another tool's known form: one finding naming the form and the
    command that reads it (only for a file refused anyway: a curve is never judged by this)."""
    text = data.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    if text[:1] in ("{", "[") and '"curve"' in text:
        message = (
            "this is the JSON that InferenceX's curve lookup prints (`python -m "
            "infx.golden_al_distribution lookup|list --json`, "
            "infx/golden_al_distribution/__main__.py): it names a curve and a value, not the "
            "measurement; give `registry ingest inferencex` the curve's YAML, "
            "golden_al_distribution/<curve>.yaml")
    else:
        message = seen(text, ()) or ""
    return [Finding(file, 1, 1, "", "another_form", message)] if message else []


def _body(doc: Any, file: str, lines: list[str], facts: Facts, findings: list[Finding]
          ) -> tuple[str, tuple[int, int], list[Cell]] | None:
    """``MODEL: {thinking_on: {K: AL}}``: the source's model name, where, and the cells."""
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
    _metadata(doc.get(METADATA_KEY), file, facts)
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
            cell, w = f"{at}.{k}", pos(values, k)
            if not is_int(k) or k < 1:
                error(key_pos(values, k), cell, "bad_k",
                      f"K {k!r} is not a positive integer (num_speculative_tokens)")
            elif al in NOT_MEASURED:
                findings.append(Finding(file, w[0], w[1], cell, "cell_not_measured",
                                        f"{mode_key} K={k} has no value ({al!r}); left out, "
                                        "never interpolated", severity="warning"))
            elif not is_number(al):
                error(w, cell, "bad_al", f"AL {al!r} is not a number")
            elif not is_finite(al):
                error(w, cell, "al_not_finite", f"AL {short_repr(al)} is not finite")
            elif (problem := al_problem(al, k)) is not None:
                error(w, cell, "al_out_of_range", problem)
            else:
                text, _, comment = lines[w[0] - 1][w[1] - 1:].partition("#")
                cells.append(Cell(MODES[mode_key], k, float(al), text.strip(), w))
                if comment.strip():
                    _cell_counts(cells[-1], comment, w[1] + len(text) + 1, file, facts)
    return model, key_pos(doc, model), cells


def _metadata(meta: Any, file: str, facts: Facts) -> None:
    """The body's ``_metadata`` mapping: the keys :data:`METADATA` knows become facts."""
    if not isinstance(meta, dict):
        return
    for key, value in meta.items():
        line, column = pos(meta, key)
        origin = Origin(file, line, column, f"line {line}")
        if key in METADATA and isinstance(value, str) and value.strip():
            facts.add(Fact(METADATA[key], value.strip(), origin))
        else:
            facts.warn(origin, "unknown_metadata",
                       f"_metadata {key!r} is not something the reader knows; left out")


def _cell_counts(cell: Cell, comment: str, column: int, file: str, facts: Facts) -> None:
    """A cell's counter comment: its counts become a fact of that (mode, K)."""
    counts, problems = read_counters(comment.strip())
    column += len(comment) - len(comment.lstrip())
    line = cell.where[0]
    for at, what in problems:
        facts.warn(Origin(file, line, column + at, f"line {line}"), "bad_counts",
                   f"{what}; left out")
    if counts is not None:
        facts.add(Fact("counts", counts, Origin(file, line, column, f"line {line}"),
                       cell.mode, cell.k))
