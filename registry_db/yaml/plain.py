"""The fast first pass of loading: plain values from libyaml's events, or "take the long way".

:func:`load_plain_file` reads a file the way :func:`registry_db.yaml.load.load_file` does (same
size limit, same UTF-8 rules, same YAML 1.2 core scalars through the same ``scalar_kind``) but
builds plain ``dict`` and ``list`` values without positions, in one loop over the events with no
per-node bookkeeping. Whenever the file could draw a finding from the loader — a syntax error, a
tag, a duplicate or complex key, an unknown or recursive alias, too deep, an alias bomb, no
document or two, bad bytes — it returns ``None`` and the caller loads the file with positions,
so that every message stays the positional loader's own. On every other file both give equal
values, aliases included (an alias is the same object, as there); a test compares the two on
the whole test corpus.

Why: positions cost (figures in docs/decisions.md). Callers keep the positional path for any
file whose checks report anything (errors and warnings carry line and column).
"""

from __future__ import annotations

import os
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from registry_db.yaml import load as _loader
from registry_db.yaml.fast import load_rapid
from registry_db.yaml.load import _NON_STR_START, plain_value

#: libyaml's event parser; None when PyYAML was built without it (then always the long way).
_CParser: Any = getattr(yaml.cyaml, "CParser", None) if yaml.__with_libyaml__ else None

__all__ = ["load_plain", "load_plain_bytes", "load_plain_file"]


class _LongWay(Exception):
    """The file may draw a finding: the positional loader must read it."""


#: Stands for "the next scalar of this mapping is a key".
_KEY = object()
#: Stands for "the open container is a list" (not None: ``~`` is a valid key).
_ITEM = object()


def load_plain_file(path: str | os.PathLike) -> Any:
    """The plain value of the YAML file at ``path``, or ``None``: load it with positions.

    ``None`` is also the answer for a file whose document is ``null``, which the checks refuse.
    """
    if _CParser is None:
        return None
    limit = _loader.MAX_FILE_BYTES  # the loader's limits, read at each call (tests lower them)
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size > limit:
                return None
            data = fh.read(limit + 1)
    except OSError:
        return None
    return load_plain_bytes(data)


def load_plain_bytes(data: bytes) -> Any:
    """:func:`load_plain_file` of a file's bytes already read: by ``ryaml`` where its byte
    guard proves it reads them our way (:mod:`registry_db.yaml.fast`), else from libyaml's
    events."""
    rapid = load_rapid(data)
    if rapid is not None:
        return rapid
    if _CParser is None or len(data) > _loader.MAX_FILE_BYTES:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return load_plain(text[1:] if text.startswith("\ufeff") else text)


def load_plain(text: str) -> Any:
    """The plain value of one YAML document, or ``None`` (see the module's docstring)."""
    if _CParser is None:
        return None
    parser = _CParser(text)
    try:
        return _build(parser.get_event)
    except (_LongWay, yaml.YAMLError, ValueError):
        return None
    finally:
        parser.dispose()


def _build(get_event: Any) -> Any:
    """One pass over the events: the document's value; raises :class:`_LongWay` on anything odd.

    The loop is flat on purpose (it runs once per event, millions of times in an import): the
    innermost container and its awaited key live in locals, the outer ones on ``stack``.
    """
    stack: list[tuple[Any, Any, str | None, int]] = []  # outer (container, key, anchor, nodes)
    top: Any = None  # the innermost open container (None: none is open)
    key: Any = _ITEM  # its state: _ITEM (a list), _KEY, or the key awaiting a value
    anchor: str | None = None  # the innermost container's anchor,
    before = 0  # and the nodes before it
    anchors: dict[str, tuple[Any, int]] = {}  # name -> (value, nodes it expands to)
    open_anchors: set[str] = set()
    total = 0  # nodes so far, every alias counted as the whole node it names
    max_depth, max_nodes = _loader.MAX_DEPTH, _loader.MAX_EXPANDED_NODES
    documents = 0
    root = None
    while True:
        event = get_event()
        kind = type(event)
        if kind is ScalarEvent:
            total += 1
            if event.tag is not None:
                raise _LongWay
            value = event.value
            # Plain scalars resolve (YAML 1.2 core); quoted ones are text. Most plain scalars
            # are names: those that cannot start a number, bool or null skip the resolver.
            if not event.style and (not value or value[0] in _NON_STR_START):
                value = plain_value(value)
            if event.anchor is not None:
                anchors[event.anchor] = (value, 1)
            # Most nodes: a scalar into the open container (a scalar key is never complex).
            if key is _KEY:
                if value in top:  # a duplicate key: the loader's finding
                    raise _LongWay
                key = value
                continue
            if key is not _ITEM:
                top[key] = value
                key = _KEY
                continue
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            total += 1
            if event.tag is not None or len(stack) >= max_depth - (top is not None):
                raise _LongWay
            name = event.anchor
            if name is not None:
                if name in open_anchors:
                    raise _LongWay
                open_anchors.add(name)
            if top is not None:
                stack.append((top, key, anchor, before))
            if kind is MappingStartEvent:
                top, key = {}, _KEY
            else:
                top, key = [], _ITEM
            anchor, before = name, total
            continue
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            value = top
            if anchor is not None:
                anchors[anchor] = (value, total - before + 1)
                open_anchors.discard(anchor)
            if stack:
                top, key, anchor, before = stack.pop()
            else:
                top, key = None, _ITEM
        elif kind is AliasEvent:
            name = event.anchor
            if name in open_anchors or name not in anchors:
                raise _LongWay
            value, size = anchors[name]
            total += size
            if total > max_nodes:
                raise _LongWay
        elif kind is DocumentStartEvent:
            documents += 1
            if documents > 1:
                raise _LongWay
            continue
        elif kind is StreamEndEvent:
            if documents == 0:
                raise _LongWay
            return root
        else:
            continue
        # A finished node: into the open container, or it is the document.
        if top is None:
            root = value
        elif key is _ITEM:
            top.append(value)
        elif key is _KEY:
            if type(value) is dict or type(value) is list or value in top:
                raise _LongWay  # a complex or duplicate key: the loader's finding
            key = value
        else:
            top[key] = value
            key = _KEY
