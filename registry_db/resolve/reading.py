"""The one way a resolution's caller opens the registry: :func:`reading` chooses the read path."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from registry_db.store.engine import ReadBind
    from registry_db.store.pg_read import PgReader

__all__ = ["reading", "snapshot"]


@contextlib.contextmanager
def reading(url: str) -> Iterator[ReadBind]:
    """The registry at ``url`` to resolve against: a bare read-only DB-API connection when a
    reader of the driver opens one at the head, SQLAlchemy not imported (a SQLite file:
    :func:`registry_db.store.sqlite_read.open_readonly`, a ``sqlite3`` connection; PostgreSQL:
    :func:`registry_db.store.pg_read.open_readonly`, a psycopg one), else an engine from
    :func:`registry_db.store.migrate.registry`, which refuses or reports as every reading
    command's does (a missing SQLite file is "no registry at PATH", never created). Driver
    errors are translated on every path (:func:`registry_db.resolve.lookup.cursor`), never
    retried another way."""
    from registry_db.store.urls import dialect_of

    conn: ReadBind | None
    if dialect_of(url) == "postgresql":
        from registry_db.store.pg_read import open_readonly as open_pg

        try:
            conn = open_pg(url)
        except Exception as exc:
            # Imported only on an error: translating needs the store's engine module.
            from registry_db.store.engine import is_driver_error, translate

            if not is_driver_error(exc):
                raise
            raise translate(exc, url) from exc
    else:
        from registry_db.store.sqlite_read import leaving_no_files, open_readonly, sqlite_file

        with leaving_no_files(sqlite_file(url)):
            conn = open_readonly(url)
            if conn is not None:
                try:
                    yield conn
                finally:
                    conn.close()
                return
    if conn is None:
        from registry_db.store.migrate import registry

        with registry(url, readonly=True) as engine:  # only reads: creates and writes nothing
            yield engine
        return
    try:
        yield conn
    finally:
        conn.close()


@contextlib.contextmanager
def snapshot(bind: ReadBind) -> Iterator[ReadBind]:
    """``bind`` holding one read transaction until the block ends, for many statements that
    must read one state of the registry (a streamed batch's chunks): every resolution given
    the bind it yields joins that transaction (:func:`registry_db.resolve.lookup.cursor`).

    SQLite: ``BEGIN`` on the read-only connection, or on one of the engine's (WAL: writers go
    on; the batch does not see them). PostgreSQL: ``REPEATABLE READ, READ ONLY``. The state is
    the one of the moment this is entered (a first read takes it). A caller's connection is
    used as it is, in its own transaction. A connection that failed (a terminated backend) is
    dropped, never given back to the pool."""
    import sqlite3

    if isinstance(bind, sqlite3.Connection):
        if bind.in_transaction:
            yield bind
            return
        from registry_db.resolve.lookup import cursor

        with cursor(bind) as c:  # which translates driver errors
            c.cur.execute("BEGIN")
            c.cur.execute(_PIN).fetchall()
        try:
            yield bind
        finally:
            if bind.in_transaction:
                bind.rollback()
        return
    from registry_db.store.pg_read import PgReader

    if isinstance(bind, PgReader):
        with _pg_reader_snapshot(bind):
            yield bind
        return
    engine = bind.engine
    if bind is not engine:
        yield bind
        return
    from registry_db.store.engine import translated

    with translated(engine.url):
        conn = engine.connect()
    try:
        with translated(engine.url):
            if engine.dialect.name == "postgresql":
                # READ COMMITTED gives each statement its own snapshot (lookup.cursor says why).
                conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            conn.exec_driver_sql(_PIN).fetchall()
        yield conn
    finally:
        try:
            conn.rollback()
        except Exception:  # noqa: BLE001 - a dead connection: SQLAlchemy has invalidated it
            conn.invalidate()
        conn.close()


@contextlib.contextmanager
def _pg_reader_snapshot(reader: PgReader) -> Iterator[None]:
    """One REPEATABLE READ, READ ONLY transaction on the command line's psycopg connection
    (autocommit otherwise), which every cursor of :func:`registry_db.resolve.lookup.cursor`
    joins until the block ends; autocommit is given back afterwards."""
    raw = reader.conn
    try:
        raw.autocommit = False
        raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        raw.execute(_PIN).fetchall()
    except Exception as exc:
        # Imported only on an error: translating needs the store's engine module.
        from registry_db.store.engine import is_driver_error, translate

        if not is_driver_error(exc):
            raise
        raise translate(exc, reader.where) from exc
    try:
        yield
    finally:
        # A dead connection (a terminated backend) has nothing to roll back or give back.
        with contextlib.suppress(Exception):
            raw.rollback()
            raw.autocommit = True


#: A first read, which takes the transaction's snapshot (SQLite and PostgreSQL take it lazily).
_PIN = "SELECT 1 FROM alembic_version"
