"""``registry query``: one read-only SQL statement, printed as a table, JSON or CSV.

Thin: parsing ``-p`` and rendering live here, the read-only execution in
:mod:`registry_db.store.query`.
"""

from __future__ import annotations

import sys

import click

from registry_db.cli.output import emit_rows, handle_errors, output_options


def _params(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict:
    from registry_db.store.query import parse_param

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


@click.command("query")
@click.argument("sql")
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
              callback=_params,
              help="Bind :NAME in the SQL. A VALUE that is a JSON number is bound as a number, "
                   "anything else as text. Repeatable.")
@output_options
@click.pass_obj
@handle_errors
def query(settings, sql: str, params: dict, as_json: bool, as_csv: bool) -> None:
    """Run one read-only SQL statement (SQL, or - to read it from stdin).

    The connection is read-only: the database refuses INSERT, UPDATE, DELETE and DDL (exit 1),
    and one statement runs at a time. Query the views acceptance_profiles, profile_conflicts,
    profile_rates_long, provenance_details and set_overview, or the tables; docs/schema.md
    describes them all.

    \b
    Example:
        registry query "SELECT model, num_spec_tokens, acceptance_length
                        FROM acceptance_profiles WHERE method = :m" -p m=measured
        registry query --csv "SELECT * FROM acceptance_profiles" > profiles.csv
        registry query --json - < question.sql
    """
    from registry_db.store.query import run_query

    if as_json and as_csv:
        raise click.UsageError("--json and --csv cannot be used together")
    if sql == "-":
        sql = sys.stdin.read()
    result = run_query(settings.url, sql, params)
    if not result.columns:
        if as_json:
            emit_rows((), (), as_json=True)
        elif not as_csv:
            click.echo("(the statement returned no result set)", err=True)
        return
    emit_rows(result.columns, result.rows, as_json=as_json, as_csv=as_csv)
