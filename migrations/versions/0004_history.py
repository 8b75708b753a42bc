"""History: every revision of every set kept beside the current registry.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

The current registry (``profile_sets`` … ``profile_rates``) stays as it is, so that resolution
against it costs what it did; ``profile_sets`` only gains ``revision``, the set's current
revision number. Beside it: ``revisions`` (one row per import that added or changed a set, and
per deletion), and a full copy of each revision's caveats, profiles and rates
(``revision_caveats``, ``revision_profiles``, ``revision_rates``); profiles cite the shared
``provenances``. Views ``set_revisions`` and ``profile_history`` are the analysts' surface.

The data migration makes every stored set revision 1 of itself (``added``, its ``imported_at``
kept). The downgrade keeps the current registry and drops the history.

Self-contained on purpose: its own table definitions and view SQL, never the live models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

VIEWS = {
    "set_revisions": """
SELECT
    v.set_name AS profile_set,
    v.revision,
    v.action,
    v.imported_at,
    v.source_file,
    v.content_hash,
    v.profile_count,
    (SELECT COUNT(*) FROM revision_caveats c WHERE c.revision_id = v.id) AS caveat_count,
    v.message,
    CASE WHEN EXISTS (SELECT 1 FROM revisions n
                      WHERE n.set_name = v.set_name AND n.revision > v.revision)
         THEN 0 ELSE 1 END AS is_latest
FROM revisions v
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
    CASE WHEN n.id IS NULL THEN 1 ELSE 0 END AS is_current
