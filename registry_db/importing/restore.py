"""A set brought back from its history: ``registry restore SET [--revision N]``.

The revision's content (read by :func:`registry_db.history.held`) is imported as any file
would be (:func:`registry_db.importing.write.import_sets`): one write transaction, a new revision
(``added`` for a deleted set, ``updated`` for one whose content differs, ``unchanged`` when it
already holds that content), the overlap warnings of an import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from registry_db import history
from registry_db.importing import write
from registry_db.model import ImportStatus


@dataclass(frozen=True)
class Restored:
    """What a restore did: the import's result for the set, the revision it came from, and
    the revision it became (None when nothing changed)."""

    result: write.SetResult
    from_revision: int
    revision: int | None
    warnings: tuple[Any, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The import's per-set object, plus ``from_revision`` and ``revision``."""
        return {**self.result.to_json(), "from_revision": self.from_revision,
                "revision": self.revision}


def restore(engine: Engine, name: str, revision: int | None = None,
            message: str | None = None) -> Restored:
    """Write revision ``revision`` of set ``name`` (default: the last content of a deleted
    set) as a new revision, with ``message`` (default ``restore of revision N``)."""
    number = history.last_content(engine, name) if revision is None else revision
    [then] = history.held(engine, [name], revision=number)
    report = write.import_sets(engine, [then.set],
                               message=message or f"restore of revision {number}",
                               from_git=False)  # the history's content, not the file's now
    result = report.sets[0]
    new = None if result.status == ImportStatus.UNCHANGED else \
        history.history(engine, name)[0].revision
    return Restored(result, number, new, report.warnings)
