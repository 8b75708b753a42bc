"""The one YAML entry point: strict loading with positions (:mod:`registry_db.yaml.dump` writes).

Loading builds values from PyYAML's event stream with an explicit stack, so no input, however
deep or aliased, can recurse or expand without bound. It reads UTF-8, one document, YAML 1.2 core
scalars (``off`` and ``012`` stay strings), refuses duplicate keys and non-standard tags, and
raises every problem at once as findings in one :class:`~registry_db.errors.InvalidInput`.
Mappings and lists come back as :class:`YMap` and :class:`YSeq`, which know where each key and
item was written.
"""

from __future__ import annotations

import math
import os
import re
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

from registry_db.errors import Finding, InvalidInput

# The located containers live apart from the loader, so that checking a plain JSON value
# (a batch line) needs no PyYAML; they are re-exported here as the loader's own.
from registry_db.yaml.nodes import UNKNOWN, Position, YMap, YSeq, key_pos, mark, pos

__all__ = ["UNKNOWN", "Position", "YMap", "YSeq", "key_pos", "mark", "pos", "load_file",
           "load_yaml", "scalar_kind"]

#: Files larger than this are refused before they are read.
MAX_FILE_BYTES = 16 * 1024 * 1024
#: Mappings and sequences nested deeper than this are refused.
MAX_DEPTH = 100
#: Nodes a document may expand to, counting every alias as the whole node it names.
MAX_EXPANDED_NODES = 1_000_000
#: Load problems after which the document is still whole (InvalidInput.document holds it).
RECOVERABLE = frozenset({"duplicate_key"})

_STD = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_STD + t for t in ("str", "int", "float", "bool", "null")}


# --- scalars -------------------------------------------------------------------------------------

_INT_RE = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT_RE = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_DIGITS_RE = re.compile(r"[-+]?[0-9]+")
_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_TRUE = frozenset(("true", "True", "TRUE"))
_FALSE = frozenset(("false", "False", "FALSE"))
_INF = frozenset(s + i for s in ("", "+", "-") for i in (".inf", ".Inf", ".INF"))
_NAN = frozenset((".nan", ".NaN", ".NAN"))
#: The first characters of every non-string plain scalar: anything else is text, no regex needed.
_NON_STR_START = frozenset("0123456789-+.~tTfFnN")


def scalar_kind(text: str) -> str:
    """The type a plain scalar resolves to under YAML 1.2 core: null, bool, int, float or str."""
    # Most scalars are names, URLs and categories: answer them before any regex runs.
    if text and text[0] not in _NON_STR_START:
        return "str"
    if text[:1].isalpha():  # keys such as thinking, top_p: only null and bool start so
        return "null" if text in _NULLS else "bool" if text in _TRUE or text in _FALSE else "str"
    decimal = _unsigned_decimal(text)
    if decimal is not None:
        return decimal
    if text in _NULLS:
        return "null"
    if text in _TRUE or text in _FALSE:
        return "bool"
    if _INT_RE.fullmatch(text):
        return "int"
    if text in _INF or text in _NAN:
        return "float"
    # YAML 1.2's float pattern also matches "012"; the contract keeps such text a string.
    if _FLOAT_RE.fullmatch(text) and not _DIGITS_RE.fullmatch(text):
        return "float"
    return "str"


def _unsigned_decimal(text: str) -> str | None:
    """The kind of an unsigned decimal (K, counts, AL, rates) told by ``str`` methods, not the
    three patterns: int, float, or str for digits with a leading zero (the same kinds as the
    patterns, which tests compare); None for any other text."""
    whole, dot, frac = text.partition(".")
    if not (whole.isdigit() and whole.isascii()) or (
            frac and not (frac.isdigit() and frac.isascii())):
        return None
    return "float" if dot else "int" if whole[0] != "0" or len(whole) == 1 else "str"


def _convert(text: str, kind: str) -> Any:
    """The value of ``text`` as ``kind``; raises ValueError when it is not one."""
    if kind == "str":
        return text
    actual = scalar_kind(text)
    if kind != actual and not (kind == "float" and actual == "int"):
        raise ValueError(f"{text!r} is not a valid {kind}")
    return _VALUE_OF[kind](text)


