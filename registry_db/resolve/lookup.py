"""The resolver's SQL: the decision itself, made by one statement per run or per batch.

A run's lookup names a key prefix (model, method, K, thinking), the workload's category, the
pin's ``fallback_category`` and the sets in scope (``--set`` or the pin's ``profiles``; none:
every set). One statement decides in the database: it keeps only the profiles of the sets in
scope, prefers the workload's category over the fallback (``preference`` 0 over 1) and counts
the sets that hold the winning key (``set_count``; more than one is a conflict), with standard
SQL that runs unchanged on SQLite (3.25 and later: window functions) and PostgreSQL. It returns
the winning key's rows only, one per (profile, stored rate); :mod:`registry_db.resolve.plan`
builds the answer from them and never chooses between categories or sets itself.

The statements probe the unique index ``uq_profiles_key`` (model, speculative_method,
num_spec_tokens, thinking, category, set_id) with all five key columns bound: each wanted
category is a row of its own, joined by equality. Many runs at once are set-based: the batch's
distinct lookups, one row per (lookup, preference, set in scope), go to the database together
(SQLite: a TEMP table filled with ``executemany``; PostgreSQL: arrays unnested in the query)
and one statement answers all of them; a batch of 100,000 requests is a handful of statements.

Only the ``candidates`` step names the stored tables, so a lookup against other tables (a
registry as of a past date) is another ``candidates`` step. The statements run on the DB-API
cursor of a pooled connection (:func:`cursor`): a resolution is read-only, its SQL is fixed text,
and rows arrive as plain tuples, so SQLAlchemy's execution layer would only add to every call's
latency (measured: one lookup on the benchmark's 100,000-profile SQLite registry, 38 µs of CPU on
the cursor against 100 µs through ``engine.connect()`` and ``exec_driver_sql``, same rows).
Driver errors become the registry's own. Rows stay here: callers get :class:`Winner` tuples by
lookup.
"""

from __future__ import annotations

import contextlib
import operator
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # imported where used: the command line's read-only SQLite path needs neither
    from sqlalchemy.engine import Connection, Engine

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


class Winner(NamedTuple):
    """The database's decision for one lookup: the key it chose and the sets that hold it."""

    #: The category of the chosen key: the workload's, or the fallback when it stood in.
    category: str
    #: How many sets in scope hold the winning key (more than one: a conflict).
    set_count: int
    #: The winning key's profiles, one per set, by set name.
    candidates: tuple[Candidate, ...]


_PREFIX = ("{a}.model = {b}.model AND {a}.speculative_method = {b}.speculative_method"
           " AND {a}.num_spec_tokens = {b}.num_spec_tokens AND {a}.thinking = {b}.thinking")

#: One run, in one statement that only probes indexes (no sort, no temporary table: a window
#: over its few rows cost a third more per resolution on SQLite, measured). A profile of the
#: workload's category is kept; a profile of the fallback is kept only when no set in scope
#: holds the category; ``set_count`` counts the sets in scope that hold the kept key.
#: ``:name`` marks a parameter (``:scope``: the names of the sets in scope, ``{scope}`` and
#: ``{scope_q}`` restrict to them); :func:`one_statement` makes it the driver's.
_LOOKUP_ONE = """SELECT 0 AS lookup_id,
       p.category,
       -- counted once per profile, on its first row (a profile has a row per stored rate)
       CASE WHEN r.position IS NULL OR r.position = 1 THEN (
           SELECT COUNT(*) FROM profiles q{join_q}
           WHERE """ + _PREFIX.format(a="q", b="p") + """ AND q.category = p.category{scope_q}
       ) END AS set_count,
       p.id, s.name, p.acceptance_length, p.method, p.copied_from, pr.source, pr.hardware,
       r.position, r.rate
FROM profiles p
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN profile_rates r ON r.profile_id = p.id
WHERE p.model = :model AND p.speculative_method = :method AND p.num_spec_tokens = :k
  AND p.thinking = :thinking AND p.category IN (:category, :fallback){scope}
  AND (p.category = :category OR NOT EXISTS (
      SELECT 1 FROM profiles q{join_q}
      WHERE """ + _PREFIX.format(a="q", b="p") + """ AND q.category = :category{scope_q}))"""

_MARKER = {"sqlite": "?", "postgresql": "%s"}
_PARAMETER = re.compile(r":(\w+)")
_STATEMENTS: dict[tuple[str, int], tuple[str, tuple[str, ...]]] = {}


