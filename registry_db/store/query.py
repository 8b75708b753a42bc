"""Read-only SQL for analysts: ``registry query`` and :func:`run_query`.

The database, not this module, refuses writes. SQLite is opened ``mode=ro`` with
``query_only`` on and no ATTACH allowed (an attached file would otherwise open read-write);
PostgreSQL runs in a read-only transaction (``default_transaction_read_only``), and every
statement goes through the extended query protocol, which carries exactly one statement: a
simple-protocol string such as ``SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE; COMMIT;
INSERT ...`` would otherwise leave the read-only transaction and write. On both backends a
string with two statements is therefore refused by the driver or the server, and the
transaction is always rolled back.

What goes wrong with the user's SQL (a refused write, a syntax error, an unknown column) is
their input: exit 1 with the database's own words. What goes wrong with the database (it cannot
be reached, its schema is old, it is locked) is exit 3.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from registry_db.errors import (
    QueryError,
    RegistryError,
    UsageError,
)
from registry_db.store.engine import translate, translated
from registry_db.store.migrate import open_registry

# What the SQLAlchemy-free path (`registry query` on an SQLite file) shares with this one; the
# public names stay importable from here.
from registry_db.store.pg_query import judge_role, pg_stream
from registry_db.store.sqlite_query import COPY as _COPY
from registry_db.store.sqlite_query import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from registry_db.store.sqlite_query import MAX_TIMEOUT as MAX_TIMEOUT
from registry_db.store.sqlite_query import QueryStream as QueryStream
from registry_db.store.sqlite_query import Terminated as _Terminated
from registry_db.store.sqlite_query import _Guard, _plain, sqlite_guard
from registry_db.store.sqlite_query import check_params as _check_params
from registry_db.store.sqlite_query import interrupted as _interrupted
from registry_db.store.sqlite_query import parse_param as parse_param
from registry_db.store.sqlite_query import parse_value as parse_value
from registry_db.store.sqlite_query import placeholders as placeholders
from registry_db.store.sqlite_query import stopped as _stopped
from registry_db.store.sqlite_query import terminate_as_interrupt as _terminate_as_interrupt
from registry_db.store.sqlite_query import timeout_problem as timeout_problem


@dataclass(frozen=True)
class QueryResult:
    """The rows of one query: column names in order, and plain Python values.

    Numbers come back as ``int`` or ``float`` on both backends (PostgreSQL's NUMERIC, which
    ``ROUND`` and ``AVG`` return, is converted), so one query renders the same on either.
    A statement that returns no result set has no columns and no rows.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


def run_query(url: str, sql: str, params: Mapping[str, Any] | None = None, *,
              trust_sql: bool = False, timeout: float | None = DEFAULT_TIMEOUT) -> QueryResult:
    """Run one statement on a read-only connection to ``url`` and return all its rows.

    :func:`stream_query` with the rows collected; see there for the rules and errors.
    """
    with stream_query(url, sql, params, trust_sql=trust_sql, timeout=timeout) as stream:
        return QueryResult(stream.columns, tuple(stream.rows))


@contextlib.contextmanager
def stream_query(url: str, sql: str, params: Mapping[str, Any] | None = None, *,
                 trust_sql: bool = False, timeout: float | None = DEFAULT_TIMEOUT,
                 warn: Callable[[str], None] | None = None) -> Iterator[QueryStream]:
    """:func:`_stream_query`, leaving no ``-wal`` or ``-shm`` beside an SQLite file
    (:func:`registry_db.store.sqlite_read.leaving_no_files`)."""
    from registry_db.store.sqlite_read import leaving_no_files
    from registry_db.store.urls import sqlite_path

    with leaving_no_files(sqlite_path(url)), _stream_query(
            url, sql, params, trust_sql=trust_sql, timeout=timeout, warn=warn) as stream:
        yield stream


@contextlib.contextmanager
def _stream_query(url: str, sql: str, params: Mapping[str, Any] | None = None, *,
                  trust_sql: bool = False, timeout: float | None = DEFAULT_TIMEOUT,
                  warn: Callable[[str], None] | None = None) -> Iterator[QueryStream]:
    """Run one statement on a read-only connection to ``url``; rows stream as they arrive.

    The database is first opened as usual (created at the head when new, refused with
    :class:`~registry_db.errors.SchemaOutOfDate` when old), then reopened read-only. On
    PostgreSQL the login role must not be able to write (:mod:`registry_db.store.roles`,
    checked before the SQL runs) unless ``trust_sql``, which ``warn`` is told about. The
    statement stops after ``timeout`` seconds (None: never), and Ctrl-C stops it on both
    backends (:class:`QueryInterrupted`). Raises :class:`QueryError` when the database refuses
    the SQL, and :class:`~registry_db.errors.DatabaseError` when the database is the problem.
    """
    params = dict(params or {})
    problem = None if timeout is None else timeout_problem(timeout)
    if problem is not None:
        raise UsageError(f"--timeout: {problem}")
    if "\0" in sql:
        raise UsageError("the SQL holds a NUL character, which no database takes as text")
    _check_params(sql, params)
    engine = open_registry(url, readonly=True)
    try:
        _lock_down(engine)
        with translated(url):
            conn = engine.connect()
        with _terminate_as_interrupt():
            try:
                if engine.dialect.name == "postgresql":
                    _pg_prepare(conn, url, trust_sql, timeout, warn)
                if _COPY.match(sql):
                    # COPY TO STDOUT would leave the connection mid-copy; TO a file or program is
                    # for the server's own roles. Neither is a query.
                    raise QueryError("copy", "refused: COPY is not a query `registry query` "
                                     "runs; SELECT the rows instead (--csv prints them as CSV)")
                if engine.dialect.name == "postgresql":
                    stream = _pg_stream(conn, url, sql, params)
                    try:
                        yield stream
                    finally:
                        _close(stream)
                else:
                    with _sqlite_guard(conn, timeout) as guard:
                        stream = _sqlite_stream(conn, url, sql, params, guard)
                        try:
                            yield stream
                        finally:
                            _close(stream)
            except KeyboardInterrupt as exc:
                _cancel(conn)
                raise _interrupted(isinstance(exc, _Terminated)) from None
            finally:
                _rollback(conn)
                conn.close()
    finally:
        engine.dispose()


