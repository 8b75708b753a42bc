"""Migrations and the schema check: Alembic driven from the library, and ``open_registry``.

The schema is created and changed only by the migrations in ``migrations/`` (shipped inside the
wheel as ``registry_db._migrations``). Every command opens the registry through
:func:`open_registry`, which creates a new database at the head, refuses an out-of-date one
(naming ``registry db upgrade``) and never imports Alembic when the schema is already current.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from registry_db.errors import (
    DatabaseError,
    DataWouldBeLost,
    NoRegistry,
    RegistryError,
    SchemaOutOfDate,
)
from registry_db.store.engine import (
    WRITE_LOCK_KEY,
    committed,
    lock_timeout,
    lock_timeout_ms,
    make_engine,
    translated,
)
from registry_db.store.revision_order import Moved, out_of_order, repair, repairable

# HEAD_REVISION, the newest migration (a test proves it equals Alembic's head), is a constant so
# that the schema check on every command does not import Alembic; it lives in .sqlite_read, which
# the command line's SQLAlchemy-free read path shares.
from registry_db.store.sqlite_read import HEAD_REVISION
from registry_db.store.urls import ENV_VAR, shown_url, sqlite_path

#: The last schema that keeps a copy of each revision: times can be repaired there alone.
COPIES_REVISION = "0006"


def migrations_dir() -> str:
    """Where the migrations are: inside the installed package, else the checkout's folder."""
    try:
        import registry_db._migrations as shipped  # type: ignore[import-not-found]

        return str(Path(shipped.__file__).parent)
    except ImportError:
        return str(Path(__file__).resolve().parents[2] / "migrations")


def seed_dir() -> Path:
    """The shipped ``seed/`` folder (``seed/acceptance/`` holds the profile sets)."""
    try:
        import registry_db._seed as shipped  # type: ignore[import-not-found]

        return Path(shipped.__file__).parent
    except ImportError:
        return Path(__file__).resolve().parents[2] / "seed"


def alembic_config(url: str | None = None, connection: Connection | None = None,
                   stdout: Any = None):
    """An Alembic ``Config`` for the shipped migrations (no alembic.ini needed)."""
    from alembic.config import Config

    cfg = Config(stdout=stdout) if stdout is not None else Config()
    cfg.set_main_option("script_location", migrations_dir())
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def run_migrations_on(connection: Connection, work: Callable[[Connection], None]) -> None:
    """Run Alembic's migration step ``work`` in one transaction on ``connection``.

    On SQLite, foreign keys are switched off around it (a batch rebuild of a parent table
    would otherwise cascade-delete its children) and checked before the commit.
    """
    if connection.dialect.name != "sqlite":
        timeout = connection.engine.get_execution_options().get("registry_lock_timeout")
        with committed(connection):
            # Every lock the migration waits for (the writers' lock, then each table's, which
            # a reader's long query may hold) is bounded like any writer's, so that a pending
            # migration cannot stall every resolution queued behind it.
            connection.execute(text(f"SET LOCAL lock_timeout = "
                                    f"'{lock_timeout_ms(timeout or lock_timeout())}ms'"))
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": WRITE_LOCK_KEY})
            work(connection)
        return
    raw = connection.connection.driver_connection
    assert raw is not None  # a live pooled connection always has its driver connection
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        connection.execution_options(registry_write=True)
        with committed(connection):
            work(connection)
            broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise DatabaseError(
                    f"migration left {len(broken)} row(s) with broken foreign keys "
                    f"(first: {tuple(broken[0])}); rolled back")
    except BaseException:
        # A Ctrl-C mid-migration closes the connection (SQLAlchemy invalidates it): putting
        # its state back then fails, and must not turn the interrupt into a database error.
        with contextlib.suppress(Exception):
            raw.execute("PRAGMA foreign_keys=ON")
        raise
    raw.execute("PRAGMA foreign_keys=ON")


def upgrade(engine: Engine, revision: str = "head") -> list[Moved]:
    """Migrate the database up to ``revision``; the revision times moved into revision order
    first, in the same transaction (:mod:`registry_db.store.revision_order`: a history written
    before times followed the writers' lock)."""
    from alembic import command

    moved: list[Moved] = []
    with _known_targets(revision), engine.connect() as conn:
        cfg = alembic_config(connection=conn)
        cfg.attributes["before_upgrade"] = lambda c: moved.extend(repair(c))
        command.upgrade(cfg, revision)
    return moved


