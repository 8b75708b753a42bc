"""Database access: URL rules, the schema check, SQLite connection settings, dead servers."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from registry_db import store
from registry_db.cli.group import main
from registry_db.errors import DatabaseLocked, DatabaseUnavailable, SchemaOutOfDate
from registry_db.store.urls import DEFAULT_URL, normalize_url, redact, resolve_url
from tests.helpers import ROOT

# --- URLs -----------------------------------------------------------------------------------------

def test_url_precedence():
    env = {"REGISTRY_DATABASE_URL": "sqlite:///from-env.db"}
    assert resolve_url("opt.db", env) == "sqlite:///opt.db"
    assert resolve_url(None, env) == "sqlite:///from-env.db"
    assert resolve_url(None, {}) == DEFAULT_URL == "sqlite:///registry.db"


@pytest.mark.parametrize("raw, url", [
    ("team.db", "sqlite:///team.db"),
    ("/srv/r.db", "sqlite:////srv/r.db"),
    ("postgres://u@h/db", "postgresql+psycopg://u@h/db"),
    ("postgresql://u@h:5433/db", "postgresql+psycopg://u@h:5433/db"),
    ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
    ("sqlite:///x.db", "sqlite:///x.db"),
])
def test_normalize_url(raw, url):
    assert normalize_url(raw) == url


def test_password_is_redacted():
    assert redact("postgresql+psycopg://bob:s3cr3t@h/db") == "postgresql+psycopg://bob:***@h/db"
    assert "s3cr3t" not in redact("postgres://bob:s3cr3t@h:5432/db")
    assert redact("sqlite:///x.db") == "sqlite:///x.db"


# --- the schema check -----------------------------------------------------------------------------

def test_empty_database_is_created_at_head(empty_url):
    engine = store.open_registry(empty_url)
    try:
        assert store.current_revision(engine) == store.HEAD_REVISION
    finally:
        engine.dispose()


def test_database_behind_head_is_refused(empty_url):
    engine = store.make_engine(empty_url)
    store.upgrade(engine, "0001")
    engine.dispose()
    with pytest.raises(SchemaOutOfDate) as exc:
        store.open_registry(empty_url)
    assert "0001" in str(exc.value) and store.HEAD_REVISION in str(exc.value)
    assert "registry db upgrade" in str(exc.value)
    assert exc.value.exit_code == 3
    result = CliRunner().invoke(main, ["-d", empty_url, "db", "current", "--json"])
    assert '"is_head": false' in result.output


def test_database_ahead_of_code_is_refused(empty_url):
    engine = store.make_engine(empty_url)
    store.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    engine.dispose()
    with pytest.raises(SchemaOutOfDate, match="newer than"):
        store.open_registry(empty_url)


def test_foreign_tables_without_revision_are_refused(empty_url):
    engine = store.make_engine(empty_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE something_else (id INTEGER)"))
    engine.dispose()
    with pytest.raises(SchemaOutOfDate, match="no registry schema"):
        store.open_registry(empty_url)


def test_script_head_matches_constant():
    assert store.script_head() == store.HEAD_REVISION


# --- SQLite connection settings -------------------------------------------------------------------

def test_sqlite_pragmas(tmp_path):
    engine = store.open_registry(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0
    finally:
        engine.dispose()


def test_sqlite_write_cache_is_the_writers_only(tmp_path):
    """A write transaction gets the larger page cache and temporary files in memory; the pooled
    connection, handed to a reader next, has its own settings again, after a commit and after a
    rollback."""
    from registry_db.store.engine import WRITE_CACHE_KIB

    engine = store.open_registry(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        def settings(conn) -> tuple:
            return tuple(conn.exec_driver_sql(f"PRAGMA {p}").scalar()
                         for p in ("cache_size", "temp_store"))

        with engine.connect() as conn:
            plain = settings(conn)
        assert plain != (-WRITE_CACHE_KIB, 2)
        assert store.run_write(engine, settings) == (-WRITE_CACHE_KIB, 2)  # 2: MEMORY
        with pytest.raises(RuntimeError), store.write_connection(engine):
            raise RuntimeError("rolled back")
        with engine.connect() as conn:
            assert settings(conn) == plain
        assert engine.pool.checkedin() == 1  # the same connection each time
    finally:
        engine.dispose()


def test_sqlite_writer_waits_then_gives_up(tmp_path, monkeypatch):
    """A second writer waits for the first (BEGIN IMMEDIATE), and past the wait: DatabaseLocked."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    store.open_registry(url).dispose()
    holder = store.make_engine(url)
    waiter = store.make_engine(url, timeout=0.3)
    holding, released = threading.Event(), threading.Event()

    def hold():
        with store.write_connection(holder) as conn:
            conn.execute(text("DELETE FROM profile_sets"))
            holding.set()
            released.wait(60)

    t = threading.Thread(target=hold)
    t.start()
    assert holding.wait(60)  # the holder is inside its write transaction
    monkeypatch.setenv("REGISTRY_LOCK_TIMEOUT", "0.5")
    try:
        with pytest.raises(DatabaseLocked, match="locked"):
            store.run_write(waiter, lambda conn: conn.execute(text("DELETE FROM profile_sets")))
    finally:
        released.set()
        t.join()
    # Once the holder is gone the same write goes through.
    store.run_write(waiter, lambda conn: conn.execute(text("DELETE FROM profile_sets")))
    holder.dispose()
    waiter.dispose()


