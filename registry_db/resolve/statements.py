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


# --- the registry layer's answer, in SQL --------------------------------------------------------

#: The lookup statements' columns (:class:`registry_db.resolve.lookup.LookupRow`'s fields).
LOOKUP_COLUMNS = ("lookup_id", "category", "set_count", "id", "name", "acceptance_length",
                 "method", "copied_from", "source", "hardware", "position", "rate", "revision",
                 "drafts", "draft_tokens", "accepted_tokens", "accepted_per_position",
                 "al_stderr")

#: The parameters of the registry layer's answer (:func:`answer_statement`), in the PostgreSQL
#: function's order: the run's key, the workload's category, the pin's fallback, one set, the
#: run's chip, the time (null: the registry as it stands) and more sets (``set`` and ``sets``
#: together are the scope; neither: every set). ``sets`` is a JSON array of names on SQLite, an
#: array on PostgreSQL.
ANSWER_PARAMETERS = ("model", "method", "k", "thinking", "category", "fallback", "set",
                     "hardware", "as_of", "sets")

#: Each dialect's pieces: the integer part of a non-negative real, a real as JSON text that
#: reads back as the same double (SQLite's own text keeps 15 digits), and an ordered text
#: aggregate (SQLite keeps the order of the subquery it reads).
_ANSWER_DIALECT = {
    "sqlite": {
        "floor": "CAST({} AS INTEGER)",
        # 17 digits by SQLite's extended-precision printf (its plain %.17g is wrong in the
        # last digits, and its text→real cast is too inexact to find a shorter text)
        "real": "printf('%!.17g', {0})",
        "agg": "group_concat({0}, ', ')",
        "text_order": "{}",
        "x_sort": " ORDER BY x",
        "named": ("SELECT :set WHERE :set IS NOT NULL"
                  " UNION SELECT value FROM json_each(COALESCE(:sets, '[]'))"),
        "scoped": "(:set IS NOT NULL OR :sets IS NOT NULL)",
    },
    "postgresql": {
        "floor": "floor({})",
        # the aggregate's cast: float8's text is the shortest that reads back exactly (the
        # function pins extra_float_digits, which would otherwise round it)
        "real": "{0}",
        "agg": "string_agg(CAST({0} AS TEXT), ', ' ORDER BY {1})",
        "text_order": "{} COLLATE \"C\"",
        "x_sort": "",
        # the function joins set_name and set_names into :sets (null: every set)
        "named": "SELECT unnest(:sets)",
        "scoped": ":sets IS NOT NULL",
    },
}

#: What the scope holds for the run's model and method (the no-profile refusals say it): now,
#: or the keys' stretches current at the time.
_STORED = """SELECT p.num_spec_tokens, p.thinking, p.category FROM profiles p
    JOIN profile_sets s ON s.id = p.set_id
    WHERE :as_of IS NULL AND p.model = :model AND p.speculative_method = :method
      AND (NOT {scoped} OR s.name IN (SELECT name FROM named))
    UNION ALL
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profile_keys p
    WHERE :as_of IS NOT NULL AND p.model = :model AND p.speculative_method = :method
      AND (NOT {scoped} OR p.set_name IN (SELECT name FROM named))
      AND """ + _CURRENT_AT.format(at=":as_of")

