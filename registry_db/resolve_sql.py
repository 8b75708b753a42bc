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

Rows stay here: callers get :class:`Candidate` tuples grouped by profile key.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, NamedTuple, Sequence

from sqlalchemy import text
from sqlalchemy.engine import Connection

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


#: What every lookup selects, after the key columns: one row per (profile, stored rate).
_SELECT = """p.id, s.name, p.acceptance_length, p.method, p.copied_from, pr.source, pr.hardware,
       r.position, r.rate
FROM {source}
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN profile_rates r ON r.profile_id = p.id"""

#: One run: the key prefix and up to two categories (the workload's and the fallback).
LOOKUP_ONE = text(
    "SELECT p.model, p.speculative_method, p.num_spec_tokens, p.thinking, p.category, "
    + _SELECT.format(source="profiles p")
    + "\nWHERE p.model = :model AND p.speculative_method = :method"
    " AND p.num_spec_tokens = :k AND p.thinking = :thinking"
    " AND p.category IN (:category, :fallback)"
)

_KEY_JOIN = ("p.model = t.model AND p.speculative_method = t.speculative_method"
             " AND p.num_spec_tokens = t.num_spec_tokens AND p.thinking = t.thinking"
             " AND p.category = t.category")

#: Many runs on SQLite: the batch's keys in a TEMP table, joined to the profiles' index.
SQLITE_KEYS_TABLE = "registry_resolve_keys"
SQLITE_LOOKUP_MANY = (
    "SELECT t.model, t.speculative_method, t.num_spec_tokens, t.thinking, t.category, "
    + _SELECT.format(source=f"temp.{SQLITE_KEYS_TABLE} t\nJOIN profiles p ON {_KEY_JOIN}")
)

#: Many runs on PostgreSQL: the keys as five parallel arrays, unnested into rows.
PG_LOOKUP_MANY = text(
    "SELECT t.model, t.speculative_method, t.num_spec_tokens, t.thinking, t.category, "
    + _SELECT.format(
        source="unnest(CAST(:models AS TEXT[]), CAST(:methods AS TEXT[]),"
               " CAST(:ks AS INTEGER[]), CAST(:thinkings AS TEXT[]),"
               " CAST(:categories AS TEXT[]))"
               " AS t(model, speculative_method, num_spec_tokens, thinking, category)"
               f"\nJOIN profiles p ON {_KEY_JOIN}")
)


def lookup_one(conn: Connection, model: str, method: str, k: int, thinking: str,
               category: str, fallback: str | None) -> dict[Key, list[Candidate]]:
    """The candidates of one run's category and fallback, in every set, by profile key."""
    rows = conn.execute(LOOKUP_ONE, {
        "model": model, "method": method, "k": k, "thinking": thinking,
        "category": category, "fallback": category if fallback is None else fallback,
    })
    return group_rows(rows)


def lookup_many(conn: Connection, keys: Iterable[Key]) -> dict[Key, list[Candidate]]:
    """The candidates of every key in ``keys`` (distinct or not), with a few set-based queries.

    Runs inside the caller's transaction, so that it reads one snapshot.
    """
    keys = list(set(keys))
    if not keys:
        return {}
    if conn.dialect.name == "postgresql":
        grouped: dict[Key, list[Candidate]] = {}
        for start in range(0, len(keys), PG_CHUNK):
            chunk = keys[start:start + PG_CHUNK]
            columns = list(zip(*chunk))
            rows = conn.execute(PG_LOOKUP_MANY, {
                "models": list(columns[0]), "methods": list(columns[1]),
                "ks": list(columns[2]), "thinkings": list(columns[3]),
                "categories": list(columns[4]),
            })
            grouped.update(group_rows(rows))
        return grouped
    return _sqlite_lookup_many(conn, keys)


def _sqlite_lookup_many(conn: Connection, keys: Sequence[Key]) -> dict[Key, list[Candidate]]:
    # A TEMP table lives in the connection's own temp database, so it needs no write access to
    # the registry (a read-only connection can make one) and no other connection sees it.
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS temp.{SQLITE_KEYS_TABLE}")
    conn.exec_driver_sql(
        f"CREATE TEMP TABLE {SQLITE_KEYS_TABLE} (model TEXT NOT NULL, "
        "speculative_method TEXT NOT NULL, num_spec_tokens INTEGER NOT NULL, "
        "thinking TEXT NOT NULL, category TEXT NOT NULL)")
    try:
        conn.exec_driver_sql(f"INSERT INTO temp.{SQLITE_KEYS_TABLE} VALUES (?, ?, ?, ?, ?)",
                             list(keys))
        return group_rows(conn.exec_driver_sql(SQLITE_LOOKUP_MANY))
    finally:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS temp.{SQLITE_KEYS_TABLE}")


def group_rows(rows: Iterable[Sequence]) -> dict[Key, list[Candidate]]:
    """Rows of the lookups above as candidates by key, each key's candidates by set name."""
    profiles: dict[int, list] = {}
    rates: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for model, method, k, thinking, category, pid, set_name, al, how, copied, source, \
            hardware, position, rate in rows:
        if pid not in profiles:
            profiles[pid] = [(model, method, k, thinking, category), set_name, al, source,
                             hardware, how, copied]
        if position is not None:
            rates[pid].append((position, rate))
    grouped: dict[Key, list[Candidate]] = defaultdict(list)
    for pid, (key, set_name, al, source, hardware, how, copied) in profiles.items():
        stored = rates.get(pid)
        grouped[key].append(Candidate(
            set_name, al, tuple(r for _, r in sorted(stored)) if stored else None,
            source, hardware, how, copied))
    for candidates in grouped.values():
        if len(candidates) > 1:
            candidates.sort()
    return dict(grouped)


def set_names(conn: Connection) -> list[str]:
    """Every stored set's name (one query; the resolver checks named sets against them)."""
    return [name for (name,) in conn.exec_driver_sql("SELECT name FROM profile_sets")]
