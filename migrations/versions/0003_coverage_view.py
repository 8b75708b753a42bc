"""Coverage view: profile_coverage, every cell of the (model, method, thinking, category, K) grid.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

A "replaceable object" like the views of 0002: this file carries its own copy of the SQL and
never imports the live code, so a later change is a new migration with new text.

The grid is what a run could ask for: every (model, speculative_method) pair stored, times both
thinking modes, times every category stored, times K from 1 to the largest K stored. A cell no
set holds is a row with NULL profile_set (a lookup there is refused or falls back); a cell two
sets hold is two rows with set_count 2 (a lookup there is a conflict).

Portable SQL: WITH RECURSIVE for the K series (no generate_series on SQLite), a window COUNT
for set_count (SQLite >= 3.25), no string aggregation.
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

VIEWS = {
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
    ) AS set_count
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
""",
}


def upgrade() -> None:
    for name, sql in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {sql}")


def would_lose(connection) -> list[str]:
    """What :func:`downgrade` destroys here: nothing (it drops the coverage view; views hold no
    data)."""
    return []


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW {name}")
