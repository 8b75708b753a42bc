"""A command that only reads, or is refused, never creates or migrates anything (issue 27.7).

On an empty database (no tables: a new PostgreSQL database, an empty SQLite file) every such
command says "no registry here" (exit 3) and leaves the database as empty as it found it; a
refused superuser `registry query` once created the 12 tables of the schema, and `query` on an
empty SQLite file wrote the whole schema into it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect

from registry_db import store
from tests.helpers import SEED, run_cli

RUN = ["--model", "glm-5.3", "--method", "mtp", "--k", "3", "--thinking", "on",
       "--category", "coding"]

#: Commands that only read, or that are refused on an empty database.
READERS = {
    "list": ["list"], "show": ["show", "x"], "profiles": ["profiles"],
    "conflicts": ["conflicts"], "export": ["export", "-o", "-"], "query": ["query", "SELECT 1"],
    "resolve": ["resolve", *RUN], "history": ["history"], "diff": ["diff", "x"],
    "coverage": ["coverage"], "delete": ["delete", "x"],
}


@pytest.fixture
def empty(empty_url, backend) -> str:
    """An empty database that exists: a 0-byte SQLite file, or a PostgreSQL one with no table."""
    path = store.urls.sqlite_path(empty_url) if backend == "sqlite" else None
    if path:
        Path(path).touch()
    return empty_url


def _relations(url: str) -> list[str]:
    engine = store.make_engine(url, readonly=True)
    try:
        with engine.connect() as conn:
            insp = inspect(conn)
            return sorted(insp.get_table_names() + insp.get_view_names())
    finally:
        engine.dispose()


def _untouched(url: str, backend: str) -> None:
    if backend == "sqlite":
        assert Path(store.urls.sqlite_path(url)).stat().st_size == 0
        assert not Path(store.urls.sqlite_path(url) + "-wal").exists()
    assert _relations(url) == []


@pytest.mark.parametrize("name", sorted(READERS))
def test_a_reading_command_on_an_empty_database_finds_no_registry(name, empty, backend):
    result = run_cli("-d", empty, *READERS[name])
    assert result.exit_code == 3, (result.stdout, result.stderr)
    assert "no registry here" in result.stderr
    _untouched(empty, backend)


def test_a_batch_on_an_empty_database_finds_no_registry(empty, backend):
    line = '{"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "c"}\n'
    result = run_cli("-d", empty, "resolve", "--batch", "-", input=line)
    assert result.exit_code == 3, (result.stdout, result.stderr)
    _untouched(empty, backend)


def test_a_dry_run_on_an_empty_database_creates_nothing(empty, backend):
    result = run_cli("-d", empty, "import", "--dry-run", str(SEED))
    assert result.exit_code == 0, result.stderr
    assert "added" in result.stdout and "nothing written" in result.stderr
    _untouched(empty, backend)


def test_db_current_on_an_empty_database_changes_nothing(empty, backend):
    result = run_cli("-d", empty, "db", "current", "--json")
    assert result.exit_code == 0, result.stderr
    assert '"revision": null' in result.stdout
    _untouched(empty, backend)


@pytest.mark.only_backend("postgresql")
def test_a_refused_superuser_query_creates_nothing(backend, empty):
    result = run_cli("-d", empty, "query", "SELECT 1")
    assert result.exit_code == 3, result.stderr
    _untouched(empty, backend)


def test_the_first_writer_creates_the_registry(empty):
    assert run_cli("-d", empty, "import", str(SEED)).exit_code == 0
    assert run_cli("-d", empty, "list").exit_code == 0
