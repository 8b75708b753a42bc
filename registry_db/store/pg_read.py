"""Reading a PostgreSQL registry without SQLAlchemy: the command line's fast way in for ``resolve``
and ``check``, the PostgreSQL driver of the reader :mod:`registry_db.store.sqlite_read` is for
SQLite.

A resolution only reads, with fixed SQL on a DB-API cursor (:mod:`registry_db.resolve.lookup`),
so for a ``postgresql+psycopg://`` URL the command line opens one psycopg 3 connection here
instead of an engine: no SQLAlchemy import, no dialect start-up queries, one connection where
:func:`registry_db.store.migrate.open_registry` opens two. The connection is the one the engine
would have made: the same keywords (:func:`connect_kwargs`, a test holds them equal to
SQLAlchemy's), the same read-only default (``default_transaction_read_only``, added to the
URL's ``options`` or ``PGOPTIONS``: :func:`reader_options`) and the same connect timeout.

:func:`open_readonly` is deliberately narrow: it answers only for a URL whose keywords it can
derive exactly and a database whose schema is at :data:`HEAD_REVISION`, and returns ``None`` for
anything else (another driver, several hosts, repeated query parameters, no ``alembic_version``,
an old or newer schema, psycopg missing), so that the caller takes the engine path, which
refuses or reports exactly as it always has. A server's error (unreachable, a missing database
or role, a refused grant) is the caller's to translate, as the engine path does, with the URL.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from registry_db.store.sqlite_read import HEAD_REVISION, NO_FAST_PATH_ENV
from registry_db.store.urls import parse_url

#: The driver the engine uses for PostgreSQL (``urls.normalize_url`` writes it).
DRIVER = "postgresql+psycopg"

#: What the engine adds to every PostgreSQL connection (``store.engine.make_engine``): a connect
#: timeout, and for a reader the read-only default of every transaction.
CONNECT_TIMEOUT = 10
READ_ONLY_OPTIONS = "-c default_transaction_read_only=on"

__all__ = ["CONNECT_TIMEOUT", "DRIVER", "PgReader", "READ_ONLY_OPTIONS", "connect_kwargs",
           "engine_url_text", "open_readonly", "reader_options"]


def reader_options(url_options: Any) -> str:
    """The ``options`` a reader connects with: the ones it would have had (the URL's
    ``options``, else ``PGOPTIONS``, as libpq picks them) plus the read-only default, last so
    it wins. Replacing them would make a reader read another ``search_path`` than the writer
    wrote (an explicit ``options`` also makes libpq ignore ``PGOPTIONS``)."""
    given = url_options if isinstance(url_options, str) else os.environ.get("PGOPTIONS", "")
    return f"{given} {READ_ONLY_OPTIONS}" if given.strip() else READ_ONLY_OPTIONS


class PgReader(NamedTuple):
    """An open read-only psycopg connection (autocommit) and the URL it was opened with."""

    conn: Any
    url: str

    @property
    def where(self) -> str:
        """The URL as an error inside a statement names it: as the engine path does."""
        return engine_url_text(self.url)

    def close(self) -> None:
        self.conn.close()


def connect_kwargs(url: str) -> dict[str, Any] | None:
    """The keywords SQLAlchemy's psycopg dialect passes ``psycopg.connect`` for ``url`` (its
    ``create_connect_args``: the URL's parts by libpq's names, then its query parameters), or
    ``None`` for a URL whose rewriting this does not repeat (several hosts, ``host=H:P``,
    repeated parameters, another driver): the engine path reads those."""
    parts = parse_url(url)
    if parts is None or parts.drivername != DRIVER:
        return None
    keys = [k for k, _ in parts.query]
    if len(set(keys)) != len(keys):
        return None
    query = dict(parts.query)
    host, port = query.get("host"), query.get("port")
    if (host is not None and ("," in host or ":" in host)) or (port is not None and "," in port):
        return None
    opts: dict[str, Any] = {}
    for name, value in (("host", parts.host), ("dbname", parts.database),
                        ("user", parts.username), ("password", parts.password),
                        ("port", int(parts.port) if parts.port else None)):
        if value:
            opts[name] = value
    opts.update(query)
    if host is not None:  # SQLAlchemy's multi-host reading of one host: the port as a number
        opts["host"] = host
        if port is not None:
            opts["port"] = str(int(port))
    return opts


def engine_url_text(url: str) -> str:
    """``url`` as an engine's URL renders (``str(engine.url)``: the password as ``***``, the
    query sorted), for the messages of errors raised inside a statement."""
    from urllib.parse import quote, quote_plus

    parts = parse_url(url)
    if parts is None:
        return url
    out = parts.drivername + "://"
    if parts.username is not None:
        out += quote(parts.username, safe=" +")
        if parts.password is not None:
            out += ":***"
        out += "@"
    if parts.host is not None:
        out += f"[{parts.host}]" if ":" in parts.host else parts.host
    if parts.port:
        out += f":{int(parts.port)}"
    if parts.database is not None:
        out += "/" + quote(parts.database, safe=" +/")
    if parts.query:
        out += "?" + "&".join(f"{quote_plus(k)}={quote_plus(v)}"
                              for k, v in sorted(parts.query, key=lambda kv: kv[0]))
    return out


def open_readonly(url: str) -> PgReader | None:
    """A read-only connection to the PostgreSQL registry at ``url``, at the head; else ``None``
    (see the module's docstring). The caller closes it, and translates a server's error,
    raised as psycopg's, with ``url`` (:func:`registry_db.resolve.reading.reading`)."""
    if os.environ.get(NO_FAST_PATH_ENV):
        return None
    kwargs = connect_kwargs(url)
    if kwargs is None:
        return None
    try:
        import psycopg
    except ImportError:  # the engine path says which extra installs it
        return None
    kwargs.update(connect_timeout=CONNECT_TIMEOUT, options=reader_options(kwargs.get("options")),
                  autocommit=True)
    conn = psycopg.connect(**kwargs)
    try:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    except psycopg.errors.UndefinedTable:  # an empty or foreign database: the engine says
        rows = []
    except BaseException:
        conn.close()
        raise
    if rows == [(HEAD_REVISION,)]:
        return PgReader(conn, url)
    conn.close()
    return None
