# ruff: noqa: E501 - FUNCTION and PREVIOUS are generated SQL, frozen as they were written out
r"""``registry_resolve_many`` as one set-based statement, in place of a call of
``registry_resolve`` per run.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05

0011's ``registry_resolve_many`` called ``registry_resolve`` once for each element of its JSON
array: 24 times the time of the set-based join ``registry resolve --batch`` runs. This one reads
the array once and answers every run in one statement: the runs' keys probe the profile key
index (or, as of a time, the stretches' and versions' indexes), one window keeps each run's
preferred category and counts the sets that hold it, and what is stored is described once per
(model, method, set, time) some run misses. Its columns and values are ``registry_resolve``'s,
run by run (``tests/db/test_resolve_differential.py`` compares them on a random grid); the
signature, the grants and ``registry_resolve`` itself do not change.

The text is a frozen copy of ``pg_many_function`` in the package's ``resolve/statements.py``
(``tests/db/test_resolve_function.py`` fails when the two differ); ``downgrade()`` puts 0011's
definition back (``PREVIOUS``, 0011's own text). SQLite has no stored functions: there this
migration does nothing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

#: ``pg_many_function("__SCHEMA__")`` as it was at this revision; the schema is the registry's,
#: quoted, filled in when it runs.
FUNCTION = """CREATE OR REPLACE FUNCTION registry_resolve_many(runs jsonb)
RETURNS TABLE (run_index integer, outcome text, reason text, profile text, acceptance_length double precision, acceptance_rate double precision, num_spec_tokens integer, per_position_rates text, rates_derived boolean, profile_set text, revision integer, category_used text, value_method text, copied_from text, source text, fallback_replaced text, fallback_used text, measured_on text, hardware_mismatch boolean, set_count integer, conflict_sets text, drafts bigint, draft_tokens bigint, accepted_tokens bigint, accepted_per_position text, al_stderr double precision, al_stderr_exact boolean, stored text)
LANGUAGE sql STABLE SECURITY INVOKER PARALLEL SAFE
SET search_path = pg_catalog, __SCHEMA__, pg_temp
SET extra_float_digits = 1
AS $registry_resolve_many$
WITH r AS MATERIALIZED (
    SELECT CAST(e.i - 1 AS INTEGER) AS run_index, CAST(e.v ->> 'model' AS text) AS model, CAST(e.v ->> 'method' AS text) AS method, CAST(e.v ->> 'k' AS integer) AS k, CAST(e.v ->> 'thinking' AS text) AS thinking, CAST(e.v ->> 'category' AS text) AS category, CAST(e.v ->> 'fallback_category' AS text) AS fallback_category, CAST(e.v ->> 'set_name' AS text) AS set_name, CAST(e.v ->> 'hardware' AS text) AS hardware, CAST(e.v ->> 'as_of' AS timestamptz) AS as_of
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
    WHERE w.as_of IS NULL AND (w.set_name IS NULL OR s.name = w.set_name)
    UNION ALL
    SELECT k.run_index, k.preference, v.id, CAST(k.category AS TEXT), CAST(k.set_name AS TEXT),
           k.revision, v.acceptance_length, CAST(v.method AS TEXT), v.copied_from,
           v.provenance_id, TRUE
    FROM (SELECT w.run_index, w.preference, p.id AS key_id, p.category, p.set_name,
                 (SELECT n.revision FROM revisions n WHERE n.set_name = p.set_name AND n.imported_at <= w.as_of ORDER BY n.imported_at DESC LIMIT 1) AS revision
          FROM wanted w
          JOIN profile_keys p ON p.model = w.model AND p.speculative_method = w.method
              AND p.num_spec_tokens = w.k AND p.thinking = w.thinking AND p.category = w.want
          WHERE w.as_of IS NOT NULL AND (w.set_name IS NULL OR p.set_name = w.set_name)
            AND p.valid_from <= w.as_of AND (p.valid_until IS NULL OR p.valid_until > w.as_of)) k
    JOIN profile_versions v ON v.id = (SELECT q.id FROM profile_versions q WHERE q.key_id = k.key_id AND q.first_revision <= k.revision ORDER BY q.first_revision DESC LIMIT 1)
),
won AS (
    SELECT * FROM (
        SELECT c.*, RANK() OVER w AS place, COUNT(*) OVER w AS set_count
        FROM candidates c
        WINDOW w AS (PARTITION BY c.run_index ORDER BY c.preference)) AS x
    WHERE x.place = 1
),
heads AS (
    SELECT w.run_index, MAX(w.category) AS used, MAX(w.set_count) AS set_count,
           string_agg(w.set_name, ', ' ORDER BY w.set_name COLLATE "C") AS sets
    FROM won w GROUP BY w.run_index
),
decided AS (
    SELECT r.*, h.used, h.set_count, h.sets, CASE
        WHEN r.set_name IS NOT NULL AND NOT (CASE WHEN r.as_of IS NULL
            THEN EXISTS (SELECT 1 FROM profile_sets WHERE name = r.set_name)
            ELSE EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = r.set_name AND v.action <> 'deleted' AND v.revision = (SELECT n.revision FROM revisions n WHERE n.set_name = v.set_name AND n.imported_at <= r.as_of ORDER BY n.imported_at DESC LIMIT 1))
            END) THEN 'unknown_set'
        WHEN r.thinking IS NULL THEN 'no_thinking'
        WHEN r.category IS NULL AND r.fallback_category IS NULL THEN 'no_category'
        WHEN h.set_count IS NULL AND r.fallback_category IS NULL THEN 'no_match'
        WHEN h.set_count IS NULL THEN 'fallback_no_match'
        WHEN h.set_count > 1 THEN 'conflict'
    END AS reason
    FROM r LEFT JOIN heads h ON h.run_index = r.run_index
),
one AS (
    SELECT o.run_index, o.id, o.category, o.set_name, o.revision, o.acceptance_length, o.method,
           o.copied_from, CAST(pr.source AS TEXT) AS source, CAST(pr.hardware AS TEXT) AS hardware,
           CASE WHEN o.past THEN vc.drafts ELSE cn.drafts END AS drafts,
           CASE WHEN o.past THEN vc.draft_tokens ELSE cn.draft_tokens END AS draft_tokens,
           CASE WHEN o.past THEN vc.accepted_tokens ELSE cn.accepted_tokens END
               AS accepted_tokens,
           CAST(CASE WHEN o.past THEN vc.accepted_per_position ELSE cn.accepted_per_position
               END AS TEXT) AS accepted_per_position,
           CASE WHEN o.past THEN vc.al_stderr ELSE cn.al_stderr END AS al_stderr,
           rt.stored_rates, rt.rates
    FROM won o
    LEFT JOIN provenances pr ON pr.id = o.provenance_id
    LEFT JOIN profile_counts cn ON NOT o.past AND cn.profile_id = o.id
    LEFT JOIN version_counts vc ON o.past AND vc.profile_id = o.id
    CROSS JOIN LATERAL (
        SELECT COUNT(*) AS stored_rates,
               string_agg(CAST(x.rate AS TEXT), ', ' ORDER BY x.position) AS rates
        FROM (SELECT q.position, q.rate FROM profile_rates q
              WHERE NOT o.past AND q.profile_id = o.id
              UNION ALL
              SELECT q.position, q.rate FROM version_rates q
              WHERE o.past AND q.profile_id = o.id) AS x) AS rt
    WHERE o.set_count = 1
),
misses AS (
    SELECT DISTINCT d.model, d.method, d.set_name, d.as_of FROM decided d
    WHERE d.reason IN ('no_match', 'fallback_no_match')
),
said AS (
    SELECT m.model, m.method, m.set_name, m.as_of,
           'K ' || array_to_string(array_agg(DISTINCT x.num_spec_tokens ORDER BY x.num_spec_tokens) FILTER (WHERE x.num_spec_tokens IS NOT NULL), ', ') || '; thinking ' || array_to_string(array_agg(DISTINCT x.thinking COLLATE "C" ORDER BY x.thinking COLLATE "C") FILTER (WHERE x.thinking IS NOT NULL), ', ') || '; categories ' || array_to_string(array_agg(DISTINCT x.category COLLATE "C" ORDER BY x.category COLLATE "C") FILTER (WHERE x.category IS NOT NULL), ', ')
           AS stored
    FROM misses m
    LEFT JOIN LATERAL (
        SELECT CAST(p.num_spec_tokens AS INTEGER) AS num_spec_tokens,
               CAST(p.thinking AS TEXT) AS thinking, CAST(p.category AS TEXT) AS category
        FROM profiles p JOIN profile_sets s ON s.id = p.set_id
        WHERE m.as_of IS NULL AND p.model = m.model AND p.speculative_method = m.method
          AND (m.set_name IS NULL OR s.name = m.set_name)
        UNION ALL
        SELECT p.num_spec_tokens, p.thinking, p.category FROM profile_keys p
        WHERE m.as_of IS NOT NULL AND p.model = m.model AND p.speculative_method = m.method
          AND (m.set_name IS NULL OR p.set_name = m.set_name) AND p.valid_from <= m.as_of AND (p.valid_until IS NULL OR p.valid_until > m.as_of)) AS x ON TRUE
    GROUP BY m.model, m.method, m.set_name, m.as_of
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
    CASE WHEN o.stored_rates > 0 THEN '[' || o.rates || ']'
    WHEN o.id IS NOT NULL THEN (
        SELECT '[' || string_agg(CAST(CASE
            WHEN i <= floor((o.acceptance_length - 1)) THEN 1.0
            WHEN i = floor((o.acceptance_length - 1)) + 1
                THEN (o.acceptance_length - 1) - floor((o.acceptance_length - 1))
            ELSE 0.0 END AS TEXT), ', ' ORDER BY i) || ']'
        FROM generate_series(1, GREATEST(d.k, 1)) AS i)
    END,
    CASE WHEN o.id IS NOT NULL THEN o.stored_rates = 0 END,
    o.set_name,
    o.revision,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN d.used END,
    o.method,
    o.copied_from,
    o.source,
    CASE WHEN o.id IS NOT NULL AND (d.category IS NULL OR o.category <> d.category)
        THEN d.category END,
    CASE WHEN o.id IS NOT NULL AND (d.category IS NULL OR o.category <> d.category)
        THEN o.category END,
    o.hardware,
    CASE WHEN o.id IS NOT NULL THEN (d.hardware IS NOT NULL AND o.hardware IS NOT NULL
        AND lower(d.hardware) <> lower(o.hardware)) END,
    CAST(d.set_count AS INTEGER),
    CASE WHEN d.reason = 'conflict' THEN d.sets END,
    o.drafts,
    o.draft_tokens,
    o.accepted_tokens,
    o.accepted_per_position,
    o.al_stderr,
    CASE WHEN o.drafts IS NOT NULL THEN o.accepted_per_position IS NOT NULL OR d.k = 1 END,
    CASE WHEN d.reason IN ('no_match', 'fallback_no_match') THEN t.stored END
FROM decided d
LEFT JOIN one o ON d.reason IS NULL AND o.run_index = d.run_index
LEFT JOIN said t ON d.reason IN ('no_match', 'fallback_no_match')
    AND t.model = d.model AND t.method = d.method
    AND COALESCE(t.set_name, '') = COALESCE(d.set_name, '')
    AND (t.set_name IS NULL) = (d.set_name IS NULL)
    AND COALESCE(t.as_of, '-infinity') = COALESCE(d.as_of, '-infinity')
    AND (t.as_of IS NULL) = (d.as_of IS NULL)
ORDER BY d.run_index
$registry_resolve_many$;
COMMENT ON FUNCTION registry_resolve_many(jsonb) IS
'registry_resolve for each run of a JSON array of objects keyed by its arguments'' '
'names, numbered from 0, in one set-based statement.';"""

#: 0011's ``registry_resolve_many``, which ``downgrade()`` restores.
PREVIOUS = """CREATE OR REPLACE FUNCTION registry_resolve_many(runs jsonb)
RETURNS TABLE (run_index integer, outcome text, reason text, profile text, acceptance_length double precision, acceptance_rate double precision, num_spec_tokens integer, per_position_rates text, rates_derived boolean, profile_set text, revision integer, category_used text, value_method text, copied_from text, source text, fallback_replaced text, fallback_used text, measured_on text, hardware_mismatch boolean, set_count integer, conflict_sets text, drafts bigint, draft_tokens bigint, accepted_tokens bigint, accepted_per_position text, al_stderr double precision, al_stderr_exact boolean, stored text)
LANGUAGE sql STABLE SECURITY INVOKER PARALLEL SAFE
SET search_path = pg_catalog, __SCHEMA__, pg_temp
AS $registry_resolve_many$
SELECT CAST(e.i - 1 AS INTEGER), r.*
FROM jsonb_array_elements(runs) WITH ORDINALITY AS e (v, i)
CROSS JOIN LATERAL registry_resolve(CAST(e.v ->> 'model' AS text), CAST(e.v ->> 'method' AS text), CAST(e.v ->> 'k' AS integer), CAST(e.v ->> 'thinking' AS text), CAST(e.v ->> 'category' AS text), CAST(e.v ->> 'fallback_category' AS text), CAST(e.v ->> 'set_name' AS text), CAST(e.v ->> 'hardware' AS text), CAST(e.v ->> 'as_of' AS timestamptz)) AS r
ORDER BY e.i
$registry_resolve_many$;
COMMENT ON FUNCTION registry_resolve_many(jsonb) IS
'registry_resolve for each run of a JSON array of objects keyed by its arguments'' '
'names, numbered from 0.';"""


def _run(definition: str) -> None:
    # The schema is the one the registry is made in, read by the server (so that the offline
    # SQL of `registry db upgrade --sql` does the same).
    op.execute(sa.text(
        "DO $registry_0013$ BEGIN EXECUTE replace($registry_0013_text$" + definition
        + "$registry_0013_text$, '__SCHEMA__', quote_ident(current_schema())); "
          "END $registry_0013$"))


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    _run(FUNCTION)


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    _run(PREVIOUS)
