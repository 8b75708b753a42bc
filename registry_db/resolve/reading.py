"""The one way a resolution's caller opens the registry: :func:`reading` chooses the read path."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from registry_db.store.engine import ReadBind

__all__ = ["reading"]


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
        from registry_db.store.sqlite_read import open_readonly

        conn = open_readonly(url)
    if conn is None:
        from registry_db.store.migrate import registry

        with registry(url, readonly=True) as engine:  # only reads: creates and writes nothing
            yield engine
        return
    try:
        yield conn
    finally:
        conn.close()
