# ruff: noqa: E501 - FUNCTIONS is generated SQL, frozen as it was written out
r"""The registry layer's answer as PostgreSQL functions: ``registry_resolve`` and
``registry_resolve_many``, for any client of the database.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05

``registry_resolve(model, method, k, thinking, category, fallback_category, set_name,
hardware, as_of)`` returns the one row ``registry_resolve.sql`` gives on SQLite: the
resolver's lookup and the decision it makes from the rows (docs/schema.md says what each column
holds). ``registry_resolve_many(runs jsonb)`` answers a JSON array of such runs. Both are
``STABLE``, ``SECURITY INVOKER`` (a caller reads only what it may read) and pin their
``search_path`` to the registry's schema; PUBLIC keeps PostgreSQL's default EXECUTE (they give
nothing a caller could not SELECT) and ``registry db reader`` grants it by name.

The text is a frozen copy, written out when this migration was (a migration imports no live
code): ``pg_function`` in the package's ``resolve/statements.py`` generates it, and
``tests/db/test_resolve_function.py`` fails when the two differ; a changed statement is a new
migration that replaces the functions (alembic's "replaceable objects"). SQLite has no stored
functions: there this migration does nothing, and the resolver runs the statement itself.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

#: The functions' signatures, as DROP FUNCTION names them.
SIGNATURES = ("registry_resolve_many(jsonb)",
              "registry_resolve(text, text, integer, text, text, text, text, text, timestamptz)")

#: ``pg_function("__SCHEMA__")`` as it was at this revision; the schema is the registry's,
#: quoted, filled in by :func:`upgrade`.
FUNCTIONS = """CREATE OR REPLACE FUNCTION registry_resolve(model text, method text, k integer, thinking text, category text, fallback_category text DEFAULT NULL, set_name text DEFAULT NULL, hardware text DEFAULT NULL, as_of timestamptz DEFAULT NULL)
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
'came from.';
CREATE OR REPLACE FUNCTION registry_resolve_many(runs jsonb)
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


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    # The schema is the one the registry is made in, read by the server (so that the offline
    # SQL of `registry db upgrade --sql` does the same).
    op.execute(sa.text(
        "DO $registry_0011$ BEGIN EXECUTE replace($registry_0011_text$" + FUNCTIONS
        + "$registry_0011_text$, '__SCHEMA__', quote_ident(current_schema())); "
          "END $registry_0011$"))


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    for signature in SIGNATURES:
        op.execute(f"DROP FUNCTION IF EXISTS {signature}")
