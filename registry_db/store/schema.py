"""The database schema as SQLAlchemy Core tables.

Migrations in ``migrations/versions`` create and change the schema; these tables describe the
head so that the library can query it and a test can prove the two agree (autogenerate finds
nothing). Core tables, not ORM classes: nothing maps rows to objects, and the ORM's import and
declarations were a share of the start-up of every command that opens an engine
(``docs/decisions.md``).
Every constraint has a name from the naming convention, identical on SQLite and PostgreSQL and
at most 63 characters; multi-column keys carry short explicit names.

The spec's rules that SQL can hold are CHECK constraints here: thinking in (on, off), K ≥ 1,
1 ≤ AL ≤ K + 1, each rate in [0, 1], the method's requirements that live in one row, and the
provenance counts and sampling ranges. What needs more than one row (a measured profile's
provenance has hardware; K rates per profile; rates that sum to AL − 1) is the validator's.

``profile_sets`` … ``profile_counts`` are the current registry (what resolution reads); the
``revisions`` table and ``profile_versions`` (each profile version once, over a range of
revisions) keep every revision of every set beside it (see
:mod:`registry_db.history`).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy import text as sql_text

from registry_db.store.catalog import comments

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(constraint_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _key_columns() -> list[Column]:
    """A profile key's five columns, as every table holding a key has them."""
    return [
        Column("model", String(), nullable=False),
        Column("speculative_method", String(), nullable=False),
        Column("num_spec_tokens", Integer, nullable=False),
        Column("thinking", String(), nullable=False),
        Column("category", String(), nullable=False),
    ]


#: A profile set: one file of ``acceptance/``, identified by its ``name``.
profile_sets = Table(
    "profile_sets", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(), nullable=False),
    Column("source_file", Text),
    Column("content_hash", String(64), nullable=False),
    Column("imported_at", DateTime(timezone=True), nullable=False),
    # The set's revision that this content is (revisions.revision); resolutions report it.
    Column("revision", Integer, nullable=False, server_default=sql_text("1")),
    UniqueConstraint("name", name="name"),
    CheckConstraint("name <> ''", name="name_not_empty"),
)


def _caveats(name: str, owner: str, parent: str) -> Table:
    """The caveats of a row of ``parent`` (by ``owner``), in file order (0-based ``position``)."""
    return Table(
        name, metadata,
        Column(owner, ForeignKey(f"{parent}.id", ondelete="CASCADE"), nullable=False),
        Column("position", Integer, nullable=False),
        Column("text", Text, nullable=False),
        PrimaryKeyConstraint(owner, "position"),
        CheckConstraint("text <> ''", name="text_not_empty"),
        CheckConstraint("position >= 0", name="position"),
    )


def _value_columns() -> list[Column]:
    """What a profile states beside its key, as the current profiles and the versions hold it."""
    return [
        Column("acceptance_length", Double, nullable=False),
        Column("method", ForeignKey("methods.name"), nullable=False),
        Column("provenance_id", ForeignKey("provenances.id")),
        Column("rationale", Text),
        Column("copied_from", Text),
    ]


def _key_checks() -> list[CheckConstraint]:
    """Fresh checks of a key's thinking and K and of the AL's range (the convention names them)."""
    return [
        CheckConstraint("thinking IN ('on', 'off')", name="thinking"),
        CheckConstraint("num_spec_tokens >= 1", name="k"),
        CheckConstraint("acceptance_length >= 1 AND acceptance_length <= num_spec_tokens + 1",
                        name="al_range"),
    ]


set_caveats = _caveats("set_caveats", "set_id", "profile_sets")

#: The methods vocabulary and what each requires (seeded by the first migration).
methods = Table(
    "methods", metadata,
    Column("name", String(32), primary_key=True),
    Column("description", Text, nullable=False),
    Column("allowed_in_profile", Boolean, nullable=False),
    Column("requires_provenance", Boolean, nullable=False),
    Column("requires_rationale", Boolean, nullable=False),
    Column("requires_copied_from", Boolean, nullable=False),
    Column("requires_measurement", Boolean, nullable=False),
)

#: One distinct provenance, shared by every profile that cites the same content (its
#: ``content_hash``, settings included); sampling's columns are NULL when it states none.
provenances = Table(
    "provenances", metadata,
    Column("id", Integer, primary_key=True),
    Column("content_hash", String(64), nullable=False),
    Column("source", Text, nullable=False),
    Column("run", Text),
    Column("benchmark", Text),
    Column("prompts", Integer),
    Column("hardware", Text),
    Column("engine_image", Text),
    Column("tp", Integer),
    Column("temperature", Double),
    Column("top_p", Double),
    Column("top_k", Integer),
    Column("max_tokens", Integer),
    UniqueConstraint("content_hash", name="content_hash"),
    CheckConstraint("source <> ''", name="source_not_empty"),
    CheckConstraint("prompts >= 0", name="prompts"),
    CheckConstraint("tp >= 0", name="tp"),
    CheckConstraint("temperature >= 0", name="temperature"),
    CheckConstraint("top_p > 0 AND top_p <= 1", name="top_p"),
    CheckConstraint("top_k >= -1", name="top_k"),
    CheckConstraint("max_tokens >= 0", name="max_tokens"),
    CheckConstraint(
        "temperature IS NOT NULL OR (top_p IS NULL AND top_k IS NULL AND max_tokens IS NULL)",
        name="sampling_has_temperature"),
)