#: The answer around the lookup (the rows of :func:`named_one_statement`, whichever of its four
#: forms the parameters call for: every set or the sets ``named`` lists, now or as of a time),
#: as one row: the refusals the registry layer makes (an unknown set, no thinking mode, no
#: category, no profile, a conflict) and, for a profile, its rates stored or derived by the
#: minimum-variance schedule (:func:`registry_db.resolve.rates.min_variance_rates`, by the same
#: float operations).
_ANSWER = """WITH RECURSIVE named (name) AS (
    {named}
),
found (""" + ", ".join(LOOKUP_COLUMNS) + """) AS (
{found}
),
-- one row per profile of the winning key (found has one per stored rate)
held AS (
    SELECT id, MAX(name) AS profile_set, MAX(category) AS category,
           MAX(acceptance_length) AS acceptance_length, MAX(method) AS method,
           MAX(copied_from) AS copied_from, MAX(source) AS source, MAX(hardware) AS hardware,
           MAX(revision) AS revision, COUNT(position) AS stored_rates, MAX(drafts) AS drafts,
           MAX(draft_tokens) AS draft_tokens, MAX(accepted_tokens) AS accepted_tokens,
           MAX(accepted_per_position) AS accepted_per_position, MAX(al_stderr) AS al_stderr
    FROM found GROUP BY id
),
winner AS (SELECT MAX(category) AS category, MAX(set_count) AS set_count FROM found),
decided AS (
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM named n WHERE NOT (CASE WHEN :as_of IS NULL
            THEN EXISTS (SELECT 1 FROM profile_sets WHERE name = n.name)
            ELSE EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = n.name AND """ \
    + _live("v", ":as_of") + """) END)) THEN 'unknown_set'
        WHEN :thinking IS NULL THEN 'no_thinking'
        WHEN :category IS NULL AND :fallback IS NULL THEN 'no_category'
        WHEN w.set_count IS NULL AND :fallback IS NULL THEN 'no_match'
        WHEN w.set_count IS NULL THEN 'fallback_no_match'
        WHEN w.set_count > 1 THEN 'conflict'
    END AS reason, w.category AS used, w.set_count
    FROM winner w
),
one AS (SELECT h.* FROM held h JOIN decided d ON d.reason IS NULL),
positions (i) AS (
    SELECT 1 FROM one WHERE stored_rates = 0
    UNION ALL
    SELECT i + 1 FROM positions WHERE i < :k
),
stored AS (
    """ + _STORED + """
)
SELECT
    CASE WHEN d.reason IS NULL THEN 'resolved' ELSE 'refused' END AS outcome,
    d.reason,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN
        :model || '/' || :method || '/k' || CAST(:k AS TEXT) || '/thinking-' || :thinking
        || '/' || d.used END AS profile,
    o.acceptance_length,
    (o.acceptance_length - 1) / :k AS acceptance_rate,
    CAST(:k AS INTEGER) AS num_spec_tokens,
    CASE WHEN o.stored_rates > 0 THEN (
        SELECT '[' || {rates} || ']' FROM (
            SELECT position, rate FROM found WHERE position IS NOT NULL ORDER BY position) AS x)
    WHEN o.id IS NOT NULL THEN (
        SELECT '[' || {derived} || ']' FROM (
            SELECT i, CASE
                WHEN i <= {full} THEN 1.0
                WHEN i = {full} + 1 THEN (o.acceptance_length - 1) - {full}
                ELSE 0.0 END AS rate
            FROM positions ORDER BY i) AS x)
    END AS per_position_rates,
    CASE WHEN o.id IS NOT NULL THEN o.stored_rates = 0 END AS rates_derived,
    o.profile_set,
    o.revision,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN d.used END AS category_used,
    o.method AS value_method,
    o.copied_from,
    o.source,
    CASE WHEN o.id IS NOT NULL AND (:category IS NULL OR o.category <> :category)
        THEN :category END AS fallback_replaced,
    CASE WHEN o.id IS NOT NULL AND (:category IS NULL OR o.category <> :category)
        THEN o.category END AS fallback_used,
    o.hardware AS measured_on,
    CASE WHEN o.id IS NOT NULL THEN (:hardware IS NOT NULL AND o.hardware IS NOT NULL
        AND lower(:hardware) <> lower(o.hardware)) END AS hardware_mismatch,
    CAST(d.set_count AS INTEGER) AS set_count,
    CASE WHEN d.reason = 'conflict' THEN (
        SELECT {sets} FROM (SELECT profile_set FROM held ORDER BY {set_order}) AS x)
    END AS conflict_sets,
    o.drafts,
    o.draft_tokens,
    o.accepted_tokens,
    o.accepted_per_position,
    o.al_stderr,
    -- exact with the per-position counts, or at K = 1 (a step accepts 0 or 1 draft)
    CASE WHEN o.drafts IS NOT NULL THEN o.accepted_per_position IS NOT NULL OR :k = 1 END
        AS al_stderr_exact,
    CASE WHEN d.reason IN ('no_match', 'fallback_no_match') THEN (
        SELECT 'K ' || (SELECT {ks} FROM (
                            SELECT DISTINCT num_spec_tokens AS x FROM stored{x_sort}) AS y)
            || '; thinking ' || (SELECT {modes} FROM (
                SELECT DISTINCT thinking AS x FROM stored{x_sort}) AS y)
            || '; categories ' || (SELECT {categories} FROM (
                SELECT DISTINCT category AS x FROM stored{x_sort}) AS y)
        WHERE EXISTS (SELECT 1 FROM stored))
    END AS stored
FROM decided d LEFT JOIN one o ON d.reason IS NULL"""


