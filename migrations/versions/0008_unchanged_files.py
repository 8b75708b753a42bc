r"""Unchanged files: what each imported file's bytes held, so a re-import skips them unread.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

One new table, ``import_files``: a file's path, the SHA-256 of its bytes, the version of the
reading rules that read them, and what they gave (the set's name, content hash, profile count and
the file's warnings). ``registry import`` skips a file whose bytes and rules match while the stored
set still has that content (``importing/unchanged.py`` in the package). It is a cache: the downgrade
drops it and loses nothing a full read cannot give back. Its PostgreSQL comments are this file's
own copy of the catalog's words (as ``0006_comments.py`` carries the others).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

#: relation -> (kind, its comment, {column: its comment}), as the catalog had them.
COMMENTS: dict[str, tuple[str, str, dict[str, str]]] = {
    "import_files": ("table",
        "What each imported file's bytes held when last read: a re-import skips a file whose "
        "bytes and reading rules are the same while its set still has that content. A cache: "
        "losing it costs one full read.",
        {
            "path": "The file as the importer was given it.",
            "bytes_hash": "SHA-256 of the file's bytes.",
            "rules": "The version of the reading rules (YAML, checks, normalisation) that read "
                     "them; new rules read every file again.",
            "set_name": "The set the file declares.",
            "content_hash": "The set's content hash those bytes gave "
                            "(profile_sets.content_hash).",
            "profiles": "The set's profiles. Unit: profiles.",
            "findings": "The file's warnings as a JSON array, repeated when it is skipped; "
                        "NULL when none.",
        }),
}


def _literal(text: str) -> str:
    """An SQL string literal, its colons escaped from SQLAlchemy's bind syntax."""
    return "'" + text.replace("'", "''").replace(":", "\\:") + "'"


def upgrade() -> None:
    op.create_table(
        "import_files",
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("bytes_hash", sa.String(64), nullable=False),
        sa.Column("rules", sa.String(64), nullable=False),
        sa.Column("set_name", sa.String(), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("profiles", sa.Integer(), nullable=False),
        sa.Column("findings", sa.Text(), nullable=True),
        sa.CheckConstraint("profiles >= 0", name=op.f("ck_import_files_profiles")),
        sa.PrimaryKeyConstraint("path", name=op.f("pk_import_files")),
    )
    if op.get_context().dialect.name == "postgresql":
        for name, (kind, text, columns) in COMMENTS.items():
            op.execute(sa.text(f"COMMENT ON {kind.upper()} {name} IS {_literal(text)}"))
            for column, words in columns.items():
                op.execute(sa.text(f"COMMENT ON COLUMN {name}.{column} IS {_literal(words)}"))


def downgrade() -> None:
    op.drop_table("import_files")


def would_lose(connection: sa.engine.Connection) -> list[str]:
    """Nothing: the table is a cache of what the files hold; the next import reads them all."""
    return []