def repair_history(engine: Engine) -> list[Moved]:
    """Put a history whose revision times are out of order (written before the writers stamped
    under their lock) into revision order, at whatever revision the schema is: at 0004-0006 in
    place (as ``db upgrade`` does); past them (a registry upgraded before the repair existed) by
    going down to 0006, which loses nothing, and back up to where it was. Nothing to do: []."""
    from sqlalchemy import inspect

    with engine.connect() as conn:
        current = _current(conn)
        if not inspect(conn).has_table("revisions") or not out_of_order(conn):
            return []
        in_place = repairable(conn)
    if in_place:
        return upgrade(engine, current or "head")
    downgrade(engine, COPIES_REVISION)
    return upgrade(engine, current or "head")


def times_out_of_order(engine: Engine) -> bool:
    """Whether the registry's history holds a revision stamped at or before the one it follows
    (:func:`repair_history` puts it right)."""
    from sqlalchemy import inspect

    with engine.connect() as conn:
        return inspect(conn).has_table("revisions") and out_of_order(conn)


def downgrade(engine: Engine, revision: str, *, refuse_loss: bool = False) -> list[str]:
    """Migrate the database down to ``revision`` (``base`` removes the schema, ``-1`` one step,
    as Alembic has them); return what the undone migrations lost.

    Each migration undone is asked what its ``downgrade()`` would destroy on this database
    (its module's ``would_lose(connection)``, if it has one), just before it is undone, inside
    the one transaction of the whole downgrade. With ``refuse_loss`` (``registry db
    downgrade`` without ``--force``), anything lost raises :class:`DataWouldBeLost` naming it
    all, and the transaction rolls back: the database is as it was.
    """
    from alembic import command

    with _known_targets(revision), engine.connect() as conn:
        check = LossCheck(_undone(conn, revision), refuse_loss)
        conn.rollback()  # reading the revision began a transaction; the migration begins its own
        cfg = alembic_config(connection=conn)
        cfg.attributes["loss_check"] = check
        command.downgrade(cfg, revision)
    return check.lost


def _undone(conn: Connection, revision: str) -> list[Any]:
    """The migration scripts a downgrade from ``conn``'s revision to ``revision`` undoes, newest
    first, resolved as Alembic's own downgrade resolves them (relative ``-N`` included)."""
    from alembic.script import ScriptDirectory
    from alembic.script.revision import RevisionError
    from alembic.util import CommandError

    script = ScriptDirectory.from_config(alembic_config())
    try:
        return list(script.revision_map.iterate_revisions(
            _current(conn), revision, select_for_downgrade=True))
    except RevisionError as exc:
        raise CommandError(str(exc)) from None


class LossCheck:
    """The downgrade's question to each migration it undoes: what would you destroy here?

    ``migrations/env.py`` asks the first before the first step and each next one after the
    step before it (Alembic's ``on_version_apply``), so that every ``would_lose`` reads the
    schema of its own revision; :meth:`finish` refuses before the commit."""

    def __init__(self, scripts: list[Any], refuse: bool):
        self.scripts = scripts
        self.refuse = refuse
        self.lost: list[str] = []
        self._asked = 0

    def ask_next(self, connection: Connection) -> None:
        """Ask the next migration to be undone, if any."""
        if self._asked < len(self.scripts):
            script = self.scripts[self._asked]
            self._asked += 1
            would_lose = getattr(script.module, "would_lose", None)
            if would_lose is not None:
                self.lost.extend(f"{what} (undoing {script.revision})"
                                 for what in would_lose(connection))

    def step_applied(self, *, ctx: Any, **_: Any) -> None:
        """Alembic's ``on_version_apply`` callback: one migration is undone; ask the next."""
        self.ask_next(ctx.connection)

    def finish(self) -> None:
        """Refuse, naming everything, when the downgrade would lose anything and may not."""
        if self.refuse and self.lost:
            raise DataWouldBeLost(
                "refused: this downgrade would lose data the older schema cannot hold: "
                + "; ".join(self.lost) + ". Nothing was changed. Keep what you need first "
                "(`registry export -o DIR`, `registry history --json`), then run it again with "
                "--force to lose it")


def stamp(engine: Engine, revision: str) -> None:
    """Record ``revision`` as the database's schema revision without running any migration
    (``alembic stamp``: for a schema that was created or changed by hand)."""
    from alembic import command

    with _known_targets(revision), engine.connect() as conn:
        command.stamp(alembic_config(connection=conn), revision)


