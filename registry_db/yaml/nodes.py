"""Located containers: the mappings and sequences the loader builds, which know where each key
and item was written, and the position helpers that read them.

Kept apart from :mod:`registry_db.yaml.load` so that the input schemas
(:mod:`registry_db.inputs.schema`) read located YAML and plain JSON alike without importing
PyYAML: a flags-only ``registry resolve`` and a ``--batch`` of JSON lines never load it.
"""

from __future__ import annotations

from typing import Any

#: A 1-based (line, column); (0, 0) means "unknown", as for a dict that came from JSON.
Position = tuple[int, int]
UNKNOWN: Position = (0, 0)

class YMap(dict):
    """A mapping that remembers where it, each key and each value were written."""

    __slots__ = ("file", "mark", "key_marks", "value_marks")

    def __init__(self, file: str = "", mark: Position = UNKNOWN):
        super().__init__()
        self.file, self.mark = file, mark
        self.key_marks: dict[Any, Position] = {}
        self.value_marks: dict[Any, Position] = {}


class YSeq(list):
    """A sequence that remembers where it and each item were written."""

    __slots__ = ("file", "mark", "item_marks")

    def __init__(self, file: str = "", mark: Position = UNKNOWN):
        super().__init__()
        self.file, self.mark = file, mark
        self.item_marks: list[Position] = []


def mark(container: Any) -> Position:
    """Where a loaded mapping or sequence starts; :data:`UNKNOWN` for anything else."""
    return getattr(container, "mark", UNKNOWN)


def pos(container: Any, key: Any) -> Position:
    """Where the value under ``key`` (a mapping key or a sequence index) was written.

    Falls back to the container's own position, then to :data:`UNKNOWN` for plain dicts and lists.
    """
    if type(container) is dict or type(container) is list:  # plain values: no positions
        return UNKNOWN
    if isinstance(container, YMap) and key in container.value_marks:
        return container.value_marks[key]
    if isinstance(container, YSeq) and isinstance(key, int) and 0 <= key < len(container):
        return container.item_marks[key]
    return mark(container)


def key_pos(container: Any, key: Any) -> Position:
    """Where the key itself was written (for "unknown key" and the like)."""
    if isinstance(container, YMap) and key in container.key_marks:
        return container.key_marks[key]
    return mark(container)
