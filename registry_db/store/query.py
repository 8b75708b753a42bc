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
import re
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from registry_db.errors import (
    QueryError,
    QueryInterrupted,
    QueryTerminated,
    RegistryError,
    UsageError,
)
from registry_db.store.engine import translate, translated
from registry_db.store.migrate import open_registry

#: A JSON number, exactly as RFC 8259 spells it (no NaN, no leading zeros, no '+').
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?P<frac>\.[0-9]+)?(?P<exp>[eE][+-]?[0-9]+)?")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

@dataclass(frozen=True)
class QueryResult:
    """The rows of one query: column names in order, and plain Python values.

    Numbers come back as ``int`` or ``float`` on both backends (PostgreSQL's NUMERIC, which
    ``ROUND`` and ``AVG`` return, is converted), so one query renders the same on either.
    A statement that returns no result set has no columns and no rows.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


def parse_value(raw: str) -> int | float | str:
    """A ``-p`` VALUE: a JSON number becomes ``int`` or ``float``, anything else stays text."""
    m = _JSON_NUMBER.fullmatch(raw)
    if not m:
        return raw
    if m.group("frac") or m.group("exp"):
        value = float(raw)
        # 1e999 is a JSON number but no float; keep what the user typed rather than inf.
        return raw if value in (float("inf"), float("-inf")) else value
    return int(raw)


def parse_param(spec: str) -> tuple[str, int | float | str]:
    """``NAME=VALUE`` as ``(name, value)``; raises ``ValueError`` saying what is wrong."""
    name, sep, raw = spec.partition("=")
    if not sep:
        raise ValueError(f"{spec!r} is not NAME=VALUE")
    if not _PARAM_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a parameter name (letters, digits and _)")
    return name, parse_value(raw)


def placeholders(sql: str) -> set[str]:
    """The ``:name`` placeholders SQLAlchemy finds in ``sql`` (``\\:`` escapes a colon)."""
    return set(text(sql).compile().params)


#: How long one query may run (seconds) unless ``--timeout`` says otherwise.
DEFAULT_TIMEOUT = 300.0
#: The longest PostgreSQL's ``statement_timeout`` (an int of milliseconds) holds, in seconds;
#: SQLite is held to the same, so that one ``--timeout`` means the same on both.
MAX_TIMEOUT = (2**31 - 1) // 1000


def timeout_problem(timeout: float) -> str | None:
    """Why ``timeout`` is no query timeout (seconds), or None: finite, above 0, at most
    :data:`MAX_TIMEOUT`."""
    if not 0 < timeout <= MAX_TIMEOUT:  # NaN fails both comparisons
        return (f"{timeout!r} is not a timeout: give seconds above 0 and at most "
                f"{MAX_TIMEOUT} (about 24 days, the most PostgreSQL's statement_timeout "
                "holds)")
    return None

_COPY = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*COPY\b", re.IGNORECASE | re.DOTALL)


@dataclass
class QueryStream:
    """A running query: its column names, and its rows as they arrive (iterate once)."""

    columns: tuple[str, ...]
    rows: Iterator[tuple[Any, ...]]


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
    if powers and not trust_sql:
        raise QueryError("role", _role_refusal(role, powers))
    if trust_sql and warn is not None:
        what = "; ".join(str(p) for p in powers[:3]) if powers else "it only reads"
        warn(f"warning: --trust-sql: the SQL runs with every privilege of the role {role} "
             f"({what}); nothing but that role limits what it does")


def _role_refusal(role: str, powers: list) -> str:
    shown = "; ".join(str(p) for p in powers[:3])
    more = f" (and {len(powers) - 3} more)" if len(powers) > 3 else ""
    return (f"refused: on PostgreSQL `registry query` runs only as a role that cannot change "
            f"the registry or the server, and the login role {role} cannot be trusted to: "
            f"{shown}{more}. Create a reader once with `registry db reader registry_reader` "
            f"and query as it: REGISTRY_QUERY_URL=postgresql://registry_reader@HOST/DB or "
            f"--query-url URL (--trust-sql runs the SQL with {role}'s full privileges)")


def _pg_stream(conn: Connection, url: str, sql: str, params: dict[str, Any]) -> QueryStream:
    # psycopg's stream() reads the rows in single-row mode: memory stays flat whatever the
    # result's size, and any statement works (a server-side cursor takes only SELECTs).
    compiled = text(sql).compile(dialect=conn.dialect)
    statement = compiled.string
    values = compiled.construct_params(params)
    dbapi: Any = conn.connection.dbapi_connection
    cur = dbapi.cursor()
    rows: Iterator[Any] = cur.stream(statement, values)
    try:
        first = next(rows, None)
    except Exception as exc:  # noqa: BLE001 - driver errors, classified below
        if not (type(exc).__name__ == "ProgrammingError" and "produce a result" in str(exc)):
            cur.close()
            raise _classify(exc, url, conn) from exc
        first = None
    if first is None:
        # A stream that ends before its first row tells neither the columns nor whether it
        # was a query at all: run the (empty, or not a query) statement once more, whole.
        try:
            cur.execute(statement, values)
        except Exception as exc:  # noqa: BLE001 - driver errors, classified below
            cur.close()
            raise _classify(exc, url, conn) from exc
        rows = iter(cur.fetchall() if cur.description else ())
    columns = tuple(d[0] for d in cur.description or ())

    def generate() -> Iterator[tuple[Any, ...]]:
        try:
            if first is not None:
                yield tuple(_plain(v) for v in first)
            for row in rows:
                yield tuple(_plain(v) for v in row)
        except Exception as exc:  # noqa: BLE001 - driver errors, classified below
            raise _classify(exc, url, conn) from exc
        finally:
            # Left before its end, psycopg's stream cancels the statement and drains what
            # already arrived; otherwise the rollback would wait for an endless result.
            close = getattr(rows, "close", None)
            if close is not None:
                close()
            cur.close()

    return QueryStream(columns, generate())


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised as Ctrl-C is: psycopg cancels the statement on the server for any
    KeyboardInterrupt while it waits, and the rest of the way out is Ctrl-C's."""


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """While the query runs, SIGTERM stops it as Ctrl-C does (on the server too), instead of
    ending the process with the statement still running there."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _on_sigterm(_signum, _frame):  # noqa: ANN001
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupted(terminated: bool) -> QueryInterrupted:
    if terminated:
        return QueryTerminated("terminated: the query was stopped")
    return QueryInterrupted("interrupted: the query was stopped")


class _Guard:
    """What stopped an SQLite query: the deadline or Ctrl-C (see :func:`_sqlite_guard`)."""

    def __init__(self, timeout: float | None):
        self.deadline = None if not timeout else time.monotonic() + timeout
        self.timeout = timeout
        self.interrupted = False
        self.terminated = False
        self.timed_out = False

    def check(self) -> int:
        if self.interrupted:
            return 1
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.timed_out = True
            return 1
        return 0


@contextlib.contextmanager
def _sqlite_guard(conn: Connection, timeout: float | None) -> Iterator[_Guard]:
    """Stop a runaway SQLite query: a progress handler checks the deadline and a flag that
    SIGINT or SIGTERM sets (inside sqlite3_step Python never sees a signal, so a recursive CTE
    would run on)."""
    guard = _Guard(timeout)
    raw: Any = conn.connection.driver_connection
    raw.set_progress_handler(guard.check, 10_000)
    previous = {}
    if threading.current_thread() is threading.main_thread():
        def _on_signal(signum, _frame):  # noqa: ANN001
            guard.interrupted = True
            guard.terminated = guard.terminated or signum == signal.SIGTERM
        previous = {n: signal.signal(n, _on_signal) for n in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield guard
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        raw.set_progress_handler(None, 0)


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


def _stopped(guard: _Guard) -> RegistryError | None:
    if guard.interrupted:
        return _interrupted(guard.terminated)
    if guard.timed_out:
        return _timeout_error(guard.timeout)
    return None


def _timeout_error(timeout: float | None) -> QueryError:
    return QueryError("timeout", f"the query ran past its timeout of {timeout:g} s and was "
                                 "stopped; give it longer with --timeout S")


def _check_params(sql: str, params: Mapping[str, Any]) -> None:
    try:
        used = placeholders(sql)
    except SQLAlchemyError as exc:  # pragma: no cover - text() parsing hardly ever fails
        raise QueryError("parameters", f"cannot read the SQL's placeholders: {exc}") from exc
    missing = sorted(used - set(params))
    unused = sorted(set(params) - used)
    if missing:
        given = ", ".join(f"-p {n}=VALUE" for n in missing)
        raise QueryError("parameters", f"the SQL uses {_names(missing)} but no value was "
                         f"given: add {given} (a literal colon is written \\:)")
    if unused:
        raise QueryError("parameters", f"-p {_names(unused, colon=False)} is not used by the "
                         f"SQL (it uses {_names(sorted(used)) if used else 'no placeholders'})")


def _names(names: list[str], colon: bool = True) -> str:
    return ", ".join((":" if colon else "") + n for n in names)


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


def _plain(value: Any) -> Any:
    """NUMERIC as int or float, so both backends give one query the same values."""
    if isinstance(value, Decimal):
        if not value.is_finite():
            return float(value)
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else float(value)
    return value