# --- dead servers ---------------------------------------------------------------------------------

def test_unreachable_server_is_exit_3_one_line():
    url = "postgresql://postgres@127.0.0.1:1/none"
    with pytest.raises(DatabaseUnavailable):
        store.open_registry(normalize_url(url))
    proc = subprocess.run([sys.executable, "-m", "registry_db", "-d", url, "db", "current"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "cannot reach the database" in proc.stderr


def test_password_never_printed():
    url = "postgresql://postgres:hunter2@127.0.0.1:1/none"
    proc = subprocess.run([sys.executable, "-m", "registry_db", "-d", url, "db", "current"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    assert "hunter2" not in proc.stderr + proc.stdout


# --- packaging ------------------------------------------------------------------------------------

def test_help_for_every_command():
    """Every command has help, and every help text ends with an example."""
    runner = CliRunner()
    top = runner.invoke(main, ["--help"])
    assert top.exit_code == 0, top.output
    commands = [("db", "upgrade"), ("db", "downgrade"), ("db", "current")]
    from registry_db.cli.group import COMMANDS

    commands += [(name,) for name in COMMANDS if name != "db"]
    for cmd in commands:
        result = runner.invoke(main, [*cmd, "--help"])
        assert result.exit_code == 0, (cmd, result.output)
        assert "Example:" in result.output, cmd


def test_python_dash_m():
    proc = subprocess.run([sys.executable, "-m", "registry_db", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "Usage: registry" in proc.stdout


@pytest.mark.slow
def test_wheel_works_outside_the_checkout(tmp_path):
    """The wheel carries the migrations and the seed: `registry db upgrade` from any folder."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                    "-q", "-w", str(wheels), str(ROOT)], check=True, timeout=300,
                   capture_output=True)
    (wheel,) = wheels.glob("registry_db-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "registry_db/_migrations/env.py" in names
    assert "registry_db/_migrations/versions/0001_initial_schema.py" in names
    assert "registry_db/_seed/acceptance/inferencex-golden-al.yaml" in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("REGISTRY_DATABASE_URL", None)
    code = ("import registry_db, sys; from registry_db.cli import main; "
            "assert registry_db.__file__.startswith(sys.argv[1]), registry_db.__file__; "
            "main(['db', 'upgrade'], prog_name='registry')")
    proc = subprocess.run([sys.executable, "-c", code, str(site)], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (elsewhere / "registry.db").exists()
    proc = subprocess.run([sys.executable, "-c",
                           "from registry_db import store; print(store.seed_dir())", str(site)],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60)
    assert Path(proc.stdout.strip()).joinpath("acceptance/inferencex-golden-al.yaml").exists()
    assert proc.stdout.strip().startswith(str(site))


def test_concurrent_first_use_creates_the_schema_once(empty_url):
    """Four processes opening one empty database at once: all succeed, one schema."""
    code = "import sys; from registry_db import store; store.open_registry(sys.argv[1]).dispose()"
    procs = [subprocess.Popen([sys.executable, "-c", code, empty_url], stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
    engine = store.make_engine(empty_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM alembic_version")).scalar() == 1
            assert conn.execute(text("SELECT COUNT(*) FROM methods")).scalar() == 6
    finally:
        engine.dispose()


def test_db_commands(empty_url):
    """upgrade, current, downgrade and --sql through the command line, on both backends."""
    runner = CliRunner()

    def run(*args):
        return runner.invoke(main, ["-d", empty_url, "db", *args])

    assert "upgraded base -> 0001" in run("upgrade", "0001").stderr
    assert run("current").output.strip() == f"0001 (head is {store.HEAD_REVISION})"
    assert f"upgraded 0001 -> {store.HEAD_REVISION}" in run("upgrade").stderr
    assert "already at" in run("upgrade").stderr
    assert run("current", "--json").output.count('"is_head": true') == 1
    assert f"downgraded {store.HEAD_REVISION} -> base" in run("downgrade", "base").stderr
    assert "no schema" in run("current").output
    sql = run("upgrade", "--sql")
    assert sql.exit_code == 0 and "CREATE TABLE profiles" in sql.output
    engine = store.make_engine(empty_url)
    try:
        assert store.current_revision(engine) is None  # --sql touched nothing
    finally:
        engine.dispose()
