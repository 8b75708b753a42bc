"""``registry query`` on an SQLite file without SQLAlchemy, and what both of its paths share.

:func:`stream_readonly` runs the analyst's statement on a bare ``sqlite3`` connection opened
read-only at the head (:func:`registry_db.store.sqlite_read.open_readonly`) and set up as the
engine of :mod:`registry_db.store.query` sets up its own: ``PRAGMA query_only``, no ATTACH,
``foreign_keys`` and the busy timeout, the ``regexp`` and ``floor`` functions SQLAlchemy's
pysqlite dialect adds, the statement in a ``BEGIN`` that is rolled back, its placeholders
compiled as SQLAlchemy compiles a ``text()``. A test holds both paths' output equal. Anything it
does not open (PostgreSQL, a URL with options, an old schema, ``REGISTRY_LOCK_TIMEOUT`` set)
is :mod:`registry_db.store.query`'s, which refuses or reports as always (the command line tries
this module first: :func:`registry_db.cli.query.streamed`).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from registry_db.errors import (
    QueryError,
    QueryInterrupted,
    QueryTerminated,
    RegistryError,
)

#: A JSON number, exactly as RFC 8259 spells it (no NaN, no leading zeros, no '+').
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?P<frac>\.[0-9]+)?(?P<exp>[eE][+-]?[0-9]+)?")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


#: SQLAlchemy's own patterns (``TextClause._bind_params_regex`` and ``compiler.BIND_PARAMS_ESC``,
#: SQLAlchemy 2.1), kept character for character: ``:name`` is a placeholder where SQLAlchemy's
#: ``text()`` finds one (a test holds them equal), and ``\\:`` a literal colon.
_BIND = re.compile(r"(?<![:\w\x5c]):(\w+)(?![:\w])", re.UNICODE)
_BIND_ESCAPED = re.compile(r"\x5c(:\w*)(?![:\w])", re.UNICODE)


def placeholders(sql: str) -> set[str]:
    """The ``:name`` placeholders SQLAlchemy finds in ``sql`` (``\\:`` escapes a colon)."""
    return set(_BIND.findall(sql))


def qmark(sql: str) -> tuple[str, list[str]]:
    """``sql`` as SQLAlchemy's SQLite dialect compiles a ``text()`` of it: each placeholder a
    ``?``, ``\\:`` a colon; and the placeholders' names in the order of the ``?``."""
    names: list[str] = []

    def marker(m: re.Match[str]) -> str:
        names.append(m.group(1))
        return "?"

    return _BIND_ESCAPED.sub(lambda m: m.group(1), _BIND.sub(marker, sql)), names


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


COPY = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*COPY\b", re.IGNORECASE | re.DOTALL)


@dataclass
class QueryStream:
    """A running query: its column names, and its rows as they arrive (iterate once)."""

    columns: tuple[str, ...]
    rows: Iterator[tuple[Any, ...]]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as Ctrl-C is: psycopg cancels the statement on the server for any
    KeyboardInterrupt while it waits, and the rest of the way out is Ctrl-C's."""


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the query runs, SIGTERM stops it as Ctrl-C does (on the server too), instead of
    ending the process with the statement still running there."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _on_sigterm(_signum, _frame):  # noqa: ANN001
        raise Terminated

    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted(terminated: bool) -> QueryInterrupted:
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


def stopped(guard: _Guard) -> RegistryError | None:
    if guard.interrupted:
        return interrupted(guard.terminated)
    if guard.timed_out:
        return timeout_error(guard.timeout)
    return None


def timeout_error(timeout: float | None) -> QueryError:
    return QueryError("timeout", f"the query ran past its timeout of {timeout:g} s and was "
                                 "stopped; give it longer with --timeout S")


def check_params(sql: str, params: Mapping[str, Any]) -> None:
    used = placeholders(sql)
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

