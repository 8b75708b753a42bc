"""Versions: each profile version is stored once, over the range of revisions that held it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

Until now every revision held a full copy of its set (``revision_profiles``, ``revision_rates``,
``revision_counts``), so an import that changed 5% of a set wrote 100% of it again into the
history. Here each version of a profile becomes one row of ``profile_versions`` held by the
set's revisions ``first_revision`` … ``last_revision`` (NULL: up to the latest) and current from
``valid_from`` to ``valid_until`` (the revisions' ``imported_at``; NULL: still current), the
slowly-changing-dimension shape, with ``version_rates`` and ``version_counts`` beside it. A
version is the same profile at the same file position with equal values, rates, counts and
provenance in consecutive revisions; a deletion closes every range of its set. Caveats stay a
copy per revision (``revision_caveats``: a few rows a set). ``revisions`` gains an index on
(``set_name``, ``imported_at``): a set's revision at a time in one probe.

The upgrade walks each set's revisions in order, so the history's answers are unchanged; the
view ``profile_history`` is recreated over the new tables with the same columns and rows
(``CREATE OR REPLACE`` on PostgreSQL, which keeps its grants and comments). The downgrade
expands every range back into one copy per revision with set-based statements: nothing is
lost either way (:func:`would_lose`).

Self-contained on purpose: its own table definitions and view SQL, never the live models.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_COUNT_COLUMNS = """,
    c.drafts,
    c.draft_tokens,
    c.accepted_tokens,
    c.al_stderr,
    CASE WHEN c.profile_id IS NULL THEN NULL
         WHEN c.accepted_per_position IS NULL THEN 0 ELSE 1 END AS al_stderr_exact"""

_PROFILE_HISTORY = """
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
    CASE WHEN n.id IS NULL THEN 1 ELSE 0 END AS is_current""" + _COUNT_COLUMNS

#: profile_history as 0005 left it (a copy per revision) and as this revision makes it.
PROFILE_HISTORY_BEFORE = _PROFILE_HISTORY + """
FROM revision_profiles p
JOIN revisions v ON v.id = p.revision_id
LEFT JOIN revisions n ON n.set_name = v.set_name AND n.revision = v.revision + 1
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN revision_counts c ON c.profile_id = p.id
"""
PROFILE_HISTORY_AFTER = _PROFILE_HISTORY + """
FROM profile_versions p
JOIN revisions v ON v.set_name = p.set_name AND v.revision >= p.first_revision
    AND (p.last_revision IS NULL OR v.revision <= p.last_revision) AND v.action <> 'deleted'
