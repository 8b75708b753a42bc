# ruff: noqa: E501 - the FUNCTION* and PREVIOUS* texts are generated SQL, frozen as written out
r"""``registry_resolve`` takes several sets (``set_names``); ``registry_resolve_many`` is
rewritten for speed and takes them too.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05

``registry_resolve`` gains a last argument, ``set_names text[] DEFAULT NULL``: the sets in scope
are ``set_name``'s and ``set_names``' together (neither: every set), so a run naming several
sets is decided by the function too (a conflict between them, an unknown one). A call with the
old arguments, by position or by name, means what it meant. PostgreSQL cannot add an argument
in place: the old signature is dropped and the new one made, with the old one's grants (PUBLIC's
included) given again. ``registry_resolve_many`` reads ``set_names`` from each run's object
too, and answers 10,000 runs in about 0.25 s of server CPU where 0013's took 0.32-0.54 s: the
join that attached what is stored to each miss was planned as a nested loop (the runs are 100
rows to the planner), the conflicts' sets were aggregated for every run, and what is stored
joined every set per miss (docs/decisions.md).

The texts are frozen copies of ``pg_function`` and ``pg_many_function`` in the package's
``resolve/statements.py`` (``tests/db/test_resolve_function.py`` fails when they differ);
``downgrade()`` puts 0011's ``registry_resolve`` (with its grants) and 0013's
``registry_resolve_many`` back. SQLite has no stored functions: there this migration does
nothing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

#: ``registry_resolve``'s signature before and after, as DROP FUNCTION and GRANT name them.
BEFORE = "registry_resolve(text, text, integer, text, text, text, text, text, timestamptz)"
AFTER = "registry_resolve(text, text, integer, text, text, text, text, text, timestamptz, text[])"

#: The functions' signatures at this revision.
SIGNATURES = (AFTER, "registry_resolve_many(jsonb)")

#: ``pg_function("__SCHEMA__")`` as it was at this revision; the schema is the registry's,
#: quoted, filled in when it runs.
FUNCTION = """CREATE OR REPLACE FUNCTION registry_resolve(model text, method text, k integer, thinking text, category text, fallback_category text DEFAULT NULL, set_name text DEFAULT NULL, hardware text DEFAULT NULL, as_of timestamptz DEFAULT NULL, set_names text[] DEFAULT NULL)
RETURNS TABLE (outcome text, reason text, profile text, acceptance_length double precision, acceptance_rate double precision, num_spec_tokens integer, per_position_rates text, rates_derived boolean, profile_set text, revision integer, category_used text, value_method text, copied_from text, source text, fallback_replaced text, fallback_used text, measured_on text, hardware_mismatch boolean, set_count integer, conflict_sets text, drafts bigint, draft_tokens bigint, accepted_tokens bigint, accepted_per_position text, al_stderr double precision, al_stderr_exact boolean, stored text)
LANGUAGE plpgsql STABLE SECURITY INVOKER PARALLEL SAFE
SET search_path = pg_catalog, __SCHEMA__, pg_temp
SET extra_float_digits = 1
SET plan_cache_mode = force_generic_plan
AS $registry_resolve$
#variable_conflict use_column
DECLARE
    -- the sets in scope, set_name's and set_names' (null: every set)
    in_scope text[] := NULLIF(array_remove($10 || $7, NULL), '{}');
BEGIN
IF $9 IS NULL AND NOT in_scope IS NOT NULL THEN
RETURN QUERY
WITH RECURSIVE named (name) AS (
    SELECT unnest(in_scope)
),
found (lookup_id, category, set_count, id, name, acceptance_length, method, copied_from, source, hardware, position, rate, revision, drafts, draft_tokens, accepted_tokens, accepted_per_position, al_stderr) AS (
    SELECT * FROM (
SELECT 0 AS lookup_id,
       p.category,
       -- counted once per profile, on its first row (a profile has a row per stored rate)
       CASE WHEN r.position IS NULL OR r.position = 1 THEN (
           SELECT COUNT(*) FROM profiles q
           WHERE q.model = p.model AND q.speculative_method = p.speculative_method AND q.num_spec_tokens = p.num_spec_tokens AND q.thinking = p.thinking AND q.category = p.category
       ) END AS set_count,
       p.id, s.name, p.acceptance_length, p.method, p.copied_from, pr.source, pr.hardware,
       r.position, r.rate, s.revision, cn.drafts, cn.draft_tokens, cn.accepted_tokens, cn.accepted_per_position, cn.al_stderr
FROM profiles p
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN profile_rates r ON r.profile_id = p.id
LEFT JOIN profile_counts cn ON cn.profile_id = p.id
WHERE p.model = $1 AND p.speculative_method = $2 AND p.num_spec_tokens = $3
  AND p.thinking = $4 AND p.category IN ($5, $6)
  AND (p.category = $5 OR NOT EXISTS (
      SELECT 1 FROM profiles q
      WHERE q.model = p.model AND q.speculative_method = p.speculative_method AND q.num_spec_tokens = p.num_spec_tokens AND q.thinking = p.thinking AND q.category = $5))
    ) AS f WHERE $9 IS NULL AND NOT in_scope IS NOT NULL
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
        WHEN EXISTS (SELECT 1 FROM named n WHERE NOT (CASE WHEN $9 IS NULL
            THEN EXISTS (SELECT 1 FROM profile_sets WHERE name = n.name)
            ELSE EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = n.name AND v.action <> 'deleted' AND v.revision = (SELECT n.revision FROM revisions n WHERE n.set_name = v.set_name AND n.imported_at <= $9 ORDER BY n.imported_at DESC LIMIT 1)) END)) THEN 'unknown_set'
        WHEN $4 IS NULL THEN 'no_thinking'
        WHEN $5 IS NULL AND $6 IS NULL THEN 'no_category'
        WHEN w.set_count IS NULL AND $6 IS NULL THEN 'no_match'
        WHEN w.set_count IS NULL THEN 'fallback_no_match'
        WHEN w.set_count > 1 THEN 'conflict'
    END AS reason, w.category AS used, w.set_count
    FROM winner w
),
one AS (SELECT h.* FROM held h JOIN decided d ON d.reason IS NULL),
positions (i) AS (
    SELECT 1 FROM one WHERE stored_rates = 0
    UNION ALL
    SELECT i + 1 FROM positions WHERE i < $3
),
stored AS (
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profiles p
    JOIN profile_sets s ON s.id = p.set_id
    WHERE $9 IS NULL AND p.model = $1 AND p.speculative_method = $2
      AND (NOT in_scope IS NOT NULL OR s.name IN (SELECT name FROM named))
    UNION ALL
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profile_keys p
    WHERE $9 IS NOT NULL AND p.model = $1 AND p.speculative_method = $2
      AND (NOT in_scope IS NOT NULL OR p.set_name IN (SELECT name FROM named))
      AND p.valid_from <= $9 AND (p.valid_until IS NULL OR p.valid_until > $9)
)
SELECT
    CASE WHEN d.reason IS NULL THEN 'resolved' ELSE 'refused' END AS outcome,
    d.reason,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN
        $1 || '/' || $2 || '/k' || CAST($3 AS TEXT) || '/thinking-' || $4
        || '/' || d.used END AS profile,
    o.acceptance_length,
    (o.acceptance_length - 1) / $3 AS acceptance_rate,
    CAST($3 AS INTEGER) AS num_spec_tokens,
    CASE WHEN o.stored_rates > 0 THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY position) || ']' FROM (
            SELECT position, rate FROM found WHERE position IS NOT NULL ORDER BY position) AS x)
    WHEN o.id IS NOT NULL THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY i) || ']' FROM (
            SELECT i, CASE
                WHEN i <= floor((o.acceptance_length - 1)) THEN 1.0
                WHEN i = floor((o.acceptance_length - 1)) + 1 THEN (o.acceptance_length - 1) - floor((o.acceptance_length - 1))
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
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN $5 END AS fallback_replaced,
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN o.category END AS fallback_used,
    o.hardware AS measured_on,
    CASE WHEN o.id IS NOT NULL THEN ($8 IS NOT NULL AND o.hardware IS NOT NULL
        AND lower($8) <> lower(o.hardware)) END AS hardware_mismatch,
    CAST(d.set_count AS INTEGER) AS set_count,
    CASE WHEN d.reason = 'conflict' THEN (
        SELECT string_agg(CAST(profile_set AS TEXT), ', ' ORDER BY profile_set COLLATE "C") FROM (SELECT profile_set FROM held ORDER BY profile_set COLLATE "C") AS x)
    END AS conflict_sets,
    o.drafts,
    o.draft_tokens,
    o.accepted_tokens,
    o.accepted_per_position,
    o.al_stderr,
    -- exact with the per-position counts, or at K = 1 (a step accepts 0 or 1 draft)
    CASE WHEN o.drafts IS NOT NULL THEN o.accepted_per_position IS NOT NULL OR $3 = 1 END
        AS al_stderr_exact,
    CASE WHEN d.reason IN ('no_match', 'fallback_no_match') THEN (
        SELECT 'K ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x) FROM (
                            SELECT DISTINCT num_spec_tokens AS x FROM stored) AS y)
            || '; thinking ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT thinking AS x FROM stored) AS y)
            || '; categories ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT category AS x FROM stored) AS y)
        WHERE EXISTS (SELECT 1 FROM stored))
    END AS stored
