"""The views' ``al_stderr_exact`` says 1 at K = 1, as ``resolve`` and ``show`` do.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05

At K = 1 a step accepts 0 or 1 draft token, so the bound mu(K - mu) is the variance itself and
the stored ``al_stderr`` is exact without per-position counts; ``registry resolve`` and the
functions say so (``al_stderr_exact``), the views said 0. ``acceptance_profiles``,
``profile_coverage`` (as 0005 left them) and ``profile_history`` (as 0007 did) get the one
changed column, same name and type, so PostgreSQL replaces them in place (grants kept); the
column comments follow. ``downgrade()`` puts the previous text back.

Self-contained on purpose: its own view SQL (the previous text copied from 0005 and 0007).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

#: The views as 0005 (acceptance_profiles, profile_coverage) and 0007 (profile_history) left
#: them.
BEFORE = {
    "acceptance_profiles": """
SELECT
    p.id AS profile_id,
    s.name AS profile_set,
    p.model,
    p.speculative_method,
    p.num_spec_tokens,
    p.thinking,
    p.category,
    p.acceptance_length,
    (p.acceptance_length - 1.0) / p.num_spec_tokens AS acceptance_rate,
    p.method,
    p.model || '/' || p.speculative_method || '/k' || CAST(p.num_spec_tokens AS TEXT)
        || '/thinking-' || p.thinking || '/' || p.category AS profile,
    p.provenance_id,
    pr.source,
    pr.run,
    pr.benchmark,
    pr.prompts,
    pr.hardware,
    pr.engine_image,
    pr.tp,
    pr.temperature,
    pr.top_p,
    pr.top_k,
    pr.max_tokens,
    p.rationale,
    p.copied_from,
    CASE WHEN EXISTS (SELECT 1 FROM profile_rates r WHERE r.profile_id = p.id)
         THEN 1 ELSE 0 END AS has_rates,
    p.position,
    s.source_file,
    s.imported_at,
    c.drafts,
    c.draft_tokens,
    c.accepted_tokens,
    c.al_stderr,
    CASE WHEN c.profile_id IS NULL THEN NULL
         WHEN c.accepted_per_position IS NULL THEN 0 ELSE 1 END AS al_stderr_exact
FROM profiles p
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN profile_counts c ON c.profile_id = p.id
""",
    "profile_coverage": """
WITH RECURSIVE ks (k) AS (
    SELECT 1
    UNION ALL
    SELECT k + 1 FROM ks WHERE k < (SELECT MAX(num_spec_tokens) FROM profiles)
),
pairs AS (SELECT DISTINCT model, speculative_method FROM profiles),
modes (thinking) AS (SELECT 'off' UNION ALL SELECT 'on'),
categories AS (SELECT DISTINCT category FROM profiles)
SELECT
    pa.model,
    pa.speculative_method,
    m.thinking,
    c.category,
    ks.k AS num_spec_tokens,
    s.name AS profile_set,
    p.id AS profile_id,
    p.acceptance_length,
    p.method,
    COUNT(p.id) OVER (
        PARTITION BY pa.model, pa.speculative_method, m.thinking, c.category, ks.k
    ) AS set_count,
    pc.drafts,
    pc.al_stderr,
    CASE WHEN pc.profile_id IS NULL THEN NULL
         WHEN pc.accepted_per_position IS NULL THEN 0 ELSE 1 END AS al_stderr_exact
FROM pairs pa
CROSS JOIN modes m
CROSS JOIN categories c
CROSS JOIN ks
LEFT JOIN profiles p
    ON p.model = pa.model
    AND p.speculative_method = pa.speculative_method
    AND p.thinking = m.thinking
    AND p.category = c.category
    AND p.num_spec_tokens = ks.k
LEFT JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN profile_counts pc ON pc.profile_id = p.id
""",
    "profile_history": """
