"""The resolver's statements, as text: the decision in SQL for one run, for a batch, now and as
of a time, per dialect (:mod:`registry_db.resolve.lookup` runs them).

Each keeps only the profiles of the sets in scope, prefers the workload's category over the
fallback (``preference`` 0 over 1) and counts the sets that hold the winning key (``set_count``;
more than one is a conflict), in standard SQL for SQLite (3.25 and later) and PostgreSQL,
probing ``uq_profiles_key`` with all five key columns bound; a candidate's counts and their
stored stderr come in the same row, by primary key. :func:`named_one_statement` is the
one-run statement with named parameters, for a reader of the database (a Datasette canned
query) to run the resolver's own decision.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from registry_db.store.as_of import revision_at

_PREFIX = ("{a}.model = {b}.model AND {a}.speculative_method = {b}.speculative_method"
           " AND {a}.num_spec_tokens = {b}.num_spec_tokens AND {a}.thinking = {b}.thinking")

#: A candidate's counts and their stderr, read by primary key beside its value (null without).
_COUNTS = "cn.drafts, cn.draft_tokens, cn.accepted_tokens, cn.accepted_per_position, cn.al_stderr"

#: A stretch of a key ``p`` (``profile_keys``) was current at time ``at``: begun by then, not
#: yet ended.
_CURRENT_AT = "p.valid_from <= {at} AND (p.valid_until IS NULL OR p.valid_until > {at})"


def _version_at(stretch: str, revision: str) -> str:
    """The id of the version of stretch ``stretch`` that revision ``revision`` of its set held:
    the stretch's latest to begin at or before it (a stretch's versions follow one another
    without gap or overlap), one probe of ``uq_profile_versions_stretch``."""
    return (f"(SELECT q.id FROM profile_versions q WHERE q.key_id = {stretch}"
            f" AND q.first_revision <= {revision} ORDER BY q.first_revision DESC LIMIT 1)")


def _live(v: str, at: str) -> str:
    """Revision ``v`` is its set's registry at time ``at``: the set's latest revision written by
    then (one probe of ``ix_revisions_set_name_imported_at``), and not a deletion."""
    return (f"{v}.action <> 'deleted' AND {v}.revision = "
            + revision_at(f"{v}.set_name", at))


#: One run, in one statement that only probes indexes (no sort, no temporary table: a window
#: over its few rows costs more per resolution on SQLite; docs/decisions.md). A profile of the
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
       r.position, r.rate, s.revision, """ + _COUNTS + """
FROM profiles p
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN profile_rates r ON r.profile_id = p.id
LEFT JOIN profile_counts cn ON cn.profile_id = p.id
WHERE p.model = :model AND p.speculative_method = :method AND p.num_spec_tokens = :k
  AND p.thinking = :thinking AND p.category IN (:category, :fallback)
  AND (p.category = :category OR NOT EXISTS (
      SELECT 1 FROM profiles q{join_q}
      WHERE """ + _PREFIX.format(a="q", b="p") + """ AND q.category = :category{scope_q})){scope}"""

#: One run as of a time: the stretches of the key (category or fallback) current at that time
#: are found by ``profile_keys``' key index (``k``: a set's each), each with its set's revision
#: of that time (one probe of the revisions' time index) and the version that revision held
#: (``c``: a few rows, found once), then the same rules as above decide among them. ``k`` is a
#: subquery that SQLite flattens into ``c``: as a CTE of its own it was materialized on every
#: run (docs/decisions.md).
_LOOKUP_ONE_AS_OF = """WITH c AS (
    SELECT p.id, k.category, p.acceptance_length, p.method, p.copied_from, p.provenance_id,
           k.set_name, k.revision
    FROM (SELECT p.id, p.category, p.set_name,
                 """ + revision_at("p.set_name", ":as_of") + """ AS revision
          FROM profile_keys p
          WHERE p.model = :model AND p.speculative_method = :method AND p.num_spec_tokens = :k
            AND p.thinking = :thinking AND p.category IN (:category, :fallback){scope}
            AND """ + _CURRENT_AT.format(at=":as_of") + """) k
    JOIN profile_versions p ON p.id = """ + _version_at("k.id", "k.revision") + """
)
SELECT 0 AS lookup_id, c.category,
       (SELECT COUNT(*) FROM c AS h WHERE h.category = c.category) AS set_count,
       c.id, c.set_name, c.acceptance_length, c.method, c.copied_from, pr.source, pr.hardware,
       r.position, r.rate, c.revision, """ + _COUNTS + """
FROM c
LEFT JOIN provenances pr ON pr.id = c.provenance_id
LEFT JOIN version_rates r ON r.profile_id = c.id
LEFT JOIN version_counts cn ON cn.profile_id = c.id
WHERE c.category = :category OR NOT EXISTS (SELECT 1 FROM c AS h WHERE h.category = :category)"""

