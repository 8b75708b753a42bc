"""The database schema as typed SQLAlchemy models.

Migrations in ``migrations/versions`` create and change the schema; these models describe the
head so that the library can query it and a test can prove the two agree (autogenerate finds
nothing). Every constraint has a name from the naming convention, identical on SQLite and
PostgreSQL and at most 63 characters; multi-column keys carry short explicit names.

The spec's rules that SQL can hold are CHECK constraints here: thinking in (on, off), K ≥ 1,
1 ≤ AL ≤ K + 1, each rate in [0, 1], the method's requirements that live in one row, and the
provenance counts and sampling ranges. What needs more than one row (a measured profile's
provenance has hardware; K rates per profile; rates that sum to AL − 1) is the validator's.

``profile_sets`` … ``profile_counts`` are the current registry (what resolution reads); the
``revisions`` table and ``profile_versions`` (each profile version once, over a range of
revisions) keep every revision of every set beside it (see
:mod:`registry_db.store.history`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
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
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from registry_db.store.catalog import comments

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(constraint_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Base(DeclarativeBase):
    metadata = metadata


class ProfileSetRow(Base):
    """A profile set: one file of ``acceptance/``, identified by its ``name``."""

    __tablename__ = "profile_sets"
    __table_args__ = (
        UniqueConstraint("name", name="name"),
        CheckConstraint("name <> ''", name="name_not_empty"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(), nullable=False)
    """The set's identity; a scenario's ``acceptance.profiles`` names it."""
    source_file: Mapped[str | None] = mapped_column(Text)
    """The file it was imported from, as the importer was given it."""
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    """SHA-256 of the set's meaning; an import with the same hash is ``unchanged``."""
    imported_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    """When this content was written (UTC)."""
    revision: Mapped[int] = mapped_column(Integer, nullable=False, server_default=sql_text("1"))
    """The set's revision that this content is (``revisions.revision``); resolutions report it."""


class SetCaveatRow(Base):
    """A caveat of a set, in file order."""

    __tablename__ = "set_caveats"
    __table_args__ = (
        PrimaryKeyConstraint("set_id", "position"),
        CheckConstraint("text <> ''", name="text_not_empty"),
        CheckConstraint("position >= 0", name="position"),
    )

    set_id: Mapped[int] = mapped_column(
        ForeignKey("profile_sets.id", ondelete="CASCADE"), nullable=False)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    """0-based order in the file."""
    text: Mapped[str] = mapped_column(Text, nullable=False)


class MethodRow(Base):
    """The methods vocabulary and what each requires (seeded by the first migration)."""

    __tablename__ = "methods"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    description: Mapped[str] = mapped_column(Text, nullable=False)
    allowed_in_profile: Mapped[bool] = mapped_column(Boolean, nullable=False)
    requires_provenance: Mapped[bool] = mapped_column(Boolean, nullable=False)
    requires_rationale: Mapped[bool] = mapped_column(Boolean, nullable=False)
    requires_copied_from: Mapped[bool] = mapped_column(Boolean, nullable=False)
    requires_measurement: Mapped[bool] = mapped_column(Boolean, nullable=False)
    """hardware, engine_image and sampling in the provenance."""


