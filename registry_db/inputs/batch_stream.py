"""A ``--batch`` input read as it arrives: chunks of lines, each line decoded on its own.

:func:`chunks` reads a binary stream (a file, or a pipe another program is still writing) and
yields its lines in chunks of at most :data:`CHUNK` lines. A chunk ends early when the stream
has nothing more to give at that moment (a pipe whose writer waits for an answer), so that the
lines read so far are answered before the input ends; a file, always readable, fills every chunk.

Lines end at ``\\n`` and nothing else (:func:`registry_db.inputs.request.batch_lines` says why).
Each line is decoded as UTF-8 by itself (:func:`decode_line`): a line that is not UTF-8 becomes
the refusal that answers it, naming its line, and the other lines are read as usual. A UTF-8
byte order mark at the very start of the input is not part of the first line.
"""

from __future__ import annotations

import select
from collections.abc import Iterator
from typing import Any

from registry_db.errors import Finding, InvalidInput
from registry_db.model import Refusal
from registry_db.model import RefusalReason as R

__all__ = ["BOM", "CHUNK", "chunks", "decode_line"]

#: Lines per chunk: the batch's memory is bounded by what one chunk holds.
CHUNK = 10_000
#: Bytes asked of the stream per read (one system call each on a pipe or a file).
_READ = 1 << 16
BOM = b"\xef\xbb\xbf"


def decode_line(raw: bytes, number: int) -> str | Refusal:
    """Line ``number`` as text, or the ``invalid_request`` refusal that answers a line that is
    not UTF-8 (naming the line and the first byte that is not)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Refusal(R.INVALID_REQUEST, (
            f"line {number}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
            f"{exc.start + 1}); a request is a JSON object in UTF-8"))


def _read(read: Any, n: int, name: str, line: int) -> bytes:
    try:
        return read(n)
    except OSError as exc:
        raise InvalidInput([Finding(name, line, 1, "", "unreadable_file",
                                    f"cannot read the batch: {exc.strerror or exc}")]) from None


def _readable_now(fd: int | None) -> bool:
    """Whether reading ``fd`` would not wait (True when it cannot be told: keep reading)."""
    if fd is None:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None


def chunks(stream: Any, size: int = CHUNK, name: str = "-") -> Iterator[list[str | Refusal]]:
    """The lines of the binary ``stream``, decoded (:func:`decode_line`), in chunks of at most
    ``size`` lines, blank lines included (line numbers count them); see the module. A read
    that fails is :class:`~registry_db.errors.InvalidInput` naming ``name`` and the line."""
    read = getattr(stream, "read1", None) or stream.read
    fd = _fileno(stream)
    pending: list[bytes] = []  # the line being read, in the pieces it came in
    lines: list[str | Refusal] = []
    number = 0  # lines read so far
    first = True
    while True:
        data = _read(read, _READ, name, number + 1)
        if not data:
            break
        if first:
            first = False
            # The mark may arrive in pieces: read on until it is told from a line's start.
            while len(data) < len(BOM) and BOM.startswith(data):
                more = _read(read, len(BOM) - len(data), name, 1)
                if not more:
                    break
                data += more
            if data.startswith(BOM):
                data = data[len(BOM):]
        parts = data.split(b"\n")
        tail = parts.pop()  # the start of a line not yet ended (b"": none)
        if parts and pending:
            parts[0] = b"".join([*pending, parts[0]])
            pending.clear()
        if tail:
            pending.append(tail)
        for raw in parts:
            number += 1
            lines.append(decode_line(raw, number))
            if len(lines) >= size:
                yield lines
                lines = []
        if lines and not _readable_now(fd):
            yield lines
            lines = []
    if pending:
        number += 1
        lines.append(decode_line(b"".join(pending), number))
    if lines:
        yield lines
