"""The Datasette side of ``registry serve``: the plugin (a page's picture as a ``.png`` output
renderer, numbers rounded for reading, the registry's state at the top of every page) and the
server on a registry, read-only, every request answered from one snapshot of it.

Datasette is the ``web`` extra; this module imports it, :mod:`registry_db.analyze.web` (the
metadata) does not. Installed, the plugin is also an entry point, so a Datasette started some
other way (``datasette -i registry.db -m metadata.json``) draws the same pictures and rounds
the same numbers.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import sys
import threading
from pathlib import Path
from typing import Any

from datasette import hookimpl
from datasette.database import Database
from markupsafe import escape

from registry_db.analyze.readable import readable_text
from registry_db.analyze.web import RESOLVE_COLUMNS, can_picture
from registry_db.analyze.web_render import PictureRefused, Renderer
from registry_db.analyze.web_snapshot import Snapshot, Snapshots
from registry_db.errors import RegistryError

#: The plugin's name with Datasette (the entry point's, in pyproject.toml).
NAME = "registry_db"

#: The pages' script (folded column descriptions, the answer read down, the picture).
SCRIPT = (Path(__file__).with_name("web_page.js")).read_text(encoding="utf-8")
#: The page's frame: Datasette's own, with the registry's state above every page's content.
TEMPLATES = str(Path(__file__).with_name("web_templates"))

#: The snapshot the current request reads (set for each request by :func:`pinned`).
PINNED: contextvars.ContextVar[Snapshot | None] = contextvars.ContextVar(
    "registry_snapshot", default=None)

#: The server's picture worker (one per process, started with the first picture).
_RENDERER: Renderer | None = None


def _can_render(columns: list[str]) -> bool:
    return can_picture(columns)


async def _render(columns: list[str], rows: list[Any]) -> dict[str, Any]:
    global _RENDERER
    if _RENDERER is None:
        _RENDERER = Renderer()
    try:
        body = await _RENDERER.png(list(columns), [tuple(r) for r in rows])
    except (PictureRefused, RegistryError) as exc:
        return {"body": f"No picture: {exc}\n", "status_code": 400,
                "content_type": "text/plain; charset=utf-8"}
    return {"body": body, "content_type": "image/png"}


@hookimpl
def render_cell(value: Any) -> Any:
    # Numbers as the command line's tables show them; the JSON keeps every digit.
    shown = readable_text(value)
    return None if shown is None else escape(shown)


@hookimpl
def extra_template_vars(request: Any) -> dict[str, Any]:
    snapshot = PINNED.get()
    return {"registry_state": None if snapshot is None else snapshot.state.words()}


@hookimpl
def register_output_renderer(datasette: Any) -> dict[str, Any]:
    return {"extension": "png", "render": _render, "can_render": _can_render}


@hookimpl
def extra_body_script(request: Any) -> str:
    # Every page: what the script does depends on what the page holds. A canned query's page
    # is Datasette's table view, so "Resolve a run" is known by its path.
    config: dict[str, Any] = {}
    if request is not None and request.path.rstrip("/").rsplit("/", 1)[-1] == "resolve":
        config["answer"] = RESOLVE_COLUMNS
    # Inside <script>: no "</" in the data may end it.
    data = json.dumps(config).replace("</", "<\\/")
    return f"window.registryPage = {data};\n{SCRIPT}"


def registered() -> None:
    """This module as a Datasette plugin (once: the entry point may have loaded it already)."""
    from datasette.plugins import pm

    here = sys.modules[__name__]
    if not pm.is_registered(here) and pm.get_plugin(NAME) is None:
        pm.register(here, name=NAME)


#: Datasette's settings for the registry: facet suggestions off (on the coverage view each
#: suggestion is a query over the whole grid); no caching (Datasette's default lets a browser
#: keep a page 5 s, and the page must show an import at the next request).
SETTINGS = {"suggest_facets": False, "default_cache_ttl": 0}


class SnapshotDatabase(Database):
    """The registry as Datasette sees it: each query reads the snapshot its request is pinned
    to (:data:`PINNED`), never the live file, and nothing can be written."""

    def __init__(self, ds: Any, snapshots: Snapshots):
        # Mutable: Datasette then caches no counts (each snapshot has its own).
        super().__init__(ds, path=snapshots.path, is_mutable=True)
        self.snapshots = snapshots
        self._local = threading.local()

    def _snapshot(self) -> Snapshot:
        return PINNED.get() or self.snapshots.current()

    @property
    def size(self) -> int:
        return Path(self._snapshot().path).stat().st_size

    @property
    def mtime_ns(self) -> int:
        return Path(self._snapshot().path).stat().st_mtime_ns

    def connect(self, write: bool = False) -> Any:
        if write:
            raise RegistryError("registry serve is read-only")
        return self._snapshot().connect()

    def _connection(self, snapshot: Snapshot) -> Any:
        """This thread's connection to ``snapshot`` (those to retired snapshots closed)."""
        mine: dict[int, tuple[Snapshot, Any]] = self._local.__dict__.setdefault("c", {})
        for generation, (old, conn) in list(mine.items()):
            if old.retired and old.users == 0:
                conn.close()
                del mine[generation]
        if snapshot.generation not in mine:
            conn = snapshot.connect()
            self.ds._prepare_connection(conn, self.name)
            mine[snapshot.generation] = (snapshot, conn)
        return mine[snapshot.generation][1]

    async def execute_fn(self, fn: Any) -> Any:
        snapshot = self._snapshot()
        return await asyncio.get_running_loop().run_in_executor(
            self.ds.executor, lambda: fn(self._connection(snapshot)))

    async def execute_write_fn(self, fn: Any, block: bool = True) -> Any:
        raise RegistryError("registry serve is read-only")