FROM decided d LEFT JOIN one o ON d.reason IS NULL;
ELSIF $9 IS NULL AND in_scope IS NOT NULL THEN
RETURN QUERY
WITH RECURSIVE named (name) AS (
    SELECT unnest(in_scope)
),
found (lookup_id, category, set_count, id, name, acceptance_length, method, copied_from, source, hardware, position, rate, revision, drafts, draft_tokens, accepted_tokens, accepted_per_position, al_stderr) AS (
    SELECT * FROM (
SELECT 0 AS lookup_id,
       p.category,
       -- counted once per profile, on its first row (a profile has a row per stored rate)
       CASE WHEN r.position IS NULL OR r.position = 1 THEN (
           SELECT COUNT(*) FROM profiles q
        JOIN profile_sets qs ON qs.id = q.set_id
           WHERE q.model = p.model AND q.speculative_method = p.speculative_method AND q.num_spec_tokens = p.num_spec_tokens AND q.thinking = p.thinking AND q.category = p.category AND qs.name IN (SELECT name FROM named)
       ) END AS set_count,
       p.id, s.name, p.acceptance_length, p.method, p.copied_from, pr.source, pr.hardware,
       r.position, r.rate, s.revision, cn.drafts, cn.draft_tokens, cn.accepted_tokens, cn.accepted_per_position, cn.al_stderr
FROM profiles p
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN profile_rates r ON r.profile_id = p.id
LEFT JOIN profile_counts cn ON cn.profile_id = p.id
WHERE p.model = $1 AND p.speculative_method = $2 AND p.num_spec_tokens = $3
  AND p.thinking = $4 AND p.category IN ($5, $6)
  AND (p.category = $5 OR NOT EXISTS (
      SELECT 1 FROM profiles q
        JOIN profile_sets qs ON qs.id = q.set_id
      WHERE q.model = p.model AND q.speculative_method = p.speculative_method AND q.num_spec_tokens = p.num_spec_tokens AND q.thinking = p.thinking AND q.category = $5 AND qs.name IN (SELECT name FROM named))) AND s.name IN (SELECT name FROM named)
    ) AS f WHERE $9 IS NULL AND in_scope IS NOT NULL
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
        WHEN EXISTS (SELECT 1 FROM named n WHERE NOT (CASE WHEN $9 IS NULL
            THEN EXISTS (SELECT 1 FROM profile_sets WHERE name = n.name)
            ELSE EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = n.name AND v.action <> 'deleted' AND v.revision = (SELECT n.revision FROM revisions n WHERE n.set_name = v.set_name AND n.imported_at <= $9 ORDER BY n.imported_at DESC LIMIT 1)) END)) THEN 'unknown_set'
        WHEN $4 IS NULL THEN 'no_thinking'
        WHEN $5 IS NULL AND $6 IS NULL THEN 'no_category'
        WHEN w.set_count IS NULL AND $6 IS NULL THEN 'no_match'
        WHEN w.set_count IS NULL THEN 'fallback_no_match'
        WHEN w.set_count > 1 THEN 'conflict'
    END AS reason, w.category AS used, w.set_count
    FROM winner w
),
one AS (SELECT h.* FROM held h JOIN decided d ON d.reason IS NULL),
positions (i) AS (
    SELECT 1 FROM one WHERE stored_rates = 0
    UNION ALL
    SELECT i + 1 FROM positions WHERE i < $3
),
stored AS (
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profiles p
    JOIN profile_sets s ON s.id = p.set_id
    WHERE $9 IS NULL AND p.model = $1 AND p.speculative_method = $2
      AND (NOT in_scope IS NOT NULL OR s.name IN (SELECT name FROM named))
    UNION ALL
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profile_keys p
    WHERE $9 IS NOT NULL AND p.model = $1 AND p.speculative_method = $2
      AND (NOT in_scope IS NOT NULL OR p.set_name IN (SELECT name FROM named))
      AND p.valid_from <= $9 AND (p.valid_until IS NULL OR p.valid_until > $9)
)
SELECT
    CASE WHEN d.reason IS NULL THEN 'resolved' ELSE 'refused' END AS outcome,
    d.reason,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN
        $1 || '/' || $2 || '/k' || CAST($3 AS TEXT) || '/thinking-' || $4
        || '/' || d.used END AS profile,
    o.acceptance_length,
    (o.acceptance_length - 1) / $3 AS acceptance_rate,
    CAST($3 AS INTEGER) AS num_spec_tokens,
    CASE WHEN o.stored_rates > 0 THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY position) || ']' FROM (
            SELECT position, rate FROM found WHERE position IS NOT NULL ORDER BY position) AS x)
    WHEN o.id IS NOT NULL THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY i) || ']' FROM (
            SELECT i, CASE
                WHEN i <= floor((o.acceptance_length - 1)) THEN 1.0
                WHEN i = floor((o.acceptance_length - 1)) + 1 THEN (o.acceptance_length - 1) - floor((o.acceptance_length - 1))
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
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN $5 END AS fallback_replaced,
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN o.category END AS fallback_used,
    o.hardware AS measured_on,
    CASE WHEN o.id IS NOT NULL THEN ($8 IS NOT NULL AND o.hardware IS NOT NULL
        AND lower($8) <> lower(o.hardware)) END AS hardware_mismatch,
    CAST(d.set_count AS INTEGER) AS set_count,
    CASE WHEN d.reason = 'conflict' THEN (
        SELECT string_agg(CAST(profile_set AS TEXT), ', ' ORDER BY profile_set COLLATE "C") FROM (SELECT profile_set FROM held ORDER BY profile_set COLLATE "C") AS x)
    END AS conflict_sets,
    o.drafts,
    o.draft_tokens,
    o.accepted_tokens,
    o.accepted_per_position,
    o.al_stderr,
    -- exact with the per-position counts, or at K = 1 (a step accepts 0 or 1 draft)
    CASE WHEN o.drafts IS NOT NULL THEN o.accepted_per_position IS NOT NULL OR $3 = 1 END
        AS al_stderr_exact,
    CASE WHEN d.reason IN ('no_match', 'fallback_no_match') THEN (
        SELECT 'K ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x) FROM (
                            SELECT DISTINCT num_spec_tokens AS x FROM stored) AS y)
            || '; thinking ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT thinking AS x FROM stored) AS y)
            || '; categories ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT category AS x FROM stored) AS y)
        WHERE EXISTS (SELECT 1 FROM stored))
    END AS stored