def revision_history() -> list[tuple[str, str | None, str]]:
    """Every migration, newest first: ``(revision, down_revision, its doc's first paragraph)``,
    read by Alembic's ``ScriptDirectory`` (imports Alembic; touches no database)."""
    from alembic.script import ScriptDirectory

    out = []
    for script in ScriptDirectory.from_config(alembic_config()).walk_revisions():
        down = script.down_revision
        summary = " ".join((script.doc or "").strip().split("\n\n")[0].split())
        out.append((script.revision, down if isinstance(down, str) or down is None
                    else ",".join(down), summary))
    return out


def migration_sql(url: str, revision: str = "head", down_from: str | None = None) -> str:
    """The DDL of an upgrade (or a ``from:to`` downgrade) for ``url``'s dialect, offline."""
    from alembic import command

    buf = io.StringIO()
    cfg = alembic_config(url=url, stdout=buf)
    cfg.output_buffer = buf
    with _known_targets(revision):
        if down_from:
            command.downgrade(cfg, f"{down_from}:{revision}", sql=True)
        else:
            command.upgrade(cfg, revision, sql=True)
    return buf.getvalue()


@contextlib.contextmanager
def _known_targets(revision: str) -> Iterator[None]:
    """Alembic's refusal of a target (unknown, or the wrong way) as a refusal (exit 1, as
    ``db stamp`` has it) that names the revisions there are."""
    from alembic.util import CommandError

    if not revision.strip():
        raise RegistryError("the revision is empty; the known revisions are base, "
                         f"{', '.join(_known_revisions())} (head: {HEAD_REVISION})")
    try:
        yield
    except CommandError as exc:
        known = ", ".join(_known_revisions())
        raise RegistryError(f"cannot migrate to {revision!r}: {exc}; the known revisions are "
                         f"base, {known} (head: {HEAD_REVISION})") from None


def script_heads() -> list[str]:
    """Every head of the migration scripts (one, as a test holds; imports Alembic)."""
    from alembic.script import ScriptDirectory

    return list(ScriptDirectory.from_config(alembic_config()).get_heads())


def schema_differences(engine: Engine) -> list[str]:
    """How the database's schema differs from the tables (:mod:`registry_db.store.schema`),
    as Alembic's autogenerate compares them (``alembic check``): one line per difference,
    none when they match. Views are the migrations' alone and not compared."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from registry_db.store.schema import metadata

    with translated(str(engine.url)), engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True,
                                                         "target_metadata": metadata})
        return [_difference(d) for d in compare_metadata(context, metadata)]


def _difference(diff: Any) -> str:
    """One of autogenerate's differences, as a line: ``add_column profiles.x``."""
    if isinstance(diff, list):  # a column's changes come as a list of tuples
        return "; ".join(_difference(d) for d in diff)
    kind, *rest = diff
    names = []
    for item in rest:
        name = getattr(item, "name", None)
        table = getattr(getattr(item, "table", None), "name", None)
        if name is not None:
            names.append(f"{table}.{name}" if table and table != name else str(name))
        elif isinstance(item, str) and item:
            names.append(item)
    return f"{kind} {' '.join(dict.fromkeys(names))}".strip()


def script_head() -> str:
    """The head revision according to the migration scripts (imports Alembic)."""
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise DatabaseError(f"the migrations have {len(heads)} heads ({heads}); expected one")
    return heads[0]


def current_revision(engine: Engine) -> str | None:
    """The database's revision, or None when it has no ``alembic_version`` table."""
    with engine.connect() as conn:
        return _current(conn)


def _current(conn: Connection) -> str | None:
    from sqlalchemy import inspect

    if not inspect(conn).has_table("alembic_version"):
        return None
    row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    return row[0] if row else None


def ensure_schema(engine: Engine, url: str | None = None) -> None:
    """Create an empty database at the head; refuse one that is behind or ahead of the code."""
    found, empty = schema_state(engine, url)
    if found == HEAD_REVISION:
        return
    if empty:
        with translated(url):
            upgrade(engine, "head")
        return
    raise _out_of_date(found, url or str(engine.url))


def schema_state(engine: Engine, url: str | None = None) -> tuple[str | None, bool]:
    """The database's revision, and whether it is empty (no tables or views at all)."""
    with translated(url):
        with engine.connect() as conn:
            found = _current(conn)
            return found, found is None and not _has_tables(conn)


