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
import math
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import quote

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from registry_db import interrupts
from registry_db.errors import (
    OUTPUT_ERRNOS,
    DatabaseError,
    DatabaseLocked,
    DatabaseUnavailable,
    QueryError,
    QueryInterrupted,
    RegistryError,
    UsageError,
)
from registry_db.store.pg_read import CONNECT_TIMEOUT, PgReader, reader_options
from registry_db.store.sqlite_read import readonly_options
from registry_db.store.urls import (
    check_url,
    dialect_of,
    parse_url,
    scrub,
    shown_url,
    sqlite_path,
)

#: How long a writer waits for another (seconds); REGISTRY_LOCK_TIMEOUT overrides it.
DEFAULT_LOCK_TIMEOUT = 60.0
#: pg_advisory_xact_lock key shared by every registry writer and migration.
WRITE_LOCK_KEY = 0x5245_4749  # "REGI"
#: SQLite page cache of a write transaction, KiB (readers keep the default): an import's changed
#: pages outgrow the default, which spills them to the WAL and writes them again (figures in
#: docs/decisions.md, "An import's rounds").
WRITE_CACHE_KIB = 64 * 1024

T = TypeVar("T")

#: What the store's readers take: an engine, or an open connection (the caller's transaction).
Bind = Engine | Connection
#: What the resolver reads through: a :data:`Bind`, or the command line's bare read-only
#: connection, ``sqlite3`` (:mod:`registry_db.store.sqlite_read`) or psycopg
#: (:mod:`registry_db.store.pg_read`).
ReadBind = Bind | sqlite3.Connection | PgReader


#: The longest wait PostgreSQL's ``lock_timeout`` (an int of milliseconds) holds, in seconds.
MAX_LOCK_TIMEOUT = (2**31 - 1) // 1000

LOCK_TIMEOUT_ENV = "REGISTRY_LOCK_TIMEOUT"


def lock_timeout() -> float:
    """The writers' wait, in seconds: ``REGISTRY_LOCK_TIMEOUT``, else the default. A value that
    is not a number of seconds from 0 to :data:`MAX_LOCK_TIMEOUT` is a usage error (exit 2):
    a wait of NaN, -1 or forever is a mistake to say, not a database to blame."""
    raw = os.environ.get(LOCK_TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_LOCK_TIMEOUT:  # NaN fails both comparisons
        raise UsageError(f"{LOCK_TIMEOUT_ENV}={raw!r} is not a number of seconds from 0 to "
                         f"{MAX_LOCK_TIMEOUT}; unset it for the default, "
                         f"{DEFAULT_LOCK_TIMEOUT:g} s")
    return value


def lock_timeout_ms(timeout: float) -> int:
    """``timeout`` seconds as PostgreSQL's ``lock_timeout`` (at least 1 ms: 0 would mean
    "wait forever" there, while SQLite's 0 means "do not wait")."""
    return max(1, int(timeout * 1000))


def make_engine(url: str, *, readonly: bool = False, timeout: float | None = None) -> Engine:
    """An engine for ``url`` with the registry's connection settings (no schema check)."""
    timeout = lock_timeout() if timeout is None else timeout
    check_url(url, in_memory=True)
    dialect = dialect_of(url)
    if dialect not in ("sqlite", "postgresql"):
        raise UsageError(f"{shown_url(url)}: the registry runs on SQLite (a file path or "
                         f"sqlite:///PATH) and PostgreSQL (postgresql://...), not {dialect!r}")
    try:
        if dialect == "sqlite":
            engine = _sqlite_engine(url, readonly=readonly, timeout=timeout)
        else:
            connect_args: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT}
            if readonly:  # added to the URL's options, not in their place (a search_path)
                connect_args["options"] = reader_options(make_url(url).query.get("options"))
            engine = create_engine(url, connect_args=connect_args, pool_pre_ping=False)
            engine.update_execution_options(registry_lock_timeout=timeout)
    except ImportError as exc:  # the driver is an extra: say which one
        raise DatabaseUnavailable(
            f"{shown_url(url)}: PostgreSQL needs the driver the postgres extra installs "
            f"(pip install 'registry_db[postgres]'): {exc}") from None
    except (ArgumentError, ValueError) as exc:
        raise UsageError(f"cannot read the database URL {shown_url(url)}: "
                         f"{scrub(str(exc), url)}") from None
    interrupts.quiet_about(engine.pool.logger)
    return engine