_MARKER = {"sqlite": "?", "postgresql": "%s"}
_PARAMETER = re.compile(r":(\w+)")


def named_one_statement(dialect: str, scoped: int, as_of: bool = False) -> str:
    """The one-run statement as text with named parameters: ``:model``, ``:method``, ``:k``,
    ``:thinking``, ``:category``, ``:fallback`` (null or ``''`` for none: no category is
    empty), ``:as_of`` (as of a time) and, for ``scoped`` set names in scope, ``:set_1`` ...
    ``:set_N``. SQLite runs this form as it is (``sqlite3`` binds a mapping by name), so a
    Datasette canned query can be the resolver's own statement; the text is the same for both
    dialects (``dialect`` is checked). :func:`one_statement` is it with the driver's markers."""
    if dialect not in _MARKER:
        raise ValueError(f"no statement for the dialect {dialect!r}")
    if as_of:
        template = _LOOKUP_ONE_AS_OF.format(scope=" AND p.set_name IN (:scope)" if scoped else "")
    else:
        join_q, scope, scope_q = "", "", ""
        if scoped:
            join_q = "\n        JOIN profile_sets qs ON qs.id = q.set_id"
            scope, scope_q = " AND s.name IN (:scope)", " AND qs.name IN (:scope)"
        template = _LOOKUP_ONE.format(join_q=join_q, scope=scope, scope_q=scope_q)
    sets = ", ".join(f":set_{i}" for i in range(1, scoped + 1))
    return template.replace(":scope", sets)


@functools.lru_cache(maxsize=64)  # statement text: a few shapes (dialect, scope size, as of)
def one_statement(dialect: str, scoped: int, as_of: bool = False
                  ) -> tuple[str, tuple[str, ...]]:
    """The one-run statement for ``dialect`` with ``scoped`` set names in scope (0: every set),
    against the registry as of a time (``as_of``: the revisions) or as it stands, with the
    driver's markers, and the names of its parameters in the order the driver binds them
    (:func:`named_one_statement`'s names)."""
    marker = _MARKER[dialect]
    if as_of and dialect == "postgresql":
        # Each value as an uncorrelated subquery, which the planner does not look into: its
        # custom plans (one per run) then cost what its generic plan does, so after psycopg
        # prepares the statement PostgreSQL keeps the generic plan, as it does for the current
        # registry's; with the values in view it judged every run worth a fresh plan.
        marker = "(SELECT %s)"
    order: list[str] = []

    def positional(m: re.Match) -> str:
        order.append(m.group(1))
        return marker

    text = _PARAMETER.sub(positional, named_one_statement(dialect, scoped, as_of))
    return text, tuple(order)


#: The one-run statement over every set, per dialect, and its parameters' order.
LOOKUP_ONE = {d: one_statement(d, 0)[0] for d in _MARKER}