@contextlib.contextmanager
def sqlite_guard(raw: sqlite3.Connection, timeout: float | None) -> Iterator[_Guard]:
    """Stop a runaway SQLite query: a progress handler checks the deadline and a flag that
    SIGINT or SIGTERM sets (inside sqlite3_step Python never sees a signal, so a recursive CTE
    would run on)."""
    guard = _Guard(timeout)
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


def _plain(value: Any) -> Any:
    """NUMERIC as int or float, so both backends give one query the same values."""
    if isinstance(value, Decimal):
        if not value.is_finite():
            return float(value)
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else float(value)
    return value


def _regexp(a: str, b: str | None) -> bool | None:
    # As SQLAlchemy's pysqlite dialect defines REGEXP (dialects/sqlite/pysqlite.py, on_connect).
    if b is None:
        return None
    return re.search(a, b) is not None


def _classify(exc: BaseException, url: str) -> RegistryError:
    from registry_db.store.engine import translate

    return translate(exc, url, user_sql=True)


@contextlib.contextmanager
def stream_readonly(url: str, sql: str, params: Mapping[str, Any], *,
                    timeout: float | None) -> Iterator[QueryStream | None]:
    """The statement's stream on a bare read-only connection, or None (nothing run) when
    :mod:`registry_db.store.query` must run it. The caller has checked the timeout, the NUL
    and the parameters (:func:`check_params`)."""
    from registry_db.store.sqlite_read import leaving_no_files, open_readonly, sqlite_file

    if os.environ.get("REGISTRY_LOCK_TIMEOUT") is not None or "__[POSTCOMPILE" in sql:
        yield None  # the engine's reading of the variable, its refusal; SQLAlchemy's own marker
        return
    with leaving_no_files(sqlite_file(url)):
        raw = open_readonly(url)
        if raw is None:
            yield None
            return
        try:
            # What the engine's connect listeners and dialect do (store.engine, store.query).
            raw.isolation_level = None
            raw.execute("PRAGMA foreign_keys=ON")
            raw.execute("PRAGMA busy_timeout=60000")  # engine.DEFAULT_LOCK_TIMEOUT
            raw.execute("PRAGMA query_only=ON")
            raw.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            raw.create_function("regexp", 2, _regexp, deterministic=True)
            raw.create_function("floor", 1, math.floor, deterministic=True)
            with terminate_as_interrupt():
                try:
                    if COPY.match(sql):
                        raise QueryError("copy", "refused: COPY is not a query `registry "
                                         "query` runs; SELECT the rows instead (--csv prints "
                                         "them as CSV)")
                    cur = raw.cursor()
                    try:
                        cur.execute("BEGIN")
                        with sqlite_guard(raw, timeout) as guard:
                            stream = _stream(cur, url, sql, params, guard)
                            try:
                                yield stream
                            finally:
                                close = getattr(stream.rows, "close", None)
                                if close is not None:
                                    close()
                    finally:
                        # Closed here, not by the garbage collector: a statement left open
                        # (an error's traceback holds the cursor) keeps the connection open
                        # after close(), and then its -wal and -shm stay behind.
                        cur.close()
                except KeyboardInterrupt as exc:
                    raise interrupted(isinstance(exc, Terminated)) from None
                finally:
                    with contextlib.suppress(Exception):
                        raw.rollback()
        finally:
            raw.close()


def _stream(cur: sqlite3.Cursor, url: str, sql: str, params: Mapping[str, Any],
            guard: _Guard) -> QueryStream:
    statement, names = qmark(sql)
    try:
        cur.execute(statement, tuple(params[n] for n in names))
    except (sqlite3.Error, OverflowError) as exc:
        raise stopped(guard) or _classify(exc, url) from exc
    if cur.description is None:
        return QueryStream((), iter(()))
    columns = tuple(d[0] for d in cur.description)

    def generate() -> Iterator[tuple[Any, ...]]:
        try:
            while rows := cur.fetchmany(500):
                for row in rows:
                    yield tuple(_plain(v) for v in row)
        except sqlite3.Error as exc:
            raise stopped(guard) or _classify(exc, url) from exc

    return QueryStream(columns, generate())
