"""``registry db``: the schema's migrations (upgrade, downgrade, current, heads, check, history,
stamp), the repair of a legacy history's times and the PostgreSQL reader role.

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
    from registry_db.errors import DatabaseLocked, RegistryError
    from registry_db.store.engine import lock_holders

    if not create:
        store.require_existing(url)
    with store.registry(url, check_schema=False) as engine:
        before = store.current_revision(engine)
        try:
            with store.translated(url):
                step(engine)
        except CommandError as exc:
            raise RegistryError(f"{exc} (see `registry db history`)") from None
        except DatabaseLocked as exc:
            if engine.dialect.name != "postgresql":
                raise
            raise DatabaseLocked(f"{exc}{lock_holders(engine)}") from None
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
    from registry_db.store.urls import shown_url

    url = settings.url
    target = _revision_arg(revision)
    if sql:
        with store.translated(url):
            click.echo(store.migration_sql(url, target), nl=False)
        return
    moved: list[Any] = []
    unrepaired: list[bool] = []

    def step(engine: Any) -> None:
        moved.extend(store.upgrade(engine, target))
        unrepaired.append(store.times_out_of_order(engine))

    before, after = _migrate(url, step)
    if moved:  # a legacy history (store/revision_order.py): said, and noted in each message
        _say_moved(url, moved)
    if unrepaired and unrepaired[0]:  # upgraded past 0006 before the repair existed
        click.echo(f"{shown_url(url)}: some revisions are stamped before the one they follow "
                   "(upgraded before times were put in order): run `registry db repair`",
                   err=True)
    if before == after:
        click.echo(f"{shown_url(url)}: already at {after}", err=True)
    else:
        click.echo(f"{shown_url(url)}: upgraded {before or 'base'} -> {after}", err=True)


@db.command("repair")
@click.pass_obj
@handle_errors
def repair(settings) -> None:
    """Put a history written before revision times followed revision order into that order.

    Until revisions were stamped under the writers' lock, a revision could be stamped before
    the one it follows (a delete queued behind an import, skewed clocks). `registry db
    upgrade` repairs such a history by itself before migrating past 0006; a registry upgraded
    before that repair existed keeps them, and `--as-of` answers can then differ from what
    each revision replaced. This moves each such time to just after the revision it follows
    (each moved revision's message says from what) and rebuilds the history's time ranges
    from it (down to 0006 and back up, which loses nothing). Exit 0 also when nothing was out
    of order.

    \b
    Example:
        registry db repair
    """
    from registry_db import store
    from registry_db.store.urls import shown_url

    url = settings.url
    moved: list[Any] = []
    _migrate(url, lambda engine: moved.extend(store.repair_history(engine)), create=False)
    if not moved:
        click.echo(f"{shown_url(url)}: every revision's time already follows revision order",
                   err=True)
        return
    _say_moved(url, moved)


def _say_moved(url: str, moved: list[Any]) -> None:
    from registry_db.store.urls import shown_url

    sets = sorted({m.set_name for m in moved})
    click.echo(f"{shown_url(url)}: moved the times of {len(moved)} revision(s) of {len(sets)} "
               f"set(s) forward to follow revision order ({', '.join(sets[:5])}"
               f"{', ...' if len(sets) > 5 else ''}; each revision's message says from what: "
               "`registry history SET`)", err=True)


@db.command("downgrade", context_settings={"ignore_unknown_options": True})
@click.argument("revision")
@click.option("--sql", "sql", is_flag=True,
              help="Print the SQL instead of running it (from the head down to REVISION).")
@click.option("--force", is_flag=True,
              help="Go ahead when the downgrade would lose data the older schema cannot hold.")
@click.pass_obj
@handle_errors
def downgrade(settings, revision: str, sql: bool, force: bool) -> None:
    """Downgrade the schema to REVISION (`base` removes it, data included).

    REVISION is a revision, -N for N steps down (as in alembic, no `--` needed) or base. A
    downgrade that would lose data the older schema cannot hold (earlier revisions of a set,
    deleted sets, revision numbers, messages; with base, every set) is refused, naming what
    would be lost, unless --force; one that loses nothing (an empty registry, a view) needs
    no flag.

    \b
    Example:
        registry db downgrade -1
        registry db downgrade 0003
        registry db downgrade base --force
    """
    from registry_db import store
    from registry_db.store.urls import shown_url

    if revision.startswith("--"):  # unknown options pass as the revision (for -1)
        raise click.UsageError(f"No such option: {revision}")
    url = settings.url
    if sql:
        with store.translated(url):
            click.echo(store.migration_sql(url, revision, down_from=store.HEAD_REVISION), nl=False)
        return
    lost: list[str] = []
    before, after = _migrate(url, lambda engine: lost.extend(
        store.downgrade(engine, revision, refuse_loss=not force)), create=False)
    for what in lost:
        click.echo(f"lost (--force): {what}", err=True)
    if before == after:
        click.echo(f"{shown_url(url)}: already at {after or 'base'}", err=True)
    else:
        click.echo(f"{shown_url(url)}: downgraded {before or 'base'} -> {after or 'base'}",
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
    from registry_db.store.urls import shown_url

    url = settings.url
    before, after = _migrate(url, lambda engine: store.stamp(engine, revision), create=False)
    click.echo(f"{shown_url(url)}: stamped {before or 'base'} -> {after or 'base'}", err=True)


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


@db.command("heads")
@json_option
@handle_errors
def heads(as_json: bool) -> None:
    """Show the head revision of the migrations (as `alembic heads`); no database needed.

    --json prints {"heads": [REVISION]}.

    \b
    Example:
        registry db heads
    """
    from registry_db import store

    found = store.script_heads()
    if as_json:
        emit_json({"heads": found})
        return
    for rev in found:
        click.echo(f"{rev} (head)")


@db.command("check")
@json_option
@click.pass_obj
@handle_errors
def check(settings, as_json: bool) -> None:
    """Check that the database's schema matches the models (as `alembic check`).

    Exit 0 when it does; 1 naming each difference (a table, column, index or constraint the
    migrations and the models disagree on); 3 when the database is not at the head.
    --json prints {"revision", "matches", "differences": [TEXT]}.

    \b
    Example:
        registry db check
    """
    from registry_db import store
    from registry_db.errors import RegistryError

    url = settings.url
    with settings.registry(readonly=True) as engine:
        differences = store.schema_differences(engine)
    if as_json:
        emit_json({"revision": store.HEAD_REVISION, "matches": not differences,
                   "differences": differences})
    elif not differences:
        click.echo(f"No new upgrade operations detected: the schema at {store.HEAD_REVISION} "
                   "matches the models.")
    if differences:
        raise RegistryError(f"the schema of {_redacted(url)} differs from the models in "
                            f"{len(differences)} way(s): " + "; ".join(differences))


def _redacted(url: str) -> str:
    from registry_db.store.urls import shown_url

    return shown_url(url)


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
    from registry_db.store.sqlite_read import HEAD_REVISION as head

    url = settings.url
    revision = _fast_current(url)
    if revision is None:  # not at the head, or not opened: the engine reads what there is
        from registry_db import store

        store.require_existing(url)  # never creates a file: a missing one is no registry (exit 3)
        with store.registry(url, check_schema=False, readonly=True) as engine:
            revision = store.current_revision(engine)
    if as_json:
        emit_json({"revision": revision, "head": head, "is_head": revision == head})
    elif revision is None:
        click.echo(f"no schema (head is {head}): run `registry db upgrade`")
    else:
        click.echo(f"{revision}{' (head)' if revision == head else f' (head is {head})'}")


def _fast_current(url: str) -> str | None:
    """The head, read by the DB-API reader that opens only a registry at the head; else None."""
    from registry_db.cli.fast import dbapi_reader
    from registry_db.store import dbapi_read

    with dbapi_reader(url) as found:
        if found is None:
            return None
        raw, dialect = found
        cur = raw.cursor()
        try:
            return dbapi_read.current_revision(cur, dialect)
        finally:
            cur.close()


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