#: The lookup's four forms, each with the condition on the parameters that calls for it:
#: (sets in scope, as of a time, the condition).
_FORMS = ((0, False, ":as_of IS NULL AND NOT {scoped}"),
          (1, False, ":as_of IS NULL AND {scoped}"),
          (0, True, ":as_of IS NOT NULL AND NOT {scoped}"),
          (1, True, ":as_of IS NOT NULL AND {scoped}"))


def answer_form(scoped: bool, as_of: bool) -> int:
    """The form (of :func:`answer_statement`) that a run in one set (``scoped``) or every set,
    as of a time or not, calls for."""
    return _FORMS.index(next(f for f in _FORMS if f[:2] == (int(scoped), as_of)))


@functools.lru_cache(maxsize=32)  # statement text: two dialects, five forms, several or not
def answer_statement(dialect: str, form: int | None = None, several: bool = True) -> str:
    """The registry layer's answer to one run, as one statement with named parameters
    (:data:`ANSWER_PARAMETERS`; ``:fallback``, ``:set``, ``:hardware`` and ``:as_of`` null for
    none; ``:as_of`` in the stored format on SQLite). It is the lookup of
    :func:`named_one_statement` and the decision the resolver makes from its rows, in SQL: the
    text of ``registry_resolve.sql`` on SQLite and the body of the PostgreSQL function
    ``registry_resolve`` (:func:`pg_function`). The lookup is its four forms (every set or
    one, now or as of a time), each run only when the parameters call for it; ``form`` (an
    index of :data:`_FORMS`) keeps only that one, for a caller that has chosen already; with
    ``several`` False (SQLite, a form chosen) the run names at most one set and ``:sets`` is
    not read."""
    d = _ANSWER_DIALECT[dialect]
    agg, real = d["agg"], d["real"]
    text_order = d["text_order"]
    # The scoped forms keep the sets that ``named`` lists (:set and :sets).
    found = "\n    UNION ALL\n".join(
        f"    SELECT * FROM (\n{named_one_statement(dialect, scoped, as_of)}\n    ) AS f"
        f" WHERE {when.format(scoped=d['scoped'])}"
        for i, (scoped, as_of, when) in enumerate(_FORMS) if form is None or i == form
    ).replace("IN (:set_1)", "IN (SELECT name FROM named)")
    # On SQLite a statement that reads :sets ran 4x slower in one process of two (98 against
    # 400 us a run): a run naming at most one set gets the text that does not read it.
    named = d["named"] if (dialect != "sqlite" or form is None or several) \
        else "SELECT :set WHERE :set IS NOT NULL"
    return _ANSWER.format(
        found=found, named=named, scoped=d["scoped"],
        rates=agg.format(real.format("rate"), "position"),
        derived=agg.format(real.format("rate"), "i"),
        full=d["floor"].format("(o.acceptance_length - 1)"),
        sets=agg.format("profile_set", text_order.format("profile_set")),
        set_order=text_order.format("profile_set"),
        ks=agg.format("x", "x"), x_sort=d["x_sort"],
        modes=agg.format("x", text_order.format("x")),
        categories=agg.format("x", text_order.format("x")),
    )