#: One engine setting of a provenance, by name: its value as text and how the file wrote it.
provenance_settings = Table(
    "provenance_settings", metadata,
    Column("provenance_id", ForeignKey("provenances.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(), nullable=False),
    Column("value", Text, nullable=False),
    Column("value_type", String(16), nullable=False),
    PrimaryKeyConstraint("provenance_id", "name"),
    CheckConstraint("name <> ''", name="name_not_empty"),
    CheckConstraint("value <> ''", name="value_not_empty"),
    CheckConstraint("value_type IN ('string', 'integer', 'number', 'boolean')",
                    name="value_type"),
)

#: One profile of one set: the measured (or stated) AL for a profile key.
profiles = Table(
    "profiles", metadata,
    Column("id", Integer, primary_key=True),
    Column("set_id", ForeignKey("profile_sets.id", ondelete="CASCADE"), nullable=False),
    Column("position", Integer, nullable=False),  # 0-based order in the file (export keeps it)
    *_key_columns(),
    *_value_columns(),
    # Key columns first and set last, so that the constraint's index also serves the
    # resolver's lookup across all sets.
    UniqueConstraint("model", "speculative_method", "num_spec_tokens", "thinking",
                     "category", "set_id", name="key"),
    CheckConstraint("model <> ''", name="model_not_empty"),
    CheckConstraint("speculative_method <> ''", name="method_name_not_empty"),
    CheckConstraint("category <> ''", name="category_not_empty"),
    *_key_checks(),
    CheckConstraint("method <> 'not_charged'", name="method_charged"),
    CheckConstraint("method = 'assumed' OR provenance_id IS NOT NULL",
                    name="provenance_required"),
    CheckConstraint("method = 'measured' OR rationale IS NOT NULL",
                    name="rationale_required"),
    CheckConstraint("method <> 'copied' OR copied_from IS NOT NULL",
                    name="copied_from_required"),
    Index(None, "set_id"),
    Index(None, "provenance_id"),
)


def _rates(name: str, parent: str) -> Table:
    """A per-position rate p_i (P(the first i drafts are all accepted), i from 1 to K) of a row
    of ``parent``."""
    return Table(
        name, metadata,
        Column("profile_id", ForeignKey(f"{parent}.id", ondelete="CASCADE"), nullable=False),
        Column("position", Integer, nullable=False),
        Column("rate", Double, nullable=False),
        PrimaryKeyConstraint("profile_id", "position"),
        CheckConstraint("position >= 1", name="position"),
        CheckConstraint("rate >= 0 AND rate <= 1", name="rate_range"),
    )


def _counts(name: str, parent: str) -> Table:
    """The counts of a row of ``parent`` (``counts`` in the file; vLLM's ``num_drafts``,
    ``num_draft_tokens``, ``num_accepted_tokens``), one row per profile that states them: a_1..a_K
    as a JSON array (NULL if not known) and AL's standard error, computed at write time by
    :meth:`registry_db.model.Counts.uncertainty`. The per-step bound ``draft_tokens <= K x
    drafts`` and the per-position rules need the profile's K and are the validator's."""
    return Table(
        name, metadata,
        Column("profile_id", ForeignKey(f"{parent}.id", ondelete="CASCADE"), primary_key=True,
               autoincrement=False),
        Column("drafts", BigInteger, nullable=False),
        Column("draft_tokens", BigInteger, nullable=False),
        Column("accepted_tokens", BigInteger, nullable=False),
        Column("accepted_per_position", Text),
        Column("al_stderr", Double, nullable=False),
        CheckConstraint("drafts >= 1", name="drafts"),
        CheckConstraint("accepted_tokens >= 0", name="accepted_tokens"),
        CheckConstraint("accepted_tokens <= draft_tokens", name="accepted_within_drafted"),
        CheckConstraint("al_stderr >= 0", name="al_stderr"),
    )


profile_rates = _rates("profile_rates", "profiles")
profile_counts = _counts("profile_counts", "profiles")

#: One revision of one set: an import that added or changed it, or its deletion. Revisions
#: outlive the set's row in ``profile_sets``; a deletion has no content hash.
revisions = Table(
    "revisions", metadata,
    Column("id", Integer, primary_key=True),
    Column("set_name", String(), nullable=False),
    Column("revision", Integer, nullable=False),  # 1, 2, ... per set, with no gaps
    Column("action", String(16), nullable=False),
    Column("imported_at", DateTime(timezone=True), nullable=False),
    Column("source_file", Text),
    Column("content_hash", String(64)),
    Column("profile_count", Integer, nullable=False),
    Column("message", Text),
    # Where the file came from when it was read from a git work tree (NULL otherwise, 0012).
    Column("git_commit", String(64)),
    Column("git_dirty", Boolean),
    Column("git_path", Text),
    UniqueConstraint("set_name", "revision", name="set_revision"),
    CheckConstraint("set_name <> ''", name="set_name_not_empty"),
    CheckConstraint("revision >= 1", name="revision"),
    CheckConstraint("action IN ('added', 'updated', 'deleted')", name="action"),
    CheckConstraint("profile_count >= 0", name="profile_count"),
    CheckConstraint("(action = 'deleted') = (content_hash IS NULL)",
                    name="deleted_has_no_hash"),
    # A set's revision at a time, in one probe (times rise with numbers within a set).
    Index(None, "set_name", "imported_at"),
)

revision_caveats = _caveats("revision_caveats", "revision_id", "revisions")

#: One version of a profile of a set, stored once and held by a range of the set's revisions
#: (``first_revision`` … ``last_revision``; NULL: up to the latest), written at ``valid_from``
#: and replaced or deleted at ``valid_until`` (NULL: still held).
profile_versions = Table(
    "profile_versions", metadata,
    Column("id", Integer, primary_key=True),
    Column("set_name", String(), nullable=False),
    Column("first_revision", Integer, nullable=False),
    Column("last_revision", Integer),
    Column("valid_from", DateTime(timezone=True), nullable=False),
    Column("valid_until", DateTime(timezone=True)),
    Column("position", Integer, nullable=False),
    *_key_columns(),
    *_value_columns(),
    # The stretch of time its set held its key: the as-of lookup goes key -> stretch (by
    # profile_keys' key index) -> the set's revision then -> this index (0010).
    Column("key_id", ForeignKey("profile_keys.id"), nullable=False),
    UniqueConstraint("key_id", "first_revision", name="stretch"),
    *_key_checks(),
    CheckConstraint("first_revision >= 1", name="first_revision"),
    CheckConstraint("last_revision IS NULL OR last_revision >= first_revision",
                    name="revision_range"),
    CheckConstraint("(last_revision IS NULL) = (valid_until IS NULL)", name="open_range"),
    # A set's versions by the revision they begin at: what a revision holds, an import's
    # open and new ones; a round only appends to it (0009).
    Index(None, "set_name", "first_revision"),
)

#: When a set held a profile key, whatever its values: one row per unbroken stretch (a new
#: value keeps the stretch; a removal or the set's deletion ends it).
profile_keys = Table(
    "profile_keys", metadata,
    Column("id", Integer, primary_key=True),
    Column("set_name", String(), nullable=False),
    *_key_columns(),
    Column("valid_from", DateTime(timezone=True), nullable=False),
    Column("valid_until", DateTime(timezone=True)),
    # The keys a model and method had at a time, in the index alone (the misses' text).
    UniqueConstraint("model", "speculative_method", "num_spec_tokens", "thinking",
                     "category", "set_name", "valid_from", "valid_until", name="key"),
    # The stretches a set holds open, which an import or a deletion closes.
    Index(None, "set_name", "valid_until"),
)

version_rates = _rates("version_rates", "profile_versions")
version_counts = _counts("version_counts", "profile_versions")

#: What one file's bytes were found to hold when last read (a re-import skips the file while
#: the stored set still has that content, :mod:`registry_db.importing.unchanged`): the SHA-256 of
#: its bytes, the reading rules' version, the set's content hash, and its warnings as a JSON
#: array (NULL when none).
import_files = Table(
    "import_files", metadata,
    Column("path", Text, primary_key=True),
    Column("bytes_hash", String(64), nullable=False),
    Column("rules", String(64), nullable=False),
    Column("set_name", String(), nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("profiles", Integer, nullable=False),
    Column("findings", Text),
    CheckConstraint("profiles >= 0", name="profiles"),
)


def _label_position() -> list[Column]:
    """Where a label points: the moment it names, and the set's revision it was made from."""
    return [
        Column("as_of", DateTime(timezone=True), nullable=False),
        Column("set_name", String()),
        Column("revision", Integer),
        Column("labelled_at", DateTime(timezone=True), nullable=False),
        Column("message", Text),
    ]


#: A label: a name for a state of the registry (the moment ``as_of``), at its latest position.
labels = Table(
    "labels", metadata,
    Column("name", String(), primary_key=True),
    *_label_position(),
    CheckConstraint("name <> ''", name="name_not_empty"),
    CheckConstraint("(set_name IS NULL) = (revision IS NULL)", name="set_revision"),
)

#: Every position a label was given (created, then each move): labels keep their history.
label_events = Table(
    "label_events", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(), nullable=False),
    Column("action", String(16), nullable=False),
    *_label_position(),
    CheckConstraint("action IN ('created', 'moved')", name="action"),
    CheckConstraint("(set_name IS NULL) = (revision IS NULL)", name="set_revision"),
    Index(None, "name"),
)


def _describe_tables() -> None:
    """The catalog's words as the tables' and columns' comments, as the comments migration
    writes them on PostgreSQL: the tables match the database, comments included."""
    for name, (_kind, words, columns) in comments().items():
        table = metadata.tables.get(name)
        if table is None:  # a view, or Alembic's own table
            continue
        table.comment = words
        for column in table.columns:
            column.comment = columns[column.name]


_describe_tables()