def _out_of_date(found: str | None, url: str) -> SchemaOutOfDate:
    if found is None:
        return SchemaOutOfDate(
            f"{shown_url(url)} has tables but no registry schema revision; "
            "point --database at a registry database or an empty one")
    known = _known_revisions()
    if found in known and known.index(found) < known.index(HEAD_REVISION):
        return SchemaOutOfDate(
            f"the database is at schema revision {found}, this registry needs "
            f"{HEAD_REVISION}: run `registry db upgrade`")
    return SchemaOutOfDate(
        f"the database is at schema revision {found}, newer than (or unknown to) this "
        f"registry's {HEAD_REVISION}: upgrade registry_db, or point --database elsewhere")


def _has_tables(conn: Connection) -> bool:
    """Tables or views other than an empty ``alembic_version`` (what ``downgrade base`` leaves:
    an empty database, not a foreign one)."""
    from sqlalchemy import inspect

    insp = inspect(conn)
    return bool(set(insp.get_table_names()) - {"alembic_version"} or insp.get_view_names())


def _known_revisions() -> list[str]:
    """Every revision the shipped migrations know, oldest first (only on the error path, so
    the common schema check still never imports Alembic)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return [s.revision for s in reversed(list(script.walk_revisions()))]


def require_existing(url: str) -> None:
    """Raise :class:`~registry_db.errors.NoRegistry` ("no registry at PATH", exit 3) when
    ``url`` is an SQLite file that does not exist; connecting would create it."""
    path = sqlite_path(url)
    if path and not os.path.exists(path):  # False for any error, a name too long included
        raise NoRegistry(
            f"no registry at {path}: the file does not exist (check --database or "
            f"${ENV_VAR}; `registry import PATH` or `registry db upgrade` creates one)")


def _no_registry(url: str) -> NoRegistry:
    return NoRegistry(
        f"no registry here: {shown_url(url)} is an empty database, and a command that only reads "
        "creates nothing (`registry import PATH` or `registry db upgrade` creates the registry)")


def open_registry(url: str, *, readonly: bool = False, create: bool | None = None) -> Engine:
    """An engine on a registry database at the head.

    With ``readonly``, the database is checked through the read-only connection, so a user
    with read permission only can still open it. ``create`` (default: not ``readonly``) says
    whether a missing SQLite file may be created and an empty database brought to the head;
    when it may not, :class:`~registry_db.errors.NoRegistry` says "no registry" (exit 3): a
    command that only reads, or is refused, never creates or migrates anything.
    """
    path = sqlite_path(url)
    may_create = not readonly if create is None else create
    if not may_create:
        require_existing(url)
    # Checked read-only first whenever nothing may be created: even a writer's connection
    # writes (SQLite's switch to WAL turns an empty file into a database).
    if (readonly or not may_create) and not (path and not Path(path).exists()):
        engine = make_engine(url, readonly=True)
        try:
            found, empty = schema_state(engine, url)
        except BaseException:
            engine.dispose()
            raise
        engine.dispose()  # a fresh pool: callers may still add "connect" listeners
        if found == HEAD_REVISION and readonly:
            return engine
        if found != HEAD_REVISION and not empty:
            raise _out_of_date(found, url)
        if found != HEAD_REVISION and not may_create:
            raise _no_registry(url)
    engine = make_engine(url)
    try:
        found, empty = schema_state(engine, url)
        if found != HEAD_REVISION:
            if not empty:
                raise _out_of_date(found, url)
            if not may_create:
                raise _no_registry(url)
            with translated(url):
                upgrade(engine, "head")
    except BaseException:
        engine.dispose()
        raise
    if readonly:
        engine.dispose()
        engine = make_engine(url, readonly=True)
    return engine


@contextlib.contextmanager
def registry(url: str, *, readonly: bool = False, check_schema: bool = True,
             create: bool | None = None) -> Iterator[Engine]:
    """The one way to hold an engine for a command: opened by :func:`open_registry` (or, with
    ``check_schema=False``, a bare engine, read-only with ``readonly``, for the ``db`` commands
    that inspect or change the schema itself), driver errors translated, and disposed
    afterwards. ``create`` is :func:`open_registry`'s: may a missing SQLite file be created."""
    from registry_db.store.sqlite_read import leaving_no_files

    with translated(url), leaving_no_files(sqlite_path(url) if readonly else None):
        engine = (open_registry(url, readonly=readonly, create=create) if check_schema
                  else make_engine(url, readonly=readonly))
        try:
            yield engine
        finally:
            engine.dispose()
