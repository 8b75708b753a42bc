"""A batch reads one state of the registry, whatever a concurrent writer commits meanwhile.

The batch's statements (the set names, then the profiles) must share one snapshot. The test
makes the interleaving certain instead of likely: a writer holds an ACCESS EXCLUSIVE lock on
``profiles``, so the batch's profile lookup waits (seen in ``pg_locks``) after its set names were
read; the writer then renames the set and changes the profile, and commits. Under READ COMMITTED
the waiting lookup reads the writer's state while the set check read the one before it.
"""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import text

from registry_db import store
from registry_db.importing import write as importer
from registry_db.model import Refusal
from registry_db.resolve.plan import Request, resolve_many
from tests.helpers import SEED

pytestmark = pytest.mark.only_backend("postgresql")

KEY = ("deepseek-v4.1-flash", "dspark", 5, "off", "coding")


def _waiting_on_profiles(conn) -> bool:
    return bool(conn.execute(text(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
        "WHERE c.relname = 'profiles' AND NOT l.granted")).scalar())


def test_batch_reads_one_snapshot_beside_a_concurrent_writer(backend, db_url, engine):
    importer.import_paths(engine, [SEED])
    requests = [Request(*KEY, sets=("renamed",)), Request(*KEY)]
    answers: list = []
    failure: list[BaseException] = []

    def run_batch() -> None:
        try:
            answers.extend(resolve_many(engine, requests))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failure.append(exc)

    writer_engine = store.make_engine(db_url)
    try:
        with writer_engine.connect() as writer, writer_engine.connect() as watcher:
            writer.begin()
            writer.execute(text("LOCK TABLE profiles IN ACCESS EXCLUSIVE MODE"))
            batch = threading.Thread(target=run_batch)
            batch.start()
            # Bounded: the batch either waits on the lock (the case under test) or finished
            # without reading profiles apart from its set names (one statement: one snapshot).
            for _ in range(3000):
                if _waiting_on_profiles(watcher) or not batch.is_alive():
                    break
                watcher.rollback()
                time.sleep(0.01)
            else:
                pytest.fail("the batch neither waited on the lock nor finished")
            writer.execute(text(
                "UPDATE profile_sets SET name = 'renamed' WHERE name = 'inferencex-golden-al'"))
            writer.execute(text(
                "UPDATE profiles SET acceptance_length = 4.5 WHERE model = :m "
                "AND speculative_method = :x AND num_spec_tokens = :k AND thinking = :t "
                "AND category = :c"), dict(zip("mxktc", KEY)))
            writer.commit()
            batch.join(60)
            assert not batch.is_alive()
    finally:
        writer_engine.dispose()
    assert not failure, failure
    pinned, free = answers
    # The set check read the state before the writer: 'renamed' did not exist...
    assert isinstance(pinned, Refusal)  # resolve_many returns refusals as values
    # ... so the profile must come from that same state.
    assert (free.profile_set, free.acceptance_length) == ("inferencex-golden-al", 4.07)