def one_statement(dialect: str, scoped: int) -> tuple[str, tuple[str, ...]]:
    """The one-run statement for ``dialect`` with ``scoped`` set names in scope (0: every set),
    and the names of its parameters in the order the driver binds them."""
    found = _STATEMENTS.get((dialect, scoped))
    if found is not None:
        return found
    join_q, scope, scope_q = "", "", ""
    if scoped:
        join_q = "\n        JOIN profile_sets qs ON qs.id = q.set_id"
        scope, scope_q = " AND s.name IN (:scope)", " AND qs.name IN (:scope)"
    template = _LOOKUP_ONE.format(join_q=join_q, scope=scope, scope_q=scope_q)
    marker, order = _MARKER[dialect], []

    def positional(m: re.Match) -> str:
        order.append(m.group(1))
        return ", ".join([marker] * scoped) if m.group(1) == "scope" else marker

    found = _STATEMENTS[(dialect, scoped)] = (_PARAMETER.sub(positional, template), tuple(order))
    return found


#: Where each named parameter sits in a :class:`Lookup`.
_FIELDS = {"model": 0, "method": 1, "k": 2, "thinking": 3, "category": 4, "fallback": 5}


def one_parameters(lookup: Lookup, order: Sequence[str]) -> tuple:
    """``lookup``'s values in a one-run statement's parameter ``order``."""
    if lookup.scope is None:
        getter = _GETTERS.get(tuple(order))
        if getter is None:
            getter = _GETTERS[tuple(order)] = operator.itemgetter(*(_FIELDS[n] for n in order))
        return getter(lookup)
    out: list = []
    for name in order:
        if name == "scope":
            out.extend(lookup.scope)
        else:
            out.append(lookup[_FIELDS[name]])
    return tuple(out)


_GETTERS: dict[tuple[str, ...], operator.itemgetter] = {}


#: The one-run statement over every set, per dialect, and its parameters' order.
LOOKUP_ONE = {d: one_statement(d, 0)[0] for d in _MARKER}

#: Many runs: one row per (lookup, preference, set in scope; '' for every set), numbered so
#: that the rows come out of the key table in (lookup, preference) order. The one window then
#: needs no sort on SQLite: its rank-1 rows are the preferred category that some set in scope
#: holds, and their count (the window's default frame ends at the current row's last peer) is
#: the number of those sets.
_MANY_COLUMNS = ("lookup_id, preference, model, speculative_method, num_spec_tokens, thinking,"
                 " category, set_name")
_LOOKUP_MANY = """WITH candidates AS (
    SELECT t.lookup_id, t.preference, p.category, p.id AS profile_id, s.name AS set_name,
           p.acceptance_length, p.method, p.copied_from, p.provenance_id
    FROM {source}
    JOIN profiles p ON """ + _PREFIX.format(a="p", b="t") + """ AND p.category = t.category
    JOIN profile_sets s ON s.id = p.set_id
    WHERE t.set_name = '' OR t.set_name = s.name
),
ranked AS (
    SELECT c.*, RANK() OVER w AS place, COUNT(*) OVER w AS set_count
    FROM candidates c
    WINDOW w AS (PARTITION BY c.lookup_id ORDER BY c.preference)
)
SELECT r.lookup_id, r.category, r.set_count, r.profile_id, r.set_name,
       r.acceptance_length, r.method, r.copied_from, pr.source, pr.hardware,
       rt.position, rt.rate
FROM ranked r
LEFT JOIN provenances pr ON pr.id = r.provenance_id
LEFT JOIN profile_rates rt ON rt.profile_id = r.profile_id
WHERE r.place = 1"""

#: Many runs on SQLite: the batch's lookup rows in a TEMP table joined to the profiles' index;
#: its primary key is the order the window reads them in.
SQLITE_KEYS_TABLE = "registry_resolve_keys"
SQLITE_KEYS_DDL = (
    f"CREATE TEMP TABLE {SQLITE_KEYS_TABLE} (lookup_id INTEGER NOT NULL, "
    "preference INTEGER NOT NULL, model TEXT NOT NULL, speculative_method TEXT NOT NULL, "
    "num_spec_tokens INTEGER NOT NULL, thinking TEXT NOT NULL, category TEXT NOT NULL, "
    "set_name TEXT NOT NULL, PRIMARY KEY (lookup_id, preference, set_name)) WITHOUT ROWID")
SQLITE_KEYS_INSERT = f"INSERT INTO temp.{SQLITE_KEYS_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
SQLITE_LOOKUP_MANY = _LOOKUP_MANY.format(source=f"temp.{SQLITE_KEYS_TABLE} t")

#: Many runs on PostgreSQL: the lookup rows as eight parallel arrays, unnested into rows.
PG_ARRAYS = ("ids", "preferences", "models", "methods", "ks", "thinkings", "categories",
             "set_names")
