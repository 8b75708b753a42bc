r"""Profile versions' indexes an import writes less to: by first revision, and no provenance index.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

Every import changes pages of each index on ``profile_versions``; two of 0007's grew with the
history in what a round writes (``docs/decisions.md``, ``benchmarks/round_pages.py``):

- ``ix_profile_versions_set_name_last_revision`` moved each closed version from its set's open
  entries to the newest revision's, in the middle of the index, so each round touched more of it
  as it grew. ``ix_profile_versions_set_name_first_revision`` replaces it: a version's first
  revision never changes, so a round only appends its new versions at each set's end. It serves
  the same reads: a set's open versions (its rows, filtered), the versions revision N holds
  (first revision N or earlier) and this import's new ones (first revision N).
- ``ix_profile_versions_provenance_id`` served no statement (a version reaches its provenance
  by the provenances' primary key) and no foreign-key check (a provenance is never deleted).

No row changes; the downgrade puts 0007's two indexes back.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TABLE = "profile_versions"


def upgrade() -> None:
    op.drop_index("ix_profile_versions_provenance_id", table_name=TABLE)
    op.drop_index("ix_profile_versions_set_name_last_revision", table_name=TABLE)
    op.create_index("ix_profile_versions_set_name_first_revision", TABLE,
                    ["set_name", "first_revision"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_profile_versions_set_name_first_revision", table_name=TABLE)
    op.create_index("ix_profile_versions_set_name_last_revision", TABLE,
                    ["set_name", "last_revision"], unique=False)
    op.create_index("ix_profile_versions_provenance_id", TABLE, ["provenance_id"], unique=False)


def would_lose(connection: sa.engine.Connection) -> list[str]:
    """Nothing: indexes hold no data."""
    return []
