"""A PostgreSQL batch's ``registry_resolve_many`` calls overlapped with the client's own work.

Answering a chunk is the client's work (read and plan its lines, then finish and write their
answers) around one call the server computes, about as long again: done one after the other,
the batch waits for the sum. :class:`Overlap` sends each part's call (a chunk in parts of
:data:`PART` lines) to one worker thread, and finishes the part before while it runs (psycopg
lets go of the GIL while it waits on the socket), so the batch takes about the longer of the
two. From an input that never waits (a regular file) the next chunk is read and its call sent
before a chunk's last part is finished, and a part is the whole chunk (:data:`PART_AHEAD`).

What stays as it was: the calls go in order on the batch's one connection, in its one snapshot
(psycopg serializes a connection's statements: a read the main thread makes meanwhile waits for
the call in progress, never the other way round, so nothing deadlocks); from a pipe a chunk's
answers are all in hand, in order, before the next chunk is read (the streaming rule:
:mod:`registry_db.inputs.batch_stream`); a call's error is raised inside its part's steps,
where the cursor translates it as ever; an interrupt, a closed pipe or any error cancels the
call in progress on the server before the snapshot ends. The answers are byte for byte those of
one call per chunk, waited for (tests/db/test_batch_overlap.py)"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from registry_db.resolve.answer_row import AnswerRow, Ask, Steps, answer_many
from registry_db.resolve.lookup import Cursor, cursor

if TYPE_CHECKING:  # concurrent.futures is imported only by a batch on PostgreSQL
    from concurrent.futures import Future, ThreadPoolExecutor

    from registry_db.store.engine import ReadBind

__all__ = ["PART", "PART_AHEAD", "Overlap", "overlap"]

#: Lines per call when a chunk is answered whole before the next is read (a pipe): a chunk
#: (:data:`~registry_db.inputs.batch_stream.CHUNK`) in two parts. A call costs the server about
#: 12 ms more (the SQL function is planned every call): 100k lines in 2,000-line parts cost it
#: 2.4 s of CPU against 2.0 s in 10,000, and were no faster (loaded).
PART = 5_000
#: Lines per call when the next chunk is read ahead (a file): a whole chunk, the next chunk's
#: call overlapping this one's finishing (100k lines ÷ the join: wall 1.08 against 1.17 in
#: 5,000-line parts, same run).
PART_AHEAD = 10_000


@contextlib.contextmanager
def overlap(bind: ReadBind, on: bool = True) -> Iterator[Overlap | None]:
    """An :class:`Overlap` for ``bind``'s snapshot when it is PostgreSQL's and ``on``, else
    None (SQLite's lookups are in process: nothing to overlap); its thread ends with the
    block."""
    if not on:
        yield None
        return
    with cursor(bind) as c:
        dialect = c.dialect
    if dialect != "postgresql":
        yield None
        return
    runner = Overlap()
    try:
        yield runner
    finally:
        runner.close()


class Overlap:
    """Parts of a chunk answered in order, each part's call running while the main thread
    works on its neighbours."""

    def __init__(self) -> None:
        self.pool: ThreadPoolExecutor | None = None  # started by the first call
        self.conn: Any = None  # the batch's psycopg connection, which every call uses

    def answers(self, chunks: Iterable[Sequence[Any]], begin: Callable[[bool], None],
                steps: Callable[[Sequence[Any], int], Steps[list[Any]]],
                ahead: bool = False) -> Iterator[list[Any]]:
        """The answers to each chunk of ``chunks`` (lines numbered from 1 across them), one
        list per chunk, in order: ``steps(part, first line)`` answers each part of
        :data:`PART` lines (:data:`PART_AHEAD` ``ahead``) in two steps; ``begin(idle)`` is
        told of each chunk before its first part is planned (``idle``: no call runs). With
        ``ahead`` (the input never waits: a regular file) the next chunk is read and its first
        part sent before the last part of a chunk is finished; else a chunk is answered whole
        before the next is read."""
        source = iter(chunks)
        size = PART_AHEAD if ahead else PART
        start = 1
        todo: deque[tuple[Sequence[Any], int, bool]] = deque()  # parts read, not yet sent
        # Parts sent, oldest first: (its steps, its call) or (None, its answers), and whether
        # it is its chunk's last.
        pending: deque[tuple[Steps[list[Any]] | None, Any, bool]] = deque()
        out: list[Any] = []
        try:
            while True:
                # One call runs while the part before it is finished.
                while len(pending) < 2:
                    if not todo:
                        if pending and not (ahead and pending[-1][2]):
                            break  # a pipe's next chunk may wait: this one is answered first
                        chunk = next(source, None)
                        if chunk is None:
                            break
                        begin(not pending)
                        todo.extend((chunk[at:at + size], start + at, at + size >= len(chunk))
                                    for at in range(0, max(len(chunk), 1), size))
                        start += len(chunk)
                    lines, at, last = todo.popleft()
                    pending.append((*self._send(steps(lines, at)), last))
                if not pending:
                    return
                part, got, last = pending[0]
                out.extend(_finish(part, got))
                pending.popleft()  # (only once finished: until then _stop must see it)
                if last:
                    yield out
                    out = []
        except BaseException:
            self._stop(pending)
            raise

    def _send(self, part: Steps[list[Any]]) -> tuple[Steps[list[Any]] | None, Any]:
        """A part planned and its call sent, or (None, its answers) when it asks nothing."""
        try:
            ask = next(part)
        except StopIteration as done:
            return None, done.value
        return part, self._call(ask)

    def _call(self, ask: Ask) -> Future[list[AnswerRow]]:
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(1, thread_name_prefix="registry-resolve-many")
        self.conn = ask.c.cur.connection
        return self.pool.submit(_rows, self.conn, ask.plans)

    def _stop(self, pending: deque[tuple[Steps[list[Any]] | None, Any, bool]]) -> None:
        """No call left running: those not begun are dropped, the one in progress cancelled on
        the server (a Ctrl-C must not leave it running); each part's cursor is closed."""
        from concurrent.futures import wait

        calls = [got for part, got, _ in pending if part is not None]
        for got in calls:
            got.cancel()
        if any(not got.done() for got in calls):
            _cancel(self.conn)
        wait(calls)
        for part, _, _ in pending:
            if part is not None:
                part.close()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


def _rows(conn: Any, plans: list[Any]) -> list[AnswerRow]:
    """``registry_resolve_many``'s rows for ``plans``, on a cursor of the batch's connection
    (the worker thread's)."""
    with conn.cursor() as cur:
        return answer_many(Cursor(cur, "postgresql"), plans)


def _finish(part: Steps[list[Any]] | None, got: Any) -> list[Any]:
    """A part's answers: its steps sent its call's rows (or its error, raised where it asked)."""
    if part is None:
        return got
    try:
        try:
            rows = got.result()
        except Exception as exc:  # noqa: BLE001 - raised inside the part, as if asked there
            part.throw(exc)
        else:
            part.send(rows)
        while True:  # a further ask (none today) is answered in place
            part.send(None)
    except StopIteration as done:
        return done.value


def _cancel(conn: Any) -> None:
    """Cancel the statement ``conn`` is running (psycopg 3.2's cancel_safe where there is one)."""
    with contextlib.suppress(Exception):
        (getattr(conn, "cancel_safe", None) or conn.cancel)()
