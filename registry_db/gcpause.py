"""The one place the cyclic garbage collector is paused: around bulk work that builds many small
objects and no cycles (an import's load, check and write; a batch resolution).

Python's collector runs whenever enough container objects have been allocated since the last
run, and a full collection walks every live container. Bulk work allocates millions of small
dicts, tuples and dataclasses that stay alive until it ends, so the collector runs again and
again over a growing heap and finds nothing to free: reference counting frees everything this
work drops. Pausing defers no garbage; the collector's prior state is restored afterwards (a
caller that had it off keeps it off). The pause is the command's to take, at its edge (what it
saves: docs/decisions.md, Speed).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["PAUSE_FROM", "gc_paused"]

#: Work of at least this many items pauses the collector; below it the pause is not worth it.
PAUSE_FROM = 1_000


@contextlib.contextmanager
def gc_paused(size: int = PAUSE_FROM) -> Iterator[None]:
    """Pause the cyclic garbage collector for bulk work of ``size`` items (see the module)."""
    if size < PAUSE_FROM or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        _age_survivors()
        gc.enable()


def _age_survivors() -> None:
    """Move every tracked object into the oldest generation before the collector resumes.

    Everything allocated during the pause is still in the youngest generation, so the first
    collection after it (due at the next allocation: the pause let the count run far past its
    threshold) would walk all of it, the batch's answers included, and find nothing.
    ``freeze`` then ``unfreeze`` splices the lists over in constant time; the oldest generation
    is walked by the next full collection, as a long-lived object's would be. Skipped when
    something else keeps objects frozen (a server that froze its heap before forking), whose
    freeze ``unfreeze`` would undo.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