LEFT JOIN revisions n ON n.set_name = v.set_name AND n.revision = v.revision + 1
LEFT JOIN provenances pr ON pr.id = p.provenance_id
LEFT JOIN version_counts c ON c.profile_id = p.id
"""

_PROFILE = ("position, model, speculative_method, num_spec_tokens, thinking, category, "
            "acceptance_length, method, provenance_id, rationale, copied_from")
_COUNTS = "drafts, draft_tokens, accepted_tokens, accepted_per_position, al_stderr"

#: Relations this revision drops: their comments go with them.
DROPPED = ("revision_profiles", "revision_rates", "revision_counts")

#: relation -> (kind, its comment, {column: its comment}), as the catalog has them.
COMMENTS: dict[str, tuple[str, str, dict[str, str]]] = {
    'profile_versions': ('table',
        ("Each version of a profile, stored once: the range of its set's "
         'revisions that held it, and when.'),
        {
            'id': 'Surrogate key.',
            'set_name': "The set's name (revisions.set_name).",
            'first_revision': 'The first revision of the set that holds this version.',
            'last_revision': ("The last revision that holds it; NULL while the set's latest "
                              'revision does.'),
            'valid_from': ("When it became current: first_revision's imported_at. Unit: UTC "
                           'timestamp.'),
            'valid_until': ('When it stopped being current (replaced, removed or the set deleted): '
                            "the next revision's imported_at; NULL while current. Unit: UTC "
                            'timestamp.'),
            'position': '0-based order in the file.',
            'model': 'The catalog model name.',
            'speculative_method': "The engine's speculative method, e.g. dspark, mtp.",
            'num_spec_tokens': ('K: draft tokens proposed per verification step; at least 1. Unit: '
                                'tokens.'),
            'thinking': 'Thinking mode: on or off.',
            'category': 'Workload category, e.g. coding (lower-case letters, digits, _, -).',
            'acceptance_length': ("AL: tokens a request gains per verification step, the target's "
                                  'bonus token included; in [1, K + 1]. Unit: tokens per step.'),
            'method': 'How the value was obtained (methods.name).',
            'provenance_id': 'Where it was measured (provenances.id).',
            'rationale': 'The reasoning behind a value that was not measured.',
            'copied_from': "For copied: the source profile's label.",
        }),
    'version_rates': ('table',
        'Per-position rates of a profile version.',
        {
            'profile_id': 'The profile version (profile_versions.id).',
            'position': 'i, from 1 to K.',
            'rate': 'p_i: P(the first i drafts are all accepted). Unit: probability.',
        }),
    'version_counts': ('table',
        'The counts of a profile version.',
        {
            'profile_id': 'The profile version (profile_versions.id).',
            'drafts': ('D: verification steps that drafted (vLLM num_drafts); at least 1. '
                       'Unit: steps.'),
            'draft_tokens': 'Tokens drafted (vLLM num_draft_tokens); at most K × D. Unit: tokens.',
            'accepted_tokens': ('A: drafted tokens accepted (vLLM num_accepted_tokens); at most '
                                'draft_tokens. Unit: tokens.'),
            'accepted_per_position': ('a_1..a_K as a JSON array of integers, [70000,40000,16838] '
                                      '(a_i: steps that accepted at least i drafts; non-increasing,'
                                      ' summing to A); NULL when not known. Read it with json_each '
                                      '(SQLite) or ::jsonb (PostgreSQL).'),
            'al_stderr': ('The standard error of AL, computed when the row was written by '
                          "Counts.uncertainty (SQLite has no portable SQRT); see the views' "
                          'column. Unit: tokens per step.'),
        }),
}

#: The dropped tables' comments as 0006 wrote them, for the downgrade.
COMMENTS_BEFORE: dict[str, tuple[str, str, dict[str, str]]] = {
    'revision_profiles': ('table',
        "A full copy of each revision's profiles.",
        {
            'id': 'Surrogate key.',
            'revision_id': 'The revision (revisions.id).',
            'position': '0-based order in the file.',
            'model': 'The catalog model name.',
            'speculative_method': "The engine's speculative method, e.g. dspark, mtp.",
            'num_spec_tokens': ('K: draft tokens proposed per verification step; at least 1. Unit: '
                                'tokens.'),
            'thinking': 'Thinking mode: on or off.',
            'category': 'Workload category, e.g. coding (lower-case letters, digits, _, -).',
            'acceptance_length': ("AL: tokens a request gains per verification step, the target's "
                                  'bonus token included; in [1, K + 1]. Unit: tokens per step.'),
            'method': 'How the value was obtained (methods.name).',
            'provenance_id': 'Where it was measured (provenances.id).',
            'rationale': 'The reasoning behind a value that was not measured.',
            'copied_from': "For copied: the source profile's label.",
        }),
    'revision_rates': ('table',
        "Per-position rates of a revision's profile.",
        {
            'profile_id': 'The profile (revision_profiles.id).',
            'position': 'i, from 1 to K.',
            'rate': 'p_i: P(the first i drafts are all accepted). Unit: probability.',
        }),
    'revision_counts': ('table',
        "The counts of a revision's profile.",
        {
            'profile_id': 'The profile (revision_profiles.id).',
            'drafts': ('D: verification steps that drafted (vLLM num_drafts); at least 1. '
                       'Unit: steps.'),
            'draft_tokens': 'Tokens drafted (vLLM num_draft_tokens); at most K × D. Unit: tokens.',
            'accepted_tokens': ('A: drafted tokens accepted (vLLM num_accepted_tokens); at most '
                                'draft_tokens. Unit: tokens.'),
            'accepted_per_position': ('a_1..a_K as a JSON array of integers, [70000,40000,16838] '
                                      '(a_i: steps that accepted at least i drafts; non-increasing,'
                                      ' summing to A); NULL when not known. Read it with json_each '
                                      '(SQLite) or ::jsonb (PostgreSQL).'),
            'al_stderr': ('The standard error of AL, computed when the row was written by '
                          "Counts.uncertainty (SQLite has no portable SQRT); see the views' "
                          'column. Unit: tokens per step.'),
        }),
}

# --- tables ---------------------------------------------------------------------------------------


def _profile_columns() -> list[sa.Column]:
    return [
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
    ]


def _profile_rules(table: str) -> list[Any]:
    return [
        sa.ForeignKeyConstraint(["method"], ["methods.name"], name=op.f(f"fk_{table}_method")),
        sa.ForeignKeyConstraint(["provenance_id"], ["provenances.id"],
                                name=op.f(f"fk_{table}_provenance_id")),
        sa.CheckConstraint("thinking IN ('on', 'off')", name=op.f(f"ck_{table}_thinking")),
        sa.CheckConstraint("num_spec_tokens >= 1", name=op.f(f"ck_{table}_k")),
        sa.CheckConstraint(
            "acceptance_length >= 1 AND acceptance_length <= num_spec_tokens + 1",
            name=op.f(f"ck_{table}_al_range")),
    ]


def _rates_table(name: str, parent: str) -> None:
    op.create_table(
        name,
        sa.Column("profile_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("rate", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("profile_id", "position", name=op.f(f"pk_{name}")),
        sa.ForeignKeyConstraint(["profile_id"], [f"{parent}.id"], ondelete="CASCADE",
                                name=op.f(f"fk_{name}_profile_id")),
        sa.CheckConstraint("position >= 1", name=op.f(f"ck_{name}_position")),
        sa.CheckConstraint("rate >= 0 AND rate <= 1", name=op.f(f"ck_{name}_rate_range")),
    )


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


def _create_versions() -> None:
    op.create_table(
        "profile_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("set_name", sa.String(), nullable=False),
        sa.Column("first_revision", sa.Integer(), nullable=False),
        sa.Column("last_revision", sa.Integer(), nullable=True),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("valid_until", sa.DateTime(timezone=True), nullable=True),
        *_profile_columns(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_profile_versions")),
        *_profile_rules("profile_versions"),
        # Key columns first: the as-of lookup searches this index by key.
        sa.UniqueConstraint("model", "speculative_method", "num_spec_tokens", "thinking",
                            "category", "set_name", "first_revision",
                            name=op.f("uq_profile_versions_key")),
        sa.CheckConstraint("first_revision >= 1", name=op.f("ck_profile_versions_first_revision")),
        sa.CheckConstraint("last_revision IS NULL OR last_revision >= first_revision",
                           name=op.f("ck_profile_versions_revision_range")),
        sa.CheckConstraint("(last_revision IS NULL) = (valid_until IS NULL)",
                           name=op.f("ck_profile_versions_open_range")),
    )
    op.create_index(op.f("ix_profile_versions_set_name_last_revision"), "profile_versions",
                    ["set_name", "last_revision"])
    op.create_index(op.f("ix_profile_versions_provenance_id"), "profile_versions",
                    ["provenance_id"])
    _rates_table("version_rates", "profile_versions")
    _counts_table("version_counts", "profile_versions")


def _create_copies() -> None:
    """``revision_profiles``, ``revision_rates`` and ``revision_counts`` as 0004 and 0005 made
    them."""
    op.create_table(
        "revision_profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("revision_id", sa.Integer(), nullable=False),
        *_profile_columns(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_revision_profiles")),
        sa.ForeignKeyConstraint(["revision_id"], ["revisions.id"], ondelete="CASCADE",
                                name=op.f("fk_revision_profiles_revision_id")),
        *_profile_rules("revision_profiles"),
        sa.UniqueConstraint("model", "speculative_method", "num_spec_tokens", "thinking",
                            "category", "revision_id", name=op.f("uq_revision_profiles_key")),
        sa.UniqueConstraint("revision_id", "position",
                            name=op.f("uq_revision_profiles_revision_position")),
    )
    op.create_index(op.f("ix_revision_profiles_provenance_id"), "revision_profiles",
                    ["provenance_id"])
    _rates_table("revision_rates", "revision_profiles")
    _counts_table("revision_counts", "revision_profiles")


def _replace_view(sql: str) -> None:
    if op.get_context().dialect.name == "postgresql":
        # The same columns: PostgreSQL replaces it in place and keeps grants and comments.
        op.execute(f"CREATE OR REPLACE VIEW profile_history AS {sql}")
        return
    op.execute("DROP VIEW profile_history")
    op.execute(f"CREATE VIEW profile_history AS {sql}")


# --- moving the history ---------------------------------------------------------------------------

_VERSIONS = sa.table("profile_versions", *(sa.column(c) for c in (
    "id", "set_name", "first_revision", "last_revision", "valid_from", "valid_until",
    *_PROFILE.split(", "))))
_RATES = sa.table("version_rates", sa.column("profile_id"), sa.column("position"),
                  sa.column("rate"))
_COUNTS_TABLE = sa.table("version_counts", sa.column("profile_id"),
                         *(sa.column(c) for c in _COUNTS.split(", ")))


def _ranges(conn: sa.engine.Connection, name: str, next_id: int
            ) -> tuple[list[dict], list[dict], list[dict]]:
    """Set ``name``'s revisions as versions (from ``next_id``), their rates and counts: a
    version runs while consecutive revisions hold the same profile at the same position with
    the same values, rates, counts and provenance."""
    revs = conn.execute(sa.text(
        "SELECT id, revision, action, imported_at FROM revisions WHERE set_name = :n "
        "ORDER BY revision"), {"n": name}).all()
    held: dict[int, list[tuple]] = {}
    for row in conn.execute(sa.text(
            f"SELECT p.revision_id, p.id, {', '.join('p.' + c for c in _PROFILE.split(', '))} "
            "FROM revision_profiles p JOIN revisions v ON v.id = p.revision_id "
            "WHERE v.set_name = :n"), {"n": name}):
        held.setdefault(row[0], []).append(tuple(row[1:]))
    rates: dict[int, list[tuple]] = {}
    for pid, pos, rate in conn.execute(sa.text(
            "SELECT r.profile_id, r.position, r.rate FROM revision_rates r "
            "JOIN revision_profiles p ON p.id = r.profile_id "
            "JOIN revisions v ON v.id = p.revision_id WHERE v.set_name = :n"), {"n": name}):
        rates.setdefault(pid, []).append((pos, rate))
    counts = {row[0]: tuple(row[1:]) for row in conn.execute(sa.text(
        f"SELECT c.profile_id, {', '.join('c.' + c for c in _COUNTS.split(', '))} "
        "FROM revision_counts c JOIN revision_profiles p ON p.id = c.profile_id "
        "JOIN revisions v ON v.id = p.revision_id WHERE v.set_name = :n"), {"n": name})}
    versions: list[dict] = []
    open_: dict[tuple, dict] = {}  # what the previous revision held, by its whole content
    for rid, number, _action, at in revs:
        now = {(*values, tuple(sorted(rates.get(pid, ()))), counts.get(pid))
               for pid, *values in held.get(rid, ())}
        for content in [c for c in open_ if c not in now]:
            closed = open_.pop(content)
            closed["last_revision"], closed["valid_until"] = number - 1, at
        for content in now:
            if content not in open_:
                row = dict(zip(_PROFILE.split(", "), content[:11]))
                row.update(id=next_id + len(versions), set_name=name, first_revision=number,
                           last_revision=None, valid_from=at, valid_until=None,
                           _rates=content[11], _counts=content[12])
                open_[content] = row
                versions.append(row)
    rate_rows = [{"profile_id": v["id"], "position": pos, "rate": rate}
                 for v in versions for pos, rate in v.pop("_rates")]
    count_rows = [{"profile_id": v["id"], **dict(zip(_COUNTS.split(", "), c))}
                  for v in versions if (c := v.pop("_counts")) is not None]
    return versions, rate_rows, count_rows


def _move_into_versions() -> None:
    conn = op.get_bind()
    next_id = 1
    names = conn.execute(sa.text("SELECT DISTINCT set_name FROM revisions ORDER BY set_name"))
    for (name,) in names.all():
        versions, rates, counts = _ranges(conn, name, next_id)
        next_id += len(versions)
        for table, rows in ((_VERSIONS, versions), (_RATES, rates), (_COUNTS_TABLE, counts)):
            if rows:
                conn.execute(table.insert(), rows)
    if conn.dialect.name == "postgresql" and next_id > 1:
        # Ids were given explicitly: the sequence continues after them.
        op.execute("SELECT setval(pg_get_serial_sequence('profile_versions', 'id'), "
                   "(SELECT MAX(id) FROM profile_versions))")


#: Revision v of a set holds version p.
_HOLDS = ("v.set_name = p.set_name AND v.revision >= p.first_revision "
          "AND (p.last_revision IS NULL OR v.revision <= p.last_revision) "
          "AND v.action <> 'deleted'")


def _expand_into_copies() -> None:
    columns = ", ".join(f"p.{c}" for c in _PROFILE.split(", "))
    op.execute(f"INSERT INTO revision_profiles (revision_id, {_PROFILE}) "
               f"SELECT v.id, {columns} FROM profile_versions p JOIN revisions v ON {_HOLDS}")
    # Each copy of a version: found by its revision and file position.
    copies = (f"JOIN profile_versions p ON p.id = x.profile_id JOIN revisions v ON {_HOLDS} "
              "JOIN revision_profiles rp ON rp.revision_id = v.id AND rp.position = p.position")
    op.execute("INSERT INTO revision_rates (profile_id, position, rate) "
               f"SELECT rp.id, x.position, x.rate FROM version_rates x {copies}")
    op.execute(f"INSERT INTO revision_counts (profile_id, {_COUNTS}) "
               f"SELECT rp.id, {', '.join('x.' + c for c in _COUNTS.split(', '))} "
               f"FROM version_counts x {copies}")


# --- the migration --------------------------------------------------------------------------------


def upgrade() -> None:
    op.create_index(op.f("ix_revisions_set_name_imported_at"), "revisions",
                    ["set_name", "imported_at"])
    _create_versions()
    _move_into_versions()
    _replace_view(PROFILE_HISTORY_AFTER)
    for name in ("revision_counts", "revision_rates"):
        op.drop_table(name)
    op.drop_index(op.f("ix_revision_profiles_provenance_id"), table_name="revision_profiles")
    op.drop_table("revision_profiles")
    _comment(COMMENTS)


def downgrade() -> None:
    _create_copies()
    _expand_into_copies()
    _replace_view(PROFILE_HISTORY_BEFORE)
    for name in ("version_counts", "version_rates"):
        op.drop_table(name)
    op.drop_index(op.f("ix_profile_versions_provenance_id"), table_name="profile_versions")
    op.drop_index(op.f("ix_profile_versions_set_name_last_revision"),
                  table_name="profile_versions")
    op.drop_table("profile_versions")
    op.drop_index(op.f("ix_revisions_set_name_imported_at"), table_name="revisions")
    _comment(COMMENTS_BEFORE)


def would_lose(connection: sa.engine.Connection) -> list[str]:
    """Nothing: the downgrade writes every range back as one copy per revision."""
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
