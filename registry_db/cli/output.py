"""What every command shares: the one place expected errors become exit codes, and the output
options (``--json``, ``--csv``, a readable table) with their renderers.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import sys
from typing import Any, Callable, Iterable, Sequence

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
    """``--json`` and ``--csv`` for listings (a readable table otherwise)."""
    fn = click.option("--csv", "as_csv", is_flag=True, help="Print CSV.")(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)
    return fn


def json_option(fn: Callable) -> Callable:
    """``--json`` alone, for commands whose output is not a listing."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def emit_json(obj: Any) -> None:
    """Print one JSON document on stdout."""
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def emit_rows(columns: Sequence[str], rows: Iterable[Sequence[Any]], as_json: bool = False,
              as_csv: bool = False) -> None:
    """Print a listing as JSON (a list of objects), CSV, or an aligned table."""
    rows = [list(r) for r in rows]
    if as_json:
        emit_json([dict(zip(columns, r)) for r in rows])
    elif as_csv:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(["" if v is None else v for v in r] for r in rows)
        click.echo(buf.getvalue(), nl=False)
    else:
        click.echo(format_table(columns, rows))


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An aligned plain-text table, numbers on the right."""
    text = [["" if v is None else str(v) for v in r] for r in rows]
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

