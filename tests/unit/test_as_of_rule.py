"""One rule for "as of T": the batch's Python timeline answers what the statements' SQL answers,
on histories whose times are out of revision order too (as a registry written before revisions
were stamped under the writers' lock, and not repaired, holds them).

``store.as_of.revision_at`` is the rule's text (``history.held`` and the resolver run it);
``timeline.Timeline`` is its Python form for batches naming many times. Hypothesis draws
histories (each revision's time at random, so some come before the one they follow), SQLite in
memory runs the rule's SQL, and both must name the same revision, deletions included.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from registry_db.resolve.lookup import bound
from registry_db.resolve.statements import LIVE_SETS
from registry_db.resolve.timeline import Timeline
from registry_db.store.as_of import revision_at

BASE = datetime(2026, 1, 1, tzinfo=UTC)

histories = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.lists(st.tuples(st.integers(0, 20), st.booleans()), min_size=1, max_size=6,
             unique_by=lambda r: r[0]),  # distinct times within a set, in any order
    min_size=1)


def _rows(history: dict) -> list[tuple[str, int, str, str]]:
    return [(name, number, "deleted" if gone else "updated",
             bound(BASE + timedelta(minutes=minute), "sqlite"))
            for name, revs in history.items()
            for number, (minute, gone) in enumerate(revs, 1)]


@settings(max_examples=300, deadline=None)
@given(histories)
def test_the_timeline_answers_as_the_statements_do(history):
    rows = _rows(history)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE revisions (set_name TEXT, revision INTEGER, action TEXT, "
               "imported_at TEXT)")
    db.executemany("INSERT INTO revisions VALUES (?, ?, ?, ?)", rows)
    timeline = Timeline(rows, "sqlite")
    for minute in range(-1, 22):
        at = BASE + timedelta(minutes=minute)
        for name in history:
            sql = db.execute(f"SELECT action, revision FROM revisions WHERE set_name = ? AND "
                             f"revision = {revision_at('?', '?')}",
                             (name, name, bound(at, "sqlite"))).fetchone()
            expected = None if sql is None or sql[0] == "deleted" else sql[1]
            assert timeline.revision_at(name, at) == expected, (name, minute)
        live = {r[0] for r in db.execute(LIVE_SETS.format(at="?"), (bound(at, "sqlite"),))}
        assert timeline.sets_at(at) == live
