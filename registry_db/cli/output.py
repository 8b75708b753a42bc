"""What every command shares: the one place expected errors become exit codes, and the output
options (``--json``, ``--csv``, a readable table) with their renderers.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import json
import math
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import click

from registry_db import interrupts
from registry_db.analyze.readable import READABLE_DIGITS, readable  # noqa: F401 (shared)
from registry_db.errors import InvalidInput, RegistryError
from registry_db.model import control_problem, visible


def handle_errors(fn: Callable) -> Callable:
    """Turn the library's expected errors into a message on stderr and the contract's exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # Exit 130 only when nothing was committed: once a write has committed, Ctrl-C lets
        # the command finish (its report is the truth about the database) and exit 0.
        with interrupts.finish_after_commit() as finishing:
            try:
                return fn(*args, **kwargs)
            except InvalidInput as exc:
                report_findings(exc.findings, as_json=bool(kwargs.get("as_json")),
                                github=kwargs.get("output_format") == "github")
                sys.exit(exc.exit_code)
            except RegistryError as exc:
                click.echo(visible(f"Error: {exc}"), err=True)  # a name or path: one line
                sys.exit(exc.exit_code)
            except KeyboardInterrupt:
                click.echo("interrupted", err=True)
                sys.exit(130)
            except Exception as exc:
                # Ctrl-C that landed inside a library's cleanup, which then failed on its own
                # state: still an interrupt before any commit (commits hold SIGINT off).
                if finishing.committed or not interrupts.from_interrupt(exc):
                    raise
                click.echo("interrupted", err=True)
                sys.exit(130)
            finally:
                if finishing.interrupted:
                    click.echo("interrupted after commit: everything was written, so the "
                               "command finished", err=True)

    return wrapper


def report_findings(findings: Sequence[Any], as_json: bool, github: bool = False) -> None:
    """Print findings: the contract's JSON object on stdout, one line each on stderr, or
    (``github``) one GitHub workflow command each on stdout, which a pull request's diff shows
    at the file and line."""
    valid = not any(f.severity == "error" for f in findings)
    if as_json:
        emit_json({"valid": valid, "problems": [f.to_json() for f in findings]})
        return
    for f in findings:
        if github:
            click.echo(annotation(f.severity, f"{f.path}: {f.message}" if f.path else f.message,
                                  file=f.file, line=f.line, col=f.column, title=f.code))
        else:
            click.echo(f.render(), err=True)
    shown = [f for f in findings if f.code != "more_problems"]  # errors.cap_findings' counts
    errors = sum(1 for f in shown if f.severity == "error")
    warnings = len(shown) - errors
    capped = len(findings) - len(shown)
    if errors or warnings:
        click.echo(f"{errors} error(s), {warnings} warning(s)" + (
            f" shown; {capped} file(s) have more, counted on their last line" if capped
            else ""), err=True)


# --- CI annotations ------------------------------------------------------------------------------

def format_option(fn: Callable) -> Callable:
    """``--format text|github``: ``github`` prints each problem as a GitHub workflow command
    (``::error file=F,line=L,col=C::MESSAGE``) on stdout, for CI to show on the diff."""
    return click.option(
        "--format", "output_format", type=click.Choice(["text", "github"]), default="text",
        show_default=True,
        help="github: each problem as a GitHub Actions annotation on stdout.")(fn)


def _escape_data(text: str) -> str:
    # As @actions/core's escapeData (actions/toolkit packages/core/src/command.ts).
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    # As @actions/core's escapeProperty: ':' and ',' also separate properties.
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(severity: str, message: str, *, file: str | None = None, line: int = 0,
               col: int = 0, title: str | None = None) -> str:
    """One GitHub workflow command: ``::error file=F,line=L,col=C,title=T::MESSAGE``
    (``::warning`` for a warning; a position of 0, unknown, is left out)."""
    props = [(name, value) for name, value in (
        ("file", file), ("line", line or None), ("col", col or None), ("title", title))
        if value]
    head = "error" if severity == "error" else "warning"
    if props:
        head += " " + ",".join(f"{k}={_escape_property(str(v))}" for k, v in props)
    return f"::{head}::{visible(_escape_data(message))}"


# --- output --------------------------------------------------------------------------------------

#: The listing formats other than the table, each a flag of :func:`output_options`.
LISTING_FORMATS = (("as_json", "--json"), ("as_csv", "--csv"), ("as_nl", "--nl"))


