"""The resolver's SQL: every profile that could answer a run, in one indexed query.

A run's lookup needs the profiles of one key prefix (model, method, K, thinking) in one or two
categories (the workload's and the pin's ``fallback_category``), in every set. That is one query
on the unique index ``uq_profiles_key`` (model, speculative_method, num_spec_tokens, thinking,
category, set_id): the few rows it returns say at once which category has a curve, in how many
sets (a conflict), and whether the fallback has one. The resolver decides from those rows in
Python; nothing here scans the profiles table.

Many runs at once are set-based: the distinct lookup keys of the whole batch go to the database
together (SQLite: a TEMP table filled with ``executemany``; PostgreSQL: arrays unnested in the
query) and one join against the same index answers all of them. A batch of 100,000 requests is
a handful of statements, not 100,000 round trips.

The statements run on the DB-API cursor of a pooled connection (:func:`cursor`): a resolution
is read-only, its SQL is fixed text, and rows arrive as plain tuples, so SQLAlchemy's execution
layer would only add to every call's latency (measured: one lookup on the benchmark's
100,000-profile SQLite registry, 38 µs of CPU on the cursor against 100 µs through
``engine.connect()`` and ``exec_driver_sql``, same rows). Driver errors become the registry's own.
Rows stay here: callers get :class:`Candidate` tuples grouped by profile key.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING, Any, Iterable, Iterator, NamedTuple, Sequence

if TYPE_CHECKING:  # imported where used: the command line's read-only SQLite path needs neither
    from sqlalchemy.engine import Connection, Engine

#: (model, speculative_method, num_spec_tokens, thinking, category)
Key = tuple[str, str, int, str, str]

#: Keys per PostgreSQL statement: bounds the arrays' memory, not the round trips' count.
PG_CHUNK = 50_000


class Candidate(NamedTuple):
    """One stored profile that matches a lookup key: the set holding it and what it says."""

    profile_set: str
    acceptance_length: float
    #: The stored per-position rates, or None when the profile states none.
    rates: tuple[float, ...] | None
    source: str | None
    hardware: str | None
    method: str
    copied_from: str | None


#: What every lookup selects after the key's tag: one row per (profile, stored rate).
_SELECT = """p.id, s.name, p.acceptance_length, p.method, p.copied_from, pr.source, pr.hardware,
       r.position, r.rate
FROM {source}
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN profile_rates r ON r.profile_id = p.id"""

#: One run: the key prefix and up to two categories (the workload's and the fallback); the
#: category tags each row. ``{p}`` is the driver's parameter marker.
_LOOKUP_ONE = ("SELECT p.category, " + _SELECT.format(source="profiles p")
               + "\nWHERE p.model = {p} AND p.speculative_method = {p}"
               " AND p.num_spec_tokens = {p} AND p.thinking = {p} AND p.category IN ({p}, {p})")
LOOKUP_ONE = {"sqlite": _LOOKUP_ONE.format(p="?"), "postgresql": _LOOKUP_ONE.format(p="%s")}

_KEY_JOIN = ("p.model = t.model AND p.speculative_method = t.speculative_method"
             " AND p.num_spec_tokens = t.num_spec_tokens AND p.thinking = t.thinking"
             " AND p.category = t.category")

#: Many runs on SQLite: the batch's keys, numbered, in a TEMP table joined to the profiles' index.
SQLITE_KEYS_TABLE = "registry_resolve_keys"
SQLITE_KEYS_DDL = (
    f"CREATE TEMP TABLE {SQLITE_KEYS_TABLE} (id INTEGER PRIMARY KEY, model TEXT NOT NULL, "
    "speculative_method TEXT NOT NULL, num_spec_tokens INTEGER NOT NULL, "
    "thinking TEXT NOT NULL, category TEXT NOT NULL)")
SQLITE_KEYS_INSERT = f"INSERT INTO temp.{SQLITE_KEYS_TABLE} VALUES (?, ?, ?, ?, ?, ?)"
SQLITE_LOOKUP_MANY = "SELECT t.id, " + _SELECT.format(
    source=f"temp.{SQLITE_KEYS_TABLE} t\nJOIN profiles p ON {_KEY_JOIN}")

#: Many runs on PostgreSQL: the numbered keys as six parallel arrays, unnested into rows.
PG_LOOKUP_MANY = "SELECT t.id, " + _SELECT.format(
    source="unnest(%(ids)s::INTEGER[], %(models)s::TEXT[], %(methods)s::TEXT[],"
           " %(ks)s::INTEGER[], %(thinkings)s::TEXT[], %(categories)s::TEXT[])"
           " AS t(id, model, speculative_method, num_spec_tokens, thinking, category)"
           f"\nJOIN profiles p ON {_KEY_JOIN}")


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
        own = None if isinstance(bind, Connection) else engine.raw_connection()
        try:
            dbapi = bind.connection.dbapi_connection if own is None else own.dbapi_connection
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
    c.cur.execute(f"SELECT name FROM profile_sets WHERE name IN ({', '.join([marker] * len(names))})",
                  tuple(names))
    return [name for (name,) in c.cur.fetchall()]


def set_names(c: Cursor) -> list[str]:
    """Every stored set's name (one query; the resolver checks named sets against them)."""
    c.cur.execute("SELECT name FROM profile_sets")
    return [name for (name,) in c.cur.fetchall()]