FROM decided d LEFT JOIN one o ON d.reason IS NULL;
ELSIF $9 IS NOT NULL AND NOT in_scope IS NOT NULL THEN
RETURN QUERY
WITH RECURSIVE named (name) AS (
    SELECT unnest(in_scope)
),
found (lookup_id, category, set_count, id, name, acceptance_length, method, copied_from, source, hardware, position, rate, revision, drafts, draft_tokens, accepted_tokens, accepted_per_position, al_stderr) AS (
    SELECT * FROM (
WITH c AS (
    SELECT p.id, k.category, p.acceptance_length, p.method, p.copied_from, p.provenance_id,
           k.set_name, k.revision
    FROM (SELECT p.id, p.category, p.set_name,
                 (SELECT n.revision FROM revisions n WHERE n.set_name = p.set_name AND n.imported_at <= $9 ORDER BY n.imported_at DESC LIMIT 1) AS revision
          FROM profile_keys p
          WHERE p.model = $1 AND p.speculative_method = $2 AND p.num_spec_tokens = $3
            AND p.thinking = $4 AND p.category IN ($5, $6)
            AND p.valid_from <= $9 AND (p.valid_until IS NULL OR p.valid_until > $9)) k
    JOIN profile_versions p ON p.id = (SELECT q.id FROM profile_versions q WHERE q.key_id = k.id AND q.first_revision <= k.revision ORDER BY q.first_revision DESC LIMIT 1)
)
SELECT 0 AS lookup_id, c.category,
       (SELECT COUNT(*) FROM c AS h WHERE h.category = c.category) AS set_count,
       c.id, c.set_name, c.acceptance_length, c.method, c.copied_from, pr.source, pr.hardware,
       r.position, r.rate, c.revision, cn.drafts, cn.draft_tokens, cn.accepted_tokens, cn.accepted_per_position, cn.al_stderr
FROM c
LEFT JOIN provenances pr ON pr.id = c.provenance_id
LEFT JOIN version_rates r ON r.profile_id = c.id
LEFT JOIN version_counts cn ON cn.profile_id = c.id
WHERE c.category = $5 OR NOT EXISTS (SELECT 1 FROM c AS h WHERE h.category = $5)
    ) AS f WHERE $9 IS NOT NULL AND NOT in_scope IS NOT NULL
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
        WHEN EXISTS (SELECT 1 FROM named n WHERE NOT (CASE WHEN $9 IS NULL
            THEN EXISTS (SELECT 1 FROM profile_sets WHERE name = n.name)
            ELSE EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = n.name AND v.action <> 'deleted' AND v.revision = (SELECT n.revision FROM revisions n WHERE n.set_name = v.set_name AND n.imported_at <= $9 ORDER BY n.imported_at DESC LIMIT 1)) END)) THEN 'unknown_set'
        WHEN $4 IS NULL THEN 'no_thinking'
        WHEN $5 IS NULL AND $6 IS NULL THEN 'no_category'
        WHEN w.set_count IS NULL AND $6 IS NULL THEN 'no_match'
        WHEN w.set_count IS NULL THEN 'fallback_no_match'
        WHEN w.set_count > 1 THEN 'conflict'
    END AS reason, w.category AS used, w.set_count
    FROM winner w
),
one AS (SELECT h.* FROM held h JOIN decided d ON d.reason IS NULL),
positions (i) AS (
    SELECT 1 FROM one WHERE stored_rates = 0
    UNION ALL
    SELECT i + 1 FROM positions WHERE i < $3
),
stored AS (
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profiles p
    JOIN profile_sets s ON s.id = p.set_id
    WHERE $9 IS NULL AND p.model = $1 AND p.speculative_method = $2
      AND (NOT in_scope IS NOT NULL OR s.name IN (SELECT name FROM named))
    UNION ALL
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profile_keys p
    WHERE $9 IS NOT NULL AND p.model = $1 AND p.speculative_method = $2
      AND (NOT in_scope IS NOT NULL OR p.set_name IN (SELECT name FROM named))
      AND p.valid_from <= $9 AND (p.valid_until IS NULL OR p.valid_until > $9)
)
SELECT
    CASE WHEN d.reason IS NULL THEN 'resolved' ELSE 'refused' END AS outcome,
    d.reason,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN
        $1 || '/' || $2 || '/k' || CAST($3 AS TEXT) || '/thinking-' || $4
        || '/' || d.used END AS profile,
    o.acceptance_length,
    (o.acceptance_length - 1) / $3 AS acceptance_rate,
    CAST($3 AS INTEGER) AS num_spec_tokens,
    CASE WHEN o.stored_rates > 0 THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY position) || ']' FROM (
            SELECT position, rate FROM found WHERE position IS NOT NULL ORDER BY position) AS x)
    WHEN o.id IS NOT NULL THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY i) || ']' FROM (
            SELECT i, CASE
                WHEN i <= floor((o.acceptance_length - 1)) THEN 1.0
                WHEN i = floor((o.acceptance_length - 1)) + 1 THEN (o.acceptance_length - 1) - floor((o.acceptance_length - 1))
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
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN $5 END AS fallback_replaced,
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN o.category END AS fallback_used,
    o.hardware AS measured_on,
    CASE WHEN o.id IS NOT NULL THEN ($8 IS NOT NULL AND o.hardware IS NOT NULL
        AND lower($8) <> lower(o.hardware)) END AS hardware_mismatch,
    CAST(d.set_count AS INTEGER) AS set_count,
    CASE WHEN d.reason = 'conflict' THEN (
        SELECT string_agg(CAST(profile_set AS TEXT), ', ' ORDER BY profile_set COLLATE "C") FROM (SELECT profile_set FROM held ORDER BY profile_set COLLATE "C") AS x)
    END AS conflict_sets,
    o.drafts,
    o.draft_tokens,
    o.accepted_tokens,
    o.accepted_per_position,
    o.al_stderr,
    -- exact with the per-position counts, or at K = 1 (a step accepts 0 or 1 draft)
    CASE WHEN o.drafts IS NOT NULL THEN o.accepted_per_position IS NOT NULL OR $3 = 1 END
        AS al_stderr_exact,
    CASE WHEN d.reason IN ('no_match', 'fallback_no_match') THEN (
        SELECT 'K ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x) FROM (
                            SELECT DISTINCT num_spec_tokens AS x FROM stored) AS y)
            || '; thinking ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT thinking AS x FROM stored) AS y)
            || '; categories ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT category AS x FROM stored) AS y)
        WHERE EXISTS (SELECT 1 FROM stored))
    END AS stored
