"""Database URLs: where the registry lives, spelled the way users type it, parsed once.

``--database`` wins, then ``REGISTRY_DATABASE_URL``, then ``sqlite:///registry.db`` in the current
folder. A bare path means an SQLite file; ``postgres://`` and ``postgresql://`` both mean
PostgreSQL through psycopg 3. :func:`parse_url` is the one parser: it reads a URL as SQLAlchemy's
``make_url`` does (the same pattern; a test holds them equal) without importing SQLAlchemy, so
that the command line's SQLAlchemy-free read path (:mod:`registry_db.store.sqlite_read`) and the
engines find the same file. Passwords never leave this module unmasked, in any of their forms.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple
from urllib.parse import parse_qsl, unquote, unquote_plus


def _usage_error(message: str) -> Exception:
    """:class:`~registry_db.errors.UsageError`, imported only when raised: the URL is read
    before ``db upgrade`` at the head answers (registry_db.cli.fast), which loads no more."""
    from registry_db.errors import UsageError

    return UsageError(message)


ENV_VAR = "REGISTRY_DATABASE_URL"
DEFAULT_URL = "sqlite:///registry.db"

_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")

#: SQLAlchemy's own pattern (sqlalchemy/engine/url.py, ``_parse_url``), kept character for
#: character: a URL means here what it means to the engine that connects with it.
_URL_RE = re.compile(
    r"""
        (?P<name>[\w\+]+)://
        (?:
            (?P<username>[^:/]*)
            (?::(?P<password>[^@]*))?
        @)?
        (?:
            (?:
                \[(?P<ipv6host>[^/\?]+)\] |
                (?P<ipv4host>[^/:\?]+)
            )?
            (?::(?P<port>[^/\?]*))?
        )?
        (?:/(?P<database>[^\?]*))?
        (?:\?(?P<query>.*))?
        """,
    re.X,
)

#: Query parameters that carry a secret (libpq's ``password`` and ``sslpassword``).
SECRET_PARAMETERS = frozenset({"password", "sslpassword"})

#: The longest file name and path Linux file systems hold (NAME_MAX, PATH_MAX), in bytes.
_NAME_BYTES, _PATH_BYTES = 255, 4096

#: What the SQLite URLs an in-memory database are spelled as (SQLAlchemy's and SQLite's).
_MEMORY = ("", ":memory:")


class Url(NamedTuple):
    """A parsed database URL: SQLAlchemy's ``URL`` fields, as plain values."""

    drivername: str
    username: str | None
    password: str | None
    host: str | None
    port: str | None
    database: str | None
    query: tuple[tuple[str, str], ...]

    @property
    def backend(self) -> str:
        """``sqlite``, ``postgresql`` or whatever else the URL names (``postgres`` is
        ``postgresql``, as SQLAlchemy has it)."""
        name = self.drivername.split("+", 1)[0]
        return "postgresql" if name == "postgres" else name

    def param(self, key: str) -> str | None:
        """The last value of query parameter ``key`` (None when absent)."""
        found = [v for k, v in self.query if k == key]
        return found[-1] if found else None


def parse_url(url: str) -> Url | None:
    """``url``'s parts as ``make_url`` reads them, or None when it is no URL at all."""
    m = _URL_RE.match(url)
    if m is None:
        return None
    g = m.groupdict()
    query = tuple(parse_qsl(g["query"])) if g["query"] is not None else ()

    def decoded(key: str) -> str | None:
        return None if g[key] is None else unquote(g[key])

    return Url(g["name"], decoded("username"), decoded("password"),
               g["ipv4host"] or g["ipv6host"], g["port"], decoded("database"), query)


def resolve_url(option: str | None = None, environ: dict[str, str] | None = None) -> str:
    """The URL to use: the option, else the environment variable, else the default file,
    checked (:func:`check_url`)."""
    return explicit_url(option, environ) or DEFAULT_URL


def explicit_url(option: str | None = None, environ: dict[str, str] | None = None) -> str | None:
    """The URL the option or the environment variable names (checked), or None when neither
    names one. A blank one is a usage error: it names nothing, and meaning the default file
    would hide a mistake in a script."""
    env = os.environ if environ is None else environ
    for raw, where in ((option, "--database"), (env.get(ENV_VAR), f"${ENV_VAR}")):
        if raw is None:
            continue
        if not raw.strip():
            raise _usage_error(f"{where} is blank; give a database URL or an SQLite file path "
                             f"(unset it to use {DEFAULT_URL})")
        return check_url(normalize_url(raw))
    return None


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


def check_url(url: str, *, in_memory: bool = False) -> str:
    """``url`` itself, or :class:`~registry_db.errors.UsageError` (exit 2) saying what is wrong
    with it: not a URL, a port that is not a number in 1-65535, or (unless ``in_memory``: a
    library caller's engine may hold one) an in-memory SQLite database, which is gone when the
    command ends. The dialect is the engine's to check."""
    parts = parse_url(url)
    if parts is None:
        raise _usage_error(f"{shown_url(url)} is not a database URL; write sqlite:///PATH, a file "
                         "path, or postgresql://USER@HOST/DATABASE")
    ports = [("", parts.port)] + [(" (?port=)", v) for k, v in parts.query if k == "port"]
    for where, port in ports:
        if port is not None and not (port.isascii() and port.isdigit()
                                     and 1 <= int(port) <= 65535):
            raise _usage_error(f"{shown_url(url)}: the port{where} {port!r} is not a number from 1 "
                             "to 65535")
    path = sqlite_path(url) if parts.backend == "sqlite" else None
    if not in_memory and parts.backend == "sqlite" and path is None:
        raise _usage_error(f"{shown_url(url)} is an in-memory SQLite database, which is gone when "
                         "the command ends; give a file path (-d registry.db)")
    if path is not None and (len(os.fsencode(path)) > _PATH_BYTES or any(
            len(os.fsencode(part)) > _NAME_BYTES for part in path.split(os.sep))):
        raise _usage_error(f"the SQLite path {path[:60]!r}... is longer than a file system "
                         f"holds ({_NAME_BYTES} bytes a name, {_PATH_BYTES} a path)")
    if path is not None and os.path.isdir(path):  # SQLite would say "disk I/O error"
        raise _usage_error(f"{path} is a folder; the registry is a file in it, such as "
                         f"-d {os.path.join(path, 'registry.db')}, or a database URL")
    return url


