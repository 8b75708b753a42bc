"""The resolver's SQL: the decision itself, made by one statement per run or per batch.

A run's lookup names a key prefix (model, method, K, thinking), the workload's category, the
pin's ``fallback_category`` and the sets in scope (``--set`` or the pin's ``profiles``; none:
every set). One statement decides in the database: it keeps only the profiles of the sets in
scope, prefers the workload's category over the fallback (``preference`` 0 over 1) and counts
the sets that hold the winning key (``set_count``; more than one is a conflict), with standard
SQL that runs unchanged on SQLite (3.25 and later: window functions) and PostgreSQL. It returns
the winning key's rows only, one per (profile, stored rate); :mod:`registry_db.resolve.plan`
builds the answer from them and never chooses between categories or sets itself. The
statements' text is in :mod:`registry_db.resolve.statements`; this module runs them.

The statements probe the unique index ``uq_profiles_key`` (model, speculative_method,
num_spec_tokens, thinking, category, set_id) with all five key columns bound: each wanted
category is a row of its own, joined by equality. Many runs at once are set-based: the batch's
distinct lookups, one row per (lookup, preference, set in scope), go to the database together
(SQLite: a TEMP table filled with ``executemany``; PostgreSQL: one JSON parameter expanded
into rows in the query) and one statement answers all of them; a batch of 100,000 requests
is a handful of statements.

The many-runs statement names the stored tables through one set of placeholders, so a lookup
against other tables (a registry as of a past date) is the same statement over the revisions.
The statements run on the DB-API cursor of a pooled connection (:func:`cursor`): a resolution
is read-only, its SQL is fixed text, and rows arrive as plain tuples, so SQLAlchemy's execution
layer would only add to every call's latency (measured: one lookup on the benchmark's
100,000-profile SQLite registry, 38 µs of CPU on the cursor against 100 µs through
``engine.connect()`` and ``exec_driver_sql``, same rows).
Driver errors become the registry's own. Rows stay here: callers get :class:`Winner` tuples by
lookup.
"""

from __future__ import annotations

import contextlib
import operator
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from registry_db.inputs.as_of import bound
from registry_db.resolve.statements import (
    LIVE_SETS,
    LOOKUP_ONE,
    PG_ARRAYS,
    PG_AS_OF_ARRAYS,
    PG_LOOKUP_MANY,
    PG_LOOKUP_MANY_AS_OF,
    SQLITE_AS_OF_DDL,
    SQLITE_AS_OF_INSERT,
    SQLITE_AS_OF_TABLE,
    SQLITE_KEYS_DDL,
    SQLITE_KEYS_INSERT,
    SQLITE_KEYS_TABLE,
    SQLITE_LOOKUP_MANY,
    SQLITE_LOOKUP_MANY_AS_OF,
    one_statement,
    pg_parameters,
)

if TYPE_CHECKING:  # imported where used: the command line's read-only SQLite path needs neither
    from sqlalchemy.engine import Connection, Engine

#: The statements' names are re-exported: callers and tests read them from here.
__all__ = ["Candidate", "Cursor", "Key", "LIVE_SETS", "LOOKUP_ONE", "Lookup", "PG_ARRAYS",
           "PG_AS_OF_ARRAYS", "PG_CHUNK", "PG_LOOKUP_MANY", "PG_LOOKUP_MANY_AS_OF",
           "SQLITE_AS_OF_DDL", "SQLITE_AS_OF_INSERT", "SQLITE_AS_OF_TABLE",
           "SQLITE_KEYS_DDL", "SQLITE_KEYS_INSERT", "SQLITE_KEYS_TABLE",
           "SQLITE_LOOKUP_MANY", "SQLITE_LOOKUP_MANY_AS_OF", "Winner", "cursor",
           "lookup_many", "lookup_one", "one_parameters", "one_statement",
           "pg_parameters", "set_names", "stored_among", "winners"]

#: (model, speculative_method, num_spec_tokens, thinking, category): a profile's key.
Key = tuple[str, str, int, str, str]

#: Lookups per PostgreSQL statement: bounds the arrays' memory, not the round trips' count.
PG_CHUNK = 50_000


