"""Revision order and time order are one order, by construction (issue 27.5).

`delete` took its time before it waited for the writers' lock (and every write stamped its time
before its commit), so a writer queued behind another could commit later with an earlier time:
`history` showed revision 3 older than revision 2, and `resolve --as-of T` could answer with a
state the registry never had at T. Each write now stamps the database's clock after the lock is
held, never before the newest revision's time.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta

from sqlalchemy import event, select, text

from registry_db import history, store
from registry_db.importing import write as importer
from registry_db.store.engine import WRITE_LOCK_KEY
from registry_db.store.read import _utc
from registry_db.store.schema import revisions
from registry_db.store.urls import sqlite_path
from tests.helpers import write_set


class _Held:
    """The writers' lock, held by a transaction of the test's own until :meth:`release`."""

    def __init__(self, url: str, backend: str):
        self.backend = backend
        if backend == "sqlite":
            self.raw = sqlite3.connect(sqlite_path(url), isolation_level=None)
            self.raw.execute("BEGIN IMMEDIATE")
        else:
            self.engine = store.make_engine(url)
            self.conn = self.engine.connect()
            self.conn.begin()
            self.conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": WRITE_LOCK_KEY})

    def release(self) -> None:
        if self.backend == "sqlite":
            self.raw.execute("COMMIT")
            self.raw.close()
        else:
            self.conn.commit()
            self.conn.close()
            self.engine.dispose()


def _queued(url: str, work) -> tuple[threading.Thread, threading.Event, list]:
    """``work(engine)`` in a thread, and an event set when it connects to write, that is, just
    before it begins its write transaction and waits for the lock there (the writers below
    connect for nothing else)."""
    engine = store.open_registry(url)
    waiting = threading.Event()
    errors: list = []

    @event.listens_for(engine, "engine_connect")
    def _connect(_conn):  # noqa: ANN001
        waiting.set()

    def run() -> None:
        try:
            work(engine)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            engine.dispose()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, waiting, errors


def _revisions(url: str) -> list[tuple[int, str, int, datetime]]:
    engine = store.make_engine(url)
    try:
        with engine.connect() as conn:
            v = revisions.c
            rows = conn.execute(select(v.id, v.set_name, v.revision, v.imported_at)
                                .order_by(v.id)).all()
    finally:
        engine.dispose()
    return [(i, n, r, _utc(t)) for i, n, r, t in rows]


def test_writers_queued_behind_the_lock_stamp_their_time_after_it(db_url, backend, tmp_path):
    engine = store.open_registry(db_url)
    importer.import_paths(engine, [write_set(tmp_path / "a", "alpha"),
                                   write_set(tmp_path / "a", "beta")])
    engine.dispose()
    held = _Held(db_url, backend)
    try:
        deleter, delete_waits, delete_errors = _queued(
            db_url, lambda e: history.delete_sets(e, ["alpha"], "queued"))
        changed = write_set(tmp_path / "b", "beta", al=2.75)
        importer_, import_waits, import_errors = _queued(
            db_url, lambda e: importer.import_paths(e, [changed], message="queued"))
        assert delete_waits.wait(60), delete_errors
        assert import_waits.wait(60), import_errors
    finally:
        released = datetime.now(UTC)
        held.release()
    deleter.join(120)
    importer_.join(120)
    assert not delete_errors and not import_errors, (delete_errors, import_errors)
    found = _revisions(db_url)
    queued = [(n, r, t) for _, n, r, t in found if (n, r) in (("alpha", 2), ("beta", 2))]
    assert len(queued) == 2, found
    for name, number, at in queued:
        assert at >= released, f"{name} revision {number} is stamped {at}, before the lock " \
                               f"it waited for was released at {released}"
    times = [t for *_, t in found]
    assert times == sorted(times), found  # one write's revisions share one time
    assert queued[0][2] != queued[1][2], found


def test_a_revision_is_never_older_than_the_one_before(db_url, tmp_path):
    """A clock stepped back (or another machine's clock behind the last writer's) cannot put
    a new revision before the newest one."""
    engine = store.open_registry(db_url)
    importer.import_paths(engine, [write_set(tmp_path / "a", "alpha")])
    ahead = datetime.now(UTC) + timedelta(days=1)
    with engine.begin() as conn:
        conn.execute(text("UPDATE revisions SET imported_at = :t"), {"t": ahead})
    importer.import_paths(engine, [write_set(tmp_path / "b", "alpha", al=2.75)])
    history.delete_sets(engine, ["alpha"])
    engine.dispose()
    times = [t for *_, t in _revisions(db_url)]
    assert times[0] == ahead and times[0] < times[1] < times[2], times
