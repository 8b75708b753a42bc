"""A PostgreSQL batch's ``registry_resolve_many`` calls overlapped with the client's own work.

Answering a chunk is the client's work (read and plan its lines, then finish and write their
answers) around one call the server computes, about as long again: done one after the other,
the batch waits for the sum. :class:`Overlap` cuts a chunk into parts of :data:`PART` lines and
runs each part's call on one worker thread while the main thread plans the next part and
finishes the one before (psycopg lets go of the GIL while it waits on the socket), so the batch
takes about the longer of the two.

What stays as it was: the calls go in order on the batch's one connection, in its one snapshot
(psycopg serializes a connection's statements: a read the main thread makes meanwhile waits for
the call in progress, never the other way round, so nothing deadlocks); a chunk's answers are
all in hand, in order, before the next chunk is read (the streaming rule:
:mod:`registry_db.inputs.batch_stream`); a call's error is raised inside its part's steps,
where the cursor translates it as ever; an interrupt or any error cancels the call in progress
on the server before the snapshot ends. The answers are byte for byte those of one call per
chunk (tests/db/test_batch_overlap.py).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from registry_db.resolve.answer_row import AnswerRow, Ask, Steps, answer_many
from registry_db.resolve.lookup import Cursor, cursor

if TYPE_CHECKING:  # concurrent.futures is imported only by a batch on PostgreSQL
    from concurrent.futures import Future, ThreadPoolExecutor

    from registry_db.store.engine import ReadBind

__all__ = ["PART", "Overlap", "overlap"]

#: Lines per call: a chunk (:data:`~registry_db.inputs.batch_stream.CHUNK`) in two parts. Each
#: call costs the server about 12 ms more (the SQL function is planned every call): 100k lines
#: in 2,000-line parts cost it 2.4 s against 2.0 s in 10,000, and were no faster (loaded).
PART = 5_000


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

    def answer(self, lines: Sequence[Any], start: int,
               steps: Callable[[Sequence[Any], int], Steps[list[Any]]]) -> list[Any]:
        """The answers to ``lines`` (the first is line ``start``), in order: ``steps(part,
        first line)`` answers each part of :data:`PART` lines in two steps."""
        out: list[Any] = []
        # Parts planned, oldest first: (its steps, its call) or (None, its answers).
        pending: deque[tuple[Steps[list[Any]] | None, Any]] = deque()
        try:
            for at in range(0, len(lines), PART):
                part = steps(lines[at:at + PART], start + at)
                try:
                    ask = next(part)
                except StopIteration as done:  # nothing to ask the server
                    pending.append((None, done.value))
                else:
                    pending.append((part, self._call(ask)))
                # The call just sent runs while the part before it is finished.
                while len(pending) > 1:
                    out.extend(_finish(*pending[0]))
                    pending.popleft()  # (only once finished: until then _stop must see it)
            while pending:
                out.extend(_finish(*pending[0]))
                pending.popleft()
        except BaseException:
            self._stop(pending)
            raise
        return out

    def _call(self, ask: Ask) -> Future[list[AnswerRow]]:
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(1, thread_name_prefix="registry-resolve-many")
        self.conn = ask.c.cur.connection
        return self.pool.submit(_rows, self.conn, ask.plans)

    def _stop(self, pending: deque[tuple[Steps[list[Any]] | None, Any]]) -> None:
        """No call left running: those not begun are dropped, the one in progress cancelled on
        the server (a Ctrl-C must not leave it running); each part's cursor is closed."""
        from concurrent.futures import wait

        calls = [got for part, got in pending if part is not None]
        for got in calls:
            got.cancel()
        if any(not got.done() for got in calls):
            _cancel(self.conn)
        wait(calls)
        for part, _ in pending:
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