def plain_value(text: str) -> Any:
    """The value of an untagged plain scalar: ``text`` as :func:`scalar_kind` resolves it
    (:func:`_convert` to its own kind, classified once instead of twice)."""
    # Half an import's typed scalars are unsigned decimals: told first and converted directly
    # (no inf or nan among them).
    kind = _unsigned_decimal(text)
    if kind == "float":
        return float(text)
    if kind == "int":
        return int(text)
    return _VALUE_OF[kind or scalar_kind(text)](text)


def _float(text: str) -> float:
    return math.nan if text in _NAN else float(text.replace(".", "", 1) if text in _INF else text)


#: A scalar's value once its kind is known (``int``: ValueError past Python's digit limit,
#: reported like any bad scalar).
_VALUE_OF: dict[str, Any] = {"str": str, "null": lambda text: None,
                             "bool": lambda text: text in _TRUE, "int": int, "float": _float}


# --- loading -------------------------------------------------------------------------------------

# libyaml's parser, when PyYAML was built with it (yaml.cyaml; the top-level yaml module does
# not export CParser, so a getattr there always fell back to the pure-Python parser).
_CParser: type | None = (getattr(yaml.cyaml, "CParser", None) if yaml.__with_libyaml__
                         else None)


class _PyParser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """PyYAML's pure-Python event parser, for installs without libyaml."""

    def __init__(self, stream: str):
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)


#: The parser classes tried in order; tests swap this to exercise the fallback.
PARSERS: list[type] = [p for p in (_CParser, _PyParser) if p is not None]


class _Stop(Exception):
    """A problem after which reading on is pointless or unsafe."""


def load_file(path: str | os.PathLike, file: str | None = None,
              max_bytes: int | None = None) -> Any:
    """Read and load one YAML file; ``file`` is the name findings show (default: ``path``).

    Files over ``max_bytes`` (default :data:`MAX_FILE_BYTES`) are refused before being read.
    """
    label = str(path) if file is None else file
    return load_yaml(read_file_bytes(path, label, max_bytes), label)


def read_file_bytes(path: str | os.PathLike, label: str, max_bytes: int | None = None) -> bytes:
    """The bytes of the file at ``path``, read once; :class:`InvalidInput` (named ``label``)
    when it cannot be read or is over ``max_bytes`` (default :data:`MAX_FILE_BYTES`)."""
    max_bytes = MAX_FILE_BYTES if max_bytes is None else max_bytes
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(max_bytes + 1) if size <= max_bytes else b""
    except OSError as exc:
        raise InvalidInput([_finding(label, UNKNOWN, "unreadable_file",
                                     f"cannot read the file: {exc.strerror or exc}")]) from None
    if size > max_bytes or len(data) > max_bytes:
        raise InvalidInput([_finding(label, UNKNOWN, "file_too_large", f"the file is larger "
                                     f"than {max_bytes} bytes, far past any registry input")])
    return data


def load_yaml(data: bytes | str, file: str) -> Any:
    """Load one YAML document strictly; raise :class:`InvalidInput` with every problem found."""
    text = _decode(bytes(data), file) if isinstance(data, (bytes, bytearray)) else data
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput([_finding(file, _char_pos(text, exc.start), "not_utf8",
                                     "the text holds a lone surrogate, which UTF-8 cannot "
                                     "encode")]) from None
    text = text[1:] if text.startswith("\ufeff") else text
    builder = _Builder(file)
    parser: Any = None
    try:
        parser = PARSERS[0](text)  # PyYAML's reader already checks characters here
        builder.run(parser)
    except _Stop:
        pass
    except (yaml.MarkedYAMLError, yaml.reader.ReaderError) as exc:
        builder.findings.append(_syntax_finding(exc, text, file, parser.__class__ is _CParser))
    finally:
        if parser is not None and hasattr(parser, "dispose"):
            parser.dispose()
    if builder.findings:
        invalid = InvalidInput(builder.findings)
        # A duplicate key leaves a whole document (the first value kept): hand it on so that
        # the validator can still report every other problem of the file at once.
        if all(f.code in RECOVERABLE for f in builder.findings):
            invalid.document = builder.root
        raise invalid
    return builder.root


