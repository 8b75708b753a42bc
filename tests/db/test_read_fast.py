"""The read commands both ways: the DB-API readers (``sqlite3``, psycopg; no SQLAlchemy) and the
engine path that ``REGISTRY_NO_FAST_PATH`` forces.

``list``, ``show``, ``conflicts``, ``profiles``, ``history``, ``coverage``, ``query``, ``db
current`` and ``db upgrade`` at the head must print the same bytes on stdout and stderr with the
same exit code both ways, on a registry with provenances, rates, caveats, counts and a conflict,
on both backends; the fast path must really have been taken; and run as the ``registry``
program, those commands must not import SQLAlchemy, Alembic or PyYAML (``db upgrade`` at the
head not even click).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from registry_db.store import pg_read, sqlite_read
from registry_db.store.pg_query import pyformat
from registry_db.store.role_powers import WRITE_POWERS_SQL
from registry_db.store.sqlite_query import placeholders, qmark
from tests.helpers import DATA, run_cli, seed_with_overlap

CORPUS = [
    ["list"], ["list", "--json"], ["list", "--csv"], ["list", "--nl"],
    ["conflicts"], ["conflicts", "--json"], ["conflicts", "--format", "github"],
    ["conflicts", "--check"],
    ["profiles"], ["profiles", "--json"], ["profiles", "--csv"], ["profiles", "--nl"],
    ["profiles", "--model", "model-a", "--k", "3"], ["profiles", "--set", "second"],
    ["profiles", "--set", "first", "--set", "counts", "--thinking", "on"],
    ["profiles", "--set", "nope"],                               # unknown set, names the known
    ["profiles", "--model", "modl-a"],                           # nothing matched: says why
    ["profiles", "--category", "coding", "--columns", "profile,set"],
    ["db", "current"], ["db", "current", "--json"],
    ["show", "inferencex-golden-al"], ["show", "inferencex-golden-al", "--json"],
    ["show", "counts"], ["show", "counts", "--json"], ["show", "second"],
    ["show", "all-optional-keys", "--json"], ["show", "nope"],
    ["history"], ["history", "--json"], ["history", "--csv"], ["history", "first"],
    ["history", "nope"],
    ["coverage"], ["coverage", "--json"], ["coverage", "--csv"], ["coverage", "--nl"],
    ["coverage", "--model", "model-a"], ["coverage", "--set", "first", "--set", "counts"],
    ["coverage", "--set", "nope"], ["coverage", "--model", "modl-a"],
    ["coverage", "--category", "coding", "--model", "deepseek-v4.1-flash"],
    ["query", "SELECT * FROM acceptance_profiles ORDER BY 1, 2, 3, 4, 5, 6"],
    ["query", "SELECT * FROM profile_sets ORDER BY name", "--json"],
    ["query", "SELECT * FROM profile_counts", "--csv"],
    ["query", "SELECT :a AS a, :b AS b, 'x\\:y' AS c", "-p", "a=1.5", "-p", "b=text"],
    ["query", "SELECT 1; SELECT 2"], ["query", "SELECT * FROM nope"],
    ["query", "DELETE FROM profile_sets"], ["query", "SELECT :a"],
    ["query", "SELECT 1", "-p", "a=1"], ["query", "COPY profiles TO STDOUT"],
    ["query", "SELECT '100%' AS p, count(*) AS n, avg(acceptance_length) AS mean "
              "FROM profiles"],
    ["query", "SELECT 1", "--timeout", "0"], ["query", "BEGIN"],
]
#: Refused before the database is opened (the parameters are checked first).
OPENS_NOTHING = (["query", "SELECT :a"], ["query", "SELECT 1", "-p", "a=1"],
                 ["query", "SELECT 1", "--timeout", "0"])


def _registry(url, tmp_path):
    from registry_db import store
    from registry_db.importing import write as importer

    seed_with_overlap(url, tmp_path)
    engine = store.open_registry(url)
    try:
        importer.import_paths(engine, [DATA / "valid" / "counts.yaml",
                                       DATA / "valid" / "all-optional-keys.yaml"])
    finally:
        engine.dispose()
    return url


@pytest.fixture
def varied(db_url, tmp_path):
    return _registry(db_url, tmp_path)


@pytest.fixture
def opened(monkeypatch):
    """Each answer of both DB-API readers' ``open_readonly``: True when it opened one."""
    calls: list[bool] = []
    for module in (sqlite_read, pg_read):
        def spy(url, _original=module.open_readonly):
            conn = _original(url)
            calls.append(conn is not None)
            return conn
        monkeypatch.setattr(module, "open_readonly", spy)
    return calls


def _query_args(backend, url, args):
    if args[0] == "query" and backend == "postgresql":
        return [*args, "--trust-sql"]  # the owner's URL: refused without it (both ways)
    return args


@pytest.mark.parametrize("args", CORPUS, ids=" ".join)
def test_each_read_command_prints_the_same_both_ways(backend, varied, opened, args):
    args = _query_args(backend, varied, args)
    path = sqlite_read.sqlite_file(varied)
    wal_files = [] if path is None else [path + "-wal", path + "-shm"]
    before = [os.path.exists(f) for f in wal_files]
    fast = run_cli("-d", varied, *args)
    # Read-only leaves nothing behind (a statement left open once kept the connection open).
    assert [os.path.exists(f) for f in wal_files] == before
    slow = run_cli("-d", varied, *args, env={sqlite_read.NO_FAST_PATH_ENV: "1"})
    assert (fast.exit_code, fast.stdout, fast.stderr) == (slow.exit_code, slow.stdout,
                                                         slow.stderr)
    assert fast.stdout or fast.stderr
    if [a for a in args if a != "--trust-sql"] not in OPENS_NOTHING:
        assert True in opened, "the DB-API reader was not taken"