def lookup_one(c: Cursor, model: str, method: str, k: int, thinking: str,
               category: str, fallback: str | None) -> dict[Key, list[Candidate]]:
    """The candidates of one run's category and fallback, in every set, by profile key."""
    c.cur.execute(LOOKUP_ONE[c.dialect], (model, method, k, thinking, category,
                                          category if fallback is None else fallback))
    prefix = (model, method, k, thinking)
    tags = {cat: prefix + (cat,) for cat in (category, fallback) if cat is not None}
    return group_rows(tags, c.cur.fetchall())


def lookup_many(c: Cursor, keys: Iterable[Key]) -> dict[Key, list[Candidate]]:
    """The candidates of every key in ``keys`` (distinct or not), with a few set-based queries."""
    # Sorted, so that the index is probed in its own order: neighbouring keys share pages, which
    # halves the join's time on a large registry.
    keys = sorted(set(keys))
    if not keys:
        return {}
    if c.dialect == "postgresql":
        grouped: dict[Key, list[Candidate]] = {}
        for start in range(0, len(keys), PG_CHUNK):
            chunk = keys[start:start + PG_CHUNK]
            columns = [list(col) for col in zip(*chunk)]
            c.cur.execute(PG_LOOKUP_MANY, {
                "ids": list(range(start, start + len(chunk))), "models": columns[0],
                "methods": columns[1], "ks": columns[2], "thinkings": columns[3],
                "categories": columns[4]})
            grouped.update(group_rows(keys, c.cur.fetchall()))
        return grouped
    # A TEMP table lives in the connection's own temp database, so it needs no write access to
    # the registry (a read-only connection can make one) and no other connection sees it.
    c.cur.execute(f"DROP TABLE IF EXISTS temp.{SQLITE_KEYS_TABLE}")
    c.cur.execute(SQLITE_KEYS_DDL)
    try:
        c.cur.executemany(SQLITE_KEYS_INSERT, [(i,) + key for i, key in enumerate(keys)])
        c.cur.execute(SQLITE_LOOKUP_MANY)
        return group_rows(keys, c.cur.fetchall())
    finally:
        c.cur.execute(f"DROP TABLE IF EXISTS temp.{SQLITE_KEYS_TABLE}")


def group_rows(keys: Sequence[Key] | dict[Any, Key],
               rows: Iterable[Sequence]) -> dict[Key, list[Candidate]]:
    """Rows of the lookups above as candidates by key, each key's candidates by set name.

    A row's first column tags its key: ``keys[tag]``.
    """
    grouped: dict[Key, list[Candidate]] = {}
    rated: dict[int, list] = {}
    for tag, pid, set_name, al, how, copied, source, hardware, position, rate in rows:
        if position is None:  # no stored rates: the profile's one and only row
            _add(grouped, keys[tag], Candidate(set_name, al, None, source, hardware, how, copied))
        elif pid in rated:
            rated[pid][-1].append((position, rate))
        else:
            rated[pid] = [tag, set_name, al, source, hardware, how, copied, [(position, rate)]]
    for tag, set_name, al, source, hardware, how, copied, rates in rated.values():
        rates.sort()
        _add(grouped, keys[tag], Candidate(set_name, al, tuple(r for _, r in rates), source,
                                           hardware, how, copied))
    return grouped


def _add(grouped: dict[Key, list[Candidate]], key: Key, candidate: Candidate) -> None:
    found = grouped.get(key)
    if found is None:
        grouped[key] = [candidate]
    else:  # the same key in several sets: kept by set name, for the conflict's message
        found.append(candidate)
        found.sort()