#: The answer's columns and their PostgreSQL types, in order (docs/schema.md says what each
#: holds). SQLite gives the same columns; its booleans are 1 and 0.
ANSWER_COLUMNS = (
    ("outcome", "text"), ("reason", "text"), ("profile", "text"),
    ("acceptance_length", "double precision"), ("acceptance_rate", "double precision"),
    ("num_spec_tokens", "integer"), ("per_position_rates", "text"), ("rates_derived", "boolean"),
    ("profile_set", "text"), ("revision", "integer"), ("category_used", "text"),
    ("value_method", "text"), ("copied_from", "text"), ("source", "text"),
    ("fallback_replaced", "text"), ("fallback_used", "text"), ("measured_on", "text"),
    ("hardware_mismatch", "boolean"), ("set_count", "integer"), ("conflict_sets", "text"),
    ("drafts", "bigint"), ("draft_tokens", "bigint"), ("accepted_tokens", "bigint"),
    ("accepted_per_position", "text"), ("al_stderr", "double precision"),
    ("al_stderr_exact", "boolean"), ("stored", "text"))

#: The function's arguments: (name, type, default), the parameters of
#: :data:`ANSWER_PARAMETERS` in their order.
PG_ARGUMENTS = (("model", "text", None), ("method", "text", None), ("k", "integer", None),
                ("thinking", "text", None), ("category", "text", None),
                ("fallback_category", "text", "NULL"), ("set_name", "text", "NULL"),
                ("hardware", "text", "NULL"), ("as_of", "timestamptz", "NULL"),
                ("set_names", "text[]", "NULL"))

#: The signatures, as DROP FUNCTION and GRANT name them.
PG_FUNCTIONS = ("registry_resolve(text, text, integer, text, text, text, text, text, "
                "timestamptz, text[])", "registry_resolve_many(jsonb)")

#: Both functions run as their caller (SECURITY INVOKER: they read what the caller may read),
#: change nothing (STABLE) and find the registry's tables in its schema only (a pinned
#: search_path: nothing of the caller's can stand in for them). PL/pgSQL, not SQL: it keeps
#: the statement's plan for the session, where a SQL function plans it again on every call;
#: the generic plan, which the parameters' one-time filters make as good as a custom one and
#: which costs no planning (a custom plan of the statement takes milliseconds to make).
_PG_FUNCTION = """CREATE OR REPLACE FUNCTION registry_resolve({arguments})
RETURNS TABLE ({columns})
LANGUAGE plpgsql STABLE SECURITY INVOKER PARALLEL SAFE
SET search_path = pg_catalog, {schema}, pg_temp
SET extra_float_digits = 1
SET plan_cache_mode = force_generic_plan
AS $registry_resolve$
#variable_conflict use_column
DECLARE
    -- the sets in scope, set_name's and set_names' (null: every set)
    in_scope text[] := NULLIF(array_remove(${sets} || ${set}, NULL), '{{}}');
BEGIN
{body}
END
$registry_resolve$;
COMMENT ON FUNCTION registry_resolve({types}) IS
'The registry layer''s answer to one run: resolved or refused, the value and where it '
'came from.';"""