class Lookup(NamedTuple):
    """What one run looks up: the key prefix, up to two categories, the sets in scope."""

    model: str
    method: str
    k: int
    thinking: str
    #: The workload's category (preferred), or None when the workload states none.
    category: str | None
    #: The pin's fallback_category, or None.
    fallback: str | None
    #: The sets in scope, sorted; None: every set.
    scope: tuple[str, ...] | None = None
    #: The registry as it stood at this UTC time (aware); None: as it stands.
    as_of: datetime | None = None


class Candidate(NamedTuple):
    """One stored profile of the winning key: the set holding it and what it says."""

    profile_set: str
    acceptance_length: float
    #: The stored per-position rates, or None when the profile states none.
    rates: tuple[float, ...] | None
    source: str | None
    hardware: str | None
    method: str
    copied_from: str | None
    #: The revision of its set that holds it (the set's current one, or the one of the time).
    revision: int


class Winner(NamedTuple):
    """The database's decision for one lookup: the key it chose and the sets that hold it."""

    #: The category of the chosen key: the workload's, or the fallback when it stood in.
    category: str
    #: How many sets in scope hold the winning key (more than one: a conflict).
    set_count: int
    #: The winning key's profiles, one per set, by set name.
    candidates: tuple[Candidate, ...]


#: Where each named parameter sits in a :class:`Lookup`.
_FIELDS = {"model": 0, "method": 1, "k": 2, "thinking": 3, "category": 4, "fallback": 5}


def one_parameters(lookup: Lookup, order: Sequence[str], dialect: str | None = None) -> tuple:
    """``lookup``'s values in a one-run statement's parameter ``order`` (``dialect``: how its
    time is bound, needed when it has one)."""
    if lookup.scope is None and lookup.as_of is None:
        getter = _GETTERS.get(tuple(order))
        if getter is None:
            getter = _GETTERS[tuple(order)] = operator.itemgetter(*(_FIELDS[n] for n in order))
        return getter(lookup)
    at = None if lookup.as_of is None else bound(lookup.as_of, dialect or "")
    out: list = []
    for name in order:
        if name == "scope":
            out.extend(lookup.scope or ())
        elif name == "as_of":
            out.append(at)
        else:
            out.append(lookup[_FIELDS[name]])
    return tuple(out)


_GETTERS: dict[tuple[str, ...], operator.itemgetter] = {}


class Cursor(NamedTuple):
    """A DB-API cursor and the dialect whose SQL it speaks (``sqlite`` or ``postgresql``)."""

    cur: Any
    dialect: str


@contextlib.contextmanager
def cursor(bind: Engine | Connection | sqlite3.Connection, *,
           snapshot: bool = False) -> Iterator[Cursor]:
    """A cursor on the engine's pooled connection (returned afterwards) or on the caller's.

    On the caller's connection the statements join whatever transaction it has. On an engine's,
    ``snapshot`` makes them read one snapshot in one transaction, which the pool rolls back on
    return; without it each statement reads on its own (autocommit), which spares PostgreSQL
    the BEGIN and ROLLBACK round trips around a one-query resolution. Driver errors are
    translated.

    A bare ``sqlite3`` connection (the command line's read-only path,
    :mod:`registry_db.store.sqlite_read`) is used as it is, its errors left to the caller, which
    then takes the engine path: SQLAlchemy is not imported for it.
    """
    if isinstance(bind, sqlite3.Connection):
        plain = bind.cursor()
        try:
            if snapshot:
                plain.execute("BEGIN")
            yield Cursor(plain, "sqlite")
        finally:
            if snapshot and bind.in_transaction:
                bind.rollback()
            plain.close()
        return
    Connection, translated = _ENGINE_SIDE or _engine_side()
    engine = bind.engine
    dialect = engine.dialect.name
    with translated(engine.url):
        if isinstance(bind, Connection):
            own, pooled = None, bind.connection
        else:
            own = pooled = engine.raw_connection()
        try:
            dbapi = pooled.dbapi_connection
            assert dbapi is not None  # checked out: a live DB-API connection
            autocommit = own is not None and not snapshot and dialect == "postgresql"
            if autocommit:
                dbapi.autocommit = True
            cur = dbapi.cursor()
            try:
                if snapshot and own is not None and dialect == "sqlite":
                    cur.execute("BEGIN")
                elif snapshot and own is not None:
                    # READ COMMITTED gives each statement its own snapshot: a batch's set names
                    # and profiles could come from before and after a concurrent import.
                    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield Cursor(cur, dialect)
            finally:
                cur.close()
                if autocommit:
                    dbapi.autocommit = False
        finally:
            if own is not None:
                own.close()


