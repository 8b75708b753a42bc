"""What ``registry serve`` shows: private, immutable copies of the registry, one per state.

A page runs several queries (the rows, the count, each facet); reading the live file with each
of them could show rows of one import and counts of the next. So the server answers every
request from one snapshot: a copy of the registry taken with SQLite's backup API (a single read
transaction), read ``immutable=1`` from a private folder. Before each request the server asks
whether the registry changed since its snapshot (:meth:`Snapshots.signature`: a ``stat`` of the
file and its ``-wal``, no connection) and takes a new one when it did, so that an import made
while serving is seen at the next request and no request mixes two states.

The live file is only read: with no ``-wal`` beside it (no writer has changes pending) it is
copied ``immutable=1``, which creates nothing next to it, and the copy is kept only if the file
did not change meanwhile; otherwise it is read ``mode=ro``, which uses the ``-wal`` and ``-shm``
the writer made. Nothing here imports Datasette (:mod:`registry_db.analyze.web_plugin` does).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from registry_db.errors import DatabaseError
from registry_db.store.sqlite_read import readonly_options

#: How often a copy is tried ``immutable=1`` before reading ``mode=ro`` (the file changed under
#: each try: a writer is busy).
IMMUTABLE_TRIES = 3


@dataclass(frozen=True)
class State:
    """What a snapshot holds, for the line at the top of every page."""

    revisions: int
    sets: int
    last_import: str | None
    last_set: str | None
    last_revision: int | None
    last_action: str | None
    taken: str

    def words(self) -> str:
        """One line: the registry's latest revision, its time, and when it was read."""
        if self.last_import is None:
            return f"The registry holds no revision yet (read {self.taken})."
        return (f"The registry as of its latest revision, {self.last_set} revision "
                f"{self.last_revision} ({self.last_action}), imported {self.last_import}: "
                f"{self.sets} set{'s' if self.sets != 1 else ''}, {self.revisions} "
                f"revision{'s' if self.revisions != 1 else ''} in all. Read {self.taken}.")

    def to_json(self) -> dict[str, Any]:
        return {"revisions": self.revisions, "sets": self.sets,
                "last_import": self.last_import, "last_set": self.last_set,
                "last_revision": self.last_revision, "last_action": self.last_action,
                "read_at": self.taken}


def _now() -> str:
    return datetime.now(UTC).isoformat(" ", "seconds").replace("+00:00", " UTC")


def state_of(conn: sqlite3.Connection, origin: str = "") -> State:
    """The :class:`State` a registry file's connection holds."""
    revisions, sets = conn.execute(
        "SELECT (SELECT COUNT(*) FROM revisions), (SELECT COUNT(*) FROM profile_sets)"
    ).fetchone()
    last = conn.execute("SELECT imported_at, set_name, revision, action FROM revisions "
                        "ORDER BY imported_at DESC, id DESC LIMIT 1").fetchone()
    at, name, number, action = last if last is not None else (None, None, None, None)
    if at is not None:  # stored as UTC text with microseconds: seconds are enough to read
        at = str(at)[:19] + " UTC"
    return State(revisions, sets, at, name, number, action, _now() + origin)


@dataclass
class Snapshot:
    """One immutable copy: its file, its state, and how many requests are reading it."""

    path: str
    generation: int
    state: State
    users: int = 0
    retired: bool = False

    def connect(self) -> sqlite3.Connection:
        """A read-only connection to the copy (nothing can change it: ``immutable=1``)."""
        conn = sqlite3.connect(f"file:{quote(self.path)}?mode=ro&immutable=1", uri=True,
                               check_same_thread=False)
        conn.execute("PRAGMA query_only=1")
        return conn