def _syntax_finding(exc: yaml.YAMLError, text: str, file: str, libyaml: bool) -> Finding:
    """The one finding for PyYAML's (or libyaml's) own complaint."""
    if isinstance(exc, yaml.reader.ReaderError):
        offset = exc.position  # libyaml counts bytes of the UTF-8 text, PyYAML characters
        if libyaml:
            offset = len(text.encode("utf-8")[:offset].decode("utf-8", "replace"))
        char = exc.character if isinstance(exc.character, int) else 0xFFFD
        return _finding(file, _char_pos(text, offset), "bad_character",
                        f"character U+{char:04X} is not allowed in YAML ({exc.reason}); "
                        "remove it, or write it as an escape in a double-quoted string")
    # Scanner and parser errors are MarkedYAMLErrors; read their fields so that any other
    # YAMLError still gets a message rather than an AttributeError.
    where = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem, context = getattr(exc, "problem", None), getattr(exc, "context", None)
    line_col = (where.line + 1, where.column + 1) if where else (1, 1)
    if "nesting depth" in str(problem):  # libyaml's own limit, met before ours
        return _finding(file, line_col, "too_deep", f"mappings and lists nest too deep here "
                        f"({problem}); a profile set needs five levels")
    tab = _tab_at(text, line_col)
    if tab is not None:  # PyYAML says "cannot start any token", which names no tab
        return _finding(file, tab, "yaml_syntax", "YAML syntax error: a tab character "
                        "indents this line; YAML indents with spaces only, so replace the tab "
                        "with spaces")
    context = f" ({context})" if context else ""
    return _finding(file, line_col, "yaml_syntax", f"YAML syntax error: {problem}{context}")


def _tab_at(text: str, line_col: Position) -> Position | None:
    """Where a tab stands in the indentation of the line a syntax error points at, or None."""
    lines = text.split("\n")
    line = lines[line_col[0] - 1] if 0 < line_col[0] <= len(lines) else ""
    indent = line[:len(line) - len(line.lstrip(" \t"))]
    return (line_col[0], indent.index("\t") + 1) if "\t" in indent else None