def _close(stream: QueryStream) -> None:
    """End a stream the caller left before its last row (a generator's ``close``)."""
    close = getattr(stream.rows, "close", None)
    if close is not None:
        close()


def _pg_prepare(conn: Connection, url: str, trust_sql: bool, timeout: float | None,
                warn: Callable[[str], None] | None) -> None:
    from registry_db.store import roles

    with translated(url):
        role = roles.login_role(conn)
        powers = roles.write_powers(conn)
        if timeout:
            conn.execute(text("SELECT set_config('statement_timeout', :ms, true)"),
                         {"ms": f"{max(1, int(timeout * 1000))}ms"})
    judge_role(role, powers, trust_sql, warn)


def _pg_stream(conn: Connection, url: str, sql: str, params: dict[str, Any]) -> QueryStream:
    compiled = text(sql).compile(dialect=conn.dialect)
    dbapi: Any = conn.connection.dbapi_connection
    return pg_stream(dbapi, url, compiled.string, compiled.construct_params(params))


def _sqlite_guard(conn: Connection, timeout: float | None) -> Any:
    """:func:`~registry_db.store.sqlite_query.sqlite_guard` on the engine's connection."""
    raw: Any = conn.connection.driver_connection
    return sqlite_guard(raw, timeout)


def _sqlite_stream(conn: Connection, url: str, sql: str, params: dict[str, Any],
                   guard: _Guard) -> QueryStream:
    try:
        result = conn.execute(text(sql), params)
    except (SQLAlchemyError, OverflowError) as exc:
        raise _stopped(guard) or _classify(exc, url, conn) from exc
    if not result.returns_rows:
        return QueryStream((), iter(()))
    columns = tuple(result.keys())

    def generate() -> Iterator[tuple[Any, ...]]:
        try:
            for row in result:
                yield tuple(_plain(v) for v in row)
        except SQLAlchemyError as exc:
            raise _stopped(guard) or _classify(exc, url, conn) from exc

    return QueryStream(columns, generate())


def _lock_down(engine: Engine) -> None:
    """Make the read-only engine refuse what ``mode=ro`` / the read-only transaction miss."""
    if engine.dialect.name == "sqlite":
        @event.listens_for(engine, "connect")
        def _sqlite(dbapi_conn, _record):  # noqa: ANN001
            # mode=ro covers the main file only: temp tables and attached files stay writable.
            dbapi_conn.execute("PRAGMA query_only=ON")
            dbapi_conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    elif engine.dialect.name == "postgresql":
        @event.listens_for(engine, "connect")
        def _postgresql(dbapi_conn, _record):  # noqa: ANN001
            # Prepare every statement: the extended protocol allows one statement per string,
            # so a COMMIT cannot end the read-only transaction before a write.
            dbapi_conn.prepare_threshold = 0


def _cancel(conn: Connection) -> None:
    """Cancel whatever statement the server runs for ``conn`` (PostgreSQL; a no-op when none).

    psycopg cancels on Ctrl-C only while it waits for the server; a Ctrl-C that lands between
    sending the statement and that wait (a window a loaded machine widens) would otherwise
    leave the rollback below waiting for the statement's end, up to its timeout."""
    if conn.dialect.name != "postgresql":
        return  # SQLite's statement is stopped by its progress handler (_sqlite_guard)
    with contextlib.suppress(Exception):
        raw: Any = conn.connection.dbapi_connection
        getattr(raw, "cancel_safe", raw.cancel)()


def _rollback(conn: Connection) -> None:
    # The rollback is the guarantee, but a connection the server already dropped (or one left
    # mid-COPY) cannot roll back; it is discarded instead, and the first error is reported.
    try:
        conn.rollback()
    except (SQLAlchemyError, Exception):  # noqa: BLE001
        with contextlib.suppress(Exception):
            conn.invalidate()


def _classify(exc: BaseException, url: str, conn: Connection | None = None) -> RegistryError:
    """The analyst's error (exit 1) or the database's (exit 3): :func:`translate` with the
    analyst's SQL in mind."""
    return translate(exc, url, user_sql=True)