FROM decided d LEFT JOIN one o ON d.reason IS NULL;
ELSIF $9 IS NOT NULL AND in_scope IS NOT NULL THEN
RETURN QUERY
WITH RECURSIVE named (name) AS (
    SELECT unnest(in_scope)
),
found (lookup_id, category, set_count, id, name, acceptance_length, method, copied_from, source, hardware, position, rate, revision, drafts, draft_tokens, accepted_tokens, accepted_per_position, al_stderr) AS (
    SELECT * FROM (
WITH c AS (
    SELECT p.id, k.category, p.acceptance_length, p.method, p.copied_from, p.provenance_id,
           k.set_name, k.revision
    FROM (SELECT p.id, p.category, p.set_name,
                 (SELECT n.revision FROM revisions n WHERE n.set_name = p.set_name AND n.imported_at <= $9 ORDER BY n.imported_at DESC LIMIT 1) AS revision
          FROM profile_keys p
          WHERE p.model = $1 AND p.speculative_method = $2 AND p.num_spec_tokens = $3
            AND p.thinking = $4 AND p.category IN ($5, $6) AND p.set_name IN (SELECT name FROM named)
            AND p.valid_from <= $9 AND (p.valid_until IS NULL OR p.valid_until > $9)) k
    JOIN profile_versions p ON p.id = (SELECT q.id FROM profile_versions q WHERE q.key_id = k.id AND q.first_revision <= k.revision ORDER BY q.first_revision DESC LIMIT 1)
)
SELECT 0 AS lookup_id, c.category,
       (SELECT COUNT(*) FROM c AS h WHERE h.category = c.category) AS set_count,
       c.id, c.set_name, c.acceptance_length, c.method, c.copied_from, pr.source, pr.hardware,
       r.position, r.rate, c.revision, cn.drafts, cn.draft_tokens, cn.accepted_tokens, cn.accepted_per_position, cn.al_stderr
FROM c
LEFT JOIN provenances pr ON pr.id = c.provenance_id
LEFT JOIN version_rates r ON r.profile_id = c.id
LEFT JOIN version_counts cn ON cn.profile_id = c.id
WHERE c.category = $5 OR NOT EXISTS (SELECT 1 FROM c AS h WHERE h.category = $5)
    ) AS f WHERE $9 IS NOT NULL AND in_scope IS NOT NULL
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
        WHEN EXISTS (SELECT 1 FROM named n WHERE NOT (CASE WHEN $9 IS NULL
            THEN EXISTS (SELECT 1 FROM profile_sets WHERE name = n.name)
            ELSE EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = n.name AND v.action <> 'deleted' AND v.revision = (SELECT n.revision FROM revisions n WHERE n.set_name = v.set_name AND n.imported_at <= $9 ORDER BY n.imported_at DESC LIMIT 1)) END)) THEN 'unknown_set'
        WHEN $4 IS NULL THEN 'no_thinking'
        WHEN $5 IS NULL AND $6 IS NULL THEN 'no_category'
        WHEN w.set_count IS NULL AND $6 IS NULL THEN 'no_match'
        WHEN w.set_count IS NULL THEN 'fallback_no_match'
        WHEN w.set_count > 1 THEN 'conflict'
    END AS reason, w.category AS used, w.set_count
    FROM winner w
),
one AS (SELECT h.* FROM held h JOIN decided d ON d.reason IS NULL),
positions (i) AS (
    SELECT 1 FROM one WHERE stored_rates = 0
    UNION ALL
    SELECT i + 1 FROM positions WHERE i < $3
),
stored AS (
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profiles p
    JOIN profile_sets s ON s.id = p.set_id
    WHERE $9 IS NULL AND p.model = $1 AND p.speculative_method = $2
      AND (NOT in_scope IS NOT NULL OR s.name IN (SELECT name FROM named))
    UNION ALL
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profile_keys p
    WHERE $9 IS NOT NULL AND p.model = $1 AND p.speculative_method = $2
      AND (NOT in_scope IS NOT NULL OR p.set_name IN (SELECT name FROM named))
      AND p.valid_from <= $9 AND (p.valid_until IS NULL OR p.valid_until > $9)
)
SELECT
    CASE WHEN d.reason IS NULL THEN 'resolved' ELSE 'refused' END AS outcome,
    d.reason,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN
        $1 || '/' || $2 || '/k' || CAST($3 AS TEXT) || '/thinking-' || $4
        || '/' || d.used END AS profile,
    o.acceptance_length,
    (o.acceptance_length - 1) / $3 AS acceptance_rate,
    CAST($3 AS INTEGER) AS num_spec_tokens,
    CASE WHEN o.stored_rates > 0 THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY position) || ']' FROM (
            SELECT position, rate FROM found WHERE position IS NOT NULL ORDER BY position) AS x)
    WHEN o.id IS NOT NULL THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY i) || ']' FROM (
            SELECT i, CASE
                WHEN i <= floor((o.acceptance_length - 1)) THEN 1.0
                WHEN i = floor((o.acceptance_length - 1)) + 1 THEN (o.acceptance_length - 1) - floor((o.acceptance_length - 1))
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
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN $5 END AS fallback_replaced,
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN o.category END AS fallback_used,
    o.hardware AS measured_on,
    CASE WHEN o.id IS NOT NULL THEN ($8 IS NOT NULL AND o.hardware IS NOT NULL
        AND lower($8) <> lower(o.hardware)) END AS hardware_mismatch,
    CAST(d.set_count AS INTEGER) AS set_count,
    CASE WHEN d.reason = 'conflict' THEN (
        SELECT string_agg(CAST(profile_set AS TEXT), ', ' ORDER BY profile_set COLLATE "C") FROM (SELECT profile_set FROM held ORDER BY profile_set COLLATE "C") AS x)
    END AS conflict_sets,
    o.drafts,
    o.draft_tokens,
    o.accepted_tokens,
    o.accepted_per_position,
    o.al_stderr,
    -- exact with the per-position counts, or at K = 1 (a step accepts 0 or 1 draft)
    CASE WHEN o.drafts IS NOT NULL THEN o.accepted_per_position IS NOT NULL OR $3 = 1 END
        AS al_stderr_exact,
    CASE WHEN d.reason IN ('no_match', 'fallback_no_match') THEN (
        SELECT 'K ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x) FROM (
                            SELECT DISTINCT num_spec_tokens AS x FROM stored) AS y)
            || '; thinking ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT thinking AS x FROM stored) AS y)
            || '; categories ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT category AS x FROM stored) AS y)
        WHERE EXISTS (SELECT 1 FROM stored))
    END AS stored
FROM decided d LEFT JOIN one o ON d.reason IS NULL;
END IF;
END
$registry_resolve$;
COMMENT ON FUNCTION registry_resolve(text, text, integer, text, text, text, text, text, timestamptz, text[]) IS
'The registry layer''s answer to one run: resolved or refused, the value and where it '
'came from.';"""

#: ``pg_many_function("__SCHEMA__")`` as it was at this revision.
FUNCTION_MANY = """CREATE OR REPLACE FUNCTION registry_resolve_many(runs jsonb)
RETURNS TABLE (run_index integer, outcome text, reason text, profile text, acceptance_length double precision, acceptance_rate double precision, num_spec_tokens integer, per_position_rates text, rates_derived boolean, profile_set text, revision integer, category_used text, value_method text, copied_from text, source text, fallback_replaced text, fallback_used text, measured_on text, hardware_mismatch boolean, set_count integer, conflict_sets text, drafts bigint, draft_tokens bigint, accepted_tokens bigint, accepted_per_position text, al_stderr double precision, al_stderr_exact boolean, stored text)
LANGUAGE sql STABLE SECURITY INVOKER PARALLEL SAFE
SET search_path = pg_catalog, __SCHEMA__, pg_temp
SET extra_float_digits = 1
AS $registry_resolve_many$
WITH r AS MATERIALIZED (
    SELECT CAST(e.i - 1 AS INTEGER) AS run_index, CAST(e.v ->> 'model' AS text) AS model, CAST(e.v ->> 'method' AS text) AS method, CAST(e.v ->> 'k' AS integer) AS k, CAST(e.v ->> 'thinking' AS text) AS thinking, CAST(e.v ->> 'category' AS text) AS category, CAST(e.v ->> 'fallback_category' AS text) AS fallback_category, CAST(e.v ->> 'hardware' AS text) AS hardware, CAST(e.v ->> 'as_of' AS timestamptz) AS as_of,
           CASE WHEN e.v ->> 'set_names' IS NULL THEN
               CASE WHEN e.v ->> 'set_name' IS NOT NULL THEN ARRAY[e.v ->> 'set_name'] END
           ELSE NULLIF(ARRAY(
               SELECT n.name FROM jsonb_array_elements_text(e.v -> 'set_names') AS n (name)
               WHERE n.name IS NOT NULL
               UNION SELECT e.v ->> 'set_name' WHERE e.v ->> 'set_name' IS NOT NULL), '{}')
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
                 (SELECT n.revision FROM revisions n WHERE n.set_name = p.set_name AND n.imported_at <= w.as_of ORDER BY n.imported_at DESC LIMIT 1) AS revision
          FROM wanted w
          JOIN profile_keys p ON p.model = w.model AND p.speculative_method = w.method
              AND p.num_spec_tokens = w.k AND p.thinking = w.thinking AND p.category = w.want
          WHERE w.as_of IS NOT NULL AND (w.scope IS NULL OR p.set_name = ANY (w.scope))
            AND p.valid_from <= w.as_of AND (p.valid_until IS NULL OR p.valid_until > w.as_of)) k
    JOIN profile_versions v ON v.id = (SELECT q.id FROM profile_versions q WHERE q.key_id = k.key_id AND q.first_revision <= k.revision ORDER BY q.first_revision DESC LIMIT 1)
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
                ELSE EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = n.name AND v.action <> 'deleted' AND v.revision = (SELECT n.revision FROM revisions n WHERE n.set_name = v.set_name AND n.imported_at <= r.as_of ORDER BY n.imported_at DESC LIMIT 1))
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
                 'K ' || array_to_string(array_agg(DISTINCT x.num_spec_tokens ORDER BY x.num_spec_tokens) FILTER (WHERE x.num_spec_tokens IS NOT NULL), ', ') || '; thinking ' || array_to_string(array_agg(DISTINCT x.thinking COLLATE "C" ORDER BY x.thinking COLLATE "C") FILTER (WHERE x.thinking IS NOT NULL), ', ') || '; categories ' || array_to_string(array_agg(DISTINCT x.category COLLATE "C" ORDER BY x.category COLLATE "C") FILTER (WHERE x.category IS NOT NULL), ', ')
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
                AND (m.scope IS NULL OR p.set_name = ANY (m.scope)) AND p.valid_from <= m.as_of AND (p.valid_until IS NULL OR p.valid_until > m.as_of)
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