class Snapshots:
    """The snapshots of the SQLite registry at ``path``, in a private folder."""

    #: What the snapshots are copies of, for the line at the top of every page.
    origin = ""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        #: The registry's name on the server (its file's stem).
        self.name = os.path.splitext(os.path.basename(path))[0]
        self.folder = tempfile.mkdtemp(prefix="registry-serve-")
        self._lock = threading.Lock()
        self._generation = 0
        self._signature: Any = None
        self.latest: Snapshot | None = None
        self._old: list[Snapshot] = []

    def signature(self) -> Any:
        """What changes whenever a writer commits: the file's identity, size and time, and
        its ``-wal``'s size and time (an empty or missing ``-wal`` holds nothing)."""
        def stat(p: str) -> os.stat_result | None:
            try:
                return os.stat(p)
            except FileNotFoundError:
                return None
        main, wal = stat(self.path), stat(self.path + "-wal")
        if main is None:
            raise DatabaseError(f"no registry at {self.path} any more (was it moved?)")
        return ((main.st_ino, main.st_size, main.st_mtime_ns),
                (wal.st_size, wal.st_mtime_ns) if wal is not None and wal.st_size else None)

    def current(self) -> Snapshot:
        """The snapshot of the registry as it is now: the last one, or a new one when a writer
        committed since (thread-safe; one copy at a time)."""
        with self._lock:
            signature = self.signature()
            if self.latest is None or signature != self._signature:
                self._take(signature)
            assert self.latest is not None
            return self.latest

    def _taken(self, dest: str, signature: Any) -> None:
        """``dest`` (a whole copy) becomes the latest snapshot."""
        conn = sqlite3.connect(f"file:{quote(dest)}?mode=ro&immutable=1", uri=True)
        try:
            state = state_of(conn, self.origin)
        finally:
            conn.close()
        if self.latest is not None:
            self.latest.retired = True
            self._old.append(self.latest)
        self.latest = Snapshot(dest, self._generation, state)
        self._signature = signature
        self.prune()

    def _pending(self) -> bool:
        """A writer's ``-wal`` or ``-shm`` beside the file: read through them (``mode=ro``)."""
        return os.path.exists(self.path + "-wal") or os.path.exists(self.path + "-shm")

    def _take(self, signature: Any) -> None:
        self._generation += 1
        dest = os.path.join(self.folder, f"snapshot-{self._generation}.db")
        copied = False
        for _ in range(IMMUTABLE_TRIES):
            if self._pending():
                break
            try:
                self._copy("mode=ro&immutable=1", dest)
            except sqlite3.DatabaseError:  # a writer changed the file under the copy
                signature = self.signature()
                continue
            after = self.signature()
            # Kept only if no writer began (a -wal) or finished (the file's time) meanwhile.
            if after == signature and not self._pending():
                copied = True
                break
            signature = after
        if not copied:
            signature = self.signature()
            self._copy(readonly_options(self.path), dest)
        self._taken(dest, signature)

    def _copy(self, options: str, dest: str) -> None:
        """The registry copied into ``dest`` in one read transaction (a failed copy leaves no
        file)."""
        if os.path.exists(dest):
            os.remove(dest)
        source = sqlite3.connect(f"file:{quote(self.path)}?{options}", uri=True)
        try:
            target = sqlite3.connect(dest)
            try:
                source.backup(target)
            finally:
                target.close()
        except BaseException:
            if os.path.exists(dest):
                os.remove(dest)
            raise
        finally:
            source.close()

    def prune(self) -> None:
        """Delete the copies no request reads any more (connections to them are closed by the
        threads that hold them; an open file outlives its name)."""
        keep = []
        for old in self._old:
            if old.users > 0:
                keep.append(old)
            else:
                for name in (old.path, old.path + "-wal", old.path + "-shm"):
                    if os.path.exists(name):
                        os.remove(name)
        self._old = keep

    def close(self) -> None:
        """Remove the private folder and every copy in it."""
        shutil.rmtree(self.folder, ignore_errors=True)


#: What changes whenever a writer commits to a PostgreSQL registry: every import, update,
#: deletion and restore writes a revision.
_PG_SIGNATURE = "SELECT COUNT(*), MAX(id), MAX(imported_at) FROM revisions"


class CopiedSnapshots(Snapshots):
    """Snapshots of a PostgreSQL registry, which Datasette cannot read: each a new SQLite
    registry at the same schema head, every table copied in one read-only, repeatable-read
    transaction, taken again at the first request after a revision was written."""

    def __init__(self, url: str, engine: Any):
        from registry_db.store.urls import redact

        self.url, self.engine = url, engine
        self.origin = f" (a copy of the PostgreSQL registry {redact(url)})"
        self.folder = tempfile.mkdtemp(prefix="registry-serve-")
        self.path = os.path.join(self.folder, "registry.db")
        self.name = engine.url.database or "registry"
        self._lock = threading.Lock()
        self._generation = 0
        self._signature = None
        self.latest = None
        self._old = []

    def signature(self) -> Any:
        from sqlalchemy import text

        with self.engine.connect() as conn:
            return tuple(conn.execute(text(_PG_SIGNATURE)).one())

    def _take(self, signature: Any) -> None:
        from sqlalchemy import delete, insert, select, text

        from registry_db.store.migrate import open_registry
        from registry_db.store.schema import metadata

        self._generation += 1
        dest = os.path.join(self.folder, f"snapshot-{self._generation}.db")
        copy = open_registry(f"sqlite:///{dest}", create=True)  # the schema, at the head
        try:
            with self.engine.connect().execution_options(
                    isolation_level="REPEATABLE READ") as source, copy.begin() as target:
                # The signature read in the same transaction: the copy holds exactly it.
                signature = tuple(source.execute(text(_PG_SIGNATURE)).one())
                for table in reversed(metadata.sorted_tables):  # what the migrations seeded
                    target.execute(delete(table))
                for table in metadata.sorted_tables:
                    rows = [dict(r) for r in source.execute(select(table)).mappings()]
                    if rows:
                        target.execute(insert(table), rows)
        except BaseException:
            copy.dispose()
            for name in (dest, dest + "-wal", dest + "-shm"):
                if os.path.exists(name):
                    os.remove(name)
            raise
        copy.dispose()  # the last connection: SQLite folds its -wal into the file
        self._taken(dest, signature)

    def close(self) -> None:
        self.engine.dispose()
        super().close()
