"""Ctrl-C and the commit: an interrupt stops a write before its commit (nothing is written) or
comes after it (everything is), and the caller can tell which.

Every write transaction commits through :func:`commit`, which holds SIGINT off while the COMMIT
runs. If the commit fails, a held interrupt is raised as ``KeyboardInterrupt``: nothing was
written. If it succeeds, a held interrupt is raised as :class:`InterruptedAfterCommit`, unless
the caller runs inside :func:`finish_after_commit` (the command line does): then every SIGINT
from the commit on is only counted, the command finishes what it prints, and says so at its end;
in the command line's own process (:func:`until_exit`) it stays counted until the process ends.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

__all__ = ["Finishing", "InterruptedAfterCommit", "commit", "finish_after_commit", "until_exit"]


class InterruptedAfterCommit(KeyboardInterrupt):
    """Ctrl-C while (or after) a transaction committed: its writes are in the database."""


class Finishing:
    """What :func:`finish_after_commit` saw: whether a transaction committed, and how many
    SIGINTs arrived from its commit on."""

    def __init__(self) -> None:
        self.committed = False
        self.interrupted = 0
        self._previous: Any = None

    def _count(self, _signum: int, _frame: Any) -> None:
        self.interrupted += 1

    def _restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


_FINISHING: ContextVar[Finishing | None] = ContextVar("registry_db_finishing", default=None)

#: Set by the command line's process edge (:func:`until_exit`): there, once a transaction has
#: committed, SIGINT stays only counted until the process ends.
_UNTIL_EXIT = False


def until_exit() -> None:
    """This process is the command line: after a commit, keep SIGINT counted to the end (a
    Ctrl-C while the command returns, flushes or exits must not kill a process whose writes
    are in: that would be exit 130, or death by SIGINT, for a committed write)."""
    global _UNTIL_EXIT
    _UNTIL_EXIT = True


@contextlib.contextmanager
def finish_after_commit() -> Iterator[Finishing]:
    """Inside: once a transaction has committed, SIGINT no longer stops the work (it would
    only make a complete write look failed); it is counted on the :class:`Finishing` given.
    SIGINT's handler is put back on the way out."""
    state = Finishing()
    token = _FINISHING.set(state)
    try:
        yield state
    finally:
        _FINISHING.reset(token)
        if not (state.committed and _UNTIL_EXIT):
            state._restore()


def commit(do_commit: Callable[[], None]) -> None:
    """Run ``do_commit`` with SIGINT held off (see the module)."""
    state = _FINISHING.get()
    if threading.current_thread() is not threading.main_thread() or (
            state is not None and state.committed):
        # Signals reach only the main thread; after a commit under finish_after_commit, SIGINT
        # is already only counted.
        do_commit()
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda _s, _f: held.append(1))
    previous = signal.default_int_handler if previous is None else previous
    try:
        do_commit()
    except BaseException:
        signal.signal(signal.SIGINT, previous)
        if held:
            raise KeyboardInterrupt from None
        raise
    if state is not None:
        state.committed = True
        state.interrupted += len(held)
        state._previous = previous
        signal.signal(signal.SIGINT, state._count)
        return
    signal.signal(signal.SIGINT, previous)
    if held:
        raise InterruptedAfterCommit("interrupted after commit: the transaction's writes are "
                                     "in the database")


def from_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while handling a Ctrl-C before any commit (a library's
    cleanup failing half-way, as SQLAlchemy's does when SIGINT lands while it closes a
    connection): the interrupt, not a new error, is what the user should hear of."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt) and not isinstance(cause,
                                                                   InterruptedAfterCommit):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def quiet_about(logger: Any) -> None:
    """Have ``logger`` drop the records that only report a Ctrl-C (SQLAlchemy's pool logs
    "Exception closing connection" with the KeyboardInterrupt, then re-raises it): the
    command line says "interrupted" once, without a library's traceback."""
    filters = getattr(logger, "filters", None)  # None: SQLAlchemy's echo logger, no filters
    if filters is not None and _interrupt_records not in filters:
        logger.addFilter(_interrupt_records)


def _interrupt_records(record: Any) -> bool:
    info = record.exc_info
    return not (info and info[0] is not None and issubclass(info[0], KeyboardInterrupt))
