"""``registry query`` on PostgreSQL without SQLAlchemy: the analyst's statement on the command
line's psycopg connection (:func:`registry_db.store.pg_read.open_readonly`, read-only at the head),
set up as :mod:`registry_db.store.query` sets up an engine's: every statement prepared (one per
string), the login role judged by the catalog (:mod:`.role_powers`) before the SQL runs, the
statement timeout, the placeholders compiled as SQLAlchemy's psycopg dialect compiles a
``text()`` (``%(name)s``, ``%`` doubled), ``hstore`` read as that dialect registers it, one
transaction rolled back. What it does not open is :mod:`registry_db.store.query`'s.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from registry_db.errors import QueryError, RegistryError
from registry_db.store.role_powers import POWERFUL_ROLES, WRITE_POWERS_SQL, Power, powers_of
from registry_db.store.sqlite_query import (
    _BIND,
    _BIND_ESCAPED,
    COPY,
    QueryStream,
    Terminated,
    _plain,
    interrupted,
    terminate_as_interrupt,
)

__all__ = ["judge_role", "pg_stream", "pyformat", "stream_readonly"]


def pyformat(sql: str) -> str:
    """``sql`` as SQLAlchemy's psycopg dialect compiles a ``text()`` of it: ``%`` doubled, each
    placeholder ``%(name)s``, ``\\:`` a colon (a test holds them equal)."""
    return _BIND_ESCAPED.sub(lambda m: m.group(1),
                             _BIND.sub(lambda m: f"%({m.group(1)})s", sql.replace("%", "%%")))


def _classify(exc: BaseException, url: str) -> RegistryError:
    from registry_db.store.engine import translate

    return translate(exc, url, user_sql=True)


def judge_role(role: str, powers: list[Power], trust_sql: bool,
               warn: Callable[[str], None] | None) -> None:
    """Refuse a login role that could change anything (unless ``trust_sql``, said to ``warn``)."""
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


def pg_stream(dbapi: Any, url: str, statement: str, values: Mapping[str, Any]) -> QueryStream:
    """The rows of ``statement`` (compiled for psycopg) on the psycopg connection ``dbapi``."""
    # psycopg's stream() reads the rows in single-row mode: memory stays flat whatever the
    # result's size, and any statement works (a server-side cursor takes only SELECTs).
    cur = dbapi.cursor()
    rows: Iterator[Any] = cur.stream(statement, values)
    try:
        first = next(rows, None)
    except Exception as exc:  # noqa: BLE001 - driver errors, classified below
        if not (type(exc).__name__ == "ProgrammingError" and "produce a result" in str(exc)):
            cur.close()
            raise _classify(exc, url) from exc
        first = None
    if first is None:
        # A stream that ends before its first row tells neither the columns nor whether it
        # was a query at all: run the (empty, or not a query) statement once more, whole.
        try:
            cur.execute(statement, values)
        except Exception as exc:  # noqa: BLE001 - driver errors, classified below
            cur.close()
            raise _classify(exc, url) from exc
        rows = iter(cur.fetchall() if cur.description else ())
    columns = tuple(d[0] for d in cur.description or ())

    def generate() -> Iterator[tuple[Any, ...]]:
        try:
            if first is not None:
                yield tuple(_plain(v) for v in first)
            for row in rows:
                yield tuple(_plain(v) for v in row)
        except Exception as exc:  # noqa: BLE001 - driver errors, classified below
            raise _classify(exc, url) from exc
        finally:
            # Left before its end, psycopg's stream cancels the statement and drains what
            # already arrived; otherwise the rollback would wait for an endless result.
            close = getattr(rows, "close", None)
            if close is not None:
                close()
            cur.close()

    return QueryStream(columns, generate())


def _translated(exc: Exception, url: str) -> BaseException:
    from registry_db.store.engine import is_driver_error, translate

    return translate(exc, url) if is_driver_error(exc) else exc


def _prepare(raw: Any, url: str, trust_sql: bool, timeout: float | None,
             warn: Callable[[str], None] | None) -> None:
    """The engine path's ``_pg_prepare`` on the bare connection: the role, its powers, the
    statement timeout (driver errors translated with ``url``)."""
    try:
        cur = raw.cursor()
        try:
            cur.execute("SELECT session_user")
            role = str(cur.fetchone()[0])
            cur.execute(pyformat(WRITE_POWERS_SQL), {"powerful": list(POWERFUL_ROLES)})
            powers = powers_of([(r, w) for r, w in cur.fetchall()], role)
            if timeout:
                cur.execute("SELECT set_config('statement_timeout', %(ms)s, true)",
                            {"ms": f"{max(1, int(timeout * 1000))}ms"})
        finally:
            cur.close()
    except Exception as exc:
        raise _translated(exc, url) from exc
    judge_role(role, powers, trust_sql, warn)


def _hstore(raw: Any) -> None:
    """``hstore`` values read as dicts where the extension is installed, as SQLAlchemy's
    psycopg dialect registers them on its connections (``use_native_hstore``)."""
    from psycopg.types import TypeInfo

    info = TypeInfo.fetch(raw, "hstore")
    if info is not None:
        from psycopg.types.hstore import register_hstore

        register_hstore(info, raw)
    raw.rollback()


@contextlib.contextmanager
def stream_readonly(url: str, sql: str, params: Mapping[str, Any], *, trust_sql: bool,
                    timeout: float | None, warn: Callable[[str], None] | None = None,
                    ) -> Iterator[QueryStream | None]:
    """The statement's stream on the command line's psycopg connection, or None (nothing run)
    when :mod:`registry_db.store.query` must run it. The caller has checked the timeout, the
    NUL and the parameters."""
    from registry_db.store.pg_read import open_readonly

    if os.environ.get("REGISTRY_LOCK_TIMEOUT") is not None or "__[POSTCOMPILE" in sql:
        yield None  # the engine's reading of the variable, its refusal; SQLAlchemy's own marker
        return
    try:
        reader = open_readonly(url)
    except Exception as exc:
        raise _translated(exc, url) from exc
    if reader is None:
        yield None
        return
    raw = reader.conn
    try:
        try:
            raw.prepare_threshold = 0  # one statement per string (store.query._lock_down)
            raw.autocommit = False
            _hstore(raw)
        except Exception as exc:
            raise _translated(exc, url) from exc
        with terminate_as_interrupt():
            try:
                _prepare(raw, url, trust_sql, timeout, warn)
                if COPY.match(sql):
                    raise QueryError("copy", "refused: COPY is not a query `registry query` "
                                     "runs; SELECT the rows instead (--csv prints them as CSV)")
                stream = pg_stream(raw, url, pyformat(sql), dict(params))
                try:
                    yield stream
                finally:
                    close = getattr(stream.rows, "close", None)
                    if close is not None:
                        close()
            except KeyboardInterrupt as exc:
                with contextlib.suppress(Exception):  # the statement, on the server too
                    getattr(raw, "cancel_safe", raw.cancel)()
                raise interrupted(isinstance(exc, Terminated)) from None
            finally:
                with contextlib.suppress(Exception):  # a dropped connection: the first error
                    raw.rollback()
    finally:
        reader.close()
