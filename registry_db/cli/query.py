"""``registry query``: one read-only SQL statement, printed as a table, JSON or CSV.

Thin: parsing ``-p`` and rendering live here, the read-only execution in
:mod:`registry_db.store.query`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import click

from registry_db.cli.output import (
    csv_text,
    emit_lines,
    emit_rows,
    format_table,
    handle_errors,
    output_options,
    readable,
    shorten,
    terminal_width,
)
from registry_db.model import visible


def _params(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict:
    from registry_db.store.sqlite_query import parse_param

    out: dict = {}
    for spec in values:
        try:
            name, value = parse_param(spec)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from exc
        if name in out:
            raise click.BadParameter(f"{name!r} is given twice")
        out[name] = value
    return out


def _timeout(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    from registry_db.store.sqlite_query import timeout_problem

    problem = timeout_problem(value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


@click.command("query")
@click.argument("sql")
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
              callback=_params,
              help="Bind :NAME in the SQL. A VALUE that is a JSON number is bound as a number, "
                   "anything else as text. Repeatable.")
@click.option("--query-url", metavar="URL", envvar="REGISTRY_QUERY_URL",
              help="Run the SQL on this URL (PostgreSQL: a reader role's, see `registry db "
                   "reader`). Default: $REGISTRY_QUERY_URL, else the database URL.")
@click.option("--timeout", type=float, callback=_timeout, metavar="S", default=300.0,
              show_default=True, help="Stop the query after S seconds (at most 2147483).")
@click.option("--trust-sql", is_flag=True,
              help="PostgreSQL: run the SQL with the connection role's full privileges, even "
                   "a superuser's or a writer's (says so on stderr).")
@output_options
@click.pass_obj
@handle_errors
def query(settings, sql: str, params: dict, query_url: str | None, timeout: float,
          trust_sql: bool, as_json: bool, as_csv: bool, as_nl: bool) -> None:
    """Run one read-only SQL statement (SQL, or - to read it from stdin).

    The connection is read-only: the database refuses INSERT, UPDATE, DELETE and DDL (exit 1),
    and one statement runs at a time. On PostgreSQL the login role is the boundary: a
    superuser or a role that may write the registry is refused before the SQL runs; create a
    reader once with `registry db reader NAME` and pass its URL (--query-url or
    REGISTRY_QUERY_URL). Rows are printed as they arrive; Ctrl-C stops the query (exit 130).
    Query the views {views}, or the tables; docs/schema.md in the repository describes them
    all.

    \b
    Example:
        registry query "SELECT model, num_spec_tokens, acceptance_length
                        FROM acceptance_profiles WHERE method = :m" -p m=measured
        registry query --csv "SELECT * FROM acceptance_profiles" > profiles.csv
        registry query --json - < question.sql
        export REGISTRY_QUERY_URL=postgresql://registry_reader@db/registry
        registry query "SELECT 1"
    """
    if sql == "-":
        sql = _sql_from_stdin()
    url = _login_url(settings, query_url)
    with streamed(url, sql, params, trust_sql=trust_sql, timeout=timeout,
                      warn=lambda m: click.echo(m, err=True)) as result:
        if not result.columns:
            if as_json:
                emit_rows((), (), as_json=True)
            elif not (as_csv or as_nl):
                click.echo("(the statement returned no result set)", err=True)
            return
        stream_rows(result.columns, result.rows, as_json=as_json, as_csv=as_csv, as_nl=as_nl)


@contextlib.contextmanager
def streamed(url: str, sql: str, params: dict, *, trust_sql: bool, timeout: float,
             warn: Any) -> Iterator[Any]:
    """:func:`registry_db.store.query.stream_query`'s stream, SQLAlchemy imported only when
    the DB-API path (:func:`registry_db.store.sqlite_query.stream_readonly`,
    :func:`registry_db.store.pg_query.stream_readonly`) does not open the registry (its checks
    first, in that function's order, so that a refusal is the same either way)."""
    from registry_db.store import sqlite_query
    from registry_db.store.urls import dialect_of

    if sqlite_query.timeout_problem(timeout) is None and "\0" not in sql:
        sqlite_query.check_params(sql, params)
        if dialect_of(url) == "postgresql":
            from registry_db.store import pg_query

            fast_stream = pg_query.stream_readonly(url, sql, params, trust_sql=trust_sql,
                                                   timeout=timeout, warn=warn)
        else:
            fast_stream = sqlite_query.stream_readonly(url, sql, params, timeout=timeout)
        with fast_stream as fast:
            if fast is not None:
                yield fast
                return
    from registry_db.store.query import stream_query

    with stream_query(url, sql, params, trust_sql=trust_sql, timeout=timeout,
                      warn=warn) as stream:
        yield stream


def _view_names() -> str:
    """The analysts' views, from the catalog that describes them (so the help never drifts)."""
    from registry_db.store.catalog import VIEWS

    names = list(VIEWS)
    return ", ".join(names[:-1]) + " and " + names[-1]


query.help = (query.help or "").replace("{views}", _view_names())


def _login_url(settings: Any, query_url: str | None) -> str:
    """The URL the SQL runs on: the registry's (``-d``, else $REGISTRY_DATABASE_URL, else
    ./registry.db), logged in as the query URL's role when one is given. A query URL for
    another database than an explicitly named registry is a usage error naming both: it would
    answer from a registry the command was not pointed at."""
    from registry_db.store.urls import (
        check_url,
        explicit_url,
        normalize_url,
        same_database,
        shown_url,
    )

    registry = explicit_url(settings.database)
    if query_url is None:
        return registry or settings.url
    ctx = click.get_current_context()
    source = ("$REGISTRY_QUERY_URL" if ctx.get_parameter_source("query_url")
              == click.core.ParameterSource.ENVIRONMENT else "--query-url")
    if not query_url.strip():
        raise click.UsageError(f"{source} is blank; give a reader's URL or leave it unset")
    login = check_url(normalize_url(query_url))
    if registry is None:
        return login
    from registry_db.store.migrate import require_existing

    require_existing(registry)  # -d missing.db: no registry there (exit 3), whoever logs in
    if not same_database(registry, login):
        raise click.UsageError(
            f"{source} ({shown_url(login)}) names another database than the registry "
            f"({shown_url(registry)}); the query URL is only the reader's login for the "
            "registry's own database: point it at that database, or drop it")
    return login


def _sql_from_stdin() -> str:
    """The SQL on stdin as UTF-8 text (a leading BOM dropped); a usage error when stdin is
    closed or holds bytes that are not UTF-8."""
    stream = sys.stdin
    try:
        if stream is None:
            raise ValueError("closed")
        data = stream.buffer.read() if hasattr(stream, "buffer") else stream.read()
    except (OSError, ValueError):
        raise click.UsageError("`query -` reads the SQL from stdin, and stdin is closed; "
                               "pass the SQL as an argument, or redirect a file: "
                               "registry query - < question.sql") from None
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise click.UsageError(f"the SQL on stdin is not UTF-8 text (byte "
                               f"{data[exc.start]:#04x} at offset {exc.start}); save it as "
                               "UTF-8") from None


#: The readable table aligns its columns on this many rows; later rows keep those widths.
TABLE_BLOCK = 1000
#: Rows written per write() call.
_WRITE_BLOCK = 500


def stream_rows(columns: Sequence[str], rows: Iterator[Sequence[Any]], as_json: bool = False,
                as_csv: bool = False, as_nl: bool = False) -> None:
    """Print rows as they arrive, byte for byte what :func:`emit_rows` prints for all of them
    at once (a table longer than :data:`TABLE_BLOCK` rows keeps its first block's widths):
    table numbers rounded for reading on every row, JSON, lines and CSV exact."""
    if as_json:
        _stream_json(columns, rows)
    elif as_nl:
        for block in _blocks(rows):
            emit_lines(dict(zip(columns, row)) for row in block)
    elif as_csv:
        _stream_csv(columns, rows)
    else:
        _stream_table(columns, rows)


def _stream_json(columns: Sequence[str], rows: Iterator[Sequence[Any]]) -> None:
    out: list[str] = []
    first = True
    for row in rows:
        item = json.dumps(dict(zip(columns, row)), indent=2, ensure_ascii=False, default=str)
        out.append(("[\n" if first else ",\n") + "  " + item.replace("\n", "\n  "))
        first = False
        if len(out) >= _WRITE_BLOCK:
            click.echo("".join(out), nl=False)
            out.clear()
    out.append("[]\n" if first else "\n]\n")
    click.echo("".join(out), nl=False)


def _blocks(rows: Iterator[Sequence[Any]]) -> Iterator[list[Sequence[Any]]]:
    """The rows in blocks of :data:`_WRITE_BLOCK`, one write each."""
    while block := list(itertools.islice(rows, _WRITE_BLOCK)):
        yield block


def _stream_csv(columns: Sequence[str], rows: Iterator[Sequence[Any]]) -> None:
    click.echo(csv_text(columns, ()), nl=False)
    for block in _blocks(rows):
        click.echo(csv_text(columns, block).split("\n", 1)[1], nl=False)


def _stream_table(columns: Sequence[str], rows: Iterator[Sequence[Any]]) -> None:
    block = list(itertools.islice(rows, TABLE_BLOCK))
    head = format_table(columns, block, terminal_width())
    click.echo(head)
    if len(block) < TABLE_BLOCK:
        return
    widths = [len(cell) for cell in head.splitlines()[1].split("  ")]
    numeric = [bool(block) and all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool)
                                   for r in block if r[i] is not None)
               and any(r[i] is not None for r in block) for i in range(len(columns))]
    out: list[str] = []
    for row in rows:
        cells = [shorten("" if v is None else visible(str(readable(v))), w)
                 for v, w in zip(row, widths)]
        out.append("  ".join(c.rjust(w) if num else c.ljust(w)
                             for c, w, num in zip(cells, widths, numeric)).rstrip())
        if len(out) >= _WRITE_BLOCK:
            click.echo("\n".join(out))
            out.clear()
    if out:
        click.echo("\n".join(out))
