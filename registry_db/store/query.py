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

import re
import sqlite3
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping

from sqlalchemy import event, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from registry_db.store.engine import translate, translated
from registry_db.store.migrate import open_registry
from registry_db.errors import DatabaseError, RegistryError

#: A JSON number, exactly as RFC 8259 spells it (no NaN, no leading zeros, no '+').
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?P<frac>\.[0-9]+)?(?P<exp>[eE][+-]?[0-9]+)?")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: SQLite result codes that mean the database file, not the query, is the problem.
_SQLITE_INFRA = {"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_CANTOPEN", "SQLITE_IOERR",
                 "SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_FULL", "SQLITE_PROTOCOL"}


class QueryError(RegistryError):
    """The database refused or could not run the analyst's SQL (exit 1).

    ``reason`` is ``read_only`` (a write was refused), ``one_statement`` (the string held more
    than one statement), ``parameters`` (a ``:name`` without ``-p``, or a ``-p`` the SQL does
    not use) or ``sql`` (anything else the database rejected: syntax, unknown names, types).
    """

    def __init__(self, reason: str, message: str):
        self.reason = reason
        super().__init__(message)


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


def run_query(url: str, sql: str, params: Mapping[str, Any] | None = None) -> QueryResult:
    """Run one statement on a read-only connection to ``url`` and return its rows.

    The database is first opened as usual (created at the head when new, refused with
    :class:`~registry_db.errors.SchemaOutOfDate` when old), then reopened read-only. Raises
    :class:`QueryError` when the database refuses the SQL, and
    :class:`~registry_db.errors.DatabaseError` when the database itself is the problem.
    """
    params = dict(params or {})
    _check_params(sql, params)
    engine = open_registry(url, readonly=True)
    try:
        _lock_down(engine)
        return _execute(engine, url, sql, params)
    finally:
        engine.dispose()


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


def _execute(engine: Engine, url: str, sql: str, params: dict[str, Any]) -> QueryResult:
    with translated(url):
        conn = engine.connect()
    try:
        try:
            result = conn.execute(text(sql), params)
            if not result.returns_rows:
                return QueryResult((), ())
            columns = tuple(result.keys())
            rows = tuple(tuple(_plain(v) for v in row) for row in result)
            return QueryResult(columns, rows)
        except SQLAlchemyError as exc:
            raise _classify(exc, url) from exc
        except OverflowError as exc:  # sqlite3 binds integers of at most 64 bits
            raise QueryError("parameters", f"a parameter is out of range: {exc}") from exc
        finally:
            _rollback(conn)
    finally:
        conn.close()


def _rollback(conn) -> None:  # noqa: ANN001
    # The rollback is the guarantee, but a connection the server already dropped cannot
    # roll back; the error that dropped it is the one worth reporting.
    try:
        conn.rollback()
    except SQLAlchemyError:
        pass


def _classify(exc: SQLAlchemyError, url: str) -> RegistryError:
    """The analyst's error (exit 1) or the database's (exit 3)."""
    orig = getattr(exc, "orig", None)
    msg = _first_line(orig if orig is not None else exc)
    sqlstate = getattr(orig, "sqlstate", None) or ""
    errorname = getattr(orig, "sqlite_errorname", None) or ""
    invalidated = isinstance(exc, DBAPIError) and exc.connection_invalidated
    if invalidated or sqlstate[:2] in ("08", "57", "53", "58", "XX") or errorname in _SQLITE_INFRA:
        err = translate(exc, url)
        return err if isinstance(err, DatabaseError) else DatabaseError(str(err))
    if sqlstate == "25006" or errorname == "SQLITE_READONLY":
        return QueryError("read_only", f"refused: the connection is read-only ({msg}); "
                          "`registry query` only reads, use `registry import` to change data")
    if (isinstance(orig, sqlite3.ProgrammingError) and "one statement" in msg) or (
            sqlstate == "42601" and "multiple commands" in msg):
        return QueryError("one_statement", f"refused: one statement at a time ({msg}); "
                          "combine reads with a WITH clause or a subquery")
    return QueryError("sql", f"the query failed: {msg}")


def _first_line(exc: BaseException) -> str:
    text_ = str(exc).strip()
    return text_.splitlines()[0] if text_ else type(exc).__name__


def _plain(value: Any) -> Any:
    """NUMERIC as int or float, so both backends give one query the same values."""
    if isinstance(value, Decimal):
        if not value.is_finite():
            return float(value)
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else float(value)
    return value