def pg_function(schema: str) -> str:
    """The PostgreSQL function ``registry_resolve`` (:func:`answer_statement` with the
    arguments for its parameters, ``set_name`` and ``set_names`` joined into ``:sets``), made in
    ``schema`` (a quoted name): the text migration 0015 runs (0011 made the first, with
    ``set_name`` alone; ``registry_resolve_many`` is :func:`pg_many_function`'s)."""
    position = {name: f"${i}" for i, name in enumerate(ANSWER_PARAMETERS, 1)}
    position["sets"] = "in_scope"  # set_name and set_names, joined
    scoped = _ANSWER_DIALECT["postgresql"]["scoped"]
    # One statement per form of the lookup: the four in one plan took twice as long a run.
    body = "\n".join(
        f"{'ELSIF' if i else 'IF'} {when.format(scoped=scoped)} THEN\nRETURN QUERY\n"
        f"{answer_statement('postgresql', i)};" for i, (_, _, when) in enumerate(_FORMS)
    ) + "\nEND IF;"
    body = _PARAMETER.sub(lambda m: position[m.group(1)], body)
    arguments = ", ".join(f"{name} {kind}" + (f" DEFAULT {default}" if default else "")
                          for name, kind, default in PG_ARGUMENTS)
    columns = ", ".join(f"{name} {kind}" for name, kind in ANSWER_COLUMNS)
    return _PG_FUNCTION.format(arguments=arguments, columns=columns, schema=schema, body=body,
                               types=", ".join(kind for _, kind, _ in PG_ARGUMENTS),
                               sets=ANSWER_PARAMETERS.index("sets") + 1,
                               set=ANSWER_PARAMETERS.index("set") + 1)


