"""The ``registry`` command line: parse, call the library, render, map errors to exit codes.

Commands live in :mod:`registry_db.commands` and are imported only when called, so that
``registry validate`` does not pay for SQLAlchemy and ``registry resolve`` does not pay for
Alembic. Shared here: the group and its ``--database`` option, the output options (``--json``,
``--csv``, a readable table), and the one place expected errors become exit codes.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import importlib
import io
import json
import os
import sys
from typing import Any, Callable, Iterable, Iterator, Sequence

import click

from registry_db.errors import InvalidInput, RegistryError

# name -> "module:attribute"; the module is imported only when the command runs or shows help.
COMMANDS: dict[str, str] = {
    "db": "registry_db.commands.db:db",
    "validate": "registry_db.commands.validate:validate",
    "import": "registry_db.commands.importing:import_",
    "list": "registry_db.commands.read:list_",
    "show": "registry_db.commands.read:show",
    "conflicts": "registry_db.commands.read:conflicts",
    "export": "registry_db.commands.read:export",
    "query": "registry_db.commands.query:query",
    "resolve": "registry_db.commands.resolve:resolve",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


class Settings:
    """What the group's options decided, handed to every command through ``ctx.obj``."""

    def __init__(self, database: str | None):
        self.database = database

    @property
    def url(self) -> str:
        """The database URL: ``--database``, else ``REGISTRY_DATABASE_URL``, else ./registry.db."""
        from registry_db.urls import resolve_url

        return resolve_url(self.database)

    @contextlib.contextmanager
    def registry(self) -> Iterator[Any]:
        """An engine on the registry (created at the head when new, refused when old), with
        driver errors translated; disposed afterwards."""
        from registry_db import db

        url = self.url
        with db.translated(url):
            engine = db.open_registry(url)
            try:
                yield engine
            finally:
                engine.dispose()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-d", "--database", metavar="URL",
              help="Database URL or SQLite file path. Default: $REGISTRY_DATABASE_URL, "
                   "else sqlite:///registry.db.")
@click.version_option(package_name="registry_db", prog_name="registry")
@click.pass_context
def main(ctx: click.Context, database: str | None) -> None:
    """The registry of speculative-decoding acceptance profiles.

    \b
    Example:
        registry import seed/acceptance/
        registry resolve --model deepseek-v4.1-flash --method dspark --k 5 \\
            --thinking off --category coding
    """
    ctx.obj = Settings(database)


# --- error handling ------------------------------------------------------------------------------

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


def getenv_flag(name: str) -> bool:
    """True when an environment variable is set to a true-ish value."""
    return os.environ.get(name, "").lower() in ("1", "true", "yes", "on")