SELECT
    v.set_name AS profile_set,
    v.revision,
    v.action,
    p.model,
    p.speculative_method,
    p.num_spec_tokens,
    p.thinking,
    p.category,
    p.model || '/' || p.speculative_method || '/k' || CAST(p.num_spec_tokens AS TEXT)
        || '/thinking-' || p.thinking || '/' || p.category AS profile,
    p.acceptance_length,
    (p.acceptance_length - 1.0) / p.num_spec_tokens AS acceptance_rate,
    p.method,
    p.provenance_id,
    pr.source,
    pr.hardware,
    pr.engine_image,
    p.rationale,
    p.copied_from,
    v.imported_at AS valid_from,
    n.imported_at AS valid_until,
    n.revision AS superseded_by,
    CASE WHEN n.id IS NULL THEN 1 ELSE 0 END AS is_current,
    c.drafts,
    c.draft_tokens,
    c.accepted_tokens,
    c.al_stderr,
    CASE WHEN c.profile_id IS NULL THEN NULL
         WHEN c.accepted_per_position IS NULL THEN 0 ELSE 1 END AS al_stderr_exact
FROM profile_versions p
JOIN revisions v ON v.set_name = p.set_name AND v.revision >= p.first_revision
    AND (p.last_revision IS NULL OR v.revision <= p.last_revision) AND v.action <> 'deleted'
LEFT JOIN revisions n ON n.set_name = v.set_name AND n.revision = v.revision + 1
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN version_counts c ON c.profile_id = p.id
""",
}

#: The one column that changes: its counts row is ``c``, or ``pc`` in the coverage view.
_EXACT = ("WHEN {c}.accepted_per_position IS NULL THEN 0 ELSE 1 END AS al_stderr_exact",
          "WHEN {c}.accepted_per_position IS NULL AND p.num_spec_tokens <> 1 THEN 0 ELSE 1 END\n"
          "        AS al_stderr_exact")


def _after(sql: str) -> str:
    for c in ("c", "pc"):
        sql = sql.replace(_EXACT[0].format(c=c), _EXACT[1].format(c=c))
    return sql


#: name -> (the SQL before this revision, the SQL after it).
VIEWS = {name: (sql, _after(sql)) for name, sql in BEFORE.items()}

#: The views' column comment (PostgreSQL), before and after.
COMMENT_BEFORE = ("1 when al_stderr is exact (per-position counts stored), 0 when it is the "
                  "bound; NULL without counts.")
COMMENT_AFTER = ("1 when al_stderr is exact (per-position counts stored, or K = 1), 0 when it "
                 "is the bound; NULL without counts.")

#: The views' comments as this revision leaves them (PostgreSQL): the relation's words as
#: before, ``al_stderr_exact``'s with K = 1 (``tests/db/test_comments.py`` holds them to the
#: catalog's).
COMMENTS: dict[str, tuple[str, str, dict[str, str]]] = {
    "acceptance_profiles": ("view", (
        'One row per profile of every set, with its provenance flattened in. The '
        "contract's stable view."),
        {"al_stderr_exact": COMMENT_AFTER}),
    "profile_coverage": ("view", (
        'The coverage grid, one row per cell and set: every (model, speculative_method) '
        'pair stored, times both thinking modes, times every category stored, times K '
        'from 1 to the largest K stored. A cell no set holds is one row with NULL '
        'profile_set (a run there is refused or falls back); a cell two sets hold is two '
        'rows (a run there is a conflict). registry coverage reads it.'),
        {"al_stderr_exact": COMMENT_AFTER}),
    "profile_history": ("view", (
        'One row per profile of every revision of every set, with the time range it was '
        "current: from its revision's valid_from until the set's next revision "
        '(superseded_by, valid_until; NULL while it is the latest).'),
        {"al_stderr_exact": COMMENT_AFTER}),
}


def _replace(name: str, sql: str) -> None:
    if op.get_context().dialect.name == "postgresql":
        # The same columns: replaced in place, grants and comments kept.
        op.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
        return
    op.execute(f"DROP VIEW {name}")
    op.execute(f"CREATE VIEW {name} AS {sql}")


def _comment(words: str) -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    literal = "'" + words.replace("'", "''").replace(":", "\\:") + "'"
    for name in COMMENTS:
        op.execute(sa.text(f"COMMENT ON COLUMN {name}.al_stderr_exact IS {literal}"))


def upgrade() -> None:
    for name, (_, after) in VIEWS.items():
        _replace(name, after)
    _comment(COMMENT_AFTER)


def downgrade() -> None:
    for name, (before, _) in VIEWS.items():
        _replace(name, before)
    _comment(COMMENT_BEFORE)


def would_lose(connection: sa.engine.Connection) -> list[str]:
    """What :func:`downgrade` destroys: nothing (the views are rebuilt from the tables)."""
    return []
