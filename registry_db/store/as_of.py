"""The rule for "as of T", as SQL text every reader puts in its statements: the resolver's
(``resolve/statements.py``), the history's (``history.held``) and the batch timeline's check
(``resolve/timeline.py``). Plain text, no SQLAlchemy: the resolver's fast path imports it."""

from __future__ import annotations


def revision_at(name: str, at: str) -> str:
    """The number of set ``name``'s revision of time ``at``: THE rule for "as of T", in every
    reader (the resolver's statements, ``history.held`` for show, profiles, export, ...):
    the revision stamped last at or before T. One probe of ``ix_revisions_set_name_imported_at``.
    It is also the latest by number written by then, as a set's times rise with its numbers:
    the writers stamp under their lock (``history.revision_time``) and ``db upgrade`` puts an
    older history's times in order first (``store.revision_order``)."""
    return (f"(SELECT n.revision FROM revisions n WHERE n.set_name = {name}"
            f" AND n.imported_at <= {at} ORDER BY n.imported_at DESC LIMIT 1)")