#: ``registry_resolve_many`` as one set-based statement (migration 0015; 0013 first): every run
#: of the JSON array at once, with ``registry_resolve``'s rules and columns, each value the same
#: (a test compares the two on a random grid). The runs are read once (``r``; ``scope``: the
#: names of ``set_name`` and ``set_names``, null for every set); each looks up its category
#: (preference 0) and the pin's fallback (1) in its scope, now or as of its time (the stretches
#: current then, each with its set's revision then and the version it held); one window keeps
#: each run's preferred category, counts the sets holding it and numbers them (``nth``), so a
#: run meets its first winner by one hash join; the winner's rates, counts and provenance are
#: read by key for a resolved run only, and what is stored is described once per (model,
#: method, scope, time) that some run misses, looked up by that key in one JSON object (a join
#: on it was planned as a nested loop, the runs being 100 rows to the planner: 4.5 million
#: comparisons for 10,000 runs).
_PG_MANY = """CREATE OR REPLACE FUNCTION registry_resolve_many(runs jsonb)
RETURNS TABLE (run_index integer, {columns})
LANGUAGE sql STABLE SECURITY INVOKER PARALLEL SAFE
SET search_path = pg_catalog, {schema}, pg_temp
SET extra_float_digits = 1
AS $registry_resolve_many$
WITH r AS MATERIALIZED (
    SELECT CAST(e.i - 1 AS INTEGER) AS run_index, {from_json},
           CASE WHEN e.v ->> 'set_names' IS NULL THEN
               CASE WHEN e.v ->> 'set_name' IS NOT NULL THEN ARRAY[e.v ->> 'set_name'] END
           ELSE NULLIF(ARRAY(
               SELECT n.name FROM jsonb_array_elements_text(e.v -> 'set_names') AS n (name)
               WHERE n.name IS NOT NULL
               UNION SELECT e.v ->> 'set_name' WHERE e.v ->> 'set_name' IS NOT NULL), '{{}}')
           END AS scope
    FROM jsonb_array_elements(runs) WITH ORDINALITY AS e (v, i)
),
wanted AS (
    SELECT r.*, 0 AS preference, r.category AS want FROM r
    WHERE r.thinking IS NOT NULL AND r.category IS NOT NULL
    UNION ALL
    SELECT r.*, 1 AS preference, r.fallback_category AS want FROM r
    WHERE r.thinking IS NOT NULL AND r.fallback_category IS NOT NULL
      AND (r.category IS NULL OR r.fallback_category <> r.category)
),
candidates AS (
    SELECT w.run_index, w.preference, p.id, CAST(p.category AS TEXT) AS category,
           CAST(s.name AS TEXT) AS set_name, s.revision, p.acceptance_length,
           CAST(p.method AS TEXT) AS method, p.copied_from, p.provenance_id, FALSE AS past
    FROM wanted w
    JOIN profiles p ON p.model = w.model AND p.speculative_method = w.method
        AND p.num_spec_tokens = w.k AND p.thinking = w.thinking AND p.category = w.want
    JOIN profile_sets s ON s.id = p.set_id
    WHERE w.as_of IS NULL AND (w.scope IS NULL OR s.name = ANY (w.scope))
    UNION ALL
    SELECT k.run_index, k.preference, v.id, CAST(k.category AS TEXT), CAST(k.set_name AS TEXT),
           k.revision, v.acceptance_length, CAST(v.method AS TEXT), v.copied_from,
           v.provenance_id, TRUE
    FROM (SELECT w.run_index, w.preference, p.id AS key_id, p.category, p.set_name,
                 {revision_then} AS revision
          FROM wanted w
          JOIN profile_keys p ON p.model = w.model AND p.speculative_method = w.method
              AND p.num_spec_tokens = w.k AND p.thinking = w.thinking AND p.category = w.want
          WHERE w.as_of IS NOT NULL AND (w.scope IS NULL OR p.set_name = ANY (w.scope))
            AND {current_then}) k
    JOIN profile_versions v ON v.id = {version_then}
),
won AS (
    SELECT * FROM (
        SELECT c.*, RANK() OVER w AS place, COUNT(*) OVER w AS set_count,
               ROW_NUMBER() OVER w AS nth
        FROM candidates c
        WINDOW w AS (PARTITION BY c.run_index ORDER BY c.preference)) AS x
    WHERE x.place = 1
),
decided AS (
    SELECT r.*, o.id, o.category AS used, o.set_count, o.set_name AS profile_set, o.revision,
           o.acceptance_length, o.method AS value_method, o.copied_from, o.provenance_id,
           o.past, CASE
        WHEN r.scope IS NOT NULL AND EXISTS (
            SELECT 1 FROM unnest(r.scope) AS n (name) WHERE NOT (CASE WHEN r.as_of IS NULL
                THEN EXISTS (SELECT 1 FROM profile_sets WHERE name = n.name)
                ELSE EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = n.name AND {live})
                END)) THEN 'unknown_set'
        WHEN r.thinking IS NULL THEN 'no_thinking'
        WHEN r.category IS NULL AND r.fallback_category IS NULL THEN 'no_category'
        WHEN o.set_count IS NULL AND r.fallback_category IS NULL THEN 'no_match'
        WHEN o.set_count IS NULL THEN 'fallback_no_match'
        WHEN o.set_count > 1 THEN 'conflict'
    END AS reason
    FROM r LEFT JOIN won o ON o.run_index = r.run_index AND o.nth = 1
),
-- the sets holding a conflicting run's key, by its number
conflicts AS (
    SELECT jsonb_object_agg(x.run_index, x.sets) AS sets
    FROM (SELECT w.run_index, string_agg(w.set_name, ', ' ORDER BY w.set_name COLLATE "C") AS sets
          FROM won w WHERE w.set_count > 1 GROUP BY w.run_index) AS x
),
misses AS (
    SELECT DISTINCT d.model, d.method, d.scope, d.as_of FROM decided d
    WHERE d.reason IN ('no_match', 'fallback_no_match')
),
said AS (
    SELECT jsonb_object_agg(CAST(jsonb_build_array(t.model, t.method, t.scope, t.as_of) AS TEXT),
                            t.stored) AS stored
    FROM (SELECT m.model, m.method, m.scope, m.as_of,
                 'K ' || {ks} || '; thinking ' || {modes} || '; categories ' || {categories}
                 AS stored
          FROM misses m
          LEFT JOIN LATERAL (
              SELECT CAST(p.num_spec_tokens AS INTEGER) AS num_spec_tokens,
                     CAST(p.thinking AS TEXT) AS thinking, CAST(p.category AS TEXT) AS category
              FROM profiles p
              WHERE m.as_of IS NULL AND p.model = m.model AND p.speculative_method = m.method
                AND (m.scope IS NULL OR p.set_id IN (
                    SELECT s.id FROM profile_sets s WHERE s.name = ANY (m.scope)))
              UNION ALL
              SELECT p.num_spec_tokens, p.thinking, p.category FROM profile_keys p
              WHERE m.as_of IS NOT NULL AND p.model = m.model
                AND p.speculative_method = m.method
                AND (m.scope IS NULL OR p.set_name = ANY (m.scope)) AND {current_missed}
          ) AS x ON TRUE
          GROUP BY m.model, m.method, m.scope, m.as_of) AS t
)
SELECT d.run_index,
    CASE WHEN d.reason IS NULL THEN 'resolved' ELSE 'refused' END,
    d.reason,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN
        d.model || '/' || d.method || '/k' || CAST(d.k AS TEXT) || '/thinking-' || d.thinking
        || '/' || d.used END,
    o.acceptance_length,
    (o.acceptance_length - 1) / d.k,
    CAST(d.k AS INTEGER),
    CASE WHEN o.rates IS NOT NULL THEN '[' || o.rates || ']'
    WHEN o.id IS NOT NULL THEN (
        SELECT '[' || string_agg(CAST(CASE
            WHEN i <= floor((o.acceptance_length - 1)) THEN 1.0
            WHEN i = floor((o.acceptance_length - 1)) + 1
                THEN (o.acceptance_length - 1) - floor((o.acceptance_length - 1))
            ELSE 0.0 END AS TEXT), ', ' ORDER BY i) || ']'
        FROM generate_series(1, GREATEST(d.k, 1)) AS i)
    END,
    CASE WHEN o.id IS NOT NULL THEN o.rates IS NULL END,
    o.profile_set,
    o.revision,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN d.used END,
    o.value_method,
    o.copied_from,
    CAST(pr.source AS TEXT),
    CASE WHEN o.id IS NOT NULL AND (d.category IS NULL OR o.used <> d.category)
        THEN d.category END,
    CASE WHEN o.id IS NOT NULL AND (d.category IS NULL OR o.used <> d.category)
        THEN o.used END,
    CAST(pr.hardware AS TEXT),
    CASE WHEN o.id IS NOT NULL THEN (d.hardware IS NOT NULL AND pr.hardware IS NOT NULL
        AND lower(d.hardware) <> lower(pr.hardware)) END,
    CAST(d.set_count AS INTEGER),
    CASE WHEN d.reason = 'conflict' THEN (SELECT c.sets FROM conflicts c)
        ->> CAST(d.run_index AS TEXT) END,
    CASE WHEN o.past THEN vc.drafts ELSE cn.drafts END,
    CASE WHEN o.past THEN vc.draft_tokens ELSE cn.draft_tokens END,
    CASE WHEN o.past THEN vc.accepted_tokens ELSE cn.accepted_tokens END,
    CAST(CASE WHEN o.past THEN vc.accepted_per_position ELSE cn.accepted_per_position END
        AS TEXT),
    CASE WHEN o.past THEN vc.al_stderr ELSE cn.al_stderr END,
    CASE WHEN COALESCE(vc.drafts, cn.drafts) IS NOT NULL THEN COALESCE(
        vc.accepted_per_position, cn.accepted_per_position) IS NOT NULL OR d.k = 1 END,
    CASE WHEN d.reason IN ('no_match', 'fallback_no_match') THEN (SELECT t.stored FROM said t)
        ->> CAST(jsonb_build_array(d.model, d.method, d.scope, d.as_of) AS TEXT) END
FROM decided d
-- the winner of a resolved run, its rates as stored (in position order, by the key's index)
LEFT JOIN LATERAL (
    SELECT d.id, d.used, d.profile_set, d.revision, d.acceptance_length, d.value_method,
           d.copied_from, d.provenance_id, d.past,
           CASE WHEN d.past THEN (
               SELECT string_agg(CAST(q.rate AS TEXT), ', ' ORDER BY q.position)
               FROM version_rates q WHERE q.profile_id = d.id)
           ELSE (
               SELECT string_agg(CAST(q.rate AS TEXT), ', ' ORDER BY q.position)
               FROM profile_rates q WHERE q.profile_id = d.id) END AS rates
    WHERE d.reason IS NULL) AS o ON TRUE
LEFT JOIN provenances pr ON pr.id = o.provenance_id
LEFT JOIN profile_counts cn ON NOT o.past AND cn.profile_id = o.id
LEFT JOIN version_counts vc ON o.past AND vc.profile_id = o.id
ORDER BY d.run_index
$registry_resolve_many$;
COMMENT ON FUNCTION registry_resolve_many(jsonb) IS
'registry_resolve for each run of a JSON array of objects keyed by its arguments'' '
'names, numbered from 0, in one set-based statement.';"""