def test_the_fast_readers_build_what_the_sqlalchemy_ones_build(backend, varied):
    """The store's listings themselves, object for object."""
    from registry_db import history, store
    from registry_db.analyze.coverage import read_coverage
    from registry_db.analyze.grid import Selection, read_coverage_dbapi
    from registry_db.cli.fast import read_cursor
    from registry_db.store import dbapi_read, read

    engine = store.open_registry(varied, readonly=True)
    try:
        with read_cursor(varied) as (cur, dialect, fallback):
            assert fallback is None
            assert dbapi_read.list_sets(cur, dialect) == read.list_sets(engine)
            assert dbapi_read.conflicts(cur, dialect) == read.conflicts(engine)
            assert dbapi_read.set_names(cur, dialect) == read.set_names(engine)
            for filters in ({}, {"model": "model-a"}, {"k": 3, "thinking": "on"},
                            {"sets": ["second", "first"]}, {"category": "nope"}):
                assert dbapi_read.list_profiles(cur, dialect, **filters) == \
                    read.list_profiles(engine, **filters)
            for name in read.set_names(engine):
                assert dbapi_read.load_set(cur, dialect, name) == read.load_set(engine, name)
                assert dbapi_read.set_summary(cur, dialect, name) == \
                    read.set_summary(engine, name)
                assert dbapi_read.history(cur, dialect, name) == history.history(engine, name)
            assert dbapi_read.history(cur, dialect) == history.history(engine)
            assert dbapi_read.load_set(cur, dialect, "nope") is None
            for selection in (Selection(), Selection(model="model-a"),
                              Selection(sets=("first", "counts"), thinking="on")):
                assert read_coverage_dbapi(cur, dialect, selection) == \
                    read_coverage(engine, selection)
            assert dbapi_read.current_revision(cur, dialect) == store.HEAD_REVISION
            assert dbapi_read.times_out_of_order(cur, dialect) is False
    finally:
        engine.dispose()


@pytest.mark.parametrize("sql", [
    "SELECT :a, :b_1, :a", "SELECT '\\:x', ':: y', 'a::b', :x::text", "SELECT :é, :a1b",
    "SELECT 1 WHERE x = :p AND y IN (:q, :r)", "SELECT '%', '%(a)s', ?", "no placeholders",
    ":start", "x\\:y:z", "SELECT :a:b, :c",
])
def test_placeholders_are_read_as_sqlalchemy_reads_them(sql):
    from sqlalchemy import create_engine, text
    from sqlalchemy.dialects.postgresql import psycopg

    compiled = text(sql).compile(dialect=create_engine("sqlite://").dialect)
    assert placeholders(sql) == set(text(sql).compile().params)
    assert qmark(sql) == (compiled.string, list(compiled.positiontup or []))
    assert pyformat(sql) == text(sql).compile(dialect=psycopg.dialect()).string


def test_the_role_question_compiles_as_sqlalchemy_compiles_it():
    from sqlalchemy import text
    from sqlalchemy.dialects.postgresql import psycopg

    assert pyformat(WRITE_POWERS_SQL) == \
        text(WRITE_POWERS_SQL).compile(dialect=psycopg.dialect()).string


# --- as the registry program: what is imported -------------------------------------------------

_IMPORTS = """
import runpy, sys
sys.argv = ["registry", *sys.argv[1:]]
try:
    from registry_db.cli import run
    run()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted(m for m in ("sqlalchemy", "alembic", "yaml", "click") if m in sys.modules)
print("IMPORTED", ",".join(heavy), file=sys.stderr)
sys.exit(code)
"""


def _program(url, *args, env=None):
    run_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-c", _IMPORTS, "-d", url, *args],
                          capture_output=True, text=True, env=run_env, timeout=120)
    *rest, last = proc.stderr.rstrip("\n").split("\n")
    assert last.startswith("IMPORTED"), proc.stderr
    return proc.returncode, proc.stdout, "\n".join(rest), last.split(" ", 1)[1].split(",")


@pytest.mark.parametrize("args", [
    ["list"], ["profiles", "--json"], ["conflicts"], ["db", "current"],
    ["query", "SELECT name FROM profile_sets ORDER BY name"], ["db", "upgrade"],
    ["show", "counts", "--json"], ["history"], ["coverage", "--json"],
], ids=" ".join)
def test_read_commands_import_no_sqlalchemy(backend, varied, args):
    args = _query_args(backend, varied, args)
    code, out, err, imported = _program(varied, *args)
    code_slow, out_slow, err_slow, slow_imports = _program(
        varied, *args, env={sqlite_read.NO_FAST_PATH_ENV: "1"})
    assert (code, out, err) == (code_slow, out_slow, err_slow)
    assert code == 0, err
    assert "sqlalchemy" not in imported and "alembic" not in imported
    assert "yaml" not in imported
    assert "sqlalchemy" in slow_imports  # the comparison ran the engine path
    if args == ["db", "upgrade"]:
        assert "click" not in imported
        assert err.endswith(": already at " + sqlite_read.HEAD_REVISION)


def test_db_upgrade_with_work_to_do_still_runs_alembic(tmp_path):
    """An old schema is upgraded by Alembic, as before: the early answer is for the head only."""
    from registry_db import store

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = store.make_engine(url)
    try:
        store.upgrade(engine, "0010")
    finally:
        engine.dispose()
    code, _out, err, imported = _program(url, "db", "upgrade")
    assert code == 0, err
    assert err.endswith("upgraded 0010 -> " + sqlite_read.HEAD_REVISION)
    assert "alembic" in imported
    assert json.loads(run_cli("-d", url, "db", "current", "--json").stdout)["is_head"]
