"""Many runs from JSON lines: one answer per line that is not blank, in order, refusals included
(``registry resolve --batch``).

:func:`answer_lines` reads the lines (:func:`registry_db.inputs.request.parse_lines`: each one
checked as it is read), resolves every run of every line at once, a deployment's pools included
(:func:`registry_db.resolve.deployment.resolve_runs`), and yields each line's
:class:`LineAnswer`; writing them is the caller's.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from registry_db.inputs.batch_stream import CHUNK
from registry_db.inputs.request import line_id, parse_lines
from registry_db.model import Refusal
from registry_db.model import RefusalReason as R
from registry_db.resolve.answer import Resolution
from registry_db.resolve.deployment import DeploymentAnswer, resolve_runs

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from registry_db.store.engine import ReadBind

__all__ = ["LineAnswer", "answer_chunk", "answer_chunks", "answer_lines"]


@dataclass(frozen=True, slots=True)
class LineAnswer:
    """One line's answer and the line's ``id`` (None: it has none)."""

    answer: Resolution | Refusal | DeploymentAnswer
    id: Any = None

    @property
    def well_formed(self) -> bool:
        """Whether the line was a well-formed request (a batch with one that is not exits 1)."""
        answer = self.answer
        return not (type(answer) is Refusal and answer.reason == R.INVALID_REQUEST)


def answer_lines(bind: ReadBind, lines: Iterable[str | Refusal]) -> Iterator[LineAnswer]:
    """The answer to each line of ``lines`` that is not blank, in order (:func:`answer_chunks`,
    :data:`~registry_db.inputs.batch_stream.CHUNK` lines at a time)."""
    for answers in answer_chunks(bind, _batched(lines, CHUNK)):
        yield from answers


def answer_chunks(bind: ReadBind, chunks: Iterable[Sequence[str | Refusal]]
                  ) -> Iterator[list[LineAnswer]]:
    """The answers to each chunk of lines (consecutive, numbered from 1 across chunks), one
    list per chunk, each as soon as its chunk has come: every chunk is read in one snapshot
    (:func:`~registry_db.resolve.reading.snapshot`), so the answers are the ones the whole
    input would get at once, whatever is committed meanwhile. A line may be the refusal that
    answers it already (:func:`~registry_db.inputs.batch_stream.decode_line`)."""
    from registry_db.resolve.reading import snapshot

    with snapshot(bind) as held:
        start = 1
        for chunk in chunks:
            yield list(answer_chunk(held, chunk, start))
            start += len(chunk)


def answer_chunk(bind: ReadBind, lines: Sequence[str | Refusal], start: int = 1
                 ) -> Iterator[LineAnswer]:
    """The answer to each line of ``lines`` (the first is line ``start``) that is not blank,
    in order. A line that is no request is answered ``invalid_request`` naming its line (and
    still echoes its id when it is a JSON object holding one); identical runs share one
    answer object."""
    parsed = parse_lines(lines, start)
    answers = iter(resolve_runs(bind, [p for p in parsed if type(p) is not Refusal]))  # type: ignore[misc]
    numbered = ((n, line) for n, line in enumerate(lines, start)
                if type(line) is Refusal or line.strip())  # type: ignore[union-attr]
    for item, (number, line) in zip(parsed, numbered, strict=True):
        if isinstance(item, Refusal):  # refused as it was read, its line named already
            yield LineAnswer(item, None if type(line) is Refusal else line_id(line))  # type: ignore[arg-type]
            continue
        answer = next(answers)
        if type(answer) is Refusal and answer.reason == R.INVALID_REQUEST:
            # A pool's method or K that breaks its rule: the line is named, as everywhere.
            answer = Refusal(answer.reason, f"line {number}: {answer.message}")
        yield LineAnswer(answer, item.id)


def _batched(lines: Iterable[str | Refusal], size: int) -> Iterator[list[str | Refusal]]:
    it = iter(lines)
    while chunk := list(itertools.islice(it, size)):
        yield chunk
