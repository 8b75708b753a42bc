"""A ``--batch`` input read as it arrives: chunks of lines, each line decoded on its own.

:func:`chunks` reads a binary stream (a file, or a pipe another program is still writing) and
yields its lines in chunks of at most :data:`CHUNK` lines and about :data:`CHUNK_BYTES` bytes. A
chunk ends early when the stream has nothing more to give at that moment (a pipe whose writer
waits for an answer), so that the lines read so far are answered before the input ends; a file,
always readable, fills every chunk. A line longer than :data:`MAX_LINE` bytes is never held: its
bytes are counted and dropped as they come, and the line is answered ``invalid_request``.

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

__all__ = ["BOM", "CHUNK", "CHUNK_BYTES", "MAX_LINE", "chunks", "decode_line", "too_long"]

#: Lines per chunk: the batch's memory is bounded by what one chunk holds.
CHUNK = 10_000
#: Bytes of lines after which a chunk ends (a line may take it past by one line): with
#: :data:`MAX_LINE`, what one chunk holds is bounded in bytes as well as in lines.
CHUNK_BYTES = 8 << 20
#: The longest line read, in bytes without its newline: a request is a few hundred bytes, a
#: deployment's a few thousand, so a longer line is a mistake, not a request to hold in memory.
MAX_LINE = 1 << 20
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


def too_long(size: int, number: int) -> Refusal:
    """The ``invalid_request`` refusal that answers line ``number``, ``size`` bytes long, past
    :data:`MAX_LINE` (its bytes were dropped as they were read)."""
    return Refusal(R.INVALID_REQUEST, (
        f"line {number}: the line is {size:,} bytes long; a request is at most "
        f"{MAX_LINE:,} bytes (one JSON object on one line)"))


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


def chunks(stream: Any, size: int = CHUNK, name: str = "-", limit: int = CHUNK_BYTES
           ) -> Iterator[list[str | Refusal]]:
    """The lines of the binary ``stream``, decoded (:func:`decode_line`), in chunks of at most
    ``size`` lines and about ``limit`` bytes, blank lines included (line numbers count them);
    see the module. A line past :data:`MAX_LINE` bytes is its refusal (:func:`too_long`). A
    read that fails is :class:`~registry_db.errors.InvalidInput` naming ``name`` and the
    line."""
    read = getattr(stream, "read1", None) or stream.read
    fd = _fileno(stream)
    line = _Line()
    lines: list[str | Refusal] = []
    held = 0  # bytes of the lines in ``lines``
    number = 0  # lines read so far
    first = True
    while True:
        data = _read(read, _READ, name, number + 1)
        if not data:
            break
        if first:
            first = False
            data = _without_bom(data, read, name)
        parts = data.split(b"\n")
        tail = parts.pop()  # the start of a line not yet ended (b"": none)
        if parts and line.size:  # the line begun in earlier reads ends in this one
            line.add(parts[0])
            number += 1
            found, n = line.take(number)
            lines.append(found)
            held += n
            del parts[0]
            if len(lines) >= size or held >= limit:
                yield lines
                lines, held = [], 0
        line.add(tail)
        # A part is at most one read long (_READ <= MAX_LINE): only a joined line can be long.
        for raw in parts:
            number += 1
            lines.append(decode_line(raw, number))
            held += len(raw)
            if len(lines) >= size or held >= limit:
                yield lines
                lines, held = [], 0
        if lines and not _readable_now(fd):
            yield lines
            lines, held = [], 0
    if line.size:
        number += 1
        lines.append(line.take(number)[0])
    if lines:
        yield lines


def _without_bom(data: bytes, read: Any, name: str) -> bytes:
    """The input's first bytes without a UTF-8 byte order mark."""
    # The mark may arrive in pieces: read on until it is told from a line's start.
    while len(data) < len(BOM) and BOM.startswith(data):
        more = _read(read, len(BOM) - len(data), name, 1)
        if not more:
            break
        data += more
    return data[len(BOM):] if data.startswith(BOM) else data


class _Line:
    """The line being read, in the pieces it came in, up to :data:`MAX_LINE` bytes; past that
    only its length is kept."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.size = 0

    def add(self, piece: bytes) -> None:
        if not piece:
            return
        self.size += len(piece)
        if self.size > MAX_LINE:
            self.pieces.clear()
        else:
            self.pieces.append(piece)

    def take(self, number: int) -> tuple[str | Refusal, int]:
        """Line ``number`` decoded (or refused), and the bytes it held; the next line starts."""
        size = self.size
        found = too_long(size, number) if size > MAX_LINE else decode_line(
            b"".join(self.pieces), number)
        self.pieces.clear()
        self.size = 0
        return found, 0 if size > MAX_LINE else size
