"""``registry db``: the schema's migrations (upgrade, downgrade, current, history, stamp).

The only commands that change the schema. ``upgrade --sql`` and ``downgrade --sql`` print the DDL
for the URL's dialect without connecting, for a DBA to review or run by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from registry_db.cli.group import WholeHelpGroup
from registry_db.cli.output import emit_json, handle_errors, json_option


@click.group("db", cls=WholeHelpGroup)
def db() -> None:
    """Create, upgrade, downgrade and inspect the database schema.

    \b
    Example:
        registry db upgrade
        registry db history
        registry -d postgresql://postgres@127.0.0.1/registry db current
    """


def _revision_arg(revision: str | None) -> str:
    return revision or "head"


def _migrate(url: str, step: Callable[[Any], None], *, create: bool = True,
             ) -> tuple[str | None, str | None]:
    """Run one migration step on ``url``: the revisions before and after it.

    Only ``upgrade`` may create a missing SQLite file (``create``); Alembic's refusals (an
    unknown revision, a target that is not below the current one) exit 1 with its message.
    """
    from alembic.util import CommandError

    from registry_db import store
    from registry_db.errors import RegistryError

    if not create:
        store.require_existing(url)
    with store.registry(url, check_schema=False) as engine:
        before = store.current_revision(engine)
        try:
            step(engine)
        except CommandError as exc:
            raise RegistryError(f"{exc} (see `registry db history`)") from None
        return before, store.current_revision(engine)


@db.command("upgrade")
@click.argument("revision", required=False)
@click.option("--sql", "sql", is_flag=True, help="Print the SQL instead of running it.")
@click.pass_obj
@handle_errors
def upgrade(settings, revision: str | None, sql: bool) -> None:
    """Upgrade the schema to REVISION (default: head).

    \b
    Example:
        registry db upgrade
        registry -d postgresql://localhost/registry db upgrade --sql > schema.sql
    """
    from registry_db import store
    from registry_db.store.urls import redact

    url = settings.url
    target = _revision_arg(revision)
    if sql:
        with store.translated(url):
            click.echo(store.migration_sql(url, target), nl=False)
        return
    before, after = _migrate(url, lambda engine: store.upgrade(engine, target))
    if before == after:
        click.echo(f"{redact(url)}: already at {after}", err=True)
    else:
        click.echo(f"{redact(url)}: upgraded {before or 'base'} -> {after}", err=True)


@db.command("downgrade")
@click.argument("revision")
@click.option("--sql", "sql", is_flag=True,
              help="Print the SQL instead of running it (from the head down to REVISION).")
@click.pass_obj
@handle_errors
def downgrade(settings, revision: str, sql: bool) -> None:
    """Downgrade the schema to REVISION (`base` removes it, data included).

    \b
    Example:
        registry db downgrade 0001
        registry db downgrade base
    """
    from registry_db import store
    from registry_db.store.urls import redact

    url = settings.url
    if sql:
        with store.translated(url):
            click.echo(store.migration_sql(url, revision, down_from=store.HEAD_REVISION), nl=False)
        return
    before, after = _migrate(url, lambda engine: store.downgrade(engine, revision),
                             create=False)
    if before == after:
        click.echo(f"{redact(url)}: already at {after or 'base'}", err=True)
    else:
        click.echo(f"{redact(url)}: downgraded {before or 'base'} -> {after or 'base'}",
                   err=True)


@db.command("stamp")
@click.argument("revision")
@click.pass_obj
@handle_errors
def stamp(settings, revision: str) -> None:
    """Record REVISION as the database's schema revision without migrating (as `alembic stamp`).

    For a schema that was created or repaired by hand: nothing but the recorded revision
    changes. A SQLite file that does not exist is refused (exit 3) rather than created.

    \b
    Example:
        registry db stamp head
        registry -d postgresql://localhost/registry db stamp 0001
    """
    from registry_db import store
    from registry_db.store.urls import redact

    url = settings.url
    before, after = _migrate(url, lambda engine: store.stamp(engine, revision), create=False)
    click.echo(f"{redact(url)}: stamped {before or 'base'} -> {after or 'base'}", err=True)


@db.command("history")
@json_option
@handle_errors
def history(as_json: bool) -> None:
    """List the schema's migrations, newest first (as `alembic history`); no database needed.

    --json prints [{"revision", "down_revision", "head", "doc"}].

    \b
    Example:
        registry db history
        registry db history --json
    """
    from registry_db import store

    found = store.revision_history()
    head = store.HEAD_REVISION
    if as_json:
        emit_json([{"revision": rev, "down_revision": down, "head": rev == head, "doc": doc}
                   for rev, down, doc in found])
        return
    for rev, down, doc in found:
        click.echo(f"{down or '<base>'} -> {rev}{' (head)' if rev == head else ''}, {doc}")


@db.command("current")
@json_option
@click.pass_obj
@handle_errors
def current(settings, as_json: bool) -> None:
    """Show the schema revision and whether it is the head.

    \b
    Example:
        registry db current --json
    """
    from registry_db import store

    url = settings.url
    store.require_existing(url)  # never creates a file: a missing one is no registry (exit 3)
    with store.registry(url, check_schema=False, readonly=True) as engine:
        revision = store.current_revision(engine)
    head = store.HEAD_REVISION
    if as_json:
        emit_json({"revision": revision, "head": head, "is_head": revision == head})
    elif revision is None:
        click.echo(f"no schema (head is {head}): run `registry db upgrade`")
    else:
        click.echo(f"{revision}{' (head)' if revision == head else f' (head is {head})'}")


@db.command("reader")
@click.argument("name")
@click.option("--password", metavar="TEXT",
              help="Set the role's password (else it logs in as the server's rules allow, "
                   "e.g. ~/.pgpass or a trusted host).")
@click.pass_obj
@handle_errors
def reader(settings, name: str, password: str | None) -> None:
    """PostgreSQL: create (or repair) NAME, a LOGIN role that may only SELECT the registry's
    tables and views, for `registry query`; prints the URL to query as it.

    Run it as a role that may create roles (the one that ran `registry db upgrade`). Idempotent;
    refuses a NAME that exists and may write. The URL carries no password: give it in
    PGPASSWORD or ~/.pgpass, or in the URL as NAME:PASSWORD@.

    \b
    Example:
        registry -d postgresql://postgres@db/registry db reader registry_reader
        export REGISTRY_QUERY_URL=postgresql://registry_reader@db/registry
    """
    from registry_db import store
    from registry_db.errors import UsageError
    from registry_db.store import roles
    from registry_db.store.urls import dialect_of

    url = settings.url
    if dialect_of(url) != "postgresql":
        raise UsageError("`registry db reader` is for PostgreSQL; on SQLite `registry query` "
                         "opens the file read-only and needs no role")
    roles.check_role_name(name)
    with store.registry(url, check_schema=False) as engine:
        made = roles.create_reader(engine, name, password)
    click.echo(roles.reader_url(url, name))
    click.echo(f"{name}: LOGIN, SELECT on the registry's tables and views; query as it with "
               f"--query-url or REGISTRY_QUERY_URL", err=True)
    if made.revoked:
        click.echo("revoked from PUBLIC in this database (every role's default here; grant "
                   f"back to a role that needs it): {'; '.join(made.revoked)}", err=True)
    for what in made.remains:
        click.echo(f"warning: {name} may still use {what}", err=True)
