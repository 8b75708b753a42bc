"""Which sets the registry held at a time, for a batch whose lines name several times.

A single resolution as of a time asks the database (:func:`registry_db.resolve.lookup.stored_among`
on the revisions' index). A batch may name many distinct times; asking once per time would cost a
query each, so :class:`Timeline` reads every revision's (set, number, action, time) once and
answers for any time in Python, with the statement's own rule
(:func:`registry_db.store.as_of.revision_at`): a set's registry at time T is its revision
stamped last at or before T, unless that revision is a deletion. The times
are compared as the database compares them (:func:`registry_db.resolve.lookup.bound`: text in the
stored format on SQLite, ``timestamptz`` on PostgreSQL), so the answer is the statement's.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from registry_db.resolve.lookup import Cursor, bound


class Timeline:
    """Every set's revisions, ordered by time."""

    def __init__(self, rows: Iterable[tuple[str, int, str, Any]], dialect: str):
        self.dialect = dialect
        per_set: dict[str, list[tuple[Any, int, str]]] = {}
        for name, number, action, at in rows:
            per_set.setdefault(name, []).append((at, number, action))
        #: name -> (times in order, and at each, that revision's number and action)
        self._sets: dict[str, tuple[list[Any], list[tuple[int, str]]]] = {}
        for name, revs in per_set.items():
            revs.sort()
            self._sets[name] = ([at for at, _, _ in revs],
                                [(number, action) for _, number, action in revs])

    @classmethod
    def read(cls, c: Cursor) -> Timeline:
        """Every revision of every set, in one query."""
        c.cur.execute("SELECT set_name, revision, action, imported_at FROM revisions")
        return cls(c.cur.fetchall(), c.dialect)

    def revision_at(self, name: str, as_of: datetime) -> int | None:
        """The revision of set ``name`` that was the registry at ``as_of`` (None: the set was
        not there: not yet imported, or deleted)."""
        found = self._sets.get(name)
        if found is None:
            return None
        times, latest = found
        i = bisect.bisect_right(times, bound(as_of, self.dialect))
        if i == 0:
            return None
        number, action = latest[i - 1]
        return None if action == "deleted" else number

    def sets_at(self, as_of: datetime) -> frozenset[str]:
        """The names of the sets the registry held at ``as_of``."""
        return frozenset(name for name in self._sets
                         if self.revision_at(name, as_of) is not None)


class KnownAt:
    """The set names a batch's request as of a time is checked against: the sets of that
    time, from every revision read once, and only when a request names sets."""

    def __init__(self, c: Any):
        self.c = c
        self.timeline: Timeline | None = None
        self.sets: dict[datetime, frozenset[str]] = {}

    def __call__(self, at: datetime | None, names_sets: bool) -> frozenset[str]:
        """The sets at ``at``; empty when there is no time or the request names no set."""
        if at is None or not names_sets:
            return frozenset()
        found = self.sets.get(at)
        if found is None:
            if self.timeline is None:
                self.timeline = Timeline.read(self.c)
            found = self.sets[at] = self.timeline.sets_at(at)
        return found