def _sqlite_engine(url: str, *, readonly: bool, timeout: float) -> Engine:
    path = sqlite_path(url)
    if readonly and path:
        # Quoted twice: SQLAlchemy unquotes the URL once and SQLite decodes the URI once, so a
        # path with '#' or '?' still names the same file (and never a new, writable one).
        url = f"sqlite:///file:{quote(quote(path))}?{readonly_options(path)}&uri=true"
    engine = create_engine(url, connect_args={"timeout": timeout})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001
        # Take transaction control away from pysqlite so that BEGIN is ours to emit.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        if not readonly and path:
            _wal_mode(cur, timeout)
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # noqa: ANN001
        write = conn.get_execution_options().get("registry_write")
        if write and _begin_immediate(conn.connection.dbapi_connection, timeout):
            return
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


#: How long one slice of an SQLite writer's wait for the lock lasts (seconds).
WAIT_SLICE = 0.1


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused for another connection's lock (worth another try)."""
    return "locked" in str(exc) or "busy" in str(exc)


def _wal_mode(cur: Any, timeout: float) -> None:
    """The file in WAL mode (once per file: the mode is stored in it), retried in slices of
    :data:`WAIT_SLICE` up to ``timeout``: several processes opening a new file at once race
    to switch it, and the switch can fail at once with "database is locked" whatever the
    busy timeout (seen with four processes on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(WAIT_SLICE)


def _begin_immediate(dbapi_conn: Any, timeout: float) -> bool:
    """``BEGIN IMMEDIATE``, waiting up to ``timeout`` for another writer in slices of
    :data:`WAIT_SLICE`: SQLite's own busy wait returns to Python only when it gives up, so
    Ctrl-C would go unheard for the whole wait. False when it did not begin: the caller's own
    ``BEGIN IMMEDIATE`` then raises the error, translated as every other."""
    deadline = time.monotonic() + timeout
    cur = dbapi_conn.cursor()
    try:
        cur.execute(f"PRAGMA busy_timeout={int(WAIT_SLICE * 1000)}")
        while True:
            try:
                cur.execute("BEGIN IMMEDIATE")
                return True
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    return False
    finally:
        cur.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        cur.close()


# --- errors --------------------------------------------------------------------------------------

#: SQLite result codes that mean the database file, not the query, is the problem.
_SQLITE_INFRA = {"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_CANTOPEN", "SQLITE_IOERR",
                 "SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_FULL", "SQLITE_PROTOCOL"}


def translate(exc: BaseException, url: str | URL | None = None, *,
              user_sql: bool = False) -> RegistryError:
    """A driver or SQLAlchemy error as the registry's own, with a message a user can act on.

    The one translator: every module hands its driver errors here. ``user_sql`` says the
    statement was an analyst's (``registry query``): what the database refuses in it is their
    input (:class:`~registry_db.errors.QueryError`, exit 1); what goes wrong with the database
    itself (unreachable, locked, out of space) is exit 3 either way.
    """
    where = f" ({shown_url(str(url))})" if url else ""
    orig = getattr(exc, "orig", None) or exc
    msg = scrub(_first_line(orig), str(url) if url else None)
    code = getattr(orig, "sqlstate", None) or getattr(getattr(orig, "diag", None),
                                                       "sqlstate", None) or ""
    low = msg.lower()
    invalidated = isinstance(exc, DBAPIError) and exc.connection_invalidated
    if code == "42501":  # insufficient_privilege: say which database, and the grant
        msg = f"{msg}{_grant_hint(url)}"
    if user_sql and not invalidated and code[:2] not in ("08", "53", "58", "XX") and (
            code[:2] != "57" or code == "57014") and (
            getattr(orig, "sqlite_errorname", None) or "") not in _SQLITE_INFRA:
        return _query_error(orig, msg, code)
    if code == "42501":
        return DatabaseError(f"the database refused the role{where}: {msg}")
    if "database is locked" in low or code in ("55P03",) or "lock timeout" in low:
        return DatabaseLocked(
            f"the database is locked by another writer and the wait ran out{where}; "
            f"try again, or raise REGISTRY_LOCK_TIMEOUT (now {_shown_lock_timeout()})")
    if "does not exist" in low and "database" in low:
        return DatabaseUnavailable(
            f"{msg}{where}; create it first, e.g. `createdb -h HOST -U USER NAME`")
    if invalidated or any(
            s in low for s in ("connection refused", "could not connect", "unable to open",
                               "connection failed", "timeout expired", "could not translate",
                               "server closed", "no such host", "name or service")):
        return DatabaseUnavailable(f"cannot reach the database{where}: {msg}")
    if "readonly" in low or "read-only" in low or "read only" in low or code == "25006":
        # A write the registry itself makes (import, migrate) refused by the database: the
        # file, its folder or the role is the problem, not the input.
        return DatabaseError(f"the database is read-only{where}: {msg}; check the permissions "
                             "of the file and its folder (SQLite) or the role (PostgreSQL)")
    return DatabaseError(f"database error{where}: {msg}")


def _shown_lock_timeout() -> str:
    try:
        return f"{lock_timeout():g} s"
    except UsageError:
        return repr(os.environ.get(LOCK_TIMEOUT_ENV))


def _grant_hint(url: str | URL | None) -> str:
    """What a role refused on a PostgreSQL registry lacks: its reader grant on this database
    (`registry db reader` grants one database at a time), and the command that grants it."""
    parsed = parse_url(str(url)) if url is not None else None
    if parsed is None or parsed.backend != "postgresql" or not parsed.database:
        return ""
    role = parsed.username or "ROLE"
    host = f"{parsed.host or 'localhost'}{f':{parsed.port}' if parsed.port else ''}"
    return (f"; if {role!r} is to read this registry, it lacks its grant on database "
            f"{parsed.database!r} (`registry db reader` grants one database at a time): grant "
            f"it with `registry -d postgresql://OWNER@{host}/{parsed.database} db reader "
            f"{role}`, OWNER being the role that ran `registry db upgrade` there")


def _query_error(orig: BaseException, msg: str, code: str) -> RegistryError:
    """What the database refused in an analyst's statement, as :class:`QueryError`."""
    errorname = getattr(orig, "sqlite_errorname", None) or ""
    if code == "57014":
        if "user request" in msg:
            return QueryInterrupted("interrupted: the query was stopped")
        return QueryError("timeout", f"the query ran past its timeout and was stopped ({msg}); "
                                     "give it longer with --timeout S")
    if code == "25006" or errorname == "SQLITE_READONLY":
        return QueryError("read_only", f"refused: the connection is read-only ({msg}); "
                          "`registry query` only reads, use `registry import` to change data")
    if (isinstance(orig, sqlite3.ProgrammingError) and "one statement" in msg) or (
            code == "42601" and "multiple commands" in msg):
        return QueryError("one_statement", f"refused: one statement at a time ({msg}); "
                          "combine reads with a WITH clause or a subquery")
    if isinstance(orig, OverflowError):  # sqlite3 binds integers of at most 64 bits
        return QueryError("parameters", f"a parameter is out of range: {msg}")
    if "copy" in msg.lower() and not code:  # psycopg: COPY needs its own protocol
        return QueryError("copy", "refused: COPY is not a query `registry query` runs; "
                          "SELECT the rows instead (--csv prints them as CSV)")
    return QueryError("sql", f"the query failed: {msg}")


