"""The PostgreSQL reader's connection is the engine's: the same keywords reach ``psycopg.connect``
and an error names the URL as the engine's does (``store.pg_read``, no server needed)."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from registry_db.store import pg_read
from registry_db.store.engine import make_engine

TAKEN = [
    "postgresql+psycopg://postgres@127.0.0.1:5432/registry",
    "postgresql+psycopg://u:p%40ss%2Fw@db.example.com/reg",
    "postgresql+psycopg://u:pw@[::1]:6543/reg",
    "postgresql+psycopg://u@localhost/d%20b",
    "postgresql+psycopg:///registry",
    "postgresql+psycopg://u@/registry?host=/var/run/postgresql",
    "postgresql+psycopg://u@/registry?host=/tmp&port=05432",
    "postgresql+psycopg://u@h/registry?port=5433",
    "postgresql+psycopg://u@h:5432/registry?sslmode=require&application_name=a%20b",
    "postgresql+psycopg://u@h/registry?password=secret&sslpassword=x&sslmode=disable",
    "postgresql+psycopg://u@h/registry?connect_timeout=3&options=-c%20search_path%3Dx",
    "postgresql+psycopg://u@h/registry?b=2&a=1",
    "postgresql+psycopg://u:@h/registry",
]
DECLINED = [
    "postgresql://u@h/registry",               # SQLAlchemy's default driver, psycopg2
    "postgresql+psycopg2://u@h/registry",
    "postgresql+psycopg://u@/registry?host=h1,h2",
    "postgresql+psycopg://u@/registry?host=h1:5433",
    "postgresql+psycopg://u@/registry?host=h1&host=h2",
    "postgresql+psycopg://u@h/registry?port=1,2",
    "sqlite:///registry.db",
]


def _sqlalchemys(url: str) -> dict:
    """What a reader's engine has ``psycopg.connect`` called with: the dialect's arguments,
    then the engine's ``connect_args`` (``store.engine.make_engine``, from ``pg_read``'s)."""
    engine = make_engine(url, readonly=True)
    try:
        _, params = engine.dialect.create_connect_args(make_url(url))
    finally:
        engine.dispose()
    params.pop("context", None)  # SQLAlchemy's adapters map: no keyword of libpq's
    return {**params, "connect_timeout": pg_read.CONNECT_TIMEOUT,
            "options": pg_read.reader_options(params.get("options"))}


@pytest.mark.parametrize("url", TAKEN)
def test_the_keywords_are_sqlalchemys(url):
    ours = pg_read.connect_kwargs(url)
    assert ours is not None
    ours.update(connect_timeout=pg_read.CONNECT_TIMEOUT,
                options=pg_read.reader_options(ours.get("options")))
    assert ours == _sqlalchemys(url)


@pytest.mark.parametrize(("url_options", "env", "expected"), [
    (None, None, pg_read.READ_ONLY_OPTIONS),
    ("-csearch_path=team_b", None, "-csearch_path=team_b " + pg_read.READ_ONLY_OPTIONS),
    (None, "-c search_path=x", "-c search_path=x " + pg_read.READ_ONLY_OPTIONS),
    ("-csearch_path=a", "-c search_path=x", "-csearch_path=a " + pg_read.READ_ONLY_OPTIONS),
    ("", "-c search_path=x", pg_read.READ_ONLY_OPTIONS),  # libpq: an explicit "" wins too
])
def test_a_reader_adds_read_only_to_the_options_it_would_have_had(monkeypatch, url_options,
                                                                   env, expected):
    """The URL's options, else PGOPTIONS (libpq's order), then the read-only default last."""
    if env is None:
        monkeypatch.delenv("PGOPTIONS", raising=False)
    else:
        monkeypatch.setenv("PGOPTIONS", env)
    assert pg_read.reader_options(url_options) == expected


@pytest.mark.parametrize("url", DECLINED)
def test_what_it_does_not_rewrite_as_sqlalchemy_does_is_left_to_the_engine(url):
    assert pg_read.connect_kwargs(url) is None
    assert pg_read.open_readonly(url) is None


@pytest.mark.parametrize("url", TAKEN + DECLINED[:2])
def test_an_error_names_the_url_as_the_engines_does(url):
    assert pg_read.engine_url_text(url) == str(make_url(url))


def test_without_psycopg_the_engine_path_says_which_extra_installs_it():
    """psycopg is the postgres extra: without it the reader declines, and the engine's message
    (which names the extra) is the one a user reads."""
    import subprocess
    import sys

    code = ("import sys\nsys.modules['psycopg'] = None\n"
            "from registry_db.store import pg_read\n"
            "assert pg_read.open_readonly('postgresql+psycopg://u@127.0.0.1:1/r') is None\n"
            "from registry_db.cli import main\n"
            "main(['-d', 'postgresql://u@127.0.0.1:1/r', 'resolve', '--model', 'm', "
            "'--method', 'x', '--k', '3', '--thinking', 'on', '--category', 'c'], "
            "prog_name='registry')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert "pip install 'registry_db[postgres]'" in proc.stderr
    assert "Traceback" not in proc.stderr