#: SQLAlchemy's Connection class and the error translator, imported on the first engine cursor
#: (not at import: the command line's sqlite3 path never needs them), then kept: importing
#: them on every call cost about 2.5 µs of a resolution's 60.
_ENGINE_SIDE: tuple[Any, Any] | None = None


def _engine_side() -> tuple[Any, Any]:
    global _ENGINE_SIDE
    from sqlalchemy.engine import Connection

    from registry_db.store.engine import translated

    _ENGINE_SIDE = (Connection, translated)
    return _ENGINE_SIDE


def _markers(c: Cursor, n: int) -> str:
    return ", ".join(["?" if c.dialect == "sqlite" else "%s"] * n)




def stored_among(c: Cursor, names: Sequence[str], as_of: datetime | None = None) -> list[str]:
    """Which of ``names`` are stored sets (one query on the unique name index, whatever the
    number of sets in the database); ``as_of``: which were sets at that time (one query on
    the revisions' (set_name, revision) index)."""
    if as_of is None:
        c.cur.execute(f"SELECT name FROM profile_sets WHERE name IN "
                      f"({_markers(c, len(names))})", tuple(names))
    else:
        at = _markers(c, 1)
        c.cur.execute(LIVE_SETS.format(at=at) + f" AND v.set_name IN ({_markers(c, len(names))})",
                      (bound(as_of, c.dialect), *names))
    return [name for (name,) in c.cur.fetchall()]


def set_names(c: Cursor, as_of: datetime | None = None) -> list[str]:
    """Every stored set's name, or every set's of the registry as of ``as_of`` (one query; the
    resolver checks named sets against them)."""
    if as_of is None:
        c.cur.execute("SELECT name FROM profile_sets")
    else:
        c.cur.execute(LIVE_SETS.format(at=_markers(c, 1)), (bound(as_of, c.dialect),))
    return [name for (name,) in c.cur.fetchall()]


def lookup_one(c: Cursor, lookup: Lookup) -> Winner | None:
    """The database's decision for one run: its winning key's profiles, or None (no profile)."""
    statement, order = one_statement(c.dialect, len(lookup.scope or ()),
                                     lookup.as_of is not None, lookup.fallback is not None)
    c.cur.execute(statement, one_parameters(lookup, order, c.dialect))
    return winners((lookup,), c.cur.fetchall()).get(lookup)


def lookup_many(c: Cursor, lookups: Iterable[Lookup]) -> dict[Lookup, Winner]:
    """The decision for every lookup in ``lookups`` (distinct or not), in a few set-based
    statements; a lookup that no profile answers is absent from the result. Lookups as of a
    time go to the revisions in statements of their own."""
    # Sorted by model, so that the index is probed a model's range at a time: neighbouring keys
    # share pages (the benchmark's 62,000 lookups on SQLite: 0.62 s shuffled, 0.43 s by model,
    # 0.42 s by the whole key prefix, whose sort costs 0.10 s against 0.01 s by model alone).
    lookups = sorted(set(lookups), key=_MODEL)
    if not lookups:
        return {}
    now = [lk for lk in lookups if lk.as_of is None]
    decided = _lookup_many(c, now, False) if now else {}
    if len(now) < len(lookups):
        decided.update(_lookup_many(c, [lk for lk in lookups if lk.as_of is not None], True))
    return decided


