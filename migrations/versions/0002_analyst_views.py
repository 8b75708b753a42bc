"""Analysts' views: acceptance_profiles, profile_conflicts, profile_rates_long,
provenance_details, set_overview.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

Views are versioned "replaceable objects": this file carries its own copy of each view's SQL,
so later changes add a migration with the new text and never edit this one. The SQL is portable:
it runs unchanged on SQLite and PostgreSQL (CAST AS TEXT, CASE for flags, no string_agg).
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

VIEWS = {
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
    s.imported_at
FROM profiles p
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pr ON pr.id = p.provenance_id
""",
    "profile_conflicts": """
SELECT
    p.model,
    p.speculative_method,
    p.num_spec_tokens,
    p.thinking,
    p.category,
    COUNT(*) AS set_count,
    MIN(p.acceptance_length) AS min_acceptance_length,
    MAX(p.acceptance_length) AS max_acceptance_length
FROM profiles p
GROUP BY p.model, p.speculative_method, p.num_spec_tokens, p.thinking, p.category
HAVING COUNT(*) > 1
""",
    "profile_rates_long": """
SELECT
    r.profile_id,
    s.name AS profile_set,
    p.model,
    p.speculative_method,
    p.num_spec_tokens,
    p.thinking,
    p.category,
    p.acceptance_length,
    r.position,
    r.rate
FROM profile_rates r
JOIN profiles p ON p.id = r.profile_id
JOIN profile_sets s ON s.id = p.set_id
""",
    "provenance_details": """
SELECT
    pr.id AS provenance_id,
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
    st.name AS setting_name,
    st.value AS setting_value,
    st.value_type AS setting_type,
    (SELECT COUNT(*) FROM profiles p WHERE p.provenance_id = pr.id) AS profile_count
FROM provenances pr
LEFT JOIN provenance_settings st ON st.provenance_id = pr.id
""",
    "set_overview": """
SELECT
    s.name AS profile_set,
    s.source_file,
    s.imported_at,
    s.content_hash,
    (SELECT COUNT(*) FROM profiles p WHERE p.set_id = s.id) AS profile_count,
    (SELECT COUNT(*) FROM set_caveats c WHERE c.set_id = s.id) AS caveat_count
FROM profile_sets s
""",
}


def upgrade() -> None:
    for name, sql in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {sql}")


def would_lose(connection) -> list[str]:
    """What :func:`downgrade` destroys here: nothing (it drops the analysts' views; views hold no
    data)."""
    return []


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW {name}")
