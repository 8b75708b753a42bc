"""A profile's counts as their row stores them, both ways: the per-position counts as a JSON
array in one TEXT column. No SQLAlchemy, so the resolver's read-only ``sqlite3`` path reads
counts from its own rows too."""

from __future__ import annotations

import json
from collections.abc import Sequence

from registry_db.model import Counts

__all__ = ["counts_from_row", "per_position_text"]


def per_position_text(per: Sequence[int] | None) -> str | None:
    """``accepted_per_position`` as the column holds it (``[70000,40000,16838]``; None: NULL)."""
    return None if per is None else json.dumps(list(per), separators=(",", ":"))


def counts_from_row(drafts: int, draft_tokens: int, accepted_tokens: int,
                    accepted_per_position: str | None) -> Counts:
    """A stored counts row as :class:`~registry_db.model.Counts` (the per-position counts are a
    JSON array of integers)."""
    per = None if accepted_per_position is None else tuple(json.loads(accepted_per_position))
    return Counts(int(drafts), int(draft_tokens), int(accepted_tokens), per)
