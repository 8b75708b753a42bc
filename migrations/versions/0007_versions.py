"""Versions: each profile version is stored once, over the range of revisions that held it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

Until now every revision held a full copy of its set (``revision_profiles``, ``revision_rates``,
``revision_counts``), so an import that changed 5% of a set wrote 100% of it again into the
history. Here each version of a profile becomes one row of ``profile_versions`` held by the
set's revisions ``first_revision`` … ``last_revision`` (NULL: up to the latest) and current from
``valid_from`` to ``valid_until`` (the revisions' ``imported_at``; NULL: still current), the
slowly-changing-dimension shape, with ``version_rates`` and ``version_counts`` beside it, and
``profile_keys`` the stretches of time each set held each key, whatever its values (what a
refusal says was stored then, read from one index). A
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
    'profile_keys': ('table',
        ('When each set held each profile key, whatever its values: one row per unbroken stretch (a'
         " removal or the set's deletion ends it)."),
        {
            'id': 'Surrogate key.',
            'set_name': "The set's name (revisions.set_name).",
            'model': 'The catalog model name.',
            'speculative_method': "The engine's speculative method, e.g. dspark, mtp.",
            'num_spec_tokens': ('K: draft tokens proposed per verification step; at least 1. Unit: '
                                'tokens.'),
            'thinking': 'Thinking mode: on or off.',
            'category': 'Workload category, e.g. coding (lower-case letters, digits, _, -).',
            'valid_from': 'When the set began to hold the key. Unit: UTC timestamp.',
            'valid_until': ('When it stopped (the key removed or the set deleted); NULL while it '
                            'holds it. Unit: UTC timestamp.'),
        }),
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
        # Key columns first: the as-of lookup searches this index by key, and finds the
        # versions current at a time in the index itself (it covers the times).
        sa.UniqueConstraint("model", "speculative_method", "num_spec_tokens", "thinking",
                            "category", "set_name", "valid_from", "valid_until",
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
    op.create_table(
        "profile_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("set_name", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("speculative_method", sa.String(), nullable=False),
        sa.Column("num_spec_tokens", sa.Integer(), nullable=False),
        sa.Column("thinking", sa.String(), nullable=False),
        sa.Column("category", sa.String(), nullable=False),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("valid_until", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_profile_keys")),
        # The keys a model and method had at a time, in the index alone (the misses' text).
        sa.UniqueConstraint("model", "speculative_method", "num_spec_tokens", "thinking",
                            "category", "set_name", "valid_from", "valid_until",
                            name=op.f("uq_profile_keys_key")),
    )
    op.create_index(op.f("ix_profile_keys_set_name_valid_until"), "profile_keys",
                    ["set_name", "valid_until"])


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

def _same(a: str, b: str) -> str:
    """Profile copies ``a`` and ``b`` hold the same version: every column, rates and counts."""
    def equal(column: str) -> str:
        return f"({a}.{column} = {b}.{column} OR ({a}.{column} IS NULL AND {b}.{column} IS NULL))"

    counts = " AND ".join(equal(c) for c in _COUNTS.split(", "))
    return (" AND ".join(equal(c) for c in _PROFILE.split(", "))
            + f" AND NOT EXISTS (SELECT 1 FROM revision_rates x WHERE x.profile_id = {a}.id"
            f" AND NOT EXISTS (SELECT 1 FROM revision_rates y WHERE y.profile_id = {b}.id"
            " AND y.position = x.position AND y.rate = x.rate))"
            f" AND NOT EXISTS (SELECT 1 FROM revision_rates y WHERE y.profile_id = {b}.id"
            f" AND NOT EXISTS (SELECT 1 FROM revision_rates x WHERE x.profile_id = {a}.id"
            " AND x.position = y.position))"
            " AND ((NOT EXISTS (SELECT 1 FROM revision_counts x WHERE x.profile_id = "
            f"{a}.id) AND NOT EXISTS (SELECT 1 FROM revision_counts y WHERE y.profile_id = "
            f"{b}.id)) OR EXISTS (SELECT 1 FROM revision_counts x JOIN revision_counts y ON "
            f"y.profile_id = {b}.id WHERE x.profile_id = {a}.id AND "
            + counts.replace(f"{a}.", "x.").replace(f"{b}.", "y.") + "))")


#: Each copy, and whether it starts a version: no copy of the revision before, at the same file
#: position, holds the same. Numbered per (set, position) by revision, the starts so far
#: (``island``) name its version (gaps and islands); each version's copies are consecutive.
_ISLANDS = """
SELECT set_name, position, island, MIN(revision) AS first_revision,
       MAX(revision) AS last_revision