class ProvenanceRow(Base):
    """One distinct provenance, shared by every profile that cites the same content."""

    __tablename__ = "provenances"
    __table_args__ = (
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

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    """SHA-256 of the provenance's content, settings included: its identity."""
    source: Mapped[str] = mapped_column(Text, nullable=False)
    run: Mapped[str | None] = mapped_column(Text)
    benchmark: Mapped[str | None] = mapped_column(Text)
    prompts: Mapped[int | None] = mapped_column(Integer)
    hardware: Mapped[str | None] = mapped_column(Text)
    engine_image: Mapped[str | None] = mapped_column(Text)
    tp: Mapped[int | None] = mapped_column(Integer)
    temperature: Mapped[float | None] = mapped_column(Double)
    """sampling.temperature; NULL when the provenance states no sampling."""
    top_p: Mapped[float | None] = mapped_column(Double)
    top_k: Mapped[int | None] = mapped_column(Integer)
    max_tokens: Mapped[int | None] = mapped_column(Integer)


class ProvenanceSettingRow(Base):
    """One engine setting of a provenance, by name."""

    __tablename__ = "provenance_settings"
    __table_args__ = (
        PrimaryKeyConstraint("provenance_id", "name"),
        CheckConstraint("name <> ''", name="name_not_empty"),
        CheckConstraint("value <> ''", name="value_not_empty"),
        CheckConstraint("value_type IN ('string', 'integer', 'number', 'boolean')",
                        name="value_type"),
    )

    provenance_id: Mapped[int] = mapped_column(
        ForeignKey("provenances.id", ondelete="CASCADE"), nullable=False)
    name: Mapped[str] = mapped_column(String(), nullable=False)
    value: Mapped[str] = mapped_column(Text, nullable=False)
    """The value as text (booleans as true/false)."""
    value_type: Mapped[str] = mapped_column(String(16), nullable=False)
    """string, integer, number or boolean: how the file wrote it."""


class ProfileRow(Base):
    """One profile of one set: the measured (or stated) AL for a profile key."""

    __tablename__ = "profiles"
    __table_args__ = (
        # Key columns first and set last, so that the constraint's index also serves the
        # resolver's lookup across all sets.
        UniqueConstraint("model", "speculative_method", "num_spec_tokens", "thinking",
                         "category", "set_id", name="key"),
        CheckConstraint("model <> ''", name="model_not_empty"),
        CheckConstraint("speculative_method <> ''", name="method_name_not_empty"),
        CheckConstraint("category <> ''", name="category_not_empty"),
        CheckConstraint("thinking IN ('on', 'off')", name="thinking"),
        CheckConstraint("num_spec_tokens >= 1", name="k"),
        CheckConstraint("acceptance_length >= 1 AND acceptance_length <= num_spec_tokens + 1",
                        name="al_range"),
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

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    set_id: Mapped[int] = mapped_column(
        ForeignKey("profile_sets.id", ondelete="CASCADE"), nullable=False)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    """0-based order in the file (export keeps it)."""
    model: Mapped[str] = mapped_column(String(), nullable=False)
    speculative_method: Mapped[str] = mapped_column(String(), nullable=False)
    num_spec_tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    """K, the draft tokens per step."""
    thinking: Mapped[str] = mapped_column(String(), nullable=False)
    category: Mapped[str] = mapped_column(String(), nullable=False)
    acceptance_length: Mapped[float] = mapped_column(Double, nullable=False)
    """AL: tokens gained per verification step, bonus token included; in [1, K + 1]."""
    method: Mapped[str] = mapped_column(ForeignKey("methods.name"), nullable=False)
    provenance_id: Mapped[int | None] = mapped_column(ForeignKey("provenances.id"))
    rationale: Mapped[str | None] = mapped_column(Text)
    copied_from: Mapped[str | None] = mapped_column(Text)


class ProfileRateRow(Base):
    """A per-position rate p_i of a profile: P(the first i drafts are all accepted)."""

    __tablename__ = "profile_rates"
    __table_args__ = (
        PrimaryKeyConstraint("profile_id", "position"),
        CheckConstraint("position >= 1", name="position"),
        CheckConstraint("rate >= 0 AND rate <= 1", name="rate_range"),
    )

    profile_id: Mapped[int] = mapped_column(
        ForeignKey("profiles.id", ondelete="CASCADE"), nullable=False)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    """i, from 1 to K."""
    rate: Mapped[float] = mapped_column(Double, nullable=False)


class _Counts:
    """The columns of a profile's counts (``counts`` in the file); one row per profile that
    states them. The per-step bound ``draft_tokens <= K x drafts`` and the per-position rules
    need the profile's K and are the validator's."""

    drafts: Mapped[int] = mapped_column(BigInteger, nullable=False)
    """D: verification steps that drafted (vLLM ``num_drafts``)."""
    draft_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False)
    """Tokens drafted (vLLM ``num_draft_tokens``)."""
    accepted_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False)
    """A: drafted tokens accepted (vLLM ``num_accepted_tokens``); AL is 1 + A / D."""
    accepted_per_position: Mapped[str | None] = mapped_column(Text)
    """a_1..a_K as a JSON array (a_i: steps that accepted at least i drafts); NULL if not known."""
    al_stderr: Mapped[float] = mapped_column(Double, nullable=False)
    """The standard error of AL, √(Var X / D), computed at write time by
    :meth:`registry_db.model.Counts.uncertainty` (exact with a_i, else the bound μ (K − μ))."""