def _first_line(exc: BaseException) -> str:
    text_ = str(exc).strip()
    return text_.splitlines()[0] if text_ else type(exc).__name__


def is_driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a DB-API error of a driver the registry uses (raised by a raw cursor,
    not wrapped by SQLAlchemy)."""
    if isinstance(exc, sqlite3.Error):
        return True
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.Error)


@contextlib.contextmanager
def translated(url: str | URL | None = None) -> Iterator[None]:
    """Re-raise SQLAlchemy and driver errors (raw cursors' too) as :class:`RegistryError`.

    ``url`` may be an engine's :class:`~sqlalchemy.engine.URL`: it is rendered only when an
    error is: rendering costs a sizeable part of one resolution (docs/decisions.md)."""
    try:
        yield
    except RegistryError:
        raise
    except OSError as exc:
        if exc.errno in OUTPUT_ERRNOS:  # the output's, not the database's (cli.group)
            raise
        raise translate(exc, url) from exc
    except SQLAlchemyError as exc:
        raise translate(exc, url) from exc
    except OverflowError as exc:  # sqlite3 binds integers of at most 64 bits
        raise RegistryError(f"a value is out of the database's range: {exc}") from None
    except Exception as exc:
        if not is_driver_error(exc):
            raise
        raise translate(exc, url) from exc


def _retryable(exc: BaseException) -> bool:
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlstate", None)
    return code in ("40001", "40P01") or "database is locked" in str(orig or exc).lower()


# --- write transactions --------------------------------------------------------------------------

@contextlib.contextmanager
def write_connection(engine: Engine) -> Iterator[Connection]:
    """One write transaction: SQLite ``BEGIN IMMEDIATE``, PostgreSQL the writers' lock.

    Commits on success (through :func:`registry_db.interrupts.commit`) and rolls back on any
    exception; the caller translates errors.
    """
    timeout = engine.get_execution_options().get("registry_lock_timeout", lock_timeout())
    with engine.connect() as conn, _write_cache(conn):
        conn.execution_options(registry_write=True)
        with committed(conn):
            if conn.dialect.name == "postgresql":
                conn.execute(text(f"SET LOCAL lock_timeout = '{lock_timeout_ms(timeout)}ms'"))
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": WRITE_LOCK_KEY})
            yield conn


@contextlib.contextmanager
def committed(conn: Connection) -> Iterator[None]:
    """One transaction on ``conn``: the one path every write commits through (writes,
    migrations, the reader role). Rolled back on any exception; committed through
    :func:`registry_db.interrupts.commit`, so Ctrl-C lands before the commit (nothing written,
    exit 130) or after it (everything written, exit 0), never unseen within."""
    trans = conn.begin()
    try:
        yield
    except BaseException:
        if trans.is_active:
            with contextlib.suppress(Exception):  # the first error is the one to report
                trans.rollback()
        raise
    interrupts.commit(trans.commit)


@contextlib.contextmanager
def _write_cache(conn: Connection) -> Iterator[None]:
    """SQLite: :data:`WRITE_CACHE_KIB` of page cache and temporary files in memory while
    ``conn`` writes (an ``INSERT ... SELECT``'s statement journal would otherwise be written to
    a file), its own settings again after (the pool hands the connection to readers next)."""
    if conn.dialect.name != "sqlite":
        yield
        return
    driver = conn.connection.driver_connection
    assert driver is not None
    before = driver.execute("PRAGMA cache_size").fetchone()[0]
    store = driver.execute("PRAGMA temp_store").fetchone()[0]
    driver.execute(f"PRAGMA cache_size = -{WRITE_CACHE_KIB}")
    driver.execute("PRAGMA temp_store = MEMORY")
    try:
        yield
    finally:
        with contextlib.suppress(sqlite3.Error):  # a closed or broken connection is discarded
            driver.execute(f"PRAGMA cache_size = {int(before)}")
            driver.execute(f"PRAGMA temp_store = {int(store)}")


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
            err = translate(exc, url)
            if isinstance(err, DatabaseLocked) and engine.dialect.name == "postgresql":
                err = DatabaseLocked(f"{err}{lock_holders(engine)}")
            raise err from exc


def lock_holders(engine: Engine) -> str:
    """Who holds the writers' advisory lock, from ``pg_locks``: "; the writers' lock is held by
    backend PID (...)" for each holder, or "" when none is found (or the lookup itself fails: the
    words it would add are not worth a second error)."""
    sql = text(
        "SELECT a.pid, a.usename, a.application_name, a.state, a.xact_start "
        "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.database = "
        "(SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND l.classid = :hi AND l.objid = :lo AND l.objsubid = 1 ORDER BY a.pid")
    try:
        with engine.connect() as conn:
            rows = conn.execute(sql, {"hi": WRITE_LOCK_KEY >> 32,
                                      "lo": WRITE_LOCK_KEY & 0xFFFF_FFFF}).all()
    except SQLAlchemyError:
        return ""
    return "".join(
        f"; the writers' lock is held by backend {pid} (role {user or '?'}, application "
        f"{app or '-'}, {state or 'unknown state'} since "
        f"{start.isoformat(timespec='seconds') if start else '?'}): end it with "
        f"`SELECT pg_terminate_backend({pid})` if it should not be running"
        for pid, user, app, state, start in rows)
