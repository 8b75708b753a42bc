"""Reading an SQLite registry without SQLAlchemy: the command line's fast way in for ``resolve``.

Importing SQLAlchemy costs a Python process more than everything else a one-run ``registry
resolve`` does (measured with ``-X importtime``; figures in docs/decisions.md). A resolution only
reads, with fixed SQL on a DB-API cursor (:mod:`registry_db.resolve.lookup`), so for a plain
SQLite file the command line opens a read-only ``sqlite3`` connection here instead of an engine.

:func:`open_readonly` is deliberately narrow: it answers only for a ``sqlite:///PATH`` URL whose
file exists and whose schema is at :data:`HEAD_REVISION`, and returns ``None`` for everything
else (PostgreSQL, a missing or new file, an old or newer schema, any driver error), so that the
caller takes the engine path, which creates, refuses or reports exactly as it always has. The
schema revision is the constant the engine path checks too (``registry_db.store.migrate``
re-exports it; a test proves it equals Alembic's head).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from urllib.parse import quote

from registry_db.store.urls import is_plain_sqlite, sqlite_path

#: The newest migration. Kept here, in a module without SQLAlchemy or Alembic, so that both the
#: schema check of every engine (:mod:`registry_db.store.migrate`) and this path read one constant.
HEAD_REVISION = "0015"

#: A revision stamped at or before the one it follows (``revision_order.out_of_order``'s
#: question, which ``db upgrade`` asks at the head too), in SQL both drivers read alike.
OUT_OF_ORDER = (
    "SELECT 1 FROM revisions AS a JOIN revisions AS b ON b.set_name = a.set_name "
    "AND b.revision = a.revision + 1 WHERE b.imported_at <= a.imported_at LIMIT 1")

#: Set (to anything) to send every resolution through SQLAlchemy (tests compare both paths).
NO_FAST_PATH_ENV = "REGISTRY_NO_FAST_PATH"

__all__ = ["HEAD_REVISION", "NO_FAST_PATH_ENV", "OUT_OF_ORDER", "frozen", "leaving_no_files",
           "open_readonly", "readonly_options", "sqlite_file"]


def sqlite_file(url: str) -> str | None:
    """The file of a plain ``sqlite:///PATH`` URL (no query, not in memory), else ``None``:
    the file the engine opens for it (:func:`registry_db.store.urls.sqlite_path`, one parser)."""
    return sqlite_path(url) if is_plain_sqlite(url) else None


def frozen(path: str) -> bool:
    """A database in a folder nobody here may write, with no ``-wal`` or ``-shm`` file: a
    reader cannot create the ``-shm`` index a WAL database wants, and no writer can have
    changes pending, so the file is read as immutable (without it, ``mode=ro`` fails "unable
    to open database file")."""
    folder = os.path.dirname(os.path.abspath(path))
    return (os.path.exists(path) and not os.access(folder, os.W_OK)
            and not os.path.exists(path + "-wal") and not os.path.exists(path + "-shm"))


@contextlib.contextmanager
def leaving_no_files(path: str | None) -> Iterator[None]:
    """Around a read-only use of the SQLite file ``path`` (None: not one): a read-only
    connection to a WAL file makes its ``-wal`` and ``-shm`` and, unable to write, leaves them
    when it closes. When neither was there before, a read-write connection that reads one row
    and closes hands them back as the last writer's close does: SQLite deletes them only when
    no other connection has the file open, so a concurrent reader or writer keeps them."""
    wal_files = () if path is None else (path + "-wal", path + "-shm")
    before = any(os.path.exists(f) for f in wal_files)
    try:
        yield
    finally:
        if path is not None and not before and any(os.path.exists(f) for f in wal_files):
            try:
                # mode=rw never creates the file; query_only: this connection writes nothing.
                conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=rw", uri=True)
                try:
                    conn.execute("PRAGMA query_only=ON")
                    conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
                finally:
                    conn.close()
            except sqlite3.Error:
                pass  # a folder nobody here may write, a locked file: the files stay


def readonly_options(path: str) -> str:
    """The SQLite URI options every read-only open of ``path`` uses, the engine's and this
    module's alike: ``mode=ro`` (never creates or writes the file), and ``immutable=1`` when
    the file is :func:`frozen`."""
    return "mode=ro&immutable=1" if frozen(path) else "mode=ro"


def open_readonly(url: str) -> sqlite3.Connection | None:
    """A read-only connection to the registry at ``url``, at the head revision; else ``None``.

    The caller closes it. ``None`` means "use the engine": see the module's docstring.
    """
    if os.environ.get(NO_FAST_PATH_ENV):
        return None
    path = sqlite_file(url)
    if path is None or not os.path.isfile(path):
        return None
    conn = None
    try:
        conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?{readonly_options(path)}",
                               uri=True, check_same_thread=False)
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        if rows == [(HEAD_REVISION,)]:
            return conn
    except sqlite3.Error:
        pass
    if conn is not None:
        conn.close()
    return None
