"""The read commands' way in without SQLAlchemy, and ``db upgrade`` at the head without click.

:func:`read_cursor` is what ``list``, ``profiles``, ``conflicts`` and ``db current`` read
through: the read-only DB-API connection :func:`registry_db.resolve.reading.reading` opens when
the registry is at the head (SQLite's ``sqlite3``, PostgreSQL's psycopg), else its engine,
which refuses or reports (no file, not a registry, an old schema) exactly as before.

:func:`upgrade_at_head` answers ``registry [-d URL] db upgrade`` before click is imported when
there is nothing to do: a writable SQLite file in WAL mode (or a PostgreSQL registry) at
:data:`~registry_db.store.sqlite_read.HEAD_REVISION` whose history's times are in order. It
prints what the Alembic path prints then and returns True; anything else (another argument, an
option, an error of any kind) returns False before printing, and the command line runs as always.
This module imports neither click nor SQLAlchemy.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["dbapi_reader", "read_cursor", "upgrade_at_head"]


@contextlib.contextmanager
def dbapi_reader(url: str) -> Iterator[tuple[Any, str] | None]:
    """``(connection, dialect)``: a read-only DB-API connection to the registry at ``url`` when
    it is at the head (:func:`registry_db.store.sqlite_read.open_readonly`, leaving no ``-wal``
    or ``-shm`` behind; :func:`registry_db.store.pg_read.open_readonly`), closed afterwards;
    None when the engine path must open it. A server's error is translated with ``url``."""
    from registry_db.store.urls import dialect_of

    if dialect_of(url) == "postgresql":
        from registry_db.store.pg_read import open_readonly as open_pg

        try:
            reader = open_pg(url)
        except Exception as exc:
            from registry_db.store.engine import is_driver_error, translate

            if not is_driver_error(exc):
                raise
            raise translate(exc, url) from exc
        if reader is None:
            yield None
            return
        try:
            yield reader.conn, "postgresql"
        finally:
            reader.close()
        return
    from registry_db.store.sqlite_read import leaving_no_files, open_readonly, sqlite_file

    with leaving_no_files(sqlite_file(url)):
        conn = open_readonly(url)
        if conn is None:
            yield None
            return
        try:
            yield conn, "sqlite"
        finally:
            conn.close()


@contextlib.contextmanager
def read_cursor(url: str) -> Iterator[tuple[Any, str, Any]]:
    """``(cursor, dialect, None)`` on the registry's read-only DB-API connection
    (:func:`dbapi_reader`), in one read transaction as an engine's connection reads; else
    ``(None, dialect, engine)`` on the engine :func:`registry_db.store.migrate.registry`
    opens read-only, which refuses or reports (no file, not a registry, an old schema) as
    every reading command's does. Driver errors are translated with ``url`` either way."""
    with dbapi_reader(url) as found:
        if found is None:
            from registry_db.store.migrate import registry

            with registry(url, readonly=True) as engine:
                yield None, engine.dialect.name, engine
            return
        raw, dialect = found
        try:
            if dialect == "postgresql":
                raw.autocommit = False  # a transaction, as the engine's connection begins one
            cur = raw.cursor()
            try:
                if dialect == "sqlite":
                    cur.execute("BEGIN")
                yield cur, dialect, None
            finally:
                cur.close()
                if dialect == "postgresql" or raw.in_transaction:
                    raw.rollback()
        except Exception as exc:
            from registry_db.store.engine import is_driver_error, translate

            if not is_driver_error(exc):
                raise
            raise translate(exc, url) from exc


# --- db upgrade at the head, before click ---------------------------------------------------------

def _database_and_rest(args: Sequence[str]) -> tuple[list[str | None], list[str]] | None:
    """``-d URL`` (``--database URL``, ``--database=URL``) taken out of ``args`` wherever it
    stands, and the words left; None for any other option."""
    given: list[str | None] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-d", "--database"):
            if i + 1 >= len(args):
                return None
            given.append(args[i + 1])
            i += 2
            continue
        if arg.startswith("--database="):
            given.append(arg.partition("=")[2])
        elif arg.startswith("-"):
            return None
        else:
            rest.append(arg)
        i += 1
    return given, rest


def upgrade_at_head(args: Sequence[str]) -> bool:
    """Answer ``db upgrade`` (``args``: the command line's words after the program) when the
    registry is at the head; False, having printed nothing, when click must run it."""
    try:
        parsed = _database_and_rest(args)
        if parsed is None:
            return False
        given, rest = parsed
        if rest not in (["db", "upgrade"], ["db", "upgrade", "head"]) or len(given) > 1 \
                or any("\0" in a for a in args):
            return False
        for arg in args:
            arg.encode("utf-8")  # raises for what is not UTF-8 text: click's refusal
        from registry_db.store.urls import dialect_of, resolve_url, shown_url

        url = resolve_url(given[0] if given else None)
        at_head = (_pg_at_head(url) if dialect_of(url) == "postgresql"
                   else _sqlite_at_head(url))
        if not at_head:
            return False
        sys.stderr.write(f"{shown_url(url)}: already at {at_head}\n")
        sys.stderr.flush()
        return True
    except Exception:  # noqa: BLE001 - anything unusual: the command line's own path says it
        return False


def _sqlite_at_head(url: str) -> str | None:
    """The head revision when the SQLite file of ``url`` is at it and the upgrade would do
    nothing at all (WAL already, times in order, the file and its folder writable)."""
    import os
    from urllib.parse import quote

    from registry_db.store.sqlite_read import HEAD_REVISION, NO_FAST_PATH_ENV, sqlite_file

    path = sqlite_file(url)
    if os.environ.get(NO_FAST_PATH_ENV) or path is None or not os.path.isfile(path) or \
            not os.access(path, os.R_OK | os.W_OK) or \
            not os.access(os.path.dirname(os.path.abspath(path)) or ".", os.W_OK):
        return None
    # mode=rw never creates the file; closed as the last connection, it leaves no -wal or -shm.
    conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=rw", uri=True)
    try:
        conn.execute("PRAGMA query_only=ON")
        if conn.execute("PRAGMA journal_mode").fetchone() != ("wal",):
            return None
        return _at_head(conn.cursor(), "sqlite", HEAD_REVISION)
    finally:
        conn.close()


def _pg_at_head(url: str) -> str | None:
    """The head revision when the PostgreSQL registry of ``url`` is at it with its times in
    order (the upgrade's Alembic run would change nothing)."""
    from registry_db.store.pg_read import open_readonly
    from registry_db.store.sqlite_read import HEAD_REVISION

    reader = open_readonly(url)
    if reader is None:
        return None
    try:
        return _at_head(reader.conn.cursor(), "postgresql", HEAD_REVISION)
    finally:
        reader.close()


def _at_head(cur: Any, dialect: str, head: str) -> str | None:
    from registry_db.store.sqlite_read import OUT_OF_ORDER

    cur.execute("SELECT version_num FROM alembic_version")
    if cur.fetchall() != [(head,)]:
        return None
    cur.execute(OUT_OF_ORDER)
    return None if cur.fetchall() else head