def _lookup_many(c: Cursor, lookups: list[Lookup], as_of: bool) -> dict[Lookup, Winner]:
    if c.dialect == "postgresql":
        decided: dict[Lookup, Winner] = {}
        for start in range(0, len(lookups), PG_CHUNK):
            chunk = lookups[start:start + PG_CHUNK]
            rows = _lookup_rows(chunk, as_of, c.dialect)
            if as_of:
                c.cur.execute(PG_LOOKUP_MANY_AS_OF,
                              dict(zip(PG_AS_OF_ARRAYS, [list(col) for col in zip(*rows)])))
            else:
                c.cur.execute(PG_LOOKUP_MANY, pg_parameters(rows))
            decided.update(winners(chunk, c.cur.fetchall()))
        return decided
    table, ddl, insert, statement = (
        (SQLITE_AS_OF_TABLE, SQLITE_AS_OF_DDL, SQLITE_AS_OF_INSERT, SQLITE_LOOKUP_MANY_AS_OF)
        if as_of else
        (SQLITE_KEYS_TABLE, SQLITE_KEYS_DDL, SQLITE_KEYS_INSERT, SQLITE_LOOKUP_MANY))
    # A TEMP table lives in the connection's own temp database, so it needs no write access to
    # the registry (a read-only connection can make one) and no other connection sees it.
    c.cur.execute(f"DROP TABLE IF EXISTS temp.{table}")
    c.cur.execute(ddl)
    try:
        c.cur.executemany(insert, _lookup_rows(lookups, as_of, c.dialect))
        c.cur.execute(statement)
        return winners(lookups, c.cur.fetchall())
    finally:
        c.cur.execute(f"DROP TABLE IF EXISTS temp.{table}")


#: The sort key of lookups: their model (text; a stable sort keeps the rest in batch order).
_MODEL = operator.itemgetter(0)


def _lookup_rows(lookups: Sequence[Lookup], as_of: bool = False,
                 dialect: str = "sqlite") -> list[tuple]:
    """The lookups as rows of the many-runs statement, numbered by their position (``as_of``:
    each row ends with its lookup's time, bound for ``dialect``)."""
    rows: list[tuple] = []
    add = rows.append
    for i, (model, method, k, thinking, category, fallback, scope, at) in enumerate(lookups):
        names = scope or ("",)
        more = (bound(at, dialect),) if as_of and at is not None else ()
        if category is not None:  # preference 0: the workload's category
            for name in names:
                add((i, 0, model, method, k, thinking, category, name, *more))
        if fallback is not None and fallback != category:  # preference 1: the fallback
            for name in names:
                add((i, 1, model, method, k, thinking, fallback, name, *more))
    return rows


def winners(lookups: Sequence[Lookup], rows: Iterable[Sequence]) -> dict[Lookup, Winner]:
    """Rows of the statements above as one :class:`Winner` per lookup (``lookups[lookup_id]``).

    Every row of a lookup carries the same category, and the winner's set count (the one-run
    statement puts it on a profile's first rate's row only); a profile with stored rates has
    one row per rate, in no particular order.
    """
    # Most lookups have one profile without stored rates: one row, kept as a tuple; a list
    # only when a key has several sets. tuple.__new__ skips the named tuples' Python __new__.
    new = tuple.__new__
    found: dict[int, Any] = {}
    rated: dict[tuple[int, int], list] = {}
    for lid, category, count, pid, set_name, al, how, copied, source, hardware, \
            position, rate, revision in rows:
        if position is None:  # no stored rates: the profile's one and only row
            cand = new(Candidate, (set_name, al, None, source, hardware, how, copied, revision))
            head = found.get(lid)
            if head is None:
                found[lid] = (category, count, cand)
            elif type(head) is tuple:
                found[lid] = [*head, cand]
            else:
                head.append(cand)
        elif (lid, pid) in rated:  # one profile may answer several lookups
            entry = rated[lid, pid]
            entry[-1].append((position, rate))
            if count is not None:  # the set count rides on the profile's first rate's row
                entry[2] = count
        else:
            rated[lid, pid] = [lid, category, count, set_name, al, source, hardware, how, copied,
                               revision, [(position, rate)]]
    for lid, category, count, set_name, al, source, hardware, how, copied, revision, rates \
            in rated.values():
        rates.sort()
        cand = new(Candidate, (set_name, al, tuple(r for _, r in rates), source, hardware, how,
                               copied, revision))
        head = found.get(lid)
        if head is None:
            found[lid] = (category, count, cand)
        elif type(head) is tuple:
            found[lid] = [*head, cand]
        else:
            head.append(cand)
    decided = {}
    for lid, head in found.items():
        if type(head) is tuple:
            candidates: tuple = (head[2],)
        else:  # the same key in several sets: by set name, for the message
            candidates = tuple(sorted(head[2:]))
        decided[lookups[lid]] = new(Winner, (head[0], head[1], candidates))
    return decided
