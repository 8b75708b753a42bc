"""Initial schema: profile sets, caveats, methods, provenances, settings, profiles, rates.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Self-contained on purpose: this file never imports the live models or the spec module, so what
it creates never changes when the code does. The methods vocabulary is seeded here from the
spec's Profiles table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

METHODS = [
    # name, description, allowed, provenance, rationale, copied_from, measurement
    ("measured", "Measured on real hardware by a benchmark run.",
     True, True, False, False, True),
    ("literature", "Read from a paper or a published report.",
     True, True, True, False, False),
    ("vendor_spec", "Stated by a vendor's documentation.",
     True, True, True, False, False),
    ("copied", "Copied from another profile; copied_from names it.",
     True, True, True, True, False),
    ("assumed", "Assumed without a source; the rationale explains it.",
     True, False, True, False, False),
    ("not_charged", "Not a value: speculative decoding is not charged.",
     False, True, True, False, False),
]


def upgrade() -> None:
    op.create_table(
        "profile_sets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("source_file", sa.Text(), nullable=True),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("imported_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_profile_sets")),
        sa.UniqueConstraint("name", name=op.f("uq_profile_sets_name")),
        sa.CheckConstraint("name <> ''", name=op.f("ck_profile_sets_name_not_empty")),
    )
    op.create_table(
        "set_caveats",
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("set_id", "position", name=op.f("pk_set_caveats")),
        sa.ForeignKeyConstraint(["set_id"], ["profile_sets.id"], ondelete="CASCADE",
                                name=op.f("fk_set_caveats_set_id")),
        sa.CheckConstraint("text <> ''", name=op.f("ck_set_caveats_text_not_empty")),
        sa.CheckConstraint("position >= 0", name=op.f("ck_set_caveats_position")),
    )
    methods = op.create_table(
        "methods",
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("allowed_in_profile", sa.Boolean(), nullable=False),
        sa.Column("requires_provenance", sa.Boolean(), nullable=False),
        sa.Column("requires_rationale", sa.Boolean(), nullable=False),
        sa.Column("requires_copied_from", sa.Boolean(), nullable=False),
        sa.Column("requires_measurement", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_methods")),
    )
    op.bulk_insert(methods, [
        dict(zip(("name", "description", "allowed_in_profile", "requires_provenance",
                  "requires_rationale", "requires_copied_from", "requires_measurement"), row))
        for row in METHODS
    ])
    op.create_table(
        "provenances",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("run", sa.Text(), nullable=True),
        sa.Column("benchmark", sa.Text(), nullable=True),
        sa.Column("prompts", sa.Integer(), nullable=True),
        sa.Column("hardware", sa.Text(), nullable=True),
        sa.Column("engine_image", sa.Text(), nullable=True),
        sa.Column("tp", sa.Integer(), nullable=True),
        sa.Column("temperature", sa.Double(), nullable=True),
        sa.Column("top_p", sa.Double(), nullable=True),
        sa.Column("top_k", sa.Integer(), nullable=True),
        sa.Column("max_tokens", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_provenances")),
        sa.UniqueConstraint("content_hash", name=op.f("uq_provenances_content_hash")),
        sa.CheckConstraint("source <> ''", name=op.f("ck_provenances_source_not_empty")),
        sa.CheckConstraint("prompts >= 0", name=op.f("ck_provenances_prompts")),
        sa.CheckConstraint("tp >= 0", name=op.f("ck_provenances_tp")),
        sa.CheckConstraint("temperature >= 0", name=op.f("ck_provenances_temperature")),
        sa.CheckConstraint("top_p > 0 AND top_p <= 1", name=op.f("ck_provenances_top_p")),
        sa.CheckConstraint("top_k >= -1", name=op.f("ck_provenances_top_k")),
        sa.CheckConstraint("max_tokens >= 0", name=op.f("ck_provenances_max_tokens")),
        sa.CheckConstraint(
            "temperature IS NOT NULL OR (top_p IS NULL AND top_k IS NULL AND max_tokens IS NULL)",
            name=op.f("ck_provenances_sampling_has_temperature")),
    )
    op.create_table(
        "provenance_settings",
        sa.Column("provenance_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("value_type", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("provenance_id", "name", name=op.f("pk_provenance_settings")),
        sa.ForeignKeyConstraint(["provenance_id"], ["provenances.id"], ondelete="CASCADE",
                                name=op.f("fk_provenance_settings_provenance_id")),
        sa.CheckConstraint("name <> ''", name=op.f("ck_provenance_settings_name_not_empty")),
        sa.CheckConstraint("value <> ''", name=op.f("ck_provenance_settings_value_not_empty")),
        sa.CheckConstraint("value_type IN ('string', 'integer', 'number', 'boolean')",
                           name=op.f("ck_provenance_settings_value_type")),
    )
    op.create_table(
        "profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("speculative_method", sa.String(), nullable=False),
        sa.Column("num_spec_tokens", sa.Integer(), nullable=False),
        sa.Column("thinking", sa.String(), nullable=False),
        sa.Column("category", sa.String(), nullable=False),
        sa.Column("acceptance_length", sa.Double(), nullable=False),
        sa.Column("method", sa.String(32), nullable=False),
        sa.Column("provenance_id", sa.Integer(), nullable=True),
        sa.Column("rationale", sa.Text(), nullable=True),
        sa.Column("copied_from", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_profiles")),
        sa.ForeignKeyConstraint(["set_id"], ["profile_sets.id"], ondelete="CASCADE",
                                name=op.f("fk_profiles_set_id")),
        sa.ForeignKeyConstraint(["method"], ["methods.name"], name=op.f("fk_profiles_method")),
        sa.ForeignKeyConstraint(["provenance_id"], ["provenances.id"],
                                name=op.f("fk_profiles_provenance_id")),
        # Key columns first, set last: the constraint's index serves the cross-set lookup.
        sa.UniqueConstraint("model", "speculative_method", "num_spec_tokens", "thinking",
                            "category", "set_id", name=op.f("uq_profiles_key")),
        sa.CheckConstraint("model <> ''", name=op.f("ck_profiles_model_not_empty")),
        sa.CheckConstraint("speculative_method <> ''",
                           name=op.f("ck_profiles_method_name_not_empty")),
        sa.CheckConstraint("category <> ''", name=op.f("ck_profiles_category_not_empty")),
        sa.CheckConstraint("thinking IN ('on', 'off')", name=op.f("ck_profiles_thinking")),
        sa.CheckConstraint("num_spec_tokens >= 1", name=op.f("ck_profiles_k")),
        sa.CheckConstraint(
            "acceptance_length >= 1 AND acceptance_length <= num_spec_tokens + 1",
            name=op.f("ck_profiles_al_range")),
        sa.CheckConstraint("method <> 'not_charged'", name=op.f("ck_profiles_method_charged")),
        sa.CheckConstraint("method = 'assumed' OR provenance_id IS NOT NULL",
                           name=op.f("ck_profiles_provenance_required")),
        sa.CheckConstraint("method = 'measured' OR rationale IS NOT NULL",
                           name=op.f("ck_profiles_rationale_required")),
        sa.CheckConstraint("method <> 'copied' OR copied_from IS NOT NULL",
                           name=op.f("ck_profiles_copied_from_required")),
    )
    op.create_index(op.f("ix_profiles_set_id"), "profiles", ["set_id"])
    op.create_index(op.f("ix_profiles_provenance_id"), "profiles", ["provenance_id"])
    op.create_table(
        "profile_rates",
        sa.Column("profile_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("rate", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("profile_id", "position", name=op.f("pk_profile_rates")),
        sa.ForeignKeyConstraint(["profile_id"], ["profiles.id"], ondelete="CASCADE",
                                name=op.f("fk_profile_rates_profile_id")),
        sa.CheckConstraint("position >= 1", name=op.f("ck_profile_rates_position")),
        sa.CheckConstraint("rate >= 0 AND rate <= 1", name=op.f("ck_profile_rates_rate_range")),
    )


def would_lose(connection) -> list[str]:
    """What :func:`downgrade` destroys here: every stored set and profile, and the provenances
    (the methods vocabulary is the migration's own and comes back with it)."""
    sets, profiles = connection.execute(sa.text(
        "SELECT (SELECT COUNT(*) FROM profile_sets), (SELECT COUNT(*) FROM profiles)")).one()
    provenances = connection.execute(sa.text("SELECT COUNT(*) FROM provenances")).scalar()
    if not sets and not profiles and not provenances:
        return []
    names = list(connection.execute(sa.text(
        "SELECT name FROM profile_sets ORDER BY name LIMIT 6")).scalars())
    shown = ", ".join(names[:5]) + (" and more" if len(names) > 5 else "")
    return [f"{sets} set(s) with {profiles} profile(s) and {provenances} provenance(s)"
            + (f" ({shown})" if names else "")]


def downgrade() -> None:
    op.drop_table("profile_rates")
    op.drop_index(op.f("ix_profiles_provenance_id"), table_name="profiles")
    op.drop_index(op.f("ix_profiles_set_id"), table_name="profiles")
    op.drop_table("profiles")
    op.drop_table("provenance_settings")
    op.drop_table("provenances")
    op.drop_table("methods")
    op.drop_table("set_caveats")
    op.drop_table("profile_sets")