def _counts_constraints() -> tuple[CheckConstraint, ...]:
    """Fresh constraints for one counts table (the naming convention adds its name)."""
    return (
        CheckConstraint("drafts >= 1", name="drafts"),
        CheckConstraint("accepted_tokens >= 0", name="accepted_tokens"),
        CheckConstraint("accepted_tokens <= draft_tokens", name="accepted_within_drafted"),
        CheckConstraint("al_stderr >= 0", name="al_stderr"),
    )


class ProfileCountsRow(_Counts, Base):
    """The counts of a current profile."""

    __tablename__ = "profile_counts"
    __table_args__ = _counts_constraints()

    profile_id: Mapped[int] = mapped_column(
        ForeignKey("profiles.id", ondelete="CASCADE"), primary_key=True, autoincrement=False)


class RevisionRow(Base):
    """One revision of one set: an import that added or changed it, or its deletion."""

    __tablename__ = "revisions"
    __table_args__ = (
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

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    set_name: Mapped[str] = mapped_column(String(), nullable=False)
    """The set's name; revisions outlive the set's row in ``profile_sets``."""
    revision: Mapped[int] = mapped_column(Integer, nullable=False)
    """1, 2, ... per set, with no gaps."""
    action: Mapped[str] = mapped_column(String(16), nullable=False)
    """``added``, ``updated`` or ``deleted``."""
    imported_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    """When the revision was written (UTC)."""
    source_file: Mapped[str | None] = mapped_column(Text)
    content_hash: Mapped[str | None] = mapped_column(String(64))
    """The content's hash; NULL for a deletion."""
    profile_count: Mapped[int] = mapped_column(Integer, nullable=False)
    message: Mapped[str | None] = mapped_column(Text)
    """The importer's ``-m MESSAGE``."""


class RevisionCaveatRow(Base):
    """A caveat of a set revision, in file order."""

    __tablename__ = "revision_caveats"
    __table_args__ = (
        PrimaryKeyConstraint("revision_id", "position"),
        CheckConstraint("text <> ''", name="text_not_empty"),
        CheckConstraint("position >= 0", name="position"),
    )

    revision_id: Mapped[int] = mapped_column(
        ForeignKey("revisions.id", ondelete="CASCADE"), nullable=False)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    text: Mapped[str] = mapped_column(Text, nullable=False)


class ProfileVersionRow(Base):
    """One version of a profile of a set, stored once and held by a range of the set's
    revisions (``first_revision`` … ``last_revision``; NULL: up to the latest), written at
    ``valid_from`` and replaced or deleted at ``valid_until`` (NULL: still held)."""

    __tablename__ = "profile_versions"
    __table_args__ = (
        # Key columns first: the as-of lookup searches this index by key, and finds the
        # versions current at a time in the index itself (it covers the times).
        UniqueConstraint("model", "speculative_method", "num_spec_tokens", "thinking",
                         "category", "set_name", "valid_from", "valid_until", name="key"),
        CheckConstraint("thinking IN ('on', 'off')", name="thinking"),
        CheckConstraint("num_spec_tokens >= 1", name="k"),
        CheckConstraint("acceptance_length >= 1 AND acceptance_length <= num_spec_tokens + 1",
                        name="al_range"),
        CheckConstraint("first_revision >= 1", name="first_revision"),
        CheckConstraint("last_revision IS NULL OR last_revision >= first_revision",
                        name="revision_range"),
        CheckConstraint("(last_revision IS NULL) = (valid_until IS NULL)", name="open_range"),
        # A set's versions by the revision they begin at: what a revision holds, an import's
        # open and new ones; a round only appends to it (0009).
        Index(None, "set_name", "first_revision"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    set_name: Mapped[str] = mapped_column(String(), nullable=False)
    first_revision: Mapped[int] = mapped_column(Integer, nullable=False)
    last_revision: Mapped[int | None] = mapped_column(Integer)
    valid_from: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    valid_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    model: Mapped[str] = mapped_column(String(), nullable=False)
    speculative_method: Mapped[str] = mapped_column(String(), nullable=False)
    num_spec_tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    thinking: Mapped[str] = mapped_column(String(), nullable=False)
    category: Mapped[str] = mapped_column(String(), nullable=False)
    acceptance_length: Mapped[float] = mapped_column(Double, nullable=False)
    method: Mapped[str] = mapped_column(ForeignKey("methods.name"), nullable=False)
    provenance_id: Mapped[int | None] = mapped_column(ForeignKey("provenances.id"))
    rationale: Mapped[str | None] = mapped_column(Text)
    copied_from: Mapped[str | None] = mapped_column(Text)


class ProfileKeyRow(Base):
    """When a set held a profile key, whatever its values: one row per unbroken stretch (a new
    value keeps the stretch; a removal or the set's deletion ends it)."""

    __tablename__ = "profile_keys"
    __table_args__ = (
        # The keys a model and method had at a time, in the index alone (the misses' text).
        UniqueConstraint("model", "speculative_method", "num_spec_tokens", "thinking",
                         "category", "set_name", "valid_from", "valid_until", name="key"),
        # The stretches a set holds open, which an import or a deletion closes.
        Index(None, "set_name", "valid_until"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    set_name: Mapped[str] = mapped_column(String(), nullable=False)
    model: Mapped[str] = mapped_column(String(), nullable=False)
    speculative_method: Mapped[str] = mapped_column(String(), nullable=False)
    num_spec_tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    thinking: Mapped[str] = mapped_column(String(), nullable=False)
    category: Mapped[str] = mapped_column(String(), nullable=False)
    valid_from: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    valid_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class VersionRateRow(Base):
    """A per-position rate of a profile version."""

    __tablename__ = "version_rates"
    __table_args__ = (
        PrimaryKeyConstraint("profile_id", "position"),
        CheckConstraint("position >= 1", name="position"),
        CheckConstraint("rate >= 0 AND rate <= 1", name="rate_range"),
    )

    profile_id: Mapped[int] = mapped_column(
        ForeignKey("profile_versions.id", ondelete="CASCADE"), nullable=False)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    rate: Mapped[float] = mapped_column(Double, nullable=False)


class VersionCountsRow(_Counts, Base):
    """The counts of a profile version."""

    __tablename__ = "version_counts"
    __table_args__ = _counts_constraints()

    profile_id: Mapped[int] = mapped_column(
        ForeignKey("profile_versions.id", ondelete="CASCADE"), primary_key=True,
        autoincrement=False)


class ImportFileRow(Base):
    """What one file's bytes were found to hold when last read (a re-import skips the file
    while the stored set still has that content, :mod:`registry_db.store.unchanged`)."""

    __tablename__ = "import_files"
    __table_args__ = (
        CheckConstraint("profiles >= 0", name="profiles"),
    )

    path: Mapped[str] = mapped_column(Text, primary_key=True)
    """The file as the importer was given it."""
    bytes_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    """SHA-256 of the file's bytes."""
    rules: Mapped[str] = mapped_column(String(64), nullable=False)
    """The reading rules' version that read them."""
    set_name: Mapped[str] = mapped_column(String(), nullable=False)
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    """The set's content hash those bytes gave (``profile_sets.content_hash``)."""
    profiles: Mapped[int] = mapped_column(Integer, nullable=False)
    findings: Mapped[str | None] = mapped_column(Text)
    """The file's warnings as a JSON array; NULL when none."""


def _table(row: type[Base]) -> Table:
    # Declarative classes type __table__ as a FromClause; insert/update/delete want the Table.
    table = row.__table__
    assert isinstance(table, Table)
    return table


profile_sets = _table(ProfileSetRow)
set_caveats = _table(SetCaveatRow)
methods = _table(MethodRow)
provenances = _table(ProvenanceRow)
provenance_settings = _table(ProvenanceSettingRow)
profiles = _table(ProfileRow)
profile_rates = _table(ProfileRateRow)
profile_counts = _table(ProfileCountsRow)
revisions = _table(RevisionRow)
revision_caveats = _table(RevisionCaveatRow)
profile_versions = _table(ProfileVersionRow)
profile_keys = _table(ProfileKeyRow)
version_rates = _table(VersionRateRow)
version_counts = _table(VersionCountsRow)
import_files = _table(ImportFileRow)


def _describe_tables() -> None:
    """The catalog's words as the tables' and columns' comments, as the comments migration
    writes them on PostgreSQL: the models match the database, comments included."""
    for name, (_kind, words, columns) in comments().items():
        table = metadata.tables.get(name)
        if table is None:  # a view, or Alembic's own table
            continue
        table.comment = words
        for column in table.columns:
            column.comment = columns[column.name]


_describe_tables()