def _decode(data: bytes, file: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Position of the bad byte, counting the characters before it on its line.
        where = _char_pos(data[:exc.start].decode("utf-8", "replace"), None)
        raise InvalidInput([_finding(file, where, "not_utf8", f"byte 0x{data[exc.start]:02x} "
                                     "is not valid UTF-8; save the file as UTF-8")]) from None


def _char_pos(text: str, offset: int | None) -> Position:
    offset = len(text) if offset is None else offset
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def _finding(file: str, where: Position, code: str, message: str, path: str = "") -> Finding:
    return Finding(file=file, line=where[0], column=where[1], path=path, code=code,
                   message=message)


class _Frame:
    """An open mapping or sequence: what it holds so far and what it has expanded to."""

    __slots__ = ("value", "anchor", "size", "key", "key_mark", "has_key", "skip")

    def __init__(self, value: YMap | YSeq, anchor: str | None):
        self.value, self.anchor, self.size = value, anchor, 1
        self.key: Any = None
        self.key_mark, self.has_key, self.skip = UNKNOWN, False, False


class _Builder:
    """Turns events into located values with an explicit stack; counts alias expansion."""

    def __init__(self, file: str):
        self.file, self.root, self.total = file, None, 0
        self.findings: list[Finding] = []
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int]] = {}  # name -> (value, expanded node count)
        self.open_anchors: dict[str, int] = {}

    def add(self, where: Position, code: str, message: str) -> None:
        self.findings.append(_finding(self.file, where, code, message, self._path()))

    def _path(self) -> str:
        """The key path of the slot being filled, such as ``profiles[0].category``."""
        path = ""
        for frame in self.stack:
            if isinstance(frame.value, YSeq):
                path += f"[{len(frame.value)}]"
            elif frame.has_key:
                path += f".{frame.key}" if path else str(frame.key)
        return path

    def run(self, parser: Any) -> None:
        documents = 0
        while True:
            event = parser.get_event()
            at = (event.start_mark.line + 1, event.start_mark.column + 1)
            kind = type(event)
            if kind is ScalarEvent:
                self._scalar(event, at)
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                self._open(event, at, YMap if kind is MappingStartEvent else YSeq)
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                frame = self.stack.pop()
                if frame.anchor is not None:
                    self.anchors[frame.anchor] = (frame.value, frame.size)
                    self.open_anchors[frame.anchor] -= 1
                self._emit(frame.value, frame.value.mark, frame.size)
            elif kind is AliasEvent:
                self._alias(event.anchor, at)
            elif kind is DocumentStartEvent:
                documents += 1
                if documents > 1:
                    self.add(at, "multiple_documents", "a second YAML document starts here; "
                             "a file holds exactly one, so split it or remove the '---'")
                    return
            elif kind is StreamEndEvent:
                if documents == 0:
                    self.add((1, 1), "empty_document",
                             "the file holds no YAML document; it needs a mapping")
                return

    def _scalar(self, event: ScalarEvent, at: Position) -> None:
        self.total += 1
        tag, value = event.tag, None
        if tag is None:  # plain (libyaml says "", PyYAML None) resolves; quoted is text
            kind = scalar_kind(event.value) if event.style in (None, "") else "str"
        elif tag == "!" or tag in _SCALAR_TAGS:
            kind = "str" if tag == "!" else tag[len(_STD):]
        else:
            self._bad_tag(tag, at, "a scalar")
            kind = None
        try:
            value = None if kind is None else _convert(event.value, kind)
        except ValueError:
            self.add(at, "bad_tagged_value",
                     f"{event.value[:40]!r} cannot be read as {kind}; fix the value or tag")
        if event.anchor is not None:
            self.anchors[event.anchor] = (value, 1)
        self._emit(value, at, 1)

    def _bad_tag(self, tag: str, at: Position, what: str) -> None:
        shown = "!!" + tag[len(_STD):] if tag.startswith(_STD) else tag
        self.add(at, "bad_tag", f"tag {shown} is not allowed on {what}; only the standard "
                 "!!str, !!int, !!float, !!bool, !!null, !!map and !!seq are")

    def _open(self, event: Any, at: Position, cls: type) -> None:
        self.total += 1
        allowed = (None, "!", _STD + ("map" if cls is YMap else "seq"))
        if event.tag not in allowed:
            self._bad_tag(event.tag, at, "a mapping" if cls is YMap else "a list")
        if len(self.stack) >= MAX_DEPTH:
            self.add(at, "too_deep", f"mappings and lists nest deeper than {MAX_DEPTH} levels "
                     "here; a profile set needs five")
            raise _Stop
        if event.anchor is not None:
            self.open_anchors[event.anchor] = self.open_anchors.get(event.anchor, 0) + 1
        self.stack.append(_Frame(cls(self.file, at), event.anchor))

    def _alias(self, name: str, at: Position) -> None:
        if self.open_anchors.get(name):
            self.add(at, "recursive_alias", f"alias *{name} refers to a node that contains it; "
                     "a value cannot include itself")
            return self._emit(None, at, 1)
        if name not in self.anchors:
            self.add(at, "unknown_alias", f"alias *{name} names no anchor defined before it; "
                     f"define &{name} first")
            return self._emit(None, at, 1)
        value, size = self.anchors[name]
        self.total += size
        if self.total > MAX_EXPANDED_NODES:
            self.add(at, "alias_bomb", f"aliases expand this document past {MAX_EXPANDED_NODES} "
                     "nodes; refused as an alias bomb (share fewer, smaller nodes)")
            raise _Stop
        self._emit(value, at, size)

    def _emit(self, value: Any, at: Position, size: int) -> None:
        """Place a finished node into the open container, or make it the document."""
        if not self.stack:
            self.root = value
            return
        frame = self.stack[-1]
        frame.size += size
        container = frame.value
        if isinstance(container, YSeq):
            container.append(value)
            container.item_marks.append(at)
        elif not frame.has_key:
            if isinstance(value, (YMap, YSeq)):
                self.add(at, "complex_key", "a key must be a plain scalar, not a "
                         f"{'mapping' if isinstance(value, YMap) else 'list'}")
                frame.has_key, frame.key, frame.key_mark, frame.skip = True, "?", at, True
                return
            frame.has_key, frame.key, frame.key_mark, frame.skip = True, value, at, False
            if value in container.key_marks:
                first = container.key_marks[value][0]
                self.add(at, "duplicate_key",
                         f"duplicate key {value!r} (first at line {first}); remove one of them")
                frame.skip = True
        else:
            frame.has_key = False
            if not frame.skip:
                container[frame.key] = value
                container.key_marks[frame.key] = frame.key_mark
                container.value_marks[frame.key] = at