#: Many runs: one row per (lookup, preference, set in scope; '' for every set), numbered so
#: that the rows come out of the key table in (lookup, preference) order. The one window then
#: needs no sort on SQLite: its rank-1 rows are the preferred category that some set in scope
#: holds, and their count (the window's default frame ends at the current row's last peer) is
#: the number of those sets. As of a time, each key row carries the time too (``as_of``), the
#: candidates are the keys' stretches current then, each with its set's revision of that time,
#: and each winner's version is looked up after the window (the narrow shape, both dialects).
_RANKED = """RANK() OVER w AS place, COUNT(*) OVER w AS set_count"""
_CANDIDATES = """FROM {source}
    JOIN {profiles} p ON """ + _PREFIX.format(a="p", b="t") + """ AND p.category = t.category{join}
    WHERE {where}"""
_WINDOW = "WINDOW w AS (PARTITION BY {w}lookup_id ORDER BY {w}preference)"
#: PostgreSQL's shape for the current registry: the candidates' whole rows go through the window.
_LOOKUP_MANY = """WITH candidates AS (
    SELECT t.lookup_id, t.preference, p.category, p.id AS profile_id, {set_name} AS set_name,
           p.acceptance_length, p.method, p.copied_from, p.provenance_id, {revision}
    """ + _CANDIDATES + """
),
ranked AS (
    SELECT c.*, """ + _RANKED + """
    FROM candidates c
    """ + _WINDOW.format(w="c.") + """
)
SELECT r.lookup_id, r.category, r.set_count, r.profile_id, r.set_name,
       r.acceptance_length, r.method, r.copied_from, pr.source, pr.hardware,
       rt.position, rt.rate, r.revision, """ + _COUNTS + """
FROM ranked r
LEFT JOIN provenances pr ON pr.id = r.provenance_id
LEFT JOIN {rates} rt ON rt.profile_id = r.profile_id
LEFT JOIN {counts} cn ON cn.profile_id = r.profile_id
WHERE r.place = 1"""
#: SQLite's shape, the same rows: the window runs over narrow rows (the lookup and the
#: profile's id, read from the key index alone) and the winners' columns are read afterwards by
#: primary key. SQLite's window buffers each partition, so narrow rows are cheaper there; on
#: PostgreSQL the second join by id costs more than the window's width, so for the current
#: registry each dialect has its own (docs/decisions.md). As of a time both use this one: a
#: winner's version is a lookup of its own, made for the winners only.
_LOOKUP_MANY_NARROW = """WITH ranked AS (
    SELECT t.lookup_id, p.id AS profile_id, """ + _RANKED + """{ranked}
    """ + _CANDIDATES + """
    """ + _WINDOW.format(w="t.") + """
)
SELECT r.lookup_id, p.category, r.set_count, p.id, {set_name},
       p.acceptance_length, p.method, p.copied_from, pr.source, pr.hardware,
       rt.position, rt.rate, {winner_revision}, """ + _COUNTS + """
FROM ranked r
JOIN {winner}{winner_join}
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN {rates} rt ON rt.profile_id = p.id
LEFT JOIN {counts} cn ON cn.profile_id = p.id
WHERE r.place = 1"""
#: What the many-runs statements read: the current registry, or as of a time the stretches of
#: the keys current then (``profile_ids`` are then stretches') and, for each winner, the version
#: its set's revision of that time held.
_CURRENT = {"profiles": "profiles", "rates": "profile_rates", "counts": "profile_counts",
            "join": "\n    JOIN profile_sets s ON s.id = p.set_id", "set_name": "s.name",
            "revision": "s.revision", "ranked": "", "winner_revision": "s.revision",
            "winner": "profiles p ON p.id = r.profile_id",
            "winner_join": "\nJOIN profile_sets s ON s.id = p.set_id",
            "where": "t.set_name = '' OR t.set_name = s.name"}
_AS_OF = {"profiles": "profile_keys", "rates": "version_rates", "counts": "version_counts",
          "join": "", "set_name": "p.set_name",
          "ranked": ", " + revision_at("p.set_name", "t.as_of") + " AS revision",
          "winner_revision": "r.revision",
          "winner": ("profile_versions p ON p.id = "
                     + _version_at("r.profile_id", "r.revision")),
          "winner_join": "",
          "where": ("(t.set_name = '' OR t.set_name = p.set_name)\n      AND "
                    + _CURRENT_AT.format(at="t.as_of"))}

