"""PostgreSQL: readers read the schema writers write, whatever chose it (the URL's ``options`` or
``PGOPTIONS``).

A reader connects with the read-only default of every transaction; it must add it to the
``options`` the connection would have had, never replace them (an explicit ``options`` also makes
libpq ignore ``PGOPTIONS``). Two registries share one database here: ``public`` holds a set
named ``in-public``, the schema ``team_b`` one named ``in-team-b``; every read command, pointed
at ``team_b``, must name only ``in-team-b``.
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import text

from registry_db import store
from registry_db.importing import write as importer
from registry_db.store import pg_read, sqlite_read
from tests.helpers import run_cli, write_set

pytestmark = pytest.mark.only_backend("postgresql")

KEY = ["--model", "model-a", "--method", "mtp", "--k", "3", "--thinking", "on",
       "--category", "cat0"]

#: Every command that only reads, as its arguments after ``-d URL``.
READS = [
    ["resolve", *KEY],
    ["resolve", *KEY, "--json"],
    ["resolve", "--batch", "-"],
    ["list"],
    ["profiles"],
    ["show", "in-team-b"],
    ["history", "in-team-b"],
    ["history"],
    ["diff", "in-team-b", "--from", "1", "--to", "2"],
    ["conflicts"],
    ["coverage"],
    ["query", "--trust-sql", "SELECT name FROM profile_sets"],
    ["export", "in-team-b", "-o", "-"], ["show", "in-team-b", "--as-of", "2100-01-01"],
    ["resolve", *KEY, "--as-of", "2100-01-01"],
]
BATCH = ('{"model": "model-a", "method": "mtp", "k": 3, "thinking": "on", '
         '"category": "cat0"}\n')


@pytest.fixture
def two_schemas(_pg_head_url, tmp_path):
    """The database's ``public`` registry holds ``in-public``; ``team_b``'s holds ``in-team-b``
    (two revisions, AL 3.97 at the second); the URL with ``options`` naming team_b."""
    admin = store.make_engine(_pg_head_url)
    try:
        with admin.begin() as conn:
            conn.execute(text("CREATE SCHEMA team_b"))
    finally:
        admin.dispose()
    public = store.open_registry(_pg_head_url)
    try:
        importer.import_paths(public, [write_set(tmp_path / "a", "in-public", 2, al=3.0)])
    finally:
        public.dispose()
    url = _pg_head_url + ("&" if "?" in _pg_head_url else "?") + "options=-csearch_path%3Dteam_b"
    team = store.open_registry(url)
    try:
        importer.import_paths(team, [write_set(tmp_path / "b", "in-team-b", 2, al=3.5)])
        importer.import_paths(team, [write_set(tmp_path / "b", "in-team-b", 2, al=3.97)])
    finally:
        team.dispose()
    return _pg_head_url, url


def _reads(url: str, env: dict[str, str]) -> list[tuple[list[str], int, str]]:
    out = []
    for args in READS:
        result = run_cli("-d", url, *args, input=BATCH if "--batch" in args else None,
                         env=env)
        out.append((args, result.exit_code, result.stdout + result.stderr))
    return out


def _check(results) -> None:
    for args, code, output in results:
        assert code == 0, (args, output)
        # times (12:17:13.070371) may hold "3.0"; the public set's AL is what must not show
        shown = re.sub(r"\d\d:\d\d:\d\d(\.\d+)?", "TIME", output)
        assert "in-public" not in shown and "3.0" not in shown, (args, output)
    said = "".join(output for _, _, output in results)
    assert said.count("in-team-b") >= len(READS) - 3  # conflicts, coverage and diff need not
    assert "3.97" in said


@pytest.mark.parametrize("fast", [True, False], ids=["psycopg", "engine"])
def test_every_read_reads_the_schema_the_urls_options_name(two_schemas, fast):
    _, url = two_schemas
    env = {} if fast else {sqlite_read.NO_FAST_PATH_ENV: "1"}
    _check(_reads(url, env))


@pytest.mark.parametrize("fast", [True, False], ids=["psycopg", "engine"])
def test_every_read_reads_the_schema_pgoptions_names(two_schemas, fast):
    plain, _ = two_schemas
    env = {"PGOPTIONS": "-c search_path=team_b"}
    if not fast:
        env[sqlite_read.NO_FAST_PATH_ENV] = "1"
    _check(_reads(plain, env))


def test_a_reader_stays_read_only_with_options_of_its_own(two_schemas):
    """The read-only default comes last, so an ``options`` that turns it off loses."""
    _, url = two_schemas
    off = url.replace("options=", "options=-cdefault_transaction_read_only%3Doff%20")
    result = run_cli("-d", off, "query", "--trust-sql",
                     "SELECT current_setting('default_transaction_read_only')"
                     " || ' ' || current_setting('search_path') AS s")
    assert result.exit_code == 0, result.output + result.stderr
    assert "on team_b" in result.stdout
    reader = pg_read.open_readonly(off)
    assert reader is not None
    try:
        row = reader.conn.execute("SELECT current_setting('default_transaction_read_only'), "
                                  "current_setting('search_path')").fetchone()
    finally:
        reader.close()
    assert row == ("on", "team_b")
