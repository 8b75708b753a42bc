"""Many runs from JSON lines: one answer per line that is not blank, in order, refusals included
(``registry resolve --batch``).

:func:`answer_chunks` takes the lines in chunks as they come (the command's come from
:func:`registry_db.inputs.batch_stream.chunks`), reads every chunk in one snapshot, and yields
each chunk's answers as soon as it is answered: each line is read and checked
(:func:`registry_db.inputs.request.parse_line`), and every run of the chunk is resolved at once,
a deployment's pools included (:func:`registry_db.resolve.deployment.resolve_runs`). A line
repeated later is answered from :class:`Seen`. :func:`answer_lines` is the same for lines in
hand. Writing the answers is the caller's.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from registry_db.inputs.as_of import BATCH_LABELS
from registry_db.inputs.batch_stream import CHUNK
from registry_db.inputs.request import DeploymentRun, line_id, parse_line
from registry_db.inputs.run import Run
from registry_db.model import Refusal
from registry_db.model import RefusalReason as R
from registry_db.resolve.answer import Resolution
from registry_db.resolve.answer_json import AnswerText
from registry_db.resolve.answer_row import Steps, asked_here
from registry_db.resolve.deployment import DeploymentAnswer, resolve_runs_steps
from registry_db.resolve.plan import SET_NAMES

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from registry_db.store.engine import ReadBind

__all__ = ["LineAnswer", "Seen", "answer_chunk", "answer_chunks", "answer_lines"]


@dataclass(frozen=True, slots=True)
class LineAnswer:
    """One line's answer, the line's ``id`` (None: it has none) and its number in the input
    (blank lines counted, as the answers' messages count them; 0: not told). The answer is
    text already only when the batch was asked for text (:func:`answer_chunks`)."""

    answer: Resolution | Refusal | DeploymentAnswer | AnswerText
    id: Any = None
    line: int = 0

    @property
    def well_formed(self) -> bool:
        """Whether the line was a well-formed request (a batch with one that is not exits 1)."""
        answer = self.answer
        return not (type(answer) is Refusal and answer.reason == R.INVALID_REQUEST)


def answer_lines(bind: ReadBind, lines: Iterable[str | Refusal], fast: bool = True,
                 text: bool = False) -> Iterator[LineAnswer]:
    """The answer to each line of ``lines`` that is not blank, in order (:func:`answer_chunks`,
    :data:`~registry_db.inputs.batch_stream.CHUNK` lines at a time)."""
    for answers in answer_chunks(bind, _batched(lines, CHUNK), fast=fast, text=text):
        yield from answers


def answer_chunks(bind: ReadBind, chunks: Iterable[Sequence[str | Refusal]],
                  seen: Seen | None = None, fast: bool = True, text: bool = False,
                  ahead: bool = False
                  ) -> Generator[list[Any], None, None]:
    """The answers to each chunk of lines (consecutive, numbered from 1 across chunks), one
    list per chunk, each as soon as its chunk has come: every chunk is read in one snapshot
    (:func:`~registry_db.resolve.reading.snapshot`), so the answers are the ones the whole
    input would get at once, whatever is committed meanwhile. A line may be the refusal that
    answers it already (:func:`~registry_db.inputs.batch_stream.decode_line`).

    Each answer is a :class:`LineAnswer`, or what ``seen`` keeps of one (:class:`Seen`): a
    line repeated later is answered from it, not read or resolved again. ``fast``: lines of
    the common shape are read the fast way (:func:`~registry_db.inputs.request.parse_line`);
    the answers are the same either way. ``text``: a registry hit's answer may be its JSON
    text already (:class:`~registry_db.resolve.answer_json.AnswerText`), for a caller that
    only writes the answers (:func:`~registry_db.resolve.answer_json.answer_line`).
    ``ahead``: ``chunks`` never waits for its input (a regular file), so PostgreSQL may read
    the next chunk before this one's answers are given (:mod:`~registry_db.resolve.overlap`);
    else it never does."""
    from registry_db.resolve.overlap import overlap
    from registry_db.resolve.reading import snapshot

    seen = Seen() if seen is None else seen
    stored: dict[Any, Any] = {}  # what is stored, for the refusals' text: read once
    with snapshot(bind) as held, overlap(held, OVERLAP) as beside:
        # A line's "as_of" may name a label: the labels of the batch's snapshot.
        token = BATCH_LABELS.set(_labels(held))
        try:
            if beside is not None:  # PostgreSQL: the server answers a part while we do the next
                yield from beside.answers(chunks, lambda idle: _begin(stored, idle),
                                          lambda part, at: chunk_steps(held, part, at, seen,
                                                                       stored, fast, text),
                                          ahead)
                return
            start = 1
            for chunk in chunks:
                _begin(stored, True)
                yield list(answer_chunk(held, chunk, start, seen, stored, fast, text))
                start += len(chunk)
        finally:
            BATCH_LABELS.reset(token)


def _begin(stored: dict[Any, Any], idle: bool) -> None:
    """What a chunk's start does to what the batch keeps of what is stored."""
    if len(stored) > SEEN:
        stored.clear()
    if idle:
        # Read at a chunk's start when no call runs: a chunk answered from Seen still finds
        # a lost connection (exit 3); else its parts plan without a read (it would wait).
        stored.pop(SET_NAMES, None)


#: Whether a batch on PostgreSQL overlaps its ``registry_resolve_many`` calls with its own work
#: (:mod:`registry_db.resolve.overlap`); False: one call per chunk, waited for. The answers are
#: the same (tests/db/test_batch_overlap.py).
OVERLAP = True


def _labels(bind: ReadBind) -> dict[str, datetime]:
    """Every label's name and moment (UTC), in ``bind``'s transaction: one small read."""
    from registry_db.resolve.lookup import cursor
    from registry_db.store.dbapi_read import read_time

    with cursor(bind) as c:
        c.cur.execute("SELECT name, as_of FROM labels")
        return {name: read_time(at) for name, at in c.cur.fetchall()}


#: Lines whose answers a batch keeps for the lines that repeat them (the least recently
#: repeated are dropped first): bounds what a long batch holds.
SEEN = 200_000
#: The same bound in bytes: the kept lines' text and what is kept of their answers, each entry
#: counted with :data:`ENTRY` more for the objects around it. Lines of a few kilobytes (a long
#: id) are then kept by the tens of thousands, not 200,000.
SEEN_BYTES = 192 << 20
#: What one kept entry costs besides its text: two str headers, the dict's slot and link.
ENTRY = 200


class Seen:
    """The answers of lines answered earlier in the same snapshot, by the line's text, or what
    ``keep`` makes of each (the command line keeps its JSON text, which is smaller and need
    not be written again); at most ``size``, the least recently repeated dropped first. Only
    lines that were requests are kept (a refusal of a line that is none names its line)."""

    def __init__(self, keep: Callable[[LineAnswer], Any] | None = None,
                 size: int = SEEN, limit: int = SEEN_BYTES) -> None:
        self.keep = keep
        self.size = size
        self.limit = limit
        self.held = 0  # bytes kept, as :meth:`cost` counts them
        self.lines: OrderedDict[str, Any] = OrderedDict()

    @staticmethod
    def cost(line: str, kept: Any) -> int:
        """What keeping ``kept`` for ``line`` costs in bytes: the texts (an answer kept as an
        object is counted as its line again: its id, the bulk of a long line, is echoed)."""
        return ENTRY + len(line) + (len(kept) if type(kept) is str else len(line))

    def get(self, line: str) -> Any:
        found = self.lines.get(line)
        if found is not None:
            self.lines.move_to_end(line)
        return found

    def put(self, line: str, answer: LineAnswer) -> Any:
        kept = answer if self.keep is None else self.keep(answer)
        self.held += self.cost(line, kept)
        while self.lines and (len(self.lines) >= self.size or self.held > self.limit):
            old, dropped = self.lines.popitem(last=False)
            self.held -= self.cost(old, dropped)
        if self.held > self.limit:  # one answer larger than the whole budget is not kept
            self.held -= self.cost(line, kept)
            return kept
        self.lines[line] = kept
        return kept


def answer_chunk(bind: ReadBind, lines: Sequence[str | Refusal], start: int = 1,
                 seen: Seen | None = None, stored: dict[Any, Any] | None = None,
                 fast: bool = True, text: bool = False) -> Iterator[Any]:
    """The answer to each line of ``lines`` (the first is line ``start``) that is not blank,
    in order: a :class:`LineAnswer`, or what ``seen`` keeps of it. A line that is no request
    is answered ``invalid_request`` naming its line (and still echoes its id when it is a
    JSON object holding one); identical runs share one answer object. A line found in
    ``seen`` is not read or resolved again; ``stored``, what is stored, read for the
    refusals' text (:func:`~registry_db.resolve.finish.say_what_exists`); ``text``: as
    :func:`answer_chunks`'."""
    return iter(asked_here(chunk_steps(bind, lines, start, seen, stored, fast, text)))


def chunk_steps(bind: ReadBind, lines: Sequence[str | Refusal], start: int = 1,
                seen: Seen | None = None, stored: dict[Any, Any] | None = None,
                fast: bool = True, text: bool = False) -> Steps[list[Any]]:
    """:func:`answer_chunk` in two steps (:data:`~registry_db.resolve.answer_row.Steps`): the
    lines read and planned, then (sent the rows asked for) the answers."""
    seen = Seen() if seen is None else seen
    # Per line: its answer already, or (its number, its text, its run) to resolve.
    slots: list[Any] = []
    read: dict[str, Run | DeploymentRun] = {}  # a line repeated in the chunk is read once
    for number, line in enumerate(lines, start):
        if type(line) is Refusal:  # refused as it was read (not UTF-8), its line named
            slots.append(LineAnswer(line, None, number))
            continue
        assert type(line) is str
        hit = seen.get(line)
        if hit is not None:
            # What Seen keeps of an answer is shared by every repeat: it carries its number
            # only when it is the answer itself (the library's), renumbered for this line.
            slots.append(_Done(replace(hit, line=number) if type(hit) is LineAnswer else hit))
            continue
        if not line.strip():
            continue
        parsed = read.get(line) or parse_line(line, number, fast)
        if isinstance(parsed, Refusal):  # its line named already (invalid_request)
            slots.append(LineAnswer(parsed, line_id(line), number))
            continue
        read[line] = parsed
        slots.append((number, line, parsed))
    answers = iter((yield from resolve_runs_steps(
        bind, [s[2] for s in slots if type(s) is tuple], stored, text)))
    out: list[Any] = []
    for slot in slots:
        if type(slot) is _Done:
            out.append(slot.kept)
            continue
        if type(slot) is not tuple:
            out.append(slot)
            continue
        number, line, item = slot
        answer = next(answers)
        if type(answer) is Refusal and answer.reason == R.INVALID_REQUEST:
            # A pool's method or K that breaks its rule: the line is named, as everywhere.
            out.append(LineAnswer(Refusal(answer.reason, f"line {number}: {answer.message}"),
                                  item.id, number))
            continue
        out.append(seen.put(line, LineAnswer(answer, item.id, number)))
    return out


class _Done(NamedTuple):
    """A slot answered from :class:`Seen`."""

    kept: Any


def _batched(lines: Iterable[str | Refusal], size: int) -> Iterator[list[str | Refusal]]:
    it = iter(lines)
    while chunk := list(itertools.islice(it, size)):
        yield chunk
