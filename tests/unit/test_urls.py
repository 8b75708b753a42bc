"""Database URLs: one parser that reads a URL as SQLAlchemy's ``make_url`` does, the URL rules
that make a bad URL a usage error (exit 2) rather than a database failure, and redaction of
every form a password takes (issues 23.4, 27.3, 27.20)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from registry_db.errors import UsageError
from registry_db.store import sqlite_read
from registry_db.store.urls import (
    check_url,
    explicit_url,
    parse_url,
    redact,
    same_database,
    scrub,
    sqlite_path,
)

URLS = [
    "sqlite:///registry.db", "sqlite:////srv/r.db", "sqlite://", "sqlite:///:memory:",
    "sqlite:///a%20b.db", "sqlite:///a%2520b.db", "sqlite:///x.db?timeout=5",
    "sqlite:///file:x.db?mode=ro&uri=true", "sqlite+pysqlite:///x.db", "sqlite:///caf%C3%A9.db",
    "sqlite:///we%23ird%3F.db", "sqlite:///file:a%2520b.db?uri=true&mode=ro",
    "postgresql+psycopg://u@h/db", "postgresql+psycopg://u:p@h:5433/db",
    "postgresql+psycopg://u:p%40ss@h/db", "postgresql+psycopg://u:p@ss@h/db",
    "postgresql+psycopg://u:p/ss@h/db", "postgresql+psycopg:///db?host=/tmp&port=5432",
    "postgresql+psycopg://[::1]:5432/db", "postgresql+psycopg://u@h:/db",
    "postgresql+psycopg://h?password=s&password=t", "postgresql+psycopg://%75ser@h/d%62",
    "mysql://u@h/db", "a+b+c://x", "postgresql+psycopg://u:@h/db", "postgresql+psycopg://@h/db",
    "postgresql+psycopg://u@h/db?sslmode=require&application_name=a%20b",
]


def _theirs(url: str) -> tuple | None:
    try:
        u = make_url(url)
    except (ArgumentError, ValueError):
        return None
    return (u.drivername, u.username, u.password, u.host, u.port, u.database,
            {k: list(v) if isinstance(v, tuple) else v for k, v in u.query.items()})


def _ours(url: str) -> tuple | None:
    parts = parse_url(url)
    if parts is None:
        return None
    try:
        port = None if parts.port is None else int(parts.port)
    except ValueError:
        return None  # make_url raises ValueError: int() of the port ("1 " is 1 to int())
    query: dict = {}
    for k, v in parts.query:
        query[k] = [*query[k], v] if isinstance(query.get(k), list) else (
            [query[k], v] if k in query else v)
    return (parts.drivername, parts.username, parts.password, parts.host,
            port, parts.database, query)


@pytest.mark.parametrize("url", URLS)
def test_the_parser_reads_a_url_as_make_url_does(url):
    assert _ours(url) == _theirs(url)


_PIECE = st.text(alphabet="ab:/@?&=%#[]+ .é1", max_size=8)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["sqlite", "postgresql+psycopg", "x"]), _PIECE, _PIECE, _PIECE, _PIECE)
def test_the_parser_agrees_with_make_url_on_generated_urls(scheme, user, host, db, query):
    url = f"{scheme}://{user}@{host}/{db}?{query}" if user else f"{scheme}://{host}/{db}{query}"
    assert _ours(url) == _theirs(url)


def test_the_resolve_fast_path_finds_the_file_the_engine_opens(tmp_path, monkeypatch):
    """One parser: ``sqlite_read.sqlite_file`` (no SQLAlchemy) and the engine name the same
    file for every URL the fast path takes, including percent-escapes SQLAlchemy decodes."""
    from registry_db.store.engine import make_engine

    monkeypatch.chdir(tmp_path)
    for i, name in enumerate(["plain.db", "a%20b.db", "caf%C3%A9.db", "we%23ird%3F.db",
                              "sub/../x.db"]):
        (tmp_path / "sub").mkdir(exist_ok=True)
        url = f"sqlite:///{name}"
        engine = make_engine(url)
        with engine.connect() as conn:
            conn.exec_driver_sql(f"CREATE TABLE t{i} (x)")
        engine.dispose()
        made = {p.name for p in tmp_path.iterdir() if p.suffix == ".db"}
        assert sqlite_path(url) in made or (tmp_path / sqlite_path(url)).exists(), (url, made)
        assert sqlite_read.sqlite_file(url) == sqlite_path(url)
        assert (tmp_path / sqlite_path(url)).is_file()


@pytest.mark.parametrize("url, path", [
    ("sqlite:///file:x.db?mode=ro&uri=true", "x.db"),
    ("sqlite:///file:a%2520b.db?uri=true", "a b.db"),
    ("sqlite:///file:///srv/r.db?uri=true", "/srv/r.db"),
    ("sqlite:///file:x.db", "file:x.db"),  # without uri=true, a file of that very name
    ("sqlite:///file::memory:?uri=true", None),
    ("sqlite:///file:x.db?mode=memory&uri=true", None),
    ("sqlite:///:memory:", None), ("sqlite://", None),
])
def test_sqlite_path_reads_uri_filenames_as_sqlite_does(url, path):
    assert sqlite_path(url) == path
    plain = "?" not in url and path is not None
    assert sqlite_read.sqlite_file(url) == (path if plain else None)


# --- the URL rules (issue 27.20: input problems are exit 1 or 2, never 3) -----------------------

@pytest.mark.parametrize("url, words", [
    ("postgresql+psycopg://u@h:x/db", "the port 'x' is not a number from 1 to 65535"),
    ("postgresql+psycopg://u@h:99999/db", "'99999'"),
    ("postgresql+psycopg://u@h:0/db", "'0'"),
    ("postgresql+psycopg:///db?host=h&port=abc", "port (?port=) 'abc'"),
    ("sqlite:///:memory:", "in-memory SQLite database"),
    ("sqlite://", "in-memory SQLite database"),
    ("sqlite:///" + "x" * 256, "longer than a file system holds"),
    ("sqlite:///" + "/x" * 2100, "longer than a file system holds"),
])
def test_a_bad_url_is_a_usage_error_that_says_why(url, words):
    with pytest.raises(UsageError) as caught:
        check_url(url)
    assert words in str(caught.value)
    assert "invalid literal" not in str(caught.value)


@pytest.mark.parametrize("env, option", [({"REGISTRY_DATABASE_URL": ""}, None),
                                         ({"REGISTRY_DATABASE_URL": "  "}, None),
                                         ({}, ""), ({}, " ")])
def test_a_blank_url_is_a_usage_error(env, option):
    with pytest.raises(UsageError, match="is blank"):
        explicit_url(option, env)


def test_an_explicit_url_is_told_from_the_default():
    assert explicit_url(None, {}) is None
    assert explicit_url("team.db", {}) == "sqlite:///team.db"
    assert explicit_url(None, {"REGISTRY_DATABASE_URL": "postgres://h/db"}) \
        == "postgresql+psycopg://h/db"


# --- passwords (issue 27.3) ---------------------------------------------------------------------

@pytest.mark.parametrize("url, shown", [
    ("postgresql+psycopg://bob:s3cr3t@h/db", "postgresql+psycopg://bob:***@h/db"),
    ("postgresql+psycopg:///db?host=h&password=s3cr3t", "postgresql+psycopg:///db?host=h&password=***"),
    ("postgresql+psycopg:///db?PASSWORD=s3cr3t&port=1", "postgresql+psycopg:///db?PASSWORD=***&port=1"),
    ("postgresql+psycopg:///db?pass%77ord=s3cr3t", "postgresql+psycopg:///db?pass%77ord=***"),
    ("postgresql+psycopg:///db?sslpassword=s3cr3t", "postgresql+psycopg:///db?sslpassword=***"),
    ("postgresql+psycopg://bob:s3@cr3t@h/db", "postgresql+psycopg://bob:***@h/db"),
    ("postgresql+psycopg://bob:s3/cr3t@h/db", "postgresql+psycopg://bob:***@h/db"),
    ("postgresql+psycopg://bob:s3cr3t@h:x/db", "postgresql+psycopg://bob:***@h:x/db"),
    ("sqlite:///:memory:", "sqlite:///:memory:"),
    ("sqlite:///x.db", "sqlite:///x.db"),
])
def test_every_password_form_is_redacted(url, shown):
    assert redact(url) == shown


def test_a_password_a_driver_echoes_is_scrubbed():
    url = "postgresql+psycopg://u:p@ss@h/db?password=other-secret"
    message = "failed to resolve host 'ss@h'; password other-secret, other%2Dsecret"
    assert "ss@" not in scrub(message, url) and "other-secret" not in scrub(message, url)


# --- which database a URL names (issue 28.1) ----------------------------------------------------

@pytest.mark.parametrize("a, b, same", [
    ("postgresql+psycopg://admin@h/registry", "postgresql+psycopg://reader@h/registry", True),
    ("postgresql+psycopg://admin@h/registry", "postgresql+psycopg://reader@h:5432/registry",
     True),
    ("postgresql+psycopg://admin@h/registry", "postgresql+psycopg://reader@h/other", False),
    ("postgresql+psycopg://admin@h/registry", "postgresql+psycopg://reader@g/registry", False),
    ("postgresql+psycopg://admin@h/registry", "postgresql+psycopg:///registry?host=h", True),
    ("sqlite:///team.db", "postgresql+psycopg://reader@h/registry", False),
    ("sqlite:///team.db", "sqlite:///./team.db", True),
])
def test_same_database_ignores_who_logs_in(a, b, same):
    assert same_database(a, b) is same