#: 0011's ``registry_resolve``, which ``downgrade()`` restores.
PREVIOUS = """CREATE OR REPLACE FUNCTION registry_resolve(model text, method text, k integer, thinking text, category text, fallback_category text DEFAULT NULL, set_name text DEFAULT NULL, hardware text DEFAULT NULL, as_of timestamptz DEFAULT NULL)
RETURNS TABLE (outcome text, reason text, profile text, acceptance_length double precision, acceptance_rate double precision, num_spec_tokens integer, per_position_rates text, rates_derived boolean, profile_set text, revision integer, category_used text, value_method text, copied_from text, source text, fallback_replaced text, fallback_used text, measured_on text, hardware_mismatch boolean, set_count integer, conflict_sets text, drafts bigint, draft_tokens bigint, accepted_tokens bigint, accepted_per_position text, al_stderr double precision, al_stderr_exact boolean, stored text)
LANGUAGE plpgsql STABLE SECURITY INVOKER PARALLEL SAFE
SET search_path = pg_catalog, __SCHEMA__, pg_temp
SET extra_float_digits = 1
SET plan_cache_mode = force_generic_plan
AS $registry_resolve$
#variable_conflict use_column
BEGIN
IF $9 IS NULL AND $7 IS NULL THEN
RETURN QUERY
WITH RECURSIVE found (lookup_id, category, set_count, id, name, acceptance_length, method, copied_from, source, hardware, position, rate, revision, drafts, draft_tokens, accepted_tokens, accepted_per_position, al_stderr) AS (
    SELECT * FROM (
SELECT 0 AS lookup_id,
       p.category,
       -- counted once per profile, on its first row (a profile has a row per stored rate)
       CASE WHEN r.position IS NULL OR r.position = 1 THEN (
           SELECT COUNT(*) FROM profiles q
           WHERE q.model = p.model AND q.speculative_method = p.speculative_method AND q.num_spec_tokens = p.num_spec_tokens AND q.thinking = p.thinking AND q.category = p.category
       ) END AS set_count,
       p.id, s.name, p.acceptance_length, p.method, p.copied_from, pr.source, pr.hardware,
       r.position, r.rate, s.revision, cn.drafts, cn.draft_tokens, cn.accepted_tokens, cn.accepted_per_position, cn.al_stderr
FROM profiles p
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN profile_rates r ON r.profile_id = p.id
LEFT JOIN profile_counts cn ON cn.profile_id = p.id
WHERE p.model = $1 AND p.speculative_method = $2 AND p.num_spec_tokens = $3
  AND p.thinking = $4 AND p.category IN ($5, $6)
  AND (p.category = $5 OR NOT EXISTS (
      SELECT 1 FROM profiles q
      WHERE q.model = p.model AND q.speculative_method = p.speculative_method AND q.num_spec_tokens = p.num_spec_tokens AND q.thinking = p.thinking AND q.category = $5))
    ) AS f WHERE $9 IS NULL AND $7 IS NULL
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
        WHEN $7 IS NOT NULL AND NOT (CASE WHEN $9 IS NULL
            THEN EXISTS (SELECT 1 FROM profile_sets WHERE name = $7)
            ELSE EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = $7 AND v.action <> 'deleted' AND v.revision = (SELECT n.revision FROM revisions n WHERE n.set_name = v.set_name AND n.imported_at <= $9 ORDER BY n.imported_at DESC LIMIT 1)) END) THEN 'unknown_set'
        WHEN $4 IS NULL THEN 'no_thinking'
        WHEN $5 IS NULL AND $6 IS NULL THEN 'no_category'
        WHEN w.set_count IS NULL AND $6 IS NULL THEN 'no_match'
        WHEN w.set_count IS NULL THEN 'fallback_no_match'
        WHEN w.set_count > 1 THEN 'conflict'
    END AS reason, w.category AS used, w.set_count
    FROM winner w
),
one AS (SELECT h.* FROM held h JOIN decided d ON d.reason IS NULL),
positions (i) AS (
    SELECT 1 FROM one WHERE stored_rates = 0
    UNION ALL
    SELECT i + 1 FROM positions WHERE i < $3
),
stored AS (
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profiles p
    JOIN profile_sets s ON s.id = p.set_id
    WHERE $9 IS NULL AND p.model = $1 AND p.speculative_method = $2
      AND ($7 IS NULL OR s.name = $7)
    UNION ALL
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profile_keys p
    WHERE $9 IS NOT NULL AND p.model = $1 AND p.speculative_method = $2
      AND ($7 IS NULL OR p.set_name = $7) AND p.valid_from <= $9 AND (p.valid_until IS NULL OR p.valid_until > $9)
)
SELECT
    CASE WHEN d.reason IS NULL THEN 'resolved' ELSE 'refused' END AS outcome,
    d.reason,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN
        $1 || '/' || $2 || '/k' || CAST($3 AS TEXT) || '/thinking-' || $4
        || '/' || d.used END AS profile,
    o.acceptance_length,
    (o.acceptance_length - 1) / $3 AS acceptance_rate,
    CAST($3 AS INTEGER) AS num_spec_tokens,
    CASE WHEN o.stored_rates > 0 THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY position) || ']' FROM (
            SELECT position, rate FROM found WHERE position IS NOT NULL ORDER BY position) AS x)
    WHEN o.id IS NOT NULL THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY i) || ']' FROM (
            SELECT i, CASE
                WHEN i <= floor((o.acceptance_length - 1)) THEN 1.0
                WHEN i = floor((o.acceptance_length - 1)) + 1 THEN (o.acceptance_length - 1) - floor((o.acceptance_length - 1))
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
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN $5 END AS fallback_replaced,
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN o.category END AS fallback_used,
    o.hardware AS measured_on,
    CASE WHEN o.id IS NOT NULL THEN ($8 IS NOT NULL AND o.hardware IS NOT NULL
        AND lower($8) <> lower(o.hardware)) END AS hardware_mismatch,
    CAST(d.set_count AS INTEGER) AS set_count,
    CASE WHEN d.reason = 'conflict' THEN (
        SELECT string_agg(CAST(profile_set AS TEXT), ', ' ORDER BY profile_set COLLATE "C") FROM (SELECT profile_set FROM held ORDER BY profile_set COLLATE "C") AS x)
    END AS conflict_sets,
    o.drafts,
    o.draft_tokens,
    o.accepted_tokens,
    o.accepted_per_position,
    o.al_stderr,
    -- exact with the per-position counts, or at K = 1 (a step accepts 0 or 1 draft)
    CASE WHEN o.drafts IS NOT NULL THEN o.accepted_per_position IS NOT NULL OR $3 = 1 END
        AS al_stderr_exact,
    CASE WHEN d.reason IN ('no_match', 'fallback_no_match') THEN (
        SELECT 'K ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x) FROM (
                            SELECT DISTINCT num_spec_tokens AS x FROM stored) AS y)
            || '; thinking ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT thinking AS x FROM stored) AS y)
            || '; categories ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT category AS x FROM stored) AS y)
        WHERE EXISTS (SELECT 1 FROM stored))
    END AS stored
FROM decided d LEFT JOIN one o ON d.reason IS NULL;
ELSIF $9 IS NULL AND $7 IS NOT NULL THEN
RETURN QUERY
WITH RECURSIVE found (lookup_id, category, set_count, id, name, acceptance_length, method, copied_from, source, hardware, position, rate, revision, drafts, draft_tokens, accepted_tokens, accepted_per_position, al_stderr) AS (
    SELECT * FROM (
SELECT 0 AS lookup_id,
       p.category,
       -- counted once per profile, on its first row (a profile has a row per stored rate)
       CASE WHEN r.position IS NULL OR r.position = 1 THEN (
           SELECT COUNT(*) FROM profiles q
        JOIN profile_sets qs ON qs.id = q.set_id
           WHERE q.model = p.model AND q.speculative_method = p.speculative_method AND q.num_spec_tokens = p.num_spec_tokens AND q.thinking = p.thinking AND q.category = p.category AND qs.name IN ($7)
       ) END AS set_count,
       p.id, s.name, p.acceptance_length, p.method, p.copied_from, pr.source, pr.hardware,
       r.position, r.rate, s.revision, cn.drafts, cn.draft_tokens, cn.accepted_tokens, cn.accepted_per_position, cn.al_stderr
FROM profiles p
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN profile_rates r ON r.profile_id = p.id
LEFT JOIN profile_counts cn ON cn.profile_id = p.id
WHERE p.model = $1 AND p.speculative_method = $2 AND p.num_spec_tokens = $3
  AND p.thinking = $4 AND p.category IN ($5, $6)
  AND (p.category = $5 OR NOT EXISTS (
      SELECT 1 FROM profiles q
        JOIN profile_sets qs ON qs.id = q.set_id
      WHERE q.model = p.model AND q.speculative_method = p.speculative_method AND q.num_spec_tokens = p.num_spec_tokens AND q.thinking = p.thinking AND q.category = $5 AND qs.name IN ($7))) AND s.name IN ($7)
    ) AS f WHERE $9 IS NULL AND $7 IS NOT NULL
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
        WHEN $7 IS NOT NULL AND NOT (CASE WHEN $9 IS NULL
            THEN EXISTS (SELECT 1 FROM profile_sets WHERE name = $7)
            ELSE EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = $7 AND v.action <> 'deleted' AND v.revision = (SELECT n.revision FROM revisions n WHERE n.set_name = v.set_name AND n.imported_at <= $9 ORDER BY n.imported_at DESC LIMIT 1)) END) THEN 'unknown_set'
        WHEN $4 IS NULL THEN 'no_thinking'
        WHEN $5 IS NULL AND $6 IS NULL THEN 'no_category'
        WHEN w.set_count IS NULL AND $6 IS NULL THEN 'no_match'
        WHEN w.set_count IS NULL THEN 'fallback_no_match'
        WHEN w.set_count > 1 THEN 'conflict'
    END AS reason, w.category AS used, w.set_count
    FROM winner w
),
one AS (SELECT h.* FROM held h JOIN decided d ON d.reason IS NULL),
positions (i) AS (
    SELECT 1 FROM one WHERE stored_rates = 0
    UNION ALL
    SELECT i + 1 FROM positions WHERE i < $3
),
stored AS (
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profiles p
    JOIN profile_sets s ON s.id = p.set_id
    WHERE $9 IS NULL AND p.model = $1 AND p.speculative_method = $2
      AND ($7 IS NULL OR s.name = $7)
    UNION ALL
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profile_keys p
    WHERE $9 IS NOT NULL AND p.model = $1 AND p.speculative_method = $2
      AND ($7 IS NULL OR p.set_name = $7) AND p.valid_from <= $9 AND (p.valid_until IS NULL OR p.valid_until > $9)
)
SELECT
    CASE WHEN d.reason IS NULL THEN 'resolved' ELSE 'refused' END AS outcome,
    d.reason,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN
        $1 || '/' || $2 || '/k' || CAST($3 AS TEXT) || '/thinking-' || $4
        || '/' || d.used END AS profile,
    o.acceptance_length,
    (o.acceptance_length - 1) / $3 AS acceptance_rate,
    CAST($3 AS INTEGER) AS num_spec_tokens,
    CASE WHEN o.stored_rates > 0 THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY position) || ']' FROM (
            SELECT position, rate FROM found WHERE position IS NOT NULL ORDER BY position) AS x)
    WHEN o.id IS NOT NULL THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY i) || ']' FROM (
            SELECT i, CASE
                WHEN i <= floor((o.acceptance_length - 1)) THEN 1.0
                WHEN i = floor((o.acceptance_length - 1)) + 1 THEN (o.acceptance_length - 1) - floor((o.acceptance_length - 1))
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
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN $5 END AS fallback_replaced,
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN o.category END AS fallback_used,
    o.hardware AS measured_on,
    CASE WHEN o.id IS NOT NULL THEN ($8 IS NOT NULL AND o.hardware IS NOT NULL
        AND lower($8) <> lower(o.hardware)) END AS hardware_mismatch,
    CAST(d.set_count AS INTEGER) AS set_count,
    CASE WHEN d.reason = 'conflict' THEN (
        SELECT string_agg(CAST(profile_set AS TEXT), ', ' ORDER BY profile_set COLLATE "C") FROM (SELECT profile_set FROM held ORDER BY profile_set COLLATE "C") AS x)
    END AS conflict_sets,
    o.drafts,
    o.draft_tokens,
    o.accepted_tokens,
    o.accepted_per_position,
    o.al_stderr,
    -- exact with the per-position counts, or at K = 1 (a step accepts 0 or 1 draft)
    CASE WHEN o.drafts IS NOT NULL THEN o.accepted_per_position IS NOT NULL OR $3 = 1 END
        AS al_stderr_exact,
    CASE WHEN d.reason IN ('no_match', 'fallback_no_match') THEN (
        SELECT 'K ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x) FROM (
                            SELECT DISTINCT num_spec_tokens AS x FROM stored) AS y)
            || '; thinking ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT thinking AS x FROM stored) AS y)
            || '; categories ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT category AS x FROM stored) AS y)
        WHERE EXISTS (SELECT 1 FROM stored))
    END AS stored
FROM decided d LEFT JOIN one o ON d.reason IS NULL;
ELSIF $9 IS NOT NULL AND $7 IS NULL THEN
RETURN QUERY
WITH RECURSIVE found (lookup_id, category, set_count, id, name, acceptance_length, method, copied_from, source, hardware, position, rate, revision, drafts, draft_tokens, accepted_tokens, accepted_per_position, al_stderr) AS (
    SELECT * FROM (
WITH c AS (
    SELECT p.id, k.category, p.acceptance_length, p.method, p.copied_from, p.provenance_id,
           k.set_name, k.revision
    FROM (SELECT p.id, p.category, p.set_name,
                 (SELECT n.revision FROM revisions n WHERE n.set_name = p.set_name AND n.imported_at <= $9 ORDER BY n.imported_at DESC LIMIT 1) AS revision
          FROM profile_keys p
          WHERE p.model = $1 AND p.speculative_method = $2 AND p.num_spec_tokens = $3
            AND p.thinking = $4 AND p.category IN ($5, $6)
            AND p.valid_from <= $9 AND (p.valid_until IS NULL OR p.valid_until > $9)) k
    JOIN profile_versions p ON p.id = (SELECT q.id FROM profile_versions q WHERE q.key_id = k.id AND q.first_revision <= k.revision ORDER BY q.first_revision DESC LIMIT 1)
)
SELECT 0 AS lookup_id, c.category,
       (SELECT COUNT(*) FROM c AS h WHERE h.category = c.category) AS set_count,
       c.id, c.set_name, c.acceptance_length, c.method, c.copied_from, pr.source, pr.hardware,
       r.position, r.rate, c.revision, cn.drafts, cn.draft_tokens, cn.accepted_tokens, cn.accepted_per_position, cn.al_stderr
FROM c
LEFT JOIN provenances pr ON pr.id = c.provenance_id
LEFT JOIN version_rates r ON r.profile_id = c.id
LEFT JOIN version_counts cn ON cn.profile_id = c.id
WHERE c.category = $5 OR NOT EXISTS (SELECT 1 FROM c AS h WHERE h.category = $5)
    ) AS f WHERE $9 IS NOT NULL AND $7 IS NULL
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
        WHEN $7 IS NOT NULL AND NOT (CASE WHEN $9 IS NULL
            THEN EXISTS (SELECT 1 FROM profile_sets WHERE name = $7)
            ELSE EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = $7 AND v.action <> 'deleted' AND v.revision = (SELECT n.revision FROM revisions n WHERE n.set_name = v.set_name AND n.imported_at <= $9 ORDER BY n.imported_at DESC LIMIT 1)) END) THEN 'unknown_set'
        WHEN $4 IS NULL THEN 'no_thinking'
        WHEN $5 IS NULL AND $6 IS NULL THEN 'no_category'
        WHEN w.set_count IS NULL AND $6 IS NULL THEN 'no_match'
        WHEN w.set_count IS NULL THEN 'fallback_no_match'
        WHEN w.set_count > 1 THEN 'conflict'
    END AS reason, w.category AS used, w.set_count
    FROM winner w
),
one AS (SELECT h.* FROM held h JOIN decided d ON d.reason IS NULL),
positions (i) AS (
    SELECT 1 FROM one WHERE stored_rates = 0
    UNION ALL
    SELECT i + 1 FROM positions WHERE i < $3
),
stored AS (
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profiles p
    JOIN profile_sets s ON s.id = p.set_id
    WHERE $9 IS NULL AND p.model = $1 AND p.speculative_method = $2
      AND ($7 IS NULL OR s.name = $7)
    UNION ALL
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profile_keys p
    WHERE $9 IS NOT NULL AND p.model = $1 AND p.speculative_method = $2
      AND ($7 IS NULL OR p.set_name = $7) AND p.valid_from <= $9 AND (p.valid_until IS NULL OR p.valid_until > $9)
)
SELECT
    CASE WHEN d.reason IS NULL THEN 'resolved' ELSE 'refused' END AS outcome,
    d.reason,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN
        $1 || '/' || $2 || '/k' || CAST($3 AS TEXT) || '/thinking-' || $4
        || '/' || d.used END AS profile,
    o.acceptance_length,
    (o.acceptance_length - 1) / $3 AS acceptance_rate,
    CAST($3 AS INTEGER) AS num_spec_tokens,
    CASE WHEN o.stored_rates > 0 THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY position) || ']' FROM (
            SELECT position, rate FROM found WHERE position IS NOT NULL ORDER BY position) AS x)
    WHEN o.id IS NOT NULL THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY i) || ']' FROM (
            SELECT i, CASE
                WHEN i <= floor((o.acceptance_length - 1)) THEN 1.0
                WHEN i = floor((o.acceptance_length - 1)) + 1 THEN (o.acceptance_length - 1) - floor((o.acceptance_length - 1))
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
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN $5 END AS fallback_replaced,
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN o.category END AS fallback_used,
    o.hardware AS measured_on,
    CASE WHEN o.id IS NOT NULL THEN ($8 IS NOT NULL AND o.hardware IS NOT NULL
        AND lower($8) <> lower(o.hardware)) END AS hardware_mismatch,
    CAST(d.set_count AS INTEGER) AS set_count,
    CASE WHEN d.reason = 'conflict' THEN (
        SELECT string_agg(CAST(profile_set AS TEXT), ', ' ORDER BY profile_set COLLATE "C") FROM (SELECT profile_set FROM held ORDER BY profile_set COLLATE "C") AS x)
    END AS conflict_sets,
    o.drafts,
    o.draft_tokens,
    o.accepted_tokens,
    o.accepted_per_position,
    o.al_stderr,
    -- exact with the per-position counts, or at K = 1 (a step accepts 0 or 1 draft)
    CASE WHEN o.drafts IS NOT NULL THEN o.accepted_per_position IS NOT NULL OR $3 = 1 END
        AS al_stderr_exact,
    CASE WHEN d.reason IN ('no_match', 'fallback_no_match') THEN (
        SELECT 'K ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x) FROM (
                            SELECT DISTINCT num_spec_tokens AS x FROM stored) AS y)
            || '; thinking ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT thinking AS x FROM stored) AS y)
            || '; categories ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT category AS x FROM stored) AS y)
        WHERE EXISTS (SELECT 1 FROM stored))
    END AS stored
FROM decided d LEFT JOIN one o ON d.reason IS NULL;
ELSIF $9 IS NOT NULL AND $7 IS NOT NULL THEN
RETURN QUERY
WITH RECURSIVE found (lookup_id, category, set_count, id, name, acceptance_length, method, copied_from, source, hardware, position, rate, revision, drafts, draft_tokens, accepted_tokens, accepted_per_position, al_stderr) AS (
    SELECT * FROM (
WITH c AS (
    SELECT p.id, k.category, p.acceptance_length, p.method, p.copied_from, p.provenance_id,
           k.set_name, k.revision
    FROM (SELECT p.id, p.category, p.set_name,
                 (SELECT n.revision FROM revisions n WHERE n.set_name = p.set_name AND n.imported_at <= $9 ORDER BY n.imported_at DESC LIMIT 1) AS revision
          FROM profile_keys p
          WHERE p.model = $1 AND p.speculative_method = $2 AND p.num_spec_tokens = $3
            AND p.thinking = $4 AND p.category IN ($5, $6) AND p.set_name IN ($7)
            AND p.valid_from <= $9 AND (p.valid_until IS NULL OR p.valid_until > $9)) k
    JOIN profile_versions p ON p.id = (SELECT q.id FROM profile_versions q WHERE q.key_id = k.id AND q.first_revision <= k.revision ORDER BY q.first_revision DESC LIMIT 1)
)
SELECT 0 AS lookup_id, c.category,
       (SELECT COUNT(*) FROM c AS h WHERE h.category = c.category) AS set_count,
       c.id, c.set_name, c.acceptance_length, c.method, c.copied_from, pr.source, pr.hardware,
       r.position, r.rate, c.revision, cn.drafts, cn.draft_tokens, cn.accepted_tokens, cn.accepted_per_position, cn.al_stderr
FROM c
LEFT JOIN provenances pr ON pr.id = c.provenance_id
LEFT JOIN version_rates r ON r.profile_id = c.id
LEFT JOIN version_counts cn ON cn.profile_id = c.id
WHERE c.category = $5 OR NOT EXISTS (SELECT 1 FROM c AS h WHERE h.category = $5)
    ) AS f WHERE $9 IS NOT NULL AND $7 IS NOT NULL
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
        WHEN $7 IS NOT NULL AND NOT (CASE WHEN $9 IS NULL
            THEN EXISTS (SELECT 1 FROM profile_sets WHERE name = $7)
            ELSE EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = $7 AND v.action <> 'deleted' AND v.revision = (SELECT n.revision FROM revisions n WHERE n.set_name = v.set_name AND n.imported_at <= $9 ORDER BY n.imported_at DESC LIMIT 1)) END) THEN 'unknown_set'
        WHEN $4 IS NULL THEN 'no_thinking'
        WHEN $5 IS NULL AND $6 IS NULL THEN 'no_category'
        WHEN w.set_count IS NULL AND $6 IS NULL THEN 'no_match'
        WHEN w.set_count IS NULL THEN 'fallback_no_match'
        WHEN w.set_count > 1 THEN 'conflict'
    END AS reason, w.category AS used, w.set_count
    FROM winner w
),
one AS (SELECT h.* FROM held h JOIN decided d ON d.reason IS NULL),
positions (i) AS (
    SELECT 1 FROM one WHERE stored_rates = 0
    UNION ALL
    SELECT i + 1 FROM positions WHERE i < $3
),
stored AS (
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profiles p
    JOIN profile_sets s ON s.id = p.set_id
    WHERE $9 IS NULL AND p.model = $1 AND p.speculative_method = $2
      AND ($7 IS NULL OR s.name = $7)
    UNION ALL
    SELECT p.num_spec_tokens, p.thinking, p.category FROM profile_keys p
    WHERE $9 IS NOT NULL AND p.model = $1 AND p.speculative_method = $2
      AND ($7 IS NULL OR p.set_name = $7) AND p.valid_from <= $9 AND (p.valid_until IS NULL OR p.valid_until > $9)
)
SELECT
    CASE WHEN d.reason IS NULL THEN 'resolved' ELSE 'refused' END AS outcome,
    d.reason,
    CASE WHEN d.reason IS NULL OR d.reason = 'conflict' THEN
        $1 || '/' || $2 || '/k' || CAST($3 AS TEXT) || '/thinking-' || $4
        || '/' || d.used END AS profile,
    o.acceptance_length,
    (o.acceptance_length - 1) / $3 AS acceptance_rate,
    CAST($3 AS INTEGER) AS num_spec_tokens,
    CASE WHEN o.stored_rates > 0 THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY position) || ']' FROM (
            SELECT position, rate FROM found WHERE position IS NOT NULL ORDER BY position) AS x)
    WHEN o.id IS NOT NULL THEN (
        SELECT '[' || string_agg(CAST(rate AS TEXT), ', ' ORDER BY i) || ']' FROM (
            SELECT i, CASE
                WHEN i <= floor((o.acceptance_length - 1)) THEN 1.0
                WHEN i = floor((o.acceptance_length - 1)) + 1 THEN (o.acceptance_length - 1) - floor((o.acceptance_length - 1))
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
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN $5 END AS fallback_replaced,
    CASE WHEN o.id IS NOT NULL AND ($5 IS NULL OR o.category <> $5)
        THEN o.category END AS fallback_used,
    o.hardware AS measured_on,
    CASE WHEN o.id IS NOT NULL THEN ($8 IS NOT NULL AND o.hardware IS NOT NULL
        AND lower($8) <> lower(o.hardware)) END AS hardware_mismatch,
    CAST(d.set_count AS INTEGER) AS set_count,
    CASE WHEN d.reason = 'conflict' THEN (
        SELECT string_agg(CAST(profile_set AS TEXT), ', ' ORDER BY profile_set COLLATE "C") FROM (SELECT profile_set FROM held ORDER BY profile_set COLLATE "C") AS x)
    END AS conflict_sets,
    o.drafts,
    o.draft_tokens,
    o.accepted_tokens,
    o.accepted_per_position,
    o.al_stderr,
    -- exact with the per-position counts, or at K = 1 (a step accepts 0 or 1 draft)
    CASE WHEN o.drafts IS NOT NULL THEN o.accepted_per_position IS NOT NULL OR $3 = 1 END
        AS al_stderr_exact,
    CASE WHEN d.reason IN ('no_match', 'fallback_no_match') THEN (
        SELECT 'K ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x) FROM (
                            SELECT DISTINCT num_spec_tokens AS x FROM stored) AS y)
            || '; thinking ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT thinking AS x FROM stored) AS y)
            || '; categories ' || (SELECT string_agg(CAST(x AS TEXT), ', ' ORDER BY x COLLATE "C") FROM (
                SELECT DISTINCT category AS x FROM stored) AS y)
        WHERE EXISTS (SELECT 1 FROM stored))
    END AS stored
FROM decided d LEFT JOIN one o ON d.reason IS NULL;
END IF;
END
$registry_resolve$;
COMMENT ON FUNCTION registry_resolve(text, text, integer, text, text, text, text, text, timestamptz) IS
'The registry layer''s answer to one run: resolved or refused, the value and where it '
'came from.';"""

