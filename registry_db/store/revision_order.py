"""Legacy histories: revision times put into revision order before the migrations that rely on it.

Until the writers stamped revisions after taking the lock (``history.revision_time``), each
write took its writer's own clock, so a history may hold a revision stamped before the one it
follows (a delete queued behind a writer, two machines with skewed clocks, a clock stepped
back). Migrations 0007 and 0010 build versions and key stretches from the times and need them to
rise with the revision numbers; every reader's "as of T" rule relies on it too.

:func:`repair` runs inside ``db upgrade``'s transaction, before the first migration, while the
schema still keeps a copy per revision (0004 to 0006): each revision stamped at or before the
one it follows (by number) gets that one's time plus one microsecond, and the newest revision
by id stays the latest of all (the writers stamp after it); its ``message`` says from what, and
a current set stamped with a moved time moves with it. Nothing else changes.
:func:`out_of_order` finds such a history at any revision.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

__all__ = ["Moved", "NOTE", "out_of_order", "repair", "repairable"]

_revisions = sa.table("revisions", sa.column("id", sa.Integer),
                      sa.column("set_name", sa.String), sa.column("revision", sa.Integer),
                      sa.column("imported_at", sa.DateTime(timezone=True)),
                      sa.column("message", sa.Text))
_sets = sa.table("profile_sets", sa.column("name", sa.String),
                 sa.column("imported_at", sa.DateTime(timezone=True)))

#: What a moved revision's message gains (``{old}``: its time before, ISO 8601).
NOTE = "[time moved forward from {old} to follow revision order: db upgrade]"

_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class Moved:
    """One revision whose time was moved forward."""

    set_name: str
    revision: int
    before: datetime
    after: datetime


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def out_of_order(conn: Connection) -> bool:
    """Whether some set's revision is stamped at or before the revision it follows."""
    a, b = _revisions.alias("a"), _revisions.alias("b")
    return conn.execute(
        sa.select(sa.literal(1)).select_from(a).join(
            b, (b.c.set_name == a.c.set_name) & (b.c.revision == a.c.revision + 1))
        .where(b.c.imported_at <= a.c.imported_at).limit(1)).first() is not None


def repairable(conn: Connection) -> bool:
    """The schema keeps a copy per revision (0004 to 0006): times can move with nothing else."""
    names = set(sa.inspect(conn).get_table_names())
    return "revisions" in names and "profile_versions" not in names


def repair(conn: Connection) -> list[Moved]:
    """Move every out-of-order revision time forward (see the module); what moved, in order."""
    if not repairable(conn) or not out_of_order(conn):
        return []
    rows = conn.execute(sa.select(_revisions.c.id, _revisions.c.set_name, _revisions.c.revision,
                                  _revisions.c.imported_at).order_by(_revisions.c.id)).all()
    by_set: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        by_set[r.set_name].append(r)
    moved: list[Moved] = []
    times: dict[int, datetime] = {}
    for name in sorted(by_set):
        last: datetime | None = None
        for r in sorted(by_set[name], key=lambda r: r.revision):
            at = _utc(r.imported_at)
            if last is not None and at <= last:
                moved.append(Moved(r.set_name, r.revision, at, last + _TICK))
                at = last + _TICK
            times[r.id] = last = at
    # The writers stamp after the newest revision by id (history.revision_time): keep it the
    # latest, which it is already unless a moved time passed it.
    newest = rows[-1]
    latest = max(times.values())
    is_last_of_its_set = newest.revision == max(r.revision for r in by_set[newest.set_name])
    if times[newest.id] < latest and is_last_of_its_set:
        moved = [m for m in moved if (m.set_name, m.revision) != (newest.set_name,
                                                                  newest.revision)]
        moved.append(Moved(newest.set_name, newest.revision, _utc(newest.imported_at),
                           latest + _TICK))
    for m in moved:
        note = NOTE.format(old=m.before.isoformat())
        conn.execute(sa.update(_revisions)
                     .where(_revisions.c.set_name == m.set_name,
                            _revisions.c.revision == m.revision)
                     .values(imported_at=m.after,
                             message=sa.case((_revisions.c.message.is_(None), note),
                                             else_=_revisions.c.message + "\n" + note)))
        conn.execute(sa.update(_sets).where(_sets.c.name == m.set_name,
                                            _sets.c.imported_at == m.before)
                     .values(imported_at=m.after))
    return sorted(moved, key=lambda m: (m.set_name, m.revision))