def dialect_of(url: str) -> str:
    """``sqlite`` or ``postgresql`` (or whatever else the URL names)."""
    parts = parse_url(url)
    if parts is None:
        return url.split(":", 1)[0].split("+", 1)[0]
    return parts.backend


def sqlite_path(url: str) -> str | None:
    """The file an SQLite URL opens, as the engine opens it (None for an in-memory database or
    another dialect): the URL's database, or with ``uri=true`` the path of its ``file:`` URI."""
    parts = parse_url(url)
    if parts is None or parts.backend != "sqlite":
        return None
    database = parts.database or ""
    # pysqlite's reading of uri= (SQLAlchemy's asbool)
    uri = (parts.param("uri") or "").strip().lower() in ("true", "yes", "on", "y", "t", "1")
    if uri and parts.param("mode") == "memory":
        return None
    if uri and database.startswith("file:"):
        # pysqlite hands the database to SQLite as a URI: file:PATH, file:///PATH or
        # file://localhost/PATH, percent-decoded.
        path = database[5:].split("?", 1)[0].split("#", 1)[0]
        if path.startswith("//"):
            authority, _, rest = path[2:].partition("/")
            if authority not in ("", "localhost"):
                return None
            path = "/" + rest
        path = unquote(path)
        return None if path in _MEMORY else path
    return None if database in _MEMORY else database


def is_plain_sqlite(url: str) -> bool:
    """Whether ``url`` is ``sqlite:///PATH`` (or ``sqlite+pysqlite:///PATH``) with no query:
    a file opened with SQLite's defaults, which a bare ``sqlite3`` connection reads alike."""
    parts = parse_url(url)
    return (parts is not None and parts.drivername in ("sqlite", "sqlite+pysqlite")
            and not parts.query and sqlite_path(url) is not None)


def same_database(a: str, b: str) -> bool:
    """Whether URLs ``a`` and ``b`` name one database, whoever logs in: the same SQLite file,
    or the same PostgreSQL host, port and database (libpq's query parameters included)."""
    pa, pb = parse_url(a), parse_url(b)
    if pa is None or pb is None or pa.backend != pb.backend:
        return False
    if pa.backend == "sqlite":
        fa, fb = sqlite_path(a), sqlite_path(b)
        if fa is None or fb is None:
            return False
        try:
            return os.path.samefile(fa, fb)
        except OSError:
            return os.path.abspath(fa) == os.path.abspath(fb)
    return _server_database(pa) == _server_database(pb)


def _server_database(parts: Url) -> tuple[str, str, str]:
    host = parts.param("host") or parts.host or ""
    port = parts.param("port") or parts.port or "5432"
    database = parts.param("dbname") or parts.database or ""
    return host.lower(), port, database


def redact(url: str) -> str:
    """The URL with every password replaced by ``***``, for messages: the one after ``USER:``
    and the values of ``?password=`` and ``?sslpassword=``; as the user wrote it otherwise."""
    m = _URL_RE.match(url)
    if m is None:
        # Not a URL: show only the scheme, never what might be a password.
        return url.split("://", 1)[0] + "://***" if "://" in url else url
    out = url
    if m.group("query") is not None:
        start = m.start("query")
        pairs = []
        for pair in url[start:].split("&"):
            key, eq, _ = pair.partition("=")
            secret = eq and unquote_plus(key).lower() in SECRET_PARAMETERS
            pairs.append(f"{key}=***" if secret else pair)
        out = out[:start] + "&".join(pairs)
    if m.group("password") is not None:
        end = m.end("password")
        host = m.group("ipv4host") or ""
        if "@" in host:  # an '@' in the password, unquoted: the host starts after the last
            end = m.start("ipv4host") + host.rindex("@")
        out = out[:m.start("password")] + "***" + out[end:]
    return out


def shown_url(url: str) -> str:
    """The URL as messages print it: :func:`redact`, and without the ``+psycopg`` driver that
    :func:`normalize_url` adds, so that it reads as the user typed it (``postgresql://``)."""
    out = redact(url)
    prefix = "postgresql+psycopg://"
    return "postgresql://" + out[len(prefix):] if out.startswith(prefix) else out


def scrub(message: str, url: str | None) -> str:
    """``message`` with any password of ``url`` in it (as written or decoded) masked: a driver
    may echo the connection string it was given."""
    parts = parse_url(url) if url else None
    if parts is None:
        return message
    secrets = [parts.password] + [v for k, v in parts.query if k.lower() in SECRET_PARAMETERS]
    if parts.host and "@" in parts.host:  # the rest of a password with an unquoted '@' in it
        secrets.append(parts.host.rsplit("@", 1)[0] + "@")
    # Longest first, so that a password holding another's text is masked whole; a secret of
    # one or two characters is not looked for, or every message would be masked.
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        if len(secret) >= 3:
            for form in {secret, _quoted(secret)}:
                message = message.replace(form, "***")
    return message


def _quoted(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")
