"""Counts: the raw counts a profile's AL was computed from, and the standard error they give.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

Two new child tables, one per profile that states ``counts`` (contract, third round):
``profile_counts`` beside ``profiles`` and ``revision_counts`` beside ``revision_profiles``, so
that every revision keeps its counts. No existing table is rebuilt (a batch rebuild of a
parent on SQLite is what cascades deletes into its children), and nothing is moved: no stored
profile has counts yet. ``al_stderr`` is written by the importer, computed by the library
(SQLite before 3.35, and builds without its math functions, have no SQRT; docs/decisions.md).

Views ``acceptance_profiles``, ``profile_history`` and ``profile_coverage`` gain the counts and
the standard error as their last columns (replaceable objects: this file carries the new text
and the previous one, copied from 0002, 0004 and 0003). The downgrade drops the tables and puts
the previous views back; :func:`would_lose` says what that destroys.

Self-contained on purpose: its own table definitions and view SQL, never the live models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

#: The counts' columns of a view row, from the counts row ``c`` (NULL where a profile has none).
_COUNT_COLUMNS = """,
    c.drafts,
    c.draft_tokens,
    c.accepted_tokens,
    c.al_stderr,
    CASE WHEN c.profile_id IS NULL THEN NULL
         WHEN c.accepted_per_position IS NULL THEN 0 ELSE 1 END AS al_stderr_exact"""

# --- the views as 0002, 0004 and 0003 left them (for the downgrade) ------------------------------

_ACCEPTANCE_PROFILES_BEFORE = """
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
    s.imported_at{counts}
FROM profiles p
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pr ON pr.id = p.provenance_id{join}
"""

_PROFILE_HISTORY_BEFORE = """
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
    CASE WHEN n.id IS NULL THEN 1 ELSE 0 END AS is_current{counts}
FROM revision_profiles p
JOIN revisions v ON v.id = p.revision_id
LEFT JOIN revisions n ON n.set_name = v.set_name AND n.revision = v.revision + 1
LEFT JOIN provenances pr ON pr.id = p.provenance_id{join}
"""

_PROFILE_COVERAGE_BEFORE = """
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
    ) AS set_count{counts}
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
LEFT JOIN profile_sets s ON s.id = p.set_id{join}
"""

# The coverage view already names its categories ``c``; its counts row is ``pc``.
_COVERAGE_COUNTS = """,
    pc.drafts,
    pc.al_stderr,
    CASE WHEN pc.profile_id IS NULL THEN NULL
         WHEN pc.accepted_per_position IS NULL THEN 0 ELSE 1 END AS al_stderr_exact"""

#: name -> (the SQL before this revision, the SQL after it).
VIEWS = {
    "acceptance_profiles": (
        _ACCEPTANCE_PROFILES_BEFORE.format(counts="", join=""),
        _ACCEPTANCE_PROFILES_BEFORE.format(
            counts=_COUNT_COLUMNS, join="\nLEFT JOIN profile_counts c ON c.profile_id = p.id")),
    "profile_history": (
        _PROFILE_HISTORY_BEFORE.format(counts="", join=""),
        _PROFILE_HISTORY_BEFORE.format(
            counts=_COUNT_COLUMNS, join="\nLEFT JOIN revision_counts c ON c.profile_id = p.id")),
    "profile_coverage": (
        _PROFILE_COVERAGE_BEFORE.format(counts="", join=""),
        _PROFILE_COVERAGE_BEFORE.format(
            counts=_COVERAGE_COUNTS, join="\nLEFT JOIN profile_counts pc ON pc.profile_id = p.id")),
}

#: table -> the table its ``profile_id`` belongs to.
TABLES = {"profile_counts": "profiles", "revision_counts": "revision_profiles"}


def _counts_table(name: str, parent: str) -> None:
    op.create_table(
        name,
        sa.Column("profile_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("drafts", sa.BigInteger(), nullable=False),
        sa.Column("draft_tokens", sa.BigInteger(), nullable=False),
        sa.Column("accepted_tokens", sa.BigInteger(), nullable=False),
        sa.Column("accepted_per_position", sa.Text(), nullable=True),
        sa.Column("al_stderr", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("profile_id", name=op.f(f"pk_{name}")),
        sa.ForeignKeyConstraint(["profile_id"], [f"{parent}.id"], ondelete="CASCADE",
                                name=op.f(f"fk_{name}_profile_id")),
        sa.CheckConstraint("drafts >= 1", name=op.f(f"ck_{name}_drafts")),
        sa.CheckConstraint("accepted_tokens >= 0", name=op.f(f"ck_{name}_accepted_tokens")),
        sa.CheckConstraint("accepted_tokens <= draft_tokens",
                           name=op.f(f"ck_{name}_accepted_within_drafted")),
        sa.CheckConstraint("al_stderr >= 0", name=op.f(f"ck_{name}_al_stderr")),
    )


def _replace_view(name: str, sql: str, *, fewer_columns: bool) -> None:
    if op.get_context().dialect.name == "postgresql" and not fewer_columns:
        # Keeps the grants a DBA gave on the view; PostgreSQL allows it when columns are added.
        op.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
        return
    op.execute(f"DROP VIEW {name}")
    op.execute(f"CREATE VIEW {name} AS {sql}")


def upgrade() -> None:
    for name, parent in TABLES.items():
        _counts_table(name, parent)
    for name, (_, after) in VIEWS.items():
        _replace_view(name, after, fewer_columns=False)


def downgrade() -> None:
    for name, (before, _) in VIEWS.items():
        _replace_view(name, before, fewer_columns=True)
    for name in reversed(list(TABLES)):
        op.drop_table(name)


def would_lose(connection: sa.engine.Connection) -> list[str]:
    """What :func:`downgrade` destroys on this database: the counts, current and in history."""
    current, kept = (connection.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar() or 0
                     for t in TABLES)
    if not current and not kept:
        return []
    return [f"counts on {current} current profile(s) and {kept} profile(s) of the history"]
