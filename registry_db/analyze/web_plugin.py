"""The Datasette side of ``registry serve``: the plugin that draws a page's rows (a ``.png``
output renderer, embedded under the table), and the server on a registry file, read-only.

Datasette is the ``web`` extra; this module imports it, :mod:`registry_db.analyze.web` (the
metadata) does not. Installed, the plugin is also an entry point, so a Datasette started some
other way (``datasette -i registry.db -m metadata.json``) draws the same pictures.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from datasette import hookimpl

from registry_db.analyze.web import RESOLVE_COLUMNS, can_picture, picture_png
from registry_db.errors import RegistryError

#: The plugin's name with Datasette (the entry point's, in pyproject.toml).
NAME = "registry_db"

#: The pages' script (folded column descriptions, the answer read down, the picture).
SCRIPT = (Path(__file__).with_name("web_page.js")).read_text(encoding="utf-8")


def _can_render(columns: list[str]) -> bool:
    return can_picture(columns)


def _render(columns: list[str], rows: list[Any]) -> dict[str, Any]:
    return {"body": picture_png(list(columns), [tuple(r) for r in rows]),
            "content_type": "image/png"}


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
#: suggestion is a query over the whole grid).
SETTINGS = {"suggest_facets": False}


def datasette(path: str, metadata: dict[str, Any]) -> Any:
    """A Datasette on the registry file at ``path``, immutable (read-only, no locks)."""
    from datasette.app import Datasette

    registered()
    return Datasette(immutables=[path], metadata=metadata, settings=SETTINGS)


def serve(path: str, metadata: dict[str, Any], host: str, port: int) -> None:
    """Serve the registry at ``path`` on ``host:port`` until interrupted."""
    import asyncio

    import uvicorn

    ds = datasette(path, metadata)
    asyncio.run(ds.invoke_startup())  # as `datasette serve` does: the plugins' startup hooks
    try:
        uvicorn.run(ds.app(), host=host, port=port, log_level="info", lifespan="on", workers=1)
    except SystemExit as exc:  # uvicorn's own exit when it cannot listen (it logged why)
        if exc.code:
            raise RegistryError(f"cannot listen on {host}:{port} (the reason is above); "
                                "choose another --port or --host") from None
