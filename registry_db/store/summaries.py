"""What the store's listings hand back (:class:`SetSummary`, :class:`Conflict`,
:class:`ProfileSummary`, the history's :class:`Revision`), without SQLAlchemy: the SQLAlchemy
readers (:mod:`.read`, :mod:`registry_db.history`) and the command line's DB-API ones
(:mod:`.dbapi_read`) build the same objects."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from registry_db.model import NO_GIT_ORIGIN, Counts, GitOrigin, Keyed, Uncertainty

__all__ = ["Conflict", "ProfileSummary", "Revision", "SetSummary", "utc"]


def utc(value: datetime) -> datetime:
    """A stored time as an aware UTC datetime (SQLite hands back naive ones, which the
    importer wrote in UTC; PostgreSQL aware ones in the session's zone)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True)
class SetSummary:
    """One stored set, as ``registry list`` shows it."""

    name: str
    file: str | None
    profiles: int
    caveats: int
    imported_at: datetime
    content_hash: str


@dataclass(frozen=True)
class Conflict(Keyed):
    """A profile key that two or more stored sets hold (the resolver refuses it)."""

    model: str
    speculative_method: str
    num_spec_tokens: int
    thinking: str
    category: str
    sets: tuple[str, ...]

    @property
    def set_count(self) -> int:
        """How many sets hold the key."""
        return len(self.sets)


@dataclass(frozen=True)
class ProfileSummary(Keyed):
    """One stored profile, as ``registry profiles`` lists it."""

    model: str
    speculative_method: str
    num_spec_tokens: int
    thinking: str
    category: str
    profile_set: str
    acceptance_length: float
    method: str
    source: str | None
    counts: Counts | None = None

    @property
    def acceptance_rate(self) -> float:
        """(AL − 1) / K, as the resolver and the ``acceptance_profiles`` view compute it."""
        return (self.acceptance_length - 1) / self.num_spec_tokens

    @property
    def uncertainty(self) -> Uncertainty | None:
        """The standard error of the AL, from its counts (None without them)."""
        return None if self.counts is None else self.counts.uncertainty(self.num_spec_tokens)


@dataclass(frozen=True)
class Revision:
    """One revision of one set, as ``registry history`` shows it."""

    set: str
    revision: int
    action: str
    imported_at: datetime
    file: str | None
    profiles: int
    content_hash: str | None
    message: str | None
    #: Where its file was in git when it was imported; None outside git, for a deletion or a
    #: restore, and for revisions written before 0012.
    git: GitOrigin | None = None

    def to_json(self) -> dict[str, Any]:
        """The contract's revision object, with ``git_commit``, ``git_dirty`` and ``git_path``
        (null without provenance)."""
        return {"set": self.set, "revision": self.revision, "action": self.action,
                "imported_at": self.imported_at.isoformat(), "file": self.file,
                "profiles": self.profiles, "content_hash": self.content_hash,
                "message": self.message,
                **(NO_GIT_ORIGIN if self.git is None else self.git.to_json())}


def git_origin(commit: str | None, dirty: Any, path: str | None) -> GitOrigin | None:
    """A revision's stored ``git_*`` columns as a :class:`GitOrigin` (None when empty)."""
    if commit is None or path is None:
        return None
    return GitOrigin(commit, bool(dirty), path)