FROM (
    SELECT set_name, position, revision, SUM(start) OVER (
        PARTITION BY set_name, position ORDER BY revision ROWS UNBOUNDED PRECEDING) AS island
    FROM (
        SELECT v.set_name, rp.position, v.revision,
               CASE WHEN EXISTS (
                   SELECT 1 FROM revision_profiles q JOIN revisions w ON w.id = q.revision_id
                   WHERE w.set_name = v.set_name AND w.revision = v.revision - 1
                     AND q.position = rp.position AND {same}
               ) THEN 0 ELSE 1 END AS start
        FROM revision_profiles rp JOIN revisions v ON v.id = rp.revision_id
    ) s
) i
GROUP BY set_name, position, island"""

#: A version's first copy: its first revision's profile at its position.
_FIRST_COPY = ("JOIN revisions f ON f.set_name = pv.set_name AND f.revision = pv.first_revision "
               "JOIN revision_profiles rp ON rp.revision_id = f.id AND rp.position = pv.position")


_KEY_COLUMNS = "model, speculative_method, num_spec_tokens, thinking, category"

#: Each set's unbroken stretches of each key, from its versions: a version starts a stretch
#: unless a version of the same key and set ends when it begins (gaps and islands again).
_STRETCHES = """
SELECT set_name, {key}, MIN(valid_from) AS valid_from,
       CASE WHEN COUNT(valid_until) < COUNT(*) THEN NULL ELSE MAX(valid_until) END
           AS valid_until
FROM (
    SELECT set_name, {key}, valid_from, valid_until, SUM(start) OVER (
        PARTITION BY set_name, {key} ORDER BY valid_from ROWS UNBOUNDED PRECEDING) AS stretch
    FROM (
        SELECT p.set_name, {p_key}, p.valid_from, p.valid_until,
               CASE WHEN EXISTS (
                   SELECT 1 FROM profile_versions q WHERE q.set_name = p.set_name
                     AND {same_key} AND q.valid_until = p.valid_from
               ) THEN 0 ELSE 1 END AS start
        FROM profile_versions p
    ) s
) i
GROUP BY set_name, {key}, stretch""".format(
    key=_KEY_COLUMNS, p_key=", ".join(f"p.{c}" for c in _KEY_COLUMNS.split(", ")),
    same_key=" AND ".join(f"q.{c} = p.{c}" for c in _KEY_COLUMNS.split(", ")))


def _move_into_versions() -> None:
    """Set-based, whatever the size (and so ``db upgrade --sql`` writes it as well)."""
    op.execute(
        "INSERT INTO profile_versions (set_name, first_revision, last_revision, valid_from, "
        f"valid_until, {_PROFILE}) "
        "SELECT g.set_name, g.first_revision, CASE WHEN n.id IS NULL THEN NULL "
        "ELSE g.last_revision END, f.imported_at, n.imported_at, "
        + ", ".join(f"rp.{c}" for c in _PROFILE.split(", "))
        + f" FROM ({_ISLANDS.format(same=_same('rp', 'q'))}) g "
        "JOIN revisions f ON f.set_name = g.set_name AND f.revision = g.first_revision "
        "JOIN revision_profiles rp ON rp.revision_id = f.id AND rp.position = g.position "
        "LEFT JOIN revisions n ON n.set_name = g.set_name AND n.revision = g.last_revision + 1")
    op.execute("INSERT INTO version_rates (profile_id, position, rate) "
               f"SELECT pv.id, r.position, r.rate FROM profile_versions pv {_FIRST_COPY} "
               "JOIN revision_rates r ON r.profile_id = rp.id")
    op.execute(f"INSERT INTO version_counts (profile_id, {_COUNTS}) "
               f"SELECT pv.id, {', '.join('c.' + c for c in _COUNTS.split(', '))} "
               f"FROM profile_versions pv {_FIRST_COPY} "
               "JOIN revision_counts c ON c.profile_id = rp.id")
    op.execute(f"INSERT INTO profile_keys (set_name, {_KEY_COLUMNS}, valid_from, valid_until) "
               f"SELECT set_name, {_KEY_COLUMNS}, valid_from, valid_until FROM ({_STRETCHES}) k")


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
    op.drop_index(op.f("ix_profile_keys_set_name_valid_until"), table_name="profile_keys")
    op.drop_table("profile_keys")
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
