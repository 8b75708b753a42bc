r"""Git provenance on revisions, and labels: names a team gives to states of the registry.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05

``revisions`` gains three nullable columns, filled when an import read its file from a git work
tree (NULL otherwise, and for every revision before this one): ``git_commit`` (the work tree's
``HEAD``, the full hash), ``git_dirty`` (the file's bytes were not that commit's: modified,
staged, untracked or ignored) and ``git_path`` (the file's path from the repository's root).
The view ``set_revisions`` gains the same three columns, at its end (PostgreSQL replaces it in
place, keeping its grants and comments).

Two new tables: ``labels`` (a name and the moment it names: its ``as_of``, and the set and
revision it was made from, when it was) and ``label_events`` (every position a label was ever
given, created or moved, never deleted). The downgrade drops them and the columns; it loses the
labels and the provenance, which ``would_lose`` names. Its PostgreSQL comments are this file's
own copy of the catalog's words.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

#: ``set_revisions`` as 0004 left it, and as this revision leaves it.
SET_REVISIONS_BEFORE = """
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
"""

SET_REVISIONS_AFTER = """
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
         THEN 0 ELSE 1 END AS is_latest,
    v.git_commit,
    v.git_dirty,
    v.git_path
FROM revisions v
"""

_GIT = {
    "git_commit": "The commit (HEAD, the full hash) of the git work tree the file was imported "
                  "from; NULL outside git, and for deletions and restores.",
    "git_dirty": "Whether the file's bytes were not that commit's (modified, staged, untracked "
                 "or ignored); NULL outside git.",
    "git_path": "The file's path from the repository's root; NULL outside git.",
}

#: relation -> (kind, its comment, {column: its comment}), as the catalog has them.
COMMENTS: dict[str, tuple[str, str, dict[str, str]]] = {
    "revisions": ("table",
        "One row per revision of a set: an import that added or changed it, or its deletion. "
        "Unique per (set_name, revision).", dict(_GIT)),
    "set_revisions": ("view",
        "One row per revision of every set, deleted sets included: each import that added or "
        "changed a set, and each deletion.", dict(_GIT)),
    "labels": ("table",
        "A label: a name a team gives to a state of the registry, read wherever --as-of takes "
        "a time. One row per label, at its latest position (label_events keeps every one).", {
            "name": "The label's name: a letter or digit, then letters, digits, '.', '_' or "
                    "'-', at most 64 characters; never one that reads as a time.",
            "as_of": "The moment it names: --as-of LABEL reads the registry as of it. Unit: "
                     "UTC timestamp.",
            "set_name": "The set whose revision it was made from (SET@REVISION); NULL when "
                        "made from a time.",
            "revision": "That revision's number; its imported_at is as_of.",
            "labelled_at": "When it was given this position. Unit: UTC timestamp.",
            "message": "The -m MESSAGE given with it.",
        }),
    "label_events": ("table",
        "Every position a label was given, oldest first: its creation and each move (--force).",
        {
            "id": "Surrogate key; rises with time.",
            "name": "The label (labels.name).",
            "action": "created or moved.",
            "as_of": "The moment it named from then on. Unit: UTC timestamp.",
            "set_name": "The set whose revision it was made from; NULL when made from a time.",
            "revision": "That revision's number.",
            "labelled_at": "When. Unit: UTC timestamp.",
            "message": "The -m MESSAGE given with it.",
        }),
}

#: ``set_revisions``' comments as 0006 wrote them: a downgrade on PostgreSQL recreates the view
#: (columns cannot be dropped in place), which drops them.
SET_REVISIONS_COMMENTS_BEFORE: dict[str, tuple[str, str, dict[str, str]]] = {
    "set_revisions": ("view",
        "One row per revision of every set, deleted sets included: each import that added or "
        "changed a set, and each deletion.", {
            "profile_set": "The set's name.",
            "revision": "1, 2, … per set, with no gaps.",
            "action": "added, updated or deleted.",
            "imported_at": "When the revision was written. Unit: UTC timestamp.",
            "source_file": "The file it was imported from (for a deletion: the file the set "
                           "last came from).",
            "content_hash": "SHA-256 of the revision's content; NULL for a deletion.",
            "profile_count": "Its profiles (0 for a deletion). Unit: profiles.",
            "caveat_count": "Its caveats. Unit: caveats.",
            "message": "The -m MESSAGE given to registry import or registry delete.",
            "is_latest": "1 for the set's newest revision, else 0.",
        }),
}


def _position_columns() -> list[sa.Column]:
    return [
        sa.Column("as_of", sa.DateTime(timezone=True), nullable=False),
        sa.Column("set_name", sa.String(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=True),
        sa.Column("labelled_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
    ]


def upgrade() -> None:
    op.add_column("revisions", sa.Column("git_commit", sa.String(64), nullable=True))
    op.add_column("revisions", sa.Column("git_dirty", sa.Boolean(), nullable=True))
    op.add_column("revisions", sa.Column("git_path", sa.Text(), nullable=True))
    if op.get_context().dialect.name == "postgresql":
        # Columns added at the end: replaced in place, grants and comments kept.
        op.execute(f"CREATE OR REPLACE VIEW set_revisions AS {SET_REVISIONS_AFTER}")
    else:
        op.execute("DROP VIEW set_revisions")
        op.execute(f"CREATE VIEW set_revisions AS {SET_REVISIONS_AFTER}")
    op.create_table(
        "labels",
        sa.Column("name", sa.String(), nullable=False),
        *_position_columns(),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_labels")),
        sa.CheckConstraint("name <> ''", name=op.f("ck_labels_name_not_empty")),
        sa.CheckConstraint("(set_name IS NULL) = (revision IS NULL)",
                           name=op.f("ck_labels_set_revision")),
    )
    op.create_table(
        "label_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        *_position_columns(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_label_events")),
        sa.CheckConstraint("action IN ('created', 'moved')",
                           name=op.f("ck_label_events_action")),
        sa.CheckConstraint("(set_name IS NULL) = (revision IS NULL)",
                           name=op.f("ck_label_events_set_revision")),
    )
    op.create_index(op.f("ix_label_events_name"), "label_events", ["name"])
    _comment(COMMENTS)


def downgrade() -> None:
    # The view first: SQLite's DROP COLUMN refuses a column a view still names.
    op.execute("DROP VIEW set_revisions")
    op.execute(f"CREATE VIEW set_revisions AS {SET_REVISIONS_BEFORE}")
    _comment(SET_REVISIONS_COMMENTS_BEFORE)
    op.drop_index(op.f("ix_label_events_name"), table_name="label_events")
    op.drop_table("label_events")
    op.drop_table("labels")
    for column in ("git_path", "git_dirty", "git_commit"):
        op.drop_column("revisions", column)


def would_lose(connection: sa.engine.Connection) -> list[str]:
    """What :func:`downgrade` destroys on this database: the labels and the git provenance."""
    labels = connection.execute(sa.text("SELECT COUNT(*) FROM labels")).scalar() or 0
    events = connection.execute(sa.text("SELECT COUNT(*) FROM label_events")).scalar() or 0
    git = connection.execute(sa.text(
        "SELECT COUNT(*) FROM revisions WHERE git_commit IS NOT NULL")).scalar() or 0
    out = []
    if labels or events:
        out.append(f"{labels} label(s) and their {events} position(s)")
    if git:
        out.append(f"the git provenance of {git} revision(s)")
    return out


def _literal(text: str | None) -> str:
    """An SQL string literal (or NULL), its colons escaped from SQLAlchemy's bind syntax."""
    if text is None:
        return "NULL"
    return "'" + text.replace("'", "''").replace(":", "\\:") + "'"


def _comment(comments: dict[str, tuple[str, str, dict[str, str]]]) -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    for name, (kind, text, columns) in comments.items():
        op.execute(sa.text(f"COMMENT ON {kind.upper()} {name} IS {_literal(text)}"))
        for column, words in columns.items():
            op.execute(sa.text(f"COMMENT ON COLUMN {name}.{column} IS {_literal(words)}"))
