"""A new user's PostgreSQL path (issue 28.13): the README's quick start, run as written against
the test server, ends in a first `registry query` that works; a reader made for another
database is told which database it lacks and the command that grants it."""

from __future__ import annotations

import re
import shlex

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from registry_db import store
from registry_db.store import roles
from tests.helpers import ROOT, pg_admin_url, run_cli, unique_name

pytestmark = pytest.mark.only_backend("postgresql")


def _quick_start() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### PostgreSQL\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [ln.split("  #", 1)[0].strip() for ln in block.splitlines() if ln.strip()]


@pytest.fixture
def scratch(pg_server):
    """A database name and a role name of this test's own, dropped afterwards (no server: the
    test is skipped with the reason, as every PostgreSQL test is)."""
    admin = pg_server.admin
    names = {"db": unique_name("registry_qs"), "role": unique_name("registry_reader_qs")}
    yield names
    with admin.connect() as conn:
        conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = :n AND pid <> pg_backend_pid()"), {"n": names["db"]})
        conn.execute(text(f'DROP DATABASE IF EXISTS "{names["db"]}"'))
        if conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"),
                        {"r": names["role"]}).scalar():
            conn.execute(text(f'DROP ROLE "{names["role"]}"'))


def test_the_readme_quick_start_ends_in_a_query_that_works(backend, scratch, monkeypatch):
    admin = make_url(pg_admin_url())
    server = f"{admin.host}:{admin.port or 5432}"
    monkeypatch.chdir(ROOT)
    env: dict[str, str] = {}
    ran = []
    for line in _quick_start():
        # The test server, and names of this test's own, for the README's.
        line = line.replace("127.0.0.1", server).replace("registry_reader", scratch["role"])
        line = re.sub(r"/registry\b", f"/{scratch['db']}", line)
        words = shlex.split(line)
        if words[:2] == ["pip", "install"]:
            continue
        if words[0] == "createdb":
            assert words[-1] == "registry"
            engine = create_engine(pg_admin_url(), isolation_level="AUTOCOMMIT")
            with engine.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{scratch["db"]}"'))
            engine.dispose()
            continue
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            env[name] = value.replace("postgres@", f"{admin.username}@", 1)
            continue
        assert words[0] == "registry", line
        result = run_cli(*words[1:], env=env)
        assert result.exit_code == 0, f"{line}: {result.output}"
        ran.append((words[1], result))
    assert [name for name, _ in ran][-1] == "query", "the quick start ends in a first query"
    assert "db" in [name for name, _ in ran] and "reader" in " ".join(
        " ".join(shlex.split(ln)) for ln in _quick_start())
    assert "deepseek-v4.1-flash" in ran[-1][1].stdout
    with create_engine(pg_admin_url().rsplit("/", 1)[0] + f"/{scratch['db']}").connect() as c:
        c.execute(text(f'DROP OWNED BY "{scratch["role"]}"'))
        c.commit()


def test_a_reader_of_another_database_is_told_which_database_and_the_grant(
        db_url, scratch):
    # A registry in a second database, and a reader made for the first one only.
    engine = create_engine(pg_admin_url(), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{scratch["db"]}"'))
    engine.dispose()
    other = db_url.rsplit("/", 1)[0] + f"/{scratch['db']}"
    first, second = store.make_engine(db_url), store.make_engine(other)
    try:
        store.upgrade(second)
        roles.create_reader(first, scratch["role"])
        reader_other = roles.reader_url(other, scratch["role"])
        result = run_cli("-d", reader_other, "query", "SELECT COUNT(*) FROM profiles")
        assert result.exit_code == 3, result.output
        assert "permission denied for table alembic_version" in result.stderr
        assert f"database '{scratch['db']}'" in result.stderr
        grant = re.search(r"`(registry -d \S+ db reader \S+)`", result.stderr)
        assert grant, result.stderr
        words = shlex.split(grant.group(1))
        assert words[-1] == scratch["role"] and words[2].endswith(f"/{scratch['db']}")
        # The command it names, run as the owner, is what the reader lacked.
        owner = make_url(other).username
        granted = run_cli(*[w.replace("OWNER", owner) for w in words[1:]])
        assert granted.exit_code == 0, granted.output
        assert run_cli("-d", reader_other, "query", "SELECT COUNT(*) AS n FROM profiles",
                       "--json").exit_code == 0
    finally:
        for eng in (first, second):
            with eng.connect() as conn:
                conn.execute(text(f'DROP OWNED BY "{scratch["role"]}"'))
                conn.commit()
            eng.dispose()