def pg_many_function(schema: str) -> str:
    """``registry_resolve_many`` as one set-based statement (:data:`_PG_MANY`), made in
    ``schema`` (a quoted name): the text migration 0015 runs."""
    return _PG_MANY.format(
        columns=", ".join(f"{name} {kind}" for name, kind in ANSWER_COLUMNS), schema=schema,
        from_json=", ".join(f"CAST(e.v ->> '{name}' AS {kind}) AS {name}"
                            for name, kind, _ in PG_ARGUMENTS
                            if name not in ("set_name", "set_names")),
        revision_then=revision_at("p.set_name", "w.as_of"),
        current_then=_CURRENT_AT.format(at="w.as_of"),
        version_then=_version_at("k.key_id", "k.revision"),
        live=_live("v", "r.as_of"),
        current_missed=_CURRENT_AT.format(at="m.as_of"),
        ks=_held("num_spec_tokens", "x.num_spec_tokens"),
        modes=_held("thinking", 'x.thinking COLLATE "C"'),
        categories=_held("category", 'x.category COLLATE "C"'))


def _held(column: str, order: str) -> str:
    """The distinct values of what is stored, in order, as text; null when nothing is (the
    left join's one row of nulls is filtered out, so the text is null, not "K ; ...")."""
    return (f"array_to_string(array_agg(DISTINCT {order} ORDER BY {order})"
            f" FILTER (WHERE x.{column} IS NOT NULL), ', ')")