#: Many runs on SQLite: the batch's lookup rows in a TEMP table joined to the profiles' index;
#: its primary key is the order the window reads them in.
SQLITE_KEYS_TABLE = "registry_resolve_keys"
_KEYS_COLUMNS = ("lookup_id INTEGER NOT NULL, preference INTEGER NOT NULL, model TEXT NOT NULL, "
                 "speculative_method TEXT NOT NULL, num_spec_tokens INTEGER NOT NULL, "
                 "thinking TEXT NOT NULL, category TEXT NOT NULL, set_name TEXT NOT NULL")
SQLITE_KEYS_DDL = (
    f"CREATE TEMP TABLE {SQLITE_KEYS_TABLE} ({_KEYS_COLUMNS}, "
    "PRIMARY KEY (lookup_id, preference, set_name)) WITHOUT ROWID")
SQLITE_KEYS_INSERT = f"INSERT INTO temp.{SQLITE_KEYS_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
SQLITE_LOOKUP_MANY = _LOOKUP_MANY_NARROW.format(source=f"temp.{SQLITE_KEYS_TABLE} t", **_CURRENT)
#: The same as of a time: each row's time is text in the stored format.
SQLITE_AS_OF_TABLE = "registry_resolve_keys_as_of"
SQLITE_AS_OF_DDL = (
    f"CREATE TEMP TABLE {SQLITE_AS_OF_TABLE} ({_KEYS_COLUMNS}, as_of TEXT NOT NULL, "
    "PRIMARY KEY (lookup_id, preference, set_name)) WITHOUT ROWID")
SQLITE_AS_OF_INSERT = (f"INSERT INTO temp.{SQLITE_AS_OF_TABLE} "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
SQLITE_LOOKUP_MANY_AS_OF = _LOOKUP_MANY_NARROW.format(source=f"temp.{SQLITE_AS_OF_TABLE} t",
                                                      **_AS_OF)

#: Many runs on PostgreSQL: the lookup rows as one JSON array of arrays, one parameter
#: (:func:`pg_parameters`), expanded into rows by the server; as of a time each row's last item
#: is its time. JSON rather than parallel arrays: psycopg dumps a list item by item in Python
#: (docs/decisions.md). ``LIMIT`` the rows' count changes no row: it tells the planner how
#: many there are (it assumes 100 rows of a JSON array), so a few keys probe the indexes.
_PG_ROWS = ("(SELECT (v->>0)::INTEGER AS lookup_id, (v->>1)::INTEGER AS preference,"
            " v->>2 AS model, v->>3 AS speculative_method, (v->>4)::INTEGER AS num_spec_tokens,"
            " v->>5 AS thinking, v->>6 AS category, v->>7 AS set_name{more}"
            " FROM jsonb_array_elements(%(rows)s::jsonb) AS e(v) LIMIT %(count)s) t")
PG_LOOKUP_MANY = _LOOKUP_MANY.format(source=_PG_ROWS.format(more=""), **_CURRENT)
#: As of a time, the narrow shape on PostgreSQL too: only the winners' versions are looked up.
PG_LOOKUP_MANY_AS_OF = _LOOKUP_MANY_NARROW.format(
    source=_PG_ROWS.format(more=", (v->>8)::TIMESTAMPTZ AS as_of"), **_AS_OF)


def pg_parameters(rows: Sequence[tuple]) -> dict[str, str | int]:
    """The PostgreSQL many-runs statements' parameters: the lookup rows as JSON text (a time as
    ISO 8601, which ``timestamptz`` reads back exactly), and their count."""
    return {"rows": json.dumps(rows, default=_iso), "count": len(rows)}


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a lookup row's value")


#: The sets of the registry as of a time: each set's revision of that time, unless a deletion.
LIVE_SETS = "SELECT v.set_name FROM revisions v WHERE " + _live("v", "{at}")
