"""The pictures of ``registry serve``, drawn off the server's event loop and bounded.

A page's rows come from any SQL, so the picture is bounded before it is drawn (rows, K, panels:
:func:`registry_db.analyze.web.check_picture` and :func:`registry_db.analyze.plot.check_size`)
and then drawn in one worker process of its own, with a time limit (the process is killed and
replaced when it passes it) and a memory limit (``RLIMIT_AS``): a picture past a bound is
refused with a message, and the server's other requests never wait on one. One picture is drawn
at a time (the others wait their turn without holding the event loop).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from typing import Any

from registry_db.errors import RegistryError

#: Seconds one picture may take (wall clock) before its worker is killed.
TIME_LIMIT = 30.0
#: Bytes of address space the worker may map (matplotlib and numpy take about 300 MB idle).
MEMORY_LIMIT = 1536 * 1024 * 1024


class PictureRefused(RegistryError):
    """A picture past a bound: the page's rows cannot be drawn (HTTP 400, with why)."""


def _work(conn: Any, memory: int) -> None:
    """The worker: draw each (columns, rows) it is sent, answer ("png", bytes) or ("refused",
    message), until the pipe closes."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread: its buffers count too
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    except (ImportError, ValueError, OSError):  # no such limit here: the time limit remains
        pass
    from registry_db.analyze.web import picture_png

    try:
        import matplotlib.figure  # noqa: F401 - loaded now, within the limit
        broken = None
    except (MemoryError, ImportError) as exc:  # a limit too small to load the libraries
        broken = (f"the picture worker cannot start within the memory a picture may take "
                  f"({memory // 2**20} MiB): {exc}")
    while True:
        try:
            columns, rows = conn.recv()
        except EOFError:
            return
        if broken is not None:
            conn.send(("refused", broken))
            continue
        try:
            answer: tuple[str, Any] = ("png", picture_png(columns, rows))
        except MemoryError:
            answer = ("refused", "the picture needs more memory than a picture may take "
                                 f"({memory // 2**20} MiB); draw fewer rows")
        except RegistryError as exc:
            answer = ("refused", str(exc))
        conn.send(answer)


class Renderer:
    """One worker process that draws pictures, one at a time, each within the limits."""

    def __init__(self, time_limit: float = TIME_LIMIT, memory_limit: int = MEMORY_LIMIT):
        self.time_limit, self.memory_limit = time_limit, memory_limit
        self._context = multiprocessing.get_context("spawn")  # no fork of a threaded server
        self._process: Any = None
        self._conn: Any = None
        self._turn = asyncio.Lock()

    def _start(self) -> None:
        mine, theirs = self._context.Pipe()
        self._process = self._context.Process(target=_work, args=(theirs, self.memory_limit),
                                              daemon=True, name="registry-picture")
        self._process.start()
        theirs.close()
        self._conn = mine

    def stop(self) -> None:
        """Kill the worker (a new one starts with the next picture)."""
        if self._process is not None:
            self._process.kill()
            self._process.join()
            self._conn.close()
        self._process = self._conn = None

    def _draw(self, columns: list[str], rows: list[Any]) -> tuple[str, Any]:
        if self._process is None or not self._process.is_alive():
            self.stop()
            self._start()
        self._conn.send((columns, rows))
        if not self._conn.poll(self.time_limit):
            self.stop()
            return ("refused", f"the picture took more than {self.time_limit:g} s and was "
                               "stopped; draw fewer rows")
        try:
            return self._conn.recv()
        except EOFError:  # the worker died (its memory limit): a new one for the next picture
            self.stop()
            return ("refused", "the picture could not be drawn within the memory a picture "
                               f"may take ({self.memory_limit // 2**20} MiB); draw fewer rows")

    async def png(self, columns: list[str], rows: list[Any]) -> bytes:
        """The picture's PNG bytes, drawn in the worker; :class:`PictureRefused` past a
        bound."""
        async with self._turn:
            kind, value = await asyncio.get_running_loop().run_in_executor(
                None, self._draw, columns, rows)
        if kind != "png":
            raise PictureRefused(value)
        return value