#: Where the statement ships for SQLite clients (inside the package: ``registry_db/resolve``).
SQLITE_FILE = "registry_resolve.sql"

_SQLITE_HEADER = """-- registry_resolve.sql: the registry layer's answer to one run, for any SQLite
-- client.
-- The statement registry resolve runs and PostgreSQL's registry_resolve holds (generated by
-- registry_db.resolve.statements.sqlite_file; a test compares this file with it).
--
-- Parameters, unset or NULL for none:
--   :model, :method   the run's model and speculative method
--   :k                its K, an integer
--   :thinking         the workload's thinking mode, 'on' or 'off'
--   :category         the workload's category
--   :fallback         the scenario pin's fallback_category
--   :set              one set's name (NULL, and :sets NULL: every set)
--   :sets             several sets' names, a JSON array such as '["a", "b"]'
--                     (in scope with :set; a key two of them hold is a conflict)
--   :hardware         the run's chip (the answer notes a profile measured on another)
--   :as_of            the registry as of a UTC time, in the stored format
--                     'YYYY-MM-DD HH:MM:SS.ffffff' (NULL: as it stands)
-- One row; its columns are PostgreSQL's registry_resolve's, booleans 1 and 0.
--
--   sqlite3 -readonly registry.db
--   sqlite> .parameter set :model "'model-a'"
--   sqlite> .parameter set :method "'mtp'"
--   sqlite> .parameter set :k 3
--   sqlite> .parameter set :thinking "'off'"
--   sqlite> .parameter set :category "'coding'"
--   sqlite> .read registry_resolve.sql
"""


def sqlite_file() -> str:
    """The text of ``registry_resolve.sql``: :func:`answer_statement` on SQLite, documented."""
    return _SQLITE_HEADER + answer_statement("sqlite") + ";\n"
