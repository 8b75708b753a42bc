"""Database URLs: where the registry lives, spelled the way users type it.

``--database`` wins, then ``REGISTRY_DATABASE_URL``, then ``sqlite:///registry.db`` in the current
folder. A bare path means an SQLite file; ``postgres://`` and ``postgresql://`` both mean
PostgreSQL through psycopg 3. Passwords never leave this module unmasked.
"""

from __future__ import annotations

import os
import re

ENV_VAR = "REGISTRY_DATABASE_URL"
DEFAULT_URL = "sqlite:///registry.db"

_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def resolve_url(option: str | None = None, environ: dict[str, str] | None = None) -> str:
    """The URL to use: the option, else the environment variable, else the default file."""
    env = os.environ if environ is None else environ
    raw = option or env.get(ENV_VAR) or DEFAULT_URL
    return normalize_url(raw)


def normalize_url(raw: str) -> str:
    """Bare paths become SQLite URLs; PostgreSQL URLs get the psycopg 3 driver."""
    raw = raw.strip()
    if not _SCHEME_RE.match(raw):
        if raw.startswith("sqlite:"):
            return raw
        return f"sqlite:///{raw}"
    scheme, rest = raw.split("://", 1)
    if scheme in ("postgres", "postgresql"):
        return f"postgresql+psycopg://{rest}"
    return raw


def dialect_of(url: str) -> str:
    """``sqlite`` or ``postgresql`` (or whatever else the URL names)."""
    # SQLAlchemy is imported here, not at the top: finding the URL must not cost the command
    # line's SQLAlchemy-free read path (registry_db.store.sqlite_read) SQLAlchemy's import.
    from sqlalchemy.engine.url import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).get_backend_name()
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        return url.split(":", 1)[0].split("+", 1)[0]


def redact(url: str) -> str:
    """The URL with any password replaced by ``***``, for messages."""
    from sqlalchemy.engine.url import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        # Not a URL SQLAlchemy can parse: show only the scheme, never what might be a password.
        return url.split("://", 1)[0] + "://***" if "://" in url else url


def sqlite_path(url: str) -> str | None:
    """The file path of an SQLite URL (None for in-memory or other dialects)."""
    if dialect_of(url) != "sqlite":
        return None
    path = url.split(":///", 1)[1] if ":///" in url else ""
    path = path.split("?", 1)[0]
    if path.startswith("file:"):
        path = path[5:]
    return path or None
