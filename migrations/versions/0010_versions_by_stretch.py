r"""Profile versions found by their key's stretch: an integer index in place of the key index.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01

``uq_profile_versions_key`` (five key columns, the set's name and two times: entries of about
115 bytes) was the as-of lookup's index, and the widest thing an import writes to: a round's
changed profiles each land in a leaf of their own once the history is deep
(``docs/decisions.md``, ``benchmarks/round_pages.py``). The as-of lookup now goes key →
``profile_keys`` (the stretch of time the set held the key, found by that table's key index,
which a round that changes values does not write) → the set's revision at the time
(``ix_revisions_set_name_imported_at``) → the version: the stretch's latest beginning at or
before that revision. A stretch's versions follow one another without gap or overlap (a new
value closes the old version at the revision before; a removal or deletion ends the stretch), so
that one is the version the revision held.

Each version gains ``key_id``, its stretch (``profile_keys.id``): the stretch of its set and key
that was open when the version began (``valid_from`` within the stretch's times).
``uq_profile_versions_stretch`` (``key_id``, ``first_revision``) replaces the key index: two
integers an entry. No other row changes; the downgrade drops the column and puts the key index
back, so nothing is lost.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.schema import CreateTable

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TABLE = "profile_versions"
_KEY = ("model", "speculative_method", "num_spec_tokens", "thinking", "category")

#: The new column's description, as the catalog has it (PostgreSQL's comment).
COMMENTS: dict[str, tuple[str, str, dict[str, str]]] = {
    "profile_versions": (
        "table",
        "Each version of a profile, stored once: the range of its set's revisions that held "
        "it, and when.",
        {"key_id": "The stretch of time its set held its key (profile_keys.id): the as-of "
                   "lookup finds a version by it and its first revision."}),
}

#: Each version's stretch (of the versions' row ``v``): its set's and key's, open when the
#: version began.
_STRETCH = ("(SELECT k.id FROM profile_keys k WHERE k.set_name = v.set_name AND "
            + " AND ".join(f"k.{c} = v.{c}" for c in _KEY)
            + " AND k.valid_from <= v.valid_from AND (k.valid_until IS NULL "
              "OR k.valid_until > v.valid_from))")


def upgrade() -> None:
    if op.get_context().dialect.name == "sqlite":
        _rebuild(_versions(stretch=True), key_id=_STRETCH)
    else:
        op.add_column(TABLE, sa.Column("key_id", sa.Integer(), nullable=True))
        op.execute(f"UPDATE {TABLE} AS v SET key_id = {_STRETCH}")
        op.alter_column(TABLE, "key_id", existing_type=sa.Integer(), nullable=False)
        op.create_foreign_key(op.f("fk_profile_versions_key_id"), TABLE, "profile_keys",
                              ["key_id"], ["id"])
        op.drop_constraint(op.f("uq_profile_versions_key"), TABLE, type_="unique")
        op.create_unique_constraint(op.f("uq_profile_versions_stretch"), TABLE,
                                    ["key_id", "first_revision"])
    _comment(COMMENTS)


def downgrade() -> None:
    if op.get_context().dialect.name == "sqlite":
        _rebuild(_versions(stretch=False))
    else:
        op.drop_constraint(op.f("uq_profile_versions_stretch"), TABLE, type_="unique")
        op.drop_constraint(op.f("fk_profile_versions_key_id"), TABLE, type_="foreignkey")
        op.drop_column(TABLE, "key_id")
        op.create_unique_constraint(op.f("uq_profile_versions_key"), TABLE,
                                    [*_KEY, "set_name", "valid_from", "valid_until"])


def _rebuild(target: sa.Table, key_id: str | None = None) -> None:
    """SQLite: the versions rebuilt as ``target`` (its constraints live in its ``CREATE
    TABLE``), every row copied, ``key_id`` computed by the expression given (None: the column
    goes). By hand rather than ``batch_alter_table``, whose rebuild writes the constraints in
    a different order from run to run; with the legacy RENAME, since the modern one checks every
    view and fails on ``profile_history``, which names the table while it is gone. Foreign keys
    are off around every migration (``store.migrate``): dropping the old table cascades
    nothing to the versions' rates and counts, which name the new one once it is renamed."""
    copied = [c.name for c in target.columns if c.name != "key_id"]
    columns = ", ".join(copied)
    op.execute(CreateTable(target))
    op.execute(f"INSERT INTO {target.name} ({columns}{', key_id' if key_id else ''}) "
               f"SELECT {', '.join(f'v.{c}' for c in copied)}"
               f"{', ' + key_id if key_id else ''} FROM {TABLE} v ORDER BY v.id")
    op.execute(f"DROP TABLE {TABLE}")
    op.execute("PRAGMA legacy_alter_table=ON")
    op.execute(f"ALTER TABLE {target.name} RENAME TO {TABLE}")
    op.execute("PRAGMA legacy_alter_table=OFF")
    op.create_index(op.f("ix_profile_versions_set_name_first_revision"), TABLE,
                    ["set_name", "first_revision"])


def _versions(stretch: bool) -> sa.Table:
    """``profile_versions`` as this revision leaves it (``stretch``) or as 0009 left it, under
    a temporary name (:func:`_rebuild`), with stubs of the tables it refers to."""
    table = TABLE
    meta = sa.MetaData()
    for name, key in (("methods", "name"), ("provenances", "id"), ("profile_keys", "id")):
        sa.Table(name, meta, sa.Column(key, sa.Integer(), primary_key=True))
    key = (sa.Column("key_id", sa.Integer(), nullable=False),
           sa.UniqueConstraint("key_id", "first_revision", name="uq_profile_versions_stretch"),
           sa.ForeignKeyConstraint(["key_id"], ["profile_keys.id"],
                                   name="fk_profile_versions_key_id")) if stretch else (
        sa.UniqueConstraint(*_KEY, "set_name", "valid_from", "valid_until",
                            name="uq_profile_versions_key"),)
    return sa.Table(
        "_profile_versions_0010", meta,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("set_name", sa.String(), nullable=False),
        sa.Column("first_revision", sa.Integer(), nullable=False),
        sa.Column("last_revision", sa.Integer(), nullable=True),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("valid_until", sa.DateTime(timezone=True), nullable=True),
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
        sa.PrimaryKeyConstraint("id", name="pk_profile_versions"),
        sa.ForeignKeyConstraint(["method"], ["methods.name"], name=f"fk_{table}_method"),
        sa.ForeignKeyConstraint(["provenance_id"], ["provenances.id"],
                                name=f"fk_{table}_provenance_id"),
        sa.CheckConstraint("thinking IN ('on', 'off')", name=f"ck_{table}_thinking"),
        sa.CheckConstraint("num_spec_tokens >= 1", name=f"ck_{table}_k"),
        sa.CheckConstraint("acceptance_length >= 1 AND acceptance_length <= num_spec_tokens + 1",
                           name=f"ck_{table}_al_range"),
        sa.CheckConstraint("first_revision >= 1", name=f"ck_{table}_first_revision"),
        sa.CheckConstraint("last_revision IS NULL OR last_revision >= first_revision",
                           name=f"ck_{table}_revision_range"),
        sa.CheckConstraint("(last_revision IS NULL) = (valid_until IS NULL)",
                           name=f"ck_{table}_open_range"),
        *key,
    )


def would_lose(connection: sa.engine.Connection) -> list[str]:
    """Nothing: ``key_id`` is computed from the stretches, which stay."""
    return []


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
