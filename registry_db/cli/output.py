"""What every command shares: the one place expected errors become exit codes, and the output
options (``--json``, ``--csv``, a readable table) with their renderers.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

from registry_db.errors import InvalidInput, RegistryError


def handle_errors(fn: Callable) -> Callable:
    """Turn the library's expected errors into a message on stderr and the contract's exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InvalidInput as exc:
            report_findings(exc.findings, as_json=bool(kwargs.get("as_json")))
            sys.exit(exc.exit_code)
        except RegistryError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


def report_findings(findings: Sequence[Any], as_json: bool) -> None:
    """Print findings: the contract's JSON object on stdout, or one line each on stderr."""
    valid = not any(f.severity == "error" for f in findings)
    if as_json:
        emit_json({"valid": valid, "problems": [f.to_json() for f in findings]})
        return
    for f in findings:
        click.echo(f.render(), err=True)
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = len(findings) - errors
    if errors or warnings:
        click.echo(f"{errors} error(s), {warnings} warning(s)", err=True)


# --- output --------------------------------------------------------------------------------------

def output_options(fn: Callable) -> Callable:
    """``--json`` and ``--csv`` for listings (a readable table otherwise); both at once is a
    usage error (exit 2), checked here so that every listing command refuses it alike."""

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("as_json") and kwargs.get("as_csv"):
            raise click.UsageError("--json and --csv cannot be used together")
        return fn(*args, **kwargs)

    checked = click.option("--csv", "as_csv", is_flag=True, help="Print CSV.")(checked)
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(checked)


def json_option(fn: Callable) -> Callable:
    """``--json`` alone, for commands whose output is not a listing."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def emit_json(obj: Any) -> None:
    """Print one JSON document on stdout."""
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


#: Decimal places that text and CSV output keep (``--json`` keeps every digit).
READABLE_DIGITS = 4


def readable(value: Any) -> Any:
    """A float rounded for reading (0.6140000000000001 -> 0.614, 4.07 stays 4.07); anything
    else as it is. Text and CSV output use it; ``--json`` never does."""
    if isinstance(value, float):
        return round(value, READABLE_DIGITS)
    return value


def with_stderr(al: float, uncertainty: Any) -> Any:
    """A table's AL: ``2.51 ± 0.0034`` where its standard error is known (``± ≤0.0052``: the
    bound the totals allow), else the number alone."""
    if uncertainty is None:
        return al
    bound = "" if uncertainty.exact else "≤"
    return f"{readable(al)} ± {bound}{uncertainty.stderr:.2g}"


def uncertainty_json(uncertainty: Any) -> Any:
    """``{"drafts", "stderr", "exact"}``, or None (JSON null) without counts."""
    return None if uncertainty is None else uncertainty.to_json()


def readable_list(values: Iterable[float] | None) -> str:
    """Numbers as one readable, comma-separated cell (``1.0, 0.8, 0.5``); empty for None."""
    return "" if values is None else ", ".join(repr(readable(v)) for v in values)


def emit_rows(columns: Sequence[str], rows: Iterable[Sequence[Any]], as_json: bool = False,
              as_csv: bool = False) -> None:
    """Print a listing as JSON (a list of objects, numbers exact), CSV, or an aligned table
    (numbers rounded for reading)."""
    rows = [list(r) for r in rows]
    if as_json:
        emit_json([dict(zip(columns, r)) for r in rows])
    elif as_csv:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(["" if v is None else readable(v) for v in r] for r in rows)
        click.echo(buf.getvalue(), nl=False)
    else:
        click.echo(format_table(columns, rows))


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An aligned plain-text table, numbers on the right and rounded for reading."""
    text = [["" if v is None else str(readable(v)) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in text]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool)
                   for r in rows if r[i] is not None) and any(r[i] is not None for r in rows)
               for i in range(len(columns))]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)]
        return "  ".join(parts).rstrip()

    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(r) for r in text)
    if not rows:
        out.append("(no rows)")
    return "\n".join(out)



# --- shell completion ----------------------------------------------------------------------------

def complete_set_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Complete a set name from the registry that ``-d`` (or the environment) names.

    Attach as ``shell_complete=`` to any option or argument that takes a set name. It reads
    through a read-only connection, never creates a database (a missing SQLite file completes
    nothing), and is silent on any error: a completion must not print into the user's shell.
    """
    from click.shell_completion import CompletionItem

    try:
        from registry_db.store.engine import make_engine
        from registry_db.store.read import set_names
        from registry_db.store.urls import resolve_url

        # No schema check and no migration: a read-only connection (SQLite: mode=ro, which
        # fails on a missing file instead of creating it) and one query.
        url = resolve_url(ctx.find_root().params.get("database"))
        engine = make_engine(url, readonly=True)
        try:
            names = set_names(engine)
        finally:
            engine.dispose()
    except Exception:  # noqa: BLE001 - completion offers nothing rather than an error
        return []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]