FROM revision_profiles p
JOIN revisions v ON v.id = p.revision_id
LEFT JOIN revisions n ON n.set_name = v.set_name AND n.revision = v.revision + 1
LEFT JOIN provenances pr ON pr.id = p.provenance_id
""",
}


def upgrade() -> None:
    op.add_column("profile_sets", sa.Column("revision", sa.Integer(), nullable=False,
                                            server_default=sa.text("1")))
    revisions = op.create_table(
        "revisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("set_name", sa.String(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("imported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source_file", sa.Text(), nullable=True),
        sa.Column("content_hash", sa.String(64), nullable=True),
        sa.Column("profile_count", sa.Integer(), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_revisions")),
        # Also the index of the as-of lookup's "no later revision" probe.
        sa.UniqueConstraint("set_name", "revision", name=op.f("uq_revisions_set_revision")),
        sa.CheckConstraint("set_name <> ''", name=op.f("ck_revisions_set_name_not_empty")),
        sa.CheckConstraint("revision >= 1", name=op.f("ck_revisions_revision")),
        sa.CheckConstraint("action IN ('added', 'updated', 'deleted')",
                           name=op.f("ck_revisions_action")),
        sa.CheckConstraint("profile_count >= 0", name=op.f("ck_revisions_profile_count")),
        sa.CheckConstraint("(action = 'deleted') = (content_hash IS NULL)",
                           name=op.f("ck_revisions_deleted_has_no_hash")),
    )
    op.create_table(
        "revision_caveats",
        sa.Column("revision_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("revision_id", "position", name=op.f("pk_revision_caveats")),
        sa.ForeignKeyConstraint(["revision_id"], ["revisions.id"], ondelete="CASCADE",
                                name=op.f("fk_revision_caveats_revision_id")),
        sa.CheckConstraint("text <> ''", name=op.f("ck_revision_caveats_text_not_empty")),
        sa.CheckConstraint("position >= 0", name=op.f("ck_revision_caveats_position")),
    )
    op.create_table(
        "revision_profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("revision_id", sa.Integer(), nullable=False),
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
        sa.PrimaryKeyConstraint("id", name=op.f("pk_revision_profiles")),
        sa.ForeignKeyConstraint(["revision_id"], ["revisions.id"], ondelete="CASCADE",
                                name=op.f("fk_revision_profiles_revision_id")),
        sa.ForeignKeyConstraint(["method"], ["methods.name"],
                                name=op.f("fk_revision_profiles_method")),
        sa.ForeignKeyConstraint(["provenance_id"], ["provenances.id"],
                                name=op.f("fk_revision_profiles_provenance_id")),
        # Key columns first, revision last: the as-of lookup searches this index by key.
        sa.UniqueConstraint("model", "speculative_method", "num_spec_tokens", "thinking",
                            "category", "revision_id", name=op.f("uq_revision_profiles_key")),
        sa.UniqueConstraint("revision_id", "position",
                            name=op.f("uq_revision_profiles_revision_position")),
        sa.CheckConstraint("thinking IN ('on', 'off')", name=op.f("ck_revision_profiles_thinking")),
        sa.CheckConstraint("num_spec_tokens >= 1", name=op.f("ck_revision_profiles_k")),
        sa.CheckConstraint(
            "acceptance_length >= 1 AND acceptance_length <= num_spec_tokens + 1",
            name=op.f("ck_revision_profiles_al_range")),
    )
    op.create_index(op.f("ix_revision_profiles_provenance_id"), "revision_profiles",
                    ["provenance_id"])
    op.create_table(
        "revision_rates",
        sa.Column("profile_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("rate", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("profile_id", "position", name=op.f("pk_revision_rates")),
        sa.ForeignKeyConstraint(["profile_id"], ["revision_profiles.id"], ondelete="CASCADE",
                                name=op.f("fk_revision_rates_profile_id")),
        sa.CheckConstraint("position >= 1", name=op.f("ck_revision_rates_position")),
        sa.CheckConstraint("rate >= 0 AND rate <= 1", name=op.f("ck_revision_rates_rate_range")),
    )
    _carry_existing_sets(revisions)
    for name, sql in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {sql}")


def _carry_existing_sets(revisions: sa.Table) -> None:
    """Every stored set becomes revision 1 of itself (``added``, its ``imported_at`` kept),
    with a copy of its caveats, profiles and rates: set-based statements, whatever the size."""
    op.execute(
        "INSERT INTO revisions (set_name, revision, action, imported_at, source_file, "
        "content_hash, profile_count, message) "
        "SELECT s.name, 1, 'added', s.imported_at, s.source_file, s.content_hash, "
        "(SELECT COUNT(*) FROM profiles p WHERE p.set_id = s.id), NULL FROM profile_sets s")
    # profile_sets.revision is already 1 for every row (the column's default).
    op.execute(
        "INSERT INTO revision_caveats (revision_id, position, text) "
        "SELECT v.id, c.position, c.text FROM set_caveats c "
        "JOIN profile_sets s ON s.id = c.set_id "
        "JOIN revisions v ON v.set_name = s.name AND v.revision = 1")
    op.execute(
        "INSERT INTO revision_profiles (revision_id, position, model, speculative_method, "
        "num_spec_tokens, thinking, category, acceptance_length, method, provenance_id, "
        "rationale, copied_from) "
        "SELECT v.id, p.position, p.model, p.speculative_method, p.num_spec_tokens, p.thinking, "
        "p.category, p.acceptance_length, p.method, p.provenance_id, p.rationale, p.copied_from "
        "FROM profiles p JOIN profile_sets s ON s.id = p.set_id "
        "JOIN revisions v ON v.set_name = s.name AND v.revision = 1")
    op.execute(
        "INSERT INTO revision_rates (profile_id, position, rate) "
        "SELECT rp.id, r.position, r.rate FROM profile_rates r "
        "JOIN profiles p ON p.id = r.profile_id "
        "JOIN profile_sets s ON s.id = p.set_id "
        "JOIN revisions v ON v.set_name = s.name AND v.revision = 1 "
        "JOIN revision_profiles rp ON rp.revision_id = v.id AND rp.position = p.position")


def would_lose(connection) -> list[str]:
    """What :func:`downgrade` destroys here: every revision but each stored set's current one,
    the sets deleted (their content lives only in the history), the revision numbers past 1
    that runs recorded (an upgrade makes every set revision 1 again) and the current
    revisions' messages. A registry whose every set is at revision 1, with no message and no
    deletion, loses nothing."""
    rows = connection.execute(sa.text(
        "SELECT v.set_name, v.revision, v.message, s.revision FROM revisions v "
        "LEFT JOIN profile_sets s ON s.name = v.set_name ORDER BY v.set_name, v.revision")).all()
    earlier: dict[str, int] = {}
    deleted: dict[str, int] = {}
    messages = 0
    for name, number, message, current in rows:
        if current is None:
            deleted[name] = deleted.get(name, 0) + 1
        elif number < current:
            earlier[name] = earlier.get(name, 0) + 1
        elif message is not None:
            messages += 1
    lost = []
    if earlier:
        lost.append(f"{sum(earlier.values())} earlier revision(s) of {len(earlier)} set(s), "
                    f"and the revision numbers runs recorded, which become 1 "
                    f"({_shown(earlier, 'at revision')})")
    if deleted:
        lost.append(f"{len(deleted)} deleted set(s) and their {sum(deleted.values())} "
                    f"revision(s) ({_shown(deleted, None)})")
    if messages:
        lost.append(f"the messages (-m) of {messages} current revision(s)")
    return lost


def _shown(counts: dict[str, int], label: str | None, most: int = 5) -> str:
    names = list(counts)[:most]
    shown = ", ".join(names if label is None else [f"{n} {label} {counts[n] + 1}" for n in names])
    return shown + (f" and {len(counts) - most} more" if len(counts) > most else "")


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW {name}")
    op.drop_table("revision_rates")
    op.drop_index(op.f("ix_revision_profiles_provenance_id"), table_name="revision_profiles")
    op.drop_table("revision_profiles")
    op.drop_table("revision_caveats")
    op.drop_table("revisions")
    # Provenances that only history cited go with it (0003's importer deleted uncited ones).
    # Explicitly, settings first: SQLite runs migrations with foreign keys (and cascades) off.
    uncited = ("SELECT pr.id FROM provenances pr WHERE NOT EXISTS "
               "(SELECT 1 FROM profiles p WHERE p.provenance_id = pr.id)")
    op.execute(f"DELETE FROM provenance_settings WHERE provenance_id IN ({uncited})")
    op.execute(f"DELETE FROM provenances WHERE id IN ({uncited})")
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        # The batch rebuild renames a new table to profile_sets; SQLite's modern RENAME checks
        # every view and fails on those that name profile_sets while it is gone.
        op.execute("PRAGMA legacy_alter_table=ON")
    with op.batch_alter_table("profile_sets") as batch:
        batch.drop_column("revision")
    if sqlite:
        op.execute("PRAGMA legacy_alter_table=OFF")