#: 0013's ``registry_resolve_many``, which ``downgrade()`` restores.
PREVIOUS_MANY = """CREATE OR REPLACE FUNCTION registry_resolve_many(runs jsonb)
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


#: Replaces function :old by :new (its definition, ``__SCHEMA__`` for the schema) and gives the
#: new one the old one's EXECUTE grants: the roles holding it, and PUBLIC's, kept or revoked.
_REPLACE = """DO $registry_0015$
DECLARE
    old regprocedure := to_regprocedure('{old}');
    acl aclitem[];
    role_name text;
BEGIN
    SELECT proacl INTO acl FROM pg_proc WHERE oid = old;
    EXECUTE 'DROP FUNCTION IF EXISTS {old}';
    EXECUTE replace($registry_0015_text${definition}$registry_0015_text$, '__SCHEMA__',
                    quote_ident(current_schema()));
    IF acl IS NOT NULL THEN  -- null: the default, PUBLIC's EXECUTE, which the new one has
        IF NOT EXISTS (SELECT 1 FROM aclexplode(acl) a
                       WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE') THEN
            EXECUTE 'REVOKE EXECUTE ON FUNCTION {new} FROM PUBLIC';
        END IF;
        FOR role_name IN SELECT quote_ident(r.rolname) FROM aclexplode(acl) a
                       JOIN pg_roles r ON r.oid = a.grantee
                       WHERE a.privilege_type = 'EXECUTE' LOOP
            EXECUTE 'GRANT EXECUTE ON FUNCTION {new} TO ' || role_name;
        END LOOP;
    END IF;
END $registry_0015$"""


def _replace(old: str, new: str, definition: str) -> None:
    # The schema is the one the registry is made in, read by the server (so that the offline
    # SQL of `registry db upgrade --sql` does the same).
    op.execute(sa.text(_REPLACE.replace("{old}", old).replace("{new}", new)
                       .replace("{definition}", definition)))


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    _replace(BEFORE, AFTER, FUNCTION)
    _replace("registry_resolve_many(jsonb)", "registry_resolve_many(jsonb)", FUNCTION_MANY)


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    _replace(AFTER, BEFORE, PREVIOUS)
    _replace("registry_resolve_many(jsonb)", "registry_resolve_many(jsonb)", PREVIOUS_MANY)