def output_options(fn: Callable) -> Callable:
    """``--json``, ``--csv`` and ``--nl`` for listings (a readable table otherwise); two at once
    is a usage error (exit 2), checked here so that every listing command refuses it alike."""

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        given = [flag for name, flag in LISTING_FORMATS if kwargs.get(name)]
        if len(given) > 1:
            raise click.UsageError(f"{given[0]} and {given[1]} cannot be used together")
        return fn(*args, **kwargs)

    checked = click.option("--nl", "as_nl", is_flag=True,
                           help="Print one JSON object per line (newline-delimited JSON).")(checked)
    checked = click.option("--csv", "as_csv", is_flag=True,
                           help="Print CSV (numbers with every digit, as --json).")(checked)
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(checked)


def one_line(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A text option's callback (``-m MESSAGE``): control characters are a usage error."""
    problem = None if value is None else control_problem(f"--{param.name}", value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


def message_text(_ctx: click.Context, param: click.Parameter, value: str | None
                 ) -> str | None:
    """A message option's callback (``-m MESSAGE``): it may span lines (``\\r\\n`` kept as
    ``\\n``) and hold tabs; any other control character is a usage error."""
    if value is None:
        return None
    value = value.replace("\r\n", "\n")
    problem = control_problem(f"--{param.name}", value.replace("\n", " ").replace("\t", " "))
    if problem is not None:
        raise click.BadParameter(problem.replace("names and messages are plain one-line text",
                                                 "a message is text, its lines ended by \\n"))
    return value


def check_category(_ctx: click.Context, param: click.Parameter, value: str | None
                   ) -> str | None:
    """A ``--category`` (or ``--fallback-category``) by the spec's category rule, its one
    message naming the option."""
    from registry_db.inputs.schema import category_problem

    problem = None if value is None else category_problem(str(param.name), value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


def _as_of(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    from registry_db.inputs.as_of import time_or_label

    if value is None:
        return None
    try:
        return time_or_label(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def as_of_option(fn: Callable) -> Callable:
    """``--as-of TIME|LABEL``: read the registry as it was then (the history's revisions), the
    time read by :func:`registry_db.inputs.as_of.time_or_label` as for ``resolve --as-of``;
    the command gets an aware UTC datetime, a label's name (which :func:`labelled_time` turns
    into its time once the registry is open), or None."""
    return click.option(
        "--as-of", "as_of", metavar="TIME|LABEL", callback=_as_of,
        help="The registry as it was at TIME (ISO 8601, e.g. 2026-11-30T12:00:00Z; no zone "
             "means UTC) or at a label (registry labels), read from the history.")(fn)


def labelled_time(bind: Any, as_of: Any) -> Any:
    """An ``--as-of`` value as a time: a label's name becomes the label's moment, read from the
    open registry ``bind`` (an unknown label: exit 1, naming the known ones)."""
    from registry_db.inputs.as_of import LabelName

    if not isinstance(as_of, LabelName):
        return as_of
    from registry_db.history.labels import moment

    return moment(bind, as_of)


def json_option(fn: Callable) -> Callable:
    """``--json`` alone, for commands whose output is not a listing."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def emit_json(obj: Any) -> None:
    """Print one JSON document on stdout."""
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def emit_lines(objects: Iterable[Any]) -> None:
    """Print each object as one line of JSON (``--nl``; nothing at all for none)."""
    text = "".join(json.dumps(o, ensure_ascii=False, default=str) + "\n" for o in objects)
    click.echo(text, nl=False)


def with_stderr(al: float, uncertainty: Any) -> Any:
    """A table's AL: ``2.51 ± 0.0034`` where its standard error is known (``± ≤0.0052``: the
    bound the totals allow), else the number alone. The error is about the counts' own mean:
    where the AL is that mean rounded (more than a tenth of the error away), the mean is shown
    with it, ``1.73 (counts 1.7267 ± 0.0012)``."""
    if uncertainty is None:
        return al
    bound = "" if uncertainty.exact else "≤"
    se, mean = uncertainty.stderr, getattr(uncertainty, "mean", None)
    if mean is not None and abs(mean - al) > se / 10:
        places = max(0, 1 - math.floor(math.log10(se))) if se > 0 else 6
        return f"{readable(al)} (counts {mean:.{places}f} ± {bound}{se:.2g})"
    return f"{readable(al)} ± {bound}{se:.2g}"


def uncertainty_json(uncertainty: Any) -> Any:
    """``{"drafts", "stderr", "exact"}``, or None (JSON null) without counts."""
    return None if uncertainty is None else uncertainty.to_json()


def readable_list(values: Iterable[float] | None) -> str:
    """Numbers as one readable, comma-separated cell (``1.0, 0.8, 0.5``); empty for None."""
    return "" if values is None else ", ".join(repr(readable(v)) for v in values)


def emit_rows(columns: Sequence[str], rows: Iterable[Sequence[Any]], as_json: bool = False,
              as_csv: bool = False, as_nl: bool = False) -> None:
    """Print a listing as JSON (a list of objects), one object per line, CSV (numbers exact in
    all three), or an aligned table (numbers rounded for reading)."""
    rows = [list(r) for r in rows]
    if as_json:
        emit_json([dict(zip(columns, r)) for r in rows])
    elif as_nl:
        emit_lines(dict(zip(columns, r)) for r in rows)
    elif as_csv:
        click.echo(csv_text(columns, rows), nl=False)
    else:
        click.echo(format_table(columns, rows, terminal_width()))


# --- the table's shape: --columns, --vertical ----------------------------------------------------

#: Where ``--columns`` and ``--vertical`` leave their values (the context's ``meta``), so that
#: every table a command prints takes them without each command passing them on.
TABLE_META = "registry_db.table"


def _remember(name: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def store(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        ctx.meta.setdefault(TABLE_META, {})[name] = value
        return value
    return store


def table_options(fn: Callable) -> Callable:
    """``--columns A,B`` (the table's columns, in that order) and ``--vertical`` (each row as
    a record, nothing cut), for every command that prints a table."""
    fn = click.option("--vertical", is_flag=True, expose_value=False,
                      callback=_remember("vertical"),
                      help="Print each row as a record, one 'column: value' line per cell, "
                           "nothing shortened.")(fn)
    return click.option("--columns", metavar="A,B,...", expose_value=False,
                        callback=_remember("columns"),
                        help="Only these columns of the table, in this order (--json, --csv "
                             "and --nl keep every column).")(fn)


def _table_shape() -> tuple[list[str] | None, bool]:
    """The ``--columns`` asked for (None: all) and whether ``--vertical`` was given."""
    ctx = click.get_current_context(silent=True)
    meta = ctx.meta.get(TABLE_META, {}) if ctx is not None else {}
    given = meta.get("columns")
    picked = None if not given else [c.strip() for c in given.split(",") if c.strip()]
    return picked, bool(meta.get("vertical"))


def pick_columns(header: Sequence[str], body: Sequence[Sequence[str]], right: Sequence[bool]
                 ) -> tuple[list[str], list[list[str]], list[bool]]:
    """The columns ``--columns`` names, in its order (all when it names none); a name the
    table does not have is a usage error naming the ones it has."""
    picked, _ = _table_shape()
    if picked is None:
        return list(header), [list(r) for r in body], list(right)
    unknown = [c for c in picked if c not in header]
    if unknown:
        raise click.UsageError(f"--columns: no column {unknown[0]!r} in this table; its "
                               f"columns are {','.join(header)}")
    at = [list(header).index(c) for c in picked]
    return picked, [[r[i] for i in at] for r in body], [right[i] for i in at]


def records(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    """Rows as records (``--vertical``, as psql's expanded display): a ``-[ N ]-`` line, then
    one ``column | value`` line per cell, each cell whole."""
    width = max(map(len, header), default=0)
    out: list[str] = []
    for n, row in enumerate(body, 1):
        out.append(f"-[ {n} ]" + "-" * max(0, width - len(str(n)) - 2))
        out.extend(f"{h.ljust(width)} | {v}".rstrip() for h, v in zip(header, row))
    return out or ["(no rows)"]


def render_text_table(header: Sequence[str], body: Sequence[Sequence[str]],
                      right: Sequence[bool], width: int | None,
                      gaps: Sequence[str] | None = None) -> list[str]:
    """A table of text cells as ``--columns`` and ``--vertical`` shape it; in a terminal
    (``width``) fitted to it (with the next of ``gaps`` while it does not fit), and a note on
    stderr when a cell was cut."""
    header, body, right = pick_columns(header, body, right)
    if _table_shape()[1]:
        return records(header, body)
    for gap in gaps or (GAP,):
        lines = table_lines(header, body, right, width, gap)
        if width is None or max(map(len, lines)) <= width:
            break
    if width is None:
        return lines
    if max(map(len, lines)) > width:
        # Too many unbreakable columns (numbers are never cut): records, as psql's \x auto.
        label = max(map(len, header), default=0) + 3
        cells = [[shorten(v, max(width - label, NARROWEST)) for v in row] for row in body]
        cut = sum(a != b for row, short in zip(body, cells) for a, b in zip(row, short))
        _note(f"note: the table is wider than {width} columns, so each row is a record"
              + (f" ({cut} cell(s) shortened with …)" if cut else "")
              + "; --columns A,B picks columns, --json shows every cell whole", width)
        return records(header, cells)
    cut = _cut_cells(header, body, lines[1])
    if cut:
        _note(f"note: {cut} cell(s) shortened with … to fit {width} columns; --vertical or "
              "--json shows every cell whole, --columns A,B picks columns", width)
    return lines


def _note(text: str, width: int) -> None:
    """A note on stderr, wrapped to the terminal's ``width`` as the table it explains."""
    click.echo("\n".join(wrapped(text, width, "      ")), err=True)


def wrapped(text: str, width: int | None, indent: str = "") -> list[str]:
    """``text`` as lines of at most ``width`` (whole when None: a pipe keeps every line as
    written), later lines after ``indent``; a word longer than a line is not broken."""
    if width is None:
        return [text]
    import textwrap

    return textwrap.wrap(text, max(width, 20), subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [""]


def _cut_cells(header: Sequence[str], body: Sequence[Sequence[str]], rule: str) -> int:
    """How many cells (headers too) the table shortened, told by its ``----`` rule's widths."""
    widths = [len(dashes) for dashes in rule.split()]
    return sum(len(cell) > w for row in [header, *body] for cell, w in zip(row, widths))


def csv_text(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """CSV with a header; None is an empty cell, numbers keep every digit (as ``--json``)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(["" if v is None else v for v in r] for r in rows)
    return buf.getvalue()


#: The gap between a table's columns.
GAP = "  "
#: The narrowest a shortened column gets (a header is shortened too; numbers never are).
NARROWEST = 6
#: What stands for the characters a shortened cell lost.
ELLIPSIS = "…"


def terminal_width() -> int | None:
    """The terminal's width when stdout is a terminal (``COLUMNS`` first, as the shell sets
    it), None in a pipe or a file: what a program reads is never cut."""
    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError):  # a closed or replaced stream
        return None
    return shutil.get_terminal_size().columns


def shorten(text: str, width: int, middle: bool = False) -> str:
    """``text`` cut to ``width`` characters with ``…``: from the middle when it is a URL or a
    path (both ends say which) or ``middle`` says so, else at the end."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    keep = width - 1
    if middle or "/" in text:
        # A URL's or path's end names the file; its start, the place: keep more of the end.
        head = keep * 2 // 5
        return text[:head] + ELLIPSIS + text[len(text) - (keep - head):]
    return text[:keep] + ELLIPSIS


def fit_widths(widths: Sequence[int], floors: Sequence[int], limit: int,
               gap: str = GAP) -> list[int]:
    """Column widths whose line (``gap`` between columns) fits ``limit``: the widest column
    gives way first, none below its floor (a floor equal to the width: never shortened)."""
    out = list(widths)
    excess = sum(out) + len(gap) * (len(out) - 1) - limit
    while excess > 0:
        shrinkable = [i for i, w in enumerate(out) if w > floors[i]]
        if not shrinkable:
            break
        widest = max(out[i] for i in shrinkable)
        tied = [i for i in shrinkable if out[i] == widest]
        below = max([out[i] for i in shrinkable if out[i] < widest] +
                    [max(floors[i] for i in tied)])
        # Bring the widest down together, no further than the next width or what is needed.
        step = min(widest - below, -(-excess // len(tied)))
        for i in tied:
            cut = min(step, excess)
            out[i] -= cut
            excess -= cut
    return out


def table_lines(header: Sequence[str], body: Sequence[Sequence[str]], right: Sequence[bool],
                width: int | None = None, gap: str = GAP) -> list[str]:
    """Cells (text already) as aligned lines: ``right`` columns (numbers) to the right and
    never shortened; with ``width``, the other columns' longest cells are shortened to fit."""
    cells = [max([0] + [len(r[i]) for r in body]) for i in range(len(header))]
    widths = [max(len(h), c) for h, c in zip(header, cells)]
    if width is not None:
        floors = [min(w, max(NARROWEST, c if num else 0))
                  for w, c, num in zip(widths, cells, right)]
        widths = fit_widths(widths, floors, width, gap)

    def line(texts: Sequence[str]) -> str:
        parts = [shorten(t, w).rjust(w) if num else shorten(t, w).ljust(w)
                 for t, w, num in zip(texts, widths, right)]
        return gap.join(parts).rstrip()

    top = [shorten(h, w) for h, w in zip(header, widths)]
    # Headers that the cut made alike (acceptance_length, acceptance_rate) are cut in the middle.
    top = [shorten(h, w, middle=True) if top.count(t) > 1 else t
           for h, w, t in zip(header, widths, top)]
    return [line(top), line(["-" * w for w in widths]), *(line(r) for r in body)]


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]],
                 width: int | None = None) -> str:
    """An aligned plain-text table, numbers on the right and rounded for reading; with
    ``width`` (:func:`terminal_width` for a terminal), shortened to fit it."""
    # Cells are shown with control characters escaped: a name stored before the rule that
    # refuses them, or a file's name, must not drive the terminal or break the table.
    columns = [visible(c) for c in columns]
    text = [["" if v is None else visible(str(readable(v))) for v in r] for r in rows]
    numeric = [all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool)
                   for r in rows if r[i] is not None) and any(r[i] is not None for r in rows)
               for i in range(len(columns))]
    out = render_text_table(columns, text, numeric, width)
    if not rows and out[-1] != "(no rows)":
        out.append("(no rows)")
    return "\n".join(out)


# --- progress -----------------------------------------------------------------------------------

#: A phase of fewer items gets no bar: it is over before a bar could tell anything.
PROGRESS_MIN = 20
#: What each phase's bar says; a phase not named here says its own name.
PROGRESS_LABELS = {"validate": "validating", "write": "writing", "export": "exporting",
                   "read": "reading", "resolve": "resolving"}

#: ``progress(phase, done, total)``: ``done`` of ``total`` items of ``phase`` are finished.
ProgressCallback = Callable[[str, int, int], None]


class Progress:
    """click's progress bars on stderr, one per phase (a new phase closes the last bar), for a
    phase of at least :data:`PROGRESS_MIN` items. Use :func:`progress`, which gives no callback
    at all when no bar may be drawn."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.phase: str | None = None
        self.done = 0

    def update(self, phase: str, done: int, total: int) -> None:
        """The callback: ``done`` of ``total`` items of ``phase`` are finished."""
        if phase != self.phase:
            self.close()
            self.phase, self.done = phase, 0
            if total >= PROGRESS_MIN:
                self.bar = click.progressbar(length=total, label=PROGRESS_LABELS.get(
                    phase, phase), file=sys.stderr)
                self.bar.__enter__()
        if self.bar is not None:
            self.bar.update(done - self.done)
        self.done = done

    def close(self, *exc: Any) -> None:
        """End the current bar (its line stays, finished)."""
        if self.bar is not None:
            self.bar.__exit__(*(exc or (None, None, None)))
            self.bar = None


@contextlib.contextmanager
def progress(quiet: bool = False) -> Iterator[ProgressCallback | None]:
    """The progress callback for long work (import, export, ingest, a batch): bars on stderr
    when stderr is a terminal and ``quiet`` is not set; None otherwise, so that a pipe or a
    log never gets a bar's carriage returns and the work pays nothing for them."""
    try:
        terminal = sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        terminal = False
    if quiet or not terminal:
        yield None
        return
    bars = Progress()
    try:
        yield bars.update
    finally:
        bars.close()


# --- shell completion ----------------------------------------------------------------------------

def complete_set_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Complete a set name from the registry that ``-d`` (or the environment) names.

    Attach as ``shell_complete=`` to any option or argument that takes a set name. It reads
    through a read-only connection, never creates a database (a missing SQLite file completes
    nothing), and is silent on any error: a completion must not print into the user's shell.
    """
    return _complete(ctx, incomplete, "set_names")


def complete_models(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Complete a stored model name (attach to a ``--model`` that reads the registry)."""
    return _complete(ctx, incomplete, "model")


def complete_methods(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Complete a stored speculative method (attach to a ``--method`` that reads it)."""
    return _complete(ctx, incomplete, "speculative_method")


def _complete(ctx: click.Context, incomplete: str, what: str) -> list[Any]:
    """The stored names (``set_names``, or a profile column's distinct values) that start with
    ``incomplete``, read as :func:`complete_set_names` says."""
    from click.shell_completion import CompletionItem

    try:
        from registry_db.cli.group import DATABASE_META
        from registry_db.store.engine import make_engine
        from registry_db.store.read import key_values, set_names
        from registry_db.store.urls import resolve_url

        # No schema check and no migration: a read-only connection (SQLite: mode=ro, which
        # fails on a missing file instead of creating it) and one query. The database is -d's,
        # before or after the command.
        url = resolve_url(ctx.meta.get(DATABASE_META) or ctx.find_root().params.get("database"))
        engine = make_engine(url, readonly=True)
        try:
            names = set_names(engine) if what == "set_names" else key_values(engine, what)
        finally:
            engine.dispose()
    except Exception:  # noqa: BLE001 - completion offers nothing rather than an error
        return []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]
