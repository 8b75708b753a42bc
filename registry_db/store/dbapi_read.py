"""The listings of :mod:`registry_db.store.read` on a bare DB-API cursor, for the command line's
read commands (``list``, ``profiles``, ``conflicts``, ``db current``), which open the registry
with :mod:`.sqlite_read` or :mod:`.pg_read` and so never import SQLAlchemy.

Each function runs the statement :mod:`.read` builds, written out here once for both drivers
(``?`` markers, made ``%s`` for psycopg), and builds the same objects from its rows, which a test
holds equal to :mod:`.read`'s on both backends. ``cur`` is a ``sqlite3`` or psycopg cursor and
``dialect`` its SQL (``sqlite`` or ``postgresql``), as
:func:`registry_db.resolve.lookup.cursor` yields them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from registry_db.errors import NotFound
from registry_db.model import PROFILE_KEY_FIELDS
from registry_db.store.messages import unknown_set_message
from registry_db.store.sqlite_read import OUT_OF_ORDER
from registry_db.store.stored_counts import counts_from_row
from registry_db.store.summaries import Conflict, ProfileSummary, SetSummary, utc

__all__ = ["conflicts", "current_revision", "list_profiles", "list_sets", "set_names",
           "times_out_of_order"]

_KEY = ", ".join(f"profiles.{k}" for k in PROFILE_KEY_FIELDS)

_LIST_SETS = (
    "SELECT profile_sets.name, profile_sets.source_file, "
    "(SELECT count(*) FROM profiles WHERE profiles.set_id = profile_sets.id), "
    "(SELECT count(*) FROM set_caveats WHERE set_caveats.set_id = profile_sets.id), "
    "profile_sets.imported_at, profile_sets.content_hash "
    "FROM profile_sets ORDER BY profile_sets.name")

_CONFLICTS = (
    f"SELECT {_KEY}, profile_sets.name FROM profiles "
    f"JOIN (SELECT {_KEY.replace('profiles.', '')} FROM profiles "
    f"GROUP BY {_KEY.replace('profiles.', '')} HAVING count(*) > 1) AS dup ON "
    + " AND ".join(f"profiles.{k} = dup.{k}" for k in PROFILE_KEY_FIELDS)
    + f" JOIN profile_sets ON profile_sets.id = profiles.set_id "
      f"ORDER BY {_KEY}, profile_sets.name")

_PROFILES = (
    f"SELECT {_KEY}, profile_sets.name, profiles.acceptance_length, profiles.method, "
    "provenances.source, profile_counts.drafts, profile_counts.draft_tokens, "
    "profile_counts.accepted_tokens, profile_counts.accepted_per_position "
    "FROM profiles JOIN profile_sets ON profiles.set_id = profile_sets.id "
    "LEFT OUTER JOIN provenances ON provenances.id = profiles.provenance_id "
    "LEFT OUTER JOIN profile_counts ON profile_counts.profile_id = profiles.id")



def _sql(statement: str, dialect: str) -> str:
    """``statement``'s ``?`` markers as the driver takes them (the statements hold no other
    ``?`` and no ``%``)."""
    return statement if dialect == "sqlite" else statement.replace("?", "%s")


def _time(value: Any) -> datetime:
    """A stored time as SQLAlchemy's ``DateTime`` reads it: SQLite's text by ``fromisoformat``
    (SQLAlchemy 2's own reading), PostgreSQL's ``timestamptz`` as it comes; then UTC."""
    return utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


def set_names(cur: Any, dialect: str) -> list[str]:
    """The stored sets' names, sorted (:func:`.read.set_names`)."""
    cur.execute("SELECT profile_sets.name FROM profile_sets ORDER BY profile_sets.name")
    return [n for (n,) in cur.fetchall()]


def list_sets(cur: Any, dialect: str) -> list[SetSummary]:
    """Every stored set by name (:func:`.read.list_sets`)."""
    cur.execute(_LIST_SETS)
    return [SetSummary(n, f, int(np), int(nc), _time(t), h)
            for n, f, np, nc, t, h in cur.fetchall()]


def conflicts(cur: Any, dialect: str) -> list[Conflict]:
    """Profile keys held by two or more sets (:func:`.read.conflicts`)."""
    grouped: dict[tuple, list[str]] = defaultdict(list)
    cur.execute(_CONFLICTS)
    for *key, name in cur.fetchall():
        grouped[tuple(key)].append(name)
    return [Conflict(key[0], key[1], key[2], key[3], key[4], tuple(names))
            for key, names in grouped.items()]


def list_profiles(cur: Any, dialect: str, *, model: str | None = None,
                  method: str | None = None, k: int | None = None,
                  thinking: str | None = None, category: str | None = None,
                  sets: Sequence[str] | None = None) -> list[ProfileSummary]:
    """The stored profiles that match the filters, by key then set
    (:func:`.read.list_profiles`, whose unknown set is the same :class:`NotFound`)."""
    where: list[str] = []
    params: list[Any] = []
    for column, value in (("model", model), ("speculative_method", method),
                          ("num_spec_tokens", k), ("thinking", thinking),
                          ("category", category)):
        if value is not None:
            where.append(f"profiles.{column} = ?")
            params.append(value)
    if sets:
        wanted = sorted(set(sets))
        cur.execute(_sql("SELECT profile_sets.name FROM profile_sets WHERE profile_sets.name "
                         f"IN ({', '.join('?' * len(wanted))})", dialect), wanted)
        known = {n for (n,) in cur.fetchall()}
        missing = [n for n in sets if n not in known]
        if missing:
            raise NotFound(unknown_set_message(missing[0], set_names(cur, dialect)))
        where.append(f"profile_sets.name IN ({', '.join('?' * len(known))})")
        params.extend(sorted(known))
    statement = _PROFILES + (" WHERE " + " AND ".join(where) if where else "") + \
        f" ORDER BY {_KEY}, profile_sets.name"
    cur.execute(_sql(statement, dialect), params)
    return [ProfileSummary(
        m, sm, kk, t, c, profile_set=name, acceptance_length=al, method=how, source=source,
        counts=None if drafts is None else counts_from_row(drafts, dt, at, per))
        for m, sm, kk, t, c, name, al, how, source, drafts, dt, at, per in cur.fetchall()]


def current_revision(cur: Any, dialect: str) -> str | None:
    """The schema revision ``alembic_version`` holds (the reader opened it at the head)."""
    cur.execute("SELECT version_num FROM alembic_version")
    row = cur.fetchone()
    return row[0] if row else None


def times_out_of_order(cur: Any, dialect: str) -> bool:
    """:func:`.migrate.times_out_of_order` at the head (where ``revisions`` always exists)."""
    cur.execute(OUT_OF_ORDER)
    return cur.fetchone() is not None