def datasette(snapshots: Snapshots, metadata: dict[str, Any]) -> Any:
    """A Datasette on the registry whose snapshots ``snapshots`` takes, read-only."""
    from datasette.app import Datasette

    registered()
    ds = Datasette(metadata=metadata, settings=SETTINGS, template_dir=TEMPLATES)
    ds.remove_database("_memory")  # Datasette's own when given no file: not the registry
    ds.add_database(SnapshotDatabase(ds, snapshots), name=snapshots.name, route=snapshots.name)
    return ds


def pinned(app: Any, snapshots: Snapshots) -> Any:
    """``app`` with each HTTP request pinned to the registry's snapshot when it arrives:
    a new one when a writer committed since the last, so an import is seen at the next
    request, and every query of a page reads the same state."""
    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        snapshot = await asyncio.get_running_loop().run_in_executor(None, snapshots.current)
        snapshot.users += 1
        token = PINNED.set(snapshot)
        try:
            await app(scope, receive, send)
        finally:
            PINNED.reset(token)
            snapshot.users -= 1
            if snapshot.retired and snapshot.users == 0:
                snapshots.prune()
    return asgi


def serve(snapshots: Snapshots, metadata: dict[str, Any], host: str, port: int) -> None:
    """Serve the registry whose snapshots ``snapshots`` takes on ``host:port`` until
    interrupted; the snapshots and the picture worker go with the server."""
    import contextlib
    from collections.abc import Iterator

    import uvicorn

    def finish() -> None:
        if _RENDERER is not None:
            _RENDERER.stop()
        snapshots.close()

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn ends by raising the signal it caught (SIGTERM kills the process): the
            # private copies are removed before it does.
            with super().capture_signals():
                try:
                    yield
                finally:
                    finish()

    try:
        ds = datasette(snapshots, metadata)
        asyncio.run(ds.invoke_startup())  # as `datasette serve` does: the startup hooks
        config = uvicorn.Config(pinned(ds.app(), snapshots), host=host, port=port,
                                log_level="info", lifespan="on", workers=1)
        server = Server(config)
        try:
            server.run()
        except KeyboardInterrupt:
            pass
        except SystemExit as exc:  # uvicorn's own exit when it cannot listen (it logged why)
            if not exc.code:
                raise
        if not server.started:
            raise RegistryError(f"cannot listen on {host}:{port} (the reason is above); "
                                "choose another --port or --host")
    finally:
        finish()
