"""Database access: engines, write transactions, migrations and the schema check.

No global engine or session: callers make an engine with :func:`make_engine` (or
:func:`open_registry`, which also checks the schema) and pass it on.

SQLite gets what it needs to behave like a server database: foreign keys on every connection,
WAL so readers do not block the writer, a busy timeout, ``BEGIN IMMEDIATE`` for writers (two
writers queue instead of failing with "database is locked" mid-transaction) and a real ``BEGIN``
so that DDL rolls back when a migration fails. PostgreSQL writers take one advisory lock, bounded
by ``lock_timeout``, so concurrent imports run one after another.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from pathlib import Path
from urllib.parse import quote
from typing import Any, Callable, Iterator, TypeVar

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from registry_db.errors import (
    DatabaseError,
    DatabaseLocked,
    DatabaseUnavailable,
    RegistryError,
    SchemaOutOfDate,
)
from registry_db.urls import dialect_of, redact, sqlite_path

#: The newest migration; a test proves it equals Alembic's head. Kept as a constant so that the
#: schema check on every command does not import Alembic.
HEAD_REVISION = "0002"

#: How long a writer waits for another (seconds); REGISTRY_LOCK_TIMEOUT overrides it.
DEFAULT_LOCK_TIMEOUT = 60.0
#: pg_advisory_xact_lock key shared by every registry writer and migration.
WRITE_LOCK_KEY = 0x5245_4749  # "REGI"

T = TypeVar("T")


def lock_timeout() -> float:
    """The writers' wait, in seconds."""
    try:
        return float(os.environ.get("REGISTRY_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT))
    except ValueError:
        return DEFAULT_LOCK_TIMEOUT


def make_engine(url: str, *, readonly: bool = False, timeout: float | None = None) -> Engine:
    """An engine for ``url`` with the registry's connection settings (no schema check)."""
    timeout = lock_timeout() if timeout is None else timeout
    if dialect_of(url) == "sqlite":
        return _sqlite_engine(url, readonly=readonly, timeout=timeout)
    connect_args: dict[str, Any] = {"connect_timeout": 10}
    if readonly:
        connect_args["options"] = "-c default_transaction_read_only=on"
    engine = create_engine(url, connect_args=connect_args, pool_pre_ping=False)
    engine.update_execution_options(registry_lock_timeout=timeout)
    return engine


def _sqlite_engine(url: str, *, readonly: bool, timeout: float) -> Engine:
    path = sqlite_path(url)
    if readonly and path:
        # Quoted twice: SQLAlchemy unquotes the URL once and SQLite decodes the URI once, so a
        # path with '#' or '?' still names the same file (and never a new, writable one).
        url = f"sqlite:///file:{quote(quote(path))}?mode=ro&uri=true"
    engine = create_engine(url, connect_args={"timeout": timeout})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001
        # Take transaction control away from pysqlite so that BEGIN is ours to emit.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        if not readonly and path:
            cur.execute("PRAGMA journal_mode=WAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # noqa: ANN001
        write = conn.get_execution_options().get("registry_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


# --- errors --------------------------------------------------------------------------------------

def translate(exc: BaseException, url: str | None = None) -> RegistryError:
    """A driver or SQLAlchemy error as the registry's own, with a message a user can act on."""
    where = f" ({redact(url)})" if url else ""
    orig = getattr(exc, "orig", None) or exc
    msg = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    code = getattr(orig, "sqlstate", None) or getattr(getattr(orig, "diag", None),
                                                       "sqlstate", None)
    low = msg.lower()
    if "database is locked" in low or code in ("55P03",) or "lock timeout" in low:
        return DatabaseLocked(
            f"the database is locked by another writer and the wait ran out{where}; "
            f"try again, or raise REGISTRY_LOCK_TIMEOUT (now {lock_timeout():g} s)")
    if "does not exist" in low and "database" in low:
        return DatabaseUnavailable(
            f"{msg}{where}; create it first, e.g. `createdb -h HOST -U USER NAME`")
    if (isinstance(exc, DBAPIError) and exc.connection_invalidated) or any(
            s in low for s in ("connection refused", "could not connect", "unable to open",
                               "connection failed", "timeout expired", "could not translate",
                               "server closed", "no such host", "name or service")):
        return DatabaseUnavailable(f"cannot reach the database{where}: {msg}")
    if "readonly" in low or "read-only" in low or "read only" in low or code == "25006":
        return RegistryError(f"refused: the connection is read-only: {msg}")
    return DatabaseError(f"database error{where}: {msg}")


@contextlib.contextmanager
def translated(url: str | None = None) -> Iterator[None]:
    """Re-raise SQLAlchemy and driver errors as :class:`RegistryError`."""
    try:
        yield
    except RegistryError:
        raise
    except (SQLAlchemyError, OSError) as exc:
        raise translate(exc, url) from exc


def _retryable(exc: BaseException) -> bool:
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlstate", None)
    return code in ("40001", "40P01") or "database is locked" in str(orig or exc).lower()


# --- write transactions --------------------------------------------------------------------------

@contextlib.contextmanager
def write_connection(engine: Engine) -> Iterator[Connection]:
    """One write transaction: SQLite ``BEGIN IMMEDIATE``, PostgreSQL the writers' lock.

    Commits on success and rolls back on any exception; the caller translates errors.
    """
    timeout = engine.get_execution_options().get("registry_lock_timeout", lock_timeout())
    with engine.connect() as conn:
        conn.execution_options(registry_write=True)
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text(f"SET LOCAL lock_timeout = '{int(timeout * 1000)}ms'"))
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": WRITE_LOCK_KEY})
            yield conn


def run_write(engine: Engine, work: Callable[[Connection], T], *, url: str | None = None) -> T:
    """Run ``work`` in one write transaction, retrying serialization failures until the wait
    (REGISTRY_LOCK_TIMEOUT) runs out; then :class:`DatabaseLocked`."""
    deadline = time.monotonic() + lock_timeout()
    delay = 0.05
    while True:
        try:
            with write_connection(engine) as conn:
                return work(conn)
        except RegistryError:
            raise
        except SQLAlchemyError as exc:
            if _retryable(exc) and time.monotonic() + delay < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            raise translate(exc, url) from exc


# --- migrations ----------------------------------------------------------------------------------

def migrations_dir() -> str:
    """Where the migrations are: inside the installed package, else the checkout's folder."""
    try:
        import registry_db._migrations as shipped  # type: ignore[import-not-found]

        return str(Path(shipped.__file__).parent)
    except ImportError:
        return str(Path(__file__).resolve().parent.parent / "migrations")


def seed_dir() -> Path:
    """The shipped ``seed/`` folder (``seed/acceptance/`` holds the profile sets)."""
    try:
        import registry_db._seed as shipped  # type: ignore[import-not-found]

        return Path(shipped.__file__).parent
    except ImportError:
        return Path(__file__).resolve().parent.parent / "seed"


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
        with connection.begin():
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": WRITE_LOCK_KEY})
            work(connection)
        return
    raw = connection.connection.driver_connection
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        connection.execution_options(registry_write=True)
        with connection.begin():
            work(connection)
            broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise DatabaseError(
                    f"migration left {len(broken)} row(s) with broken foreign keys "
                    f"(first: {tuple(broken[0])}); rolled back")
    finally:
        raw.execute("PRAGMA foreign_keys=ON")


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database up to ``revision``."""
    from alembic import command

    with engine.connect() as conn:
        command.upgrade(alembic_config(connection=conn), revision)


def downgrade(engine: Engine, revision: str) -> None:
    """Migrate the database down to ``revision`` (``base`` removes the schema)."""
    from alembic import command

    with engine.connect() as conn:
        command.downgrade(alembic_config(connection=conn), revision)


def migration_sql(url: str, revision: str = "head", down_from: str | None = None) -> str:
    """The DDL of an upgrade (or a ``from:to`` downgrade) for ``url``'s dialect, offline."""
    from alembic import command

    buf = io.StringIO()
    cfg = alembic_config(url=url, stdout=buf)
    cfg.output_buffer = buf
    if down_from:
        command.downgrade(cfg, f"{down_from}:{revision}", sql=True)
    else:
        command.upgrade(cfg, revision, sql=True)
    return buf.getvalue()


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
            f"{redact(url)} has tables but no registry schema revision; "
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
    from sqlalchemy import inspect

    insp = inspect(conn)
    return bool(insp.get_table_names() or insp.get_view_names())


def _known_revisions() -> list[str]:
    names = sorted(p.name for p in Path(migrations_dir(), "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))
    return [n[:4] for n in names]


def open_registry(url: str, *, readonly: bool = False) -> Engine:
    """An engine on a registry database at the head (created there when empty).

    With ``readonly``, an existing database is checked through the read-only connection, so a
    user with read permission only can still open it; only an empty one needs a writer.
    """
    path = sqlite_path(url)
    if readonly and not (path and not Path(path).exists()):
        engine = make_engine(url, readonly=True)
        try:
            found, empty = schema_state(engine, url)
        except BaseException:
            engine.dispose()
            raise
        engine.dispose()  # a fresh pool: callers may still add "connect" listeners
        if found == HEAD_REVISION:
            return engine
        if not empty:
            raise _out_of_date(found, url)
    engine = make_engine(url)
    try:
        ensure_schema(engine, url)
    except BaseException:
        engine.dispose()
        raise
    if readonly:
        engine.dispose()
        engine = make_engine(url, readonly=True)
    return engine