PG_LOOKUP_MANY = _LOOKUP_MANY.format(
    source="unnest(%(ids)s::INTEGER[], %(preferences)s::INTEGER[], %(models)s::TEXT[],"
           " %(methods)s::TEXT[], %(ks)s::INTEGER[], %(thinkings)s::TEXT[],"
           " %(categories)s::TEXT[], %(set_names)s::TEXT[])"
           f" AS t({_MANY_COLUMNS})")


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
    from sqlalchemy.engine import Connection

    from registry_db.store.engine import translated

    engine = bind.engine
    dialect = engine.dialect.name
    with translated(str(engine.url)):
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


def stored_among(c: Cursor, names: Sequence[str]) -> list[str]:
    """Which of ``names`` are stored sets (one query on the unique name index, whatever the
    number of sets in the database)."""
    marker = "?" if c.dialect == "sqlite" else "%s"
    markers = ", ".join([marker] * len(names))
    c.cur.execute(f"SELECT name FROM profile_sets WHERE name IN ({markers})", tuple(names))
    return [name for (name,) in c.cur.fetchall()]


def set_names(c: Cursor) -> list[str]:
    """Every stored set's name (one query; the resolver checks named sets against them)."""
    c.cur.execute("SELECT name FROM profile_sets")
    return [name for (name,) in c.cur.fetchall()]


def lookup_one(c: Cursor, lookup: Lookup) -> Winner | None:
    """The database's decision for one run: its winning key's profiles, or None (no profile)."""
    statement, order = one_statement(c.dialect, len(lookup.scope or ()))
    c.cur.execute(statement, one_parameters(lookup, order))
    return winners((lookup,), c.cur.fetchall()).get(lookup)


def lookup_many(c: Cursor, lookups: Iterable[Lookup]) -> dict[Lookup, Winner]:
    """The decision for every lookup in ``lookups`` (distinct or not), in a few set-based
    statements; a lookup that no profile answers is absent from the result."""
    # Sorted, so that the index is probed in its own order: neighbouring keys share pages, which
    # halves the join's time on a large registry.
    lookups = sorted(set(lookups), key=_PREFIX_ORDER)
    if not lookups:
        return {}
    if c.dialect == "postgresql":
        decided: dict[Lookup, Winner] = {}
        for start in range(0, len(lookups), PG_CHUNK):
            chunk = lookups[start:start + PG_CHUNK]
            columns = [list(col) for col in zip(*_lookup_rows(chunk))]
            c.cur.execute(PG_LOOKUP_MANY, dict(zip(PG_ARRAYS, columns)))
            decided.update(winners(chunk, c.cur.fetchall()))
        return decided
    # A TEMP table lives in the connection's own temp database, so it needs no write access to
    # the registry (a read-only connection can make one) and no other connection sees it.
    c.cur.execute(f"DROP TABLE IF EXISTS temp.{SQLITE_KEYS_TABLE}")
    c.cur.execute(SQLITE_KEYS_DDL)
    try:
        c.cur.executemany(SQLITE_KEYS_INSERT, _lookup_rows(lookups))
        c.cur.execute(SQLITE_LOOKUP_MANY)
        return winners(lookups, c.cur.fetchall())
    finally:
        c.cur.execute(f"DROP TABLE IF EXISTS temp.{SQLITE_KEYS_TABLE}")


#: The sort key of lookups: their key prefix (categories may be None, which does not sort).
_PREFIX_ORDER = operator.itemgetter(0, 1, 2, 3)


def _lookup_rows(lookups: Sequence[Lookup]) -> list[tuple]:
    """The lookups as rows of the many-runs statement, numbered by their position."""
    rows: list[tuple] = []
    add = rows.append
    for i, (model, method, k, thinking, category, fallback, scope) in enumerate(lookups):
        names = scope or ("",)
        if category is not None:  # preference 0: the workload's category
            for name in names:
                add((i, 0, model, method, k, thinking, category, name))
        if fallback is not None and fallback != category:  # preference 1: the fallback
            for name in names:
                add((i, 1, model, method, k, thinking, fallback, name))
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
            position, rate in rows:
        if position is None:  # no stored rates: the profile's one and only row
            cand = new(Candidate, (set_name, al, None, source, hardware, how, copied))
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
                               [(position, rate)]]
    for lid, category, count, set_name, al, source, hardware, how, copied, rates \
            in rated.values():
        rates.sort()
        cand = new(Candidate, (set_name, al, tuple(r for _, r in rates), source, hardware, how,
                               copied))
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
