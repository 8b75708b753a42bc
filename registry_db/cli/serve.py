"""``registry serve``: the registry on the web, with Datasette, read-only.

Datasette is the ``web`` extra, imported only when a server starts: ``--metadata`` and the
refusals need none of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from registry_db.cli.output import emit_json, handle_errors
from registry_db.errors import DatabaseError, MissingExtra, UsageError

INSTALL_HINT = "pip install 'registry_db[web]'  (in a checkout: pip install -e '.[web]')"


def sqlite_file(url: str) -> str | None:
    """The registry's SQLite file; None for PostgreSQL (served from SQLite copies); else the
    usage error that says what to do instead."""
    from registry_db.store.sqlite_read import sqlite_file as plain_file

    path = plain_file(url)  # a plain sqlite:///PATH without SQLAlchemy's import (--metadata)
    if path is not None:
        return path
    from registry_db.store.urls import dialect_of, shown_url, sqlite_path

    path = sqlite_path(url)
    if path is not None and path != ":memory:":
        return path
    if dialect_of(url) == "postgresql":
        return None
    raise UsageError(f"registry serve needs the registry's SQLite file or a PostgreSQL URL; "
                     f"{shown_url(url)} is neither")


def _database_name(url: str) -> str:
    """A PostgreSQL registry's name on the server: its database's."""
    from sqlalchemy.engine import make_url

    return make_url(url).database or "registry"


#: The web extra's packages, by the top-level module a failed import names.
_WEB_PACKAGES = {"datasette": "Datasette", "matplotlib": "matplotlib (its pictures)"}


def _missing(exc: ImportError) -> str:
    """The web extra's package an ImportError says is missing (Datasette when it names none)."""
    top = (exc.name or "").split(".")[0]
    return _WEB_PACKAGES.get(top, f"{top} (a package the web extra installs)" if top
                             else "Datasette")


@click.command("serve")
@click.option("--port", type=click.IntRange(1, 65535), default=8001, show_default=True,
              help="The port to listen on.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (0.0.0.0: every interface; the data is then "
                   "readable by anyone who reaches this machine).")
@click.option("--metadata", "print_metadata", is_flag=True,
              help="Print Datasette's metadata (JSON) instead of serving.")
@click.pass_obj
@handle_errors
def serve(settings: Any, port: int, host: str, print_metadata: bool) -> None:
    """Serve the registry on the web with Datasette: every view and column explained, facets
    by model, method, thinking and category, and canned queries (resolve a run, coverage of a
    model, history of a set, conflicts), each page's AL-against-K picture beneath it.

    Read-only, and live: each request reads one snapshot of the registry, taken anew when an
    import (or any write) committed since the last, so a page is consistent within itself and
    an import is seen at the next request; the registry's latest revision and the time it was
    read head every page. Nothing is written next to the file.
    Needs the web extra: pip install 'registry_db[web]'. --metadata prints the metadata for
    running Datasette another way (datasette -i registry.db -m metadata.json, with the plugin
    this package installs). A PostgreSQL registry is served from SQLite copies (Datasette
    reads SQLite only), each taken in one read-only transaction at the first request after a
    revision was written; the copy's time heads every page.

    \b
    Example:
        registry import seed/acceptance/
        registry serve                      # http://127.0.0.1:8001/
        registry serve --metadata > metadata.json
    """
    from registry_db.analyze.web import metadata

    path = sqlite_file(settings.url)
    meta = metadata(Path(path).stem if path is not None else _database_name(settings.url))
    if print_metadata:
        emit_json(meta)
        return
    from registry_db.analyze.web_snapshot import CopiedSnapshots, Snapshots
    from registry_db.store.migrate import open_registry, require_existing

    snapshots: Snapshots
    if path is None:  # PostgreSQL: the schema checked as every reader checks it
        snapshots = CopiedSnapshots(settings.url, open_registry(settings.url, readonly=True))
    else:
        require_existing(settings.url)  # a missing file: exit 3, and nothing created
        snapshots = Snapshots(path)
    try:
        if path is None:
            snapshots.current()
        else:
            _check_schema(snapshots)
        try:
            import matplotlib  # noqa: F401 - the pictures; imported here so that a missing one is said now

            from registry_db.analyze import web_plugin
        except ImportError as exc:
            raise MissingExtra(f"registry serve needs {_missing(exc)}, which is not "
                               f"installed ({exc}); install the web extra: {INSTALL_HINT}"
                               ) from None
        from registry_db.store.urls import shown_url

        click.echo(f"Serving {path or shown_url(settings.url)} read-only at http://{host}:{port}/ "
                   "(Ctrl-C stops it)", err=True)
        web_plugin.serve(snapshots, meta, host, port)
    finally:
        snapshots.close()


def _check_schema(snapshots: Any) -> None:
    """An empty file or an old schema: exit 3, as every command that reads; checked on the
    first snapshot, so that nothing opens the live file but the copy (which creates nothing
    beside it)."""
    from registry_db.store.migrate import registry

    copy = snapshots.current().path
    try:
        with registry(f"sqlite:///{copy}", readonly=True):
            pass
    except DatabaseError as exc:  # said of the registry's file, not of the copy
        raise type(exc)(str(exc).replace(copy, snapshots.path)) from None
