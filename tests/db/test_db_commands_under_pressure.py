"""`registry db` under pressure: downgrades that would lose data (issue 27.10), migrations
waiting on locks (27.6), and alembic's own forms (`downgrade -1`, `heads`, `check`: 28.14)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from registry_db import history, store
from registry_db.importing import write as importer
from registry_db.store.engine import WRITE_LOCK_KEY
from tests.helpers import ROOT, dump, run_cli, write_set


def db(url: str, *args: str, env: dict[str, str] | None = None):
    return run_cli("-d", url, "db", *args, env=env)


def current(url: str) -> str | None:
    engine = store.make_engine(url)
    try:
        return store.current_revision(engine)
    finally:
        engine.dispose()


def snapshot(url: str) -> dict:
    engine = store.make_engine(url)
    try:
        return dump(engine)
    finally:
        engine.dispose()


@pytest.fixture
def registry(db_url, tmp_path):
    """A registry with a history: alpha at revision 3 (with a message), beta deleted, gamma at
    revision 1."""
    engine = store.open_registry(db_url)
    folder = tmp_path / "sets"
    importer.import_paths(engine, [write_set(folder, "alpha"), write_set(folder, "beta",
                                                                        model="b"),
                                   write_set(folder, "gamma", model="g")])
    importer.import_paths(engine, [write_set(folder, "alpha", al=2.75)])
    importer.import_paths(engine, [write_set(folder, "alpha", al=3.0)], message="third")
    history.delete_sets(engine, ["beta"])
    engine.dispose()
    return db_url


# --- 27.10: a downgrade that would lose data is refused unless --force --------------------------

def test_a_downgrade_that_would_lose_history_is_refused_naming_it(registry):
    before = snapshot(registry)
    result = db(registry, "downgrade", "0003")
    assert result.exit_code == 1, result.stderr
    for words in ("refused", "2 earlier revision(s) of 1 set(s)", "alpha at revision 3",
                  "1 deleted set(s)", "(beta)", "messages (-m) of 1", "--force",
                  "Nothing was changed"):
        assert words in result.stderr, (words, result.stderr)
    assert current(registry) == store.HEAD_REVISION
    assert snapshot(registry) == before


def test_downgrade_base_of_a_registry_with_data_is_refused(registry):
    result = db(registry, "downgrade", "base")
    assert result.exit_code == 1, result.stderr
    assert "2 set(s) with 6 profile(s)" in result.stderr and "alpha, gamma" in result.stderr
    assert current(registry) == store.HEAD_REVISION


def test_force_loses_it_and_says_what(registry):
    result = db(registry, "downgrade", "0003", "--force")
    assert result.exit_code == 0, result.stderr
    assert "lost (--force): 2 earlier revision(s)" in result.stderr
    assert current(registry) == "0003"
    assert db(registry, "downgrade", "base", "--force").exit_code == 0
    assert current(registry) is None


def test_a_downgrade_that_loses_nothing_needs_no_flag(db_url, tmp_path):
    """An empty registry, or one whose every set is at revision 1 with no message: 0004's
    downgrade keeps everything the upgrade brings back, and views hold no data."""
    assert db(db_url, "downgrade", "base").exit_code == 0  # empty
    assert db(db_url, "upgrade").exit_code == 0
    engine = store.open_registry(db_url)
    importer.import_paths(engine, [write_set(tmp_path, "alpha")])
    before = dump(engine)
    engine.dispose()
    result = db(db_url, "downgrade", "0002")
    assert result.exit_code == 0, result.stderr
    assert "lost" not in result.stderr
    assert db(db_url, "upgrade").exit_code == 0
    assert snapshot(db_url) == before  # the way back brings every row back


def test_the_library_downgrade_is_alembics_unless_told(registry):
    engine = store.make_engine(registry)
    try:
        from registry_db.errors import DataWouldBeLost

        with pytest.raises(DataWouldBeLost):
            store.downgrade(engine, "0003", refuse_loss=True)
        assert store.current_revision(engine) == store.HEAD_REVISION
        lost = store.downgrade(engine, "0003")
        assert any("earlier revision" in what for what in lost)
    finally:
        engine.dispose()


def test_every_migration_undone_is_asked_even_one_added_later(db_url, tmp_path, monkeypatch):
    """The machinery asks each module it undoes for ``would_lose`` (none is named in the code):
    a copy of the migrations whose 0003 (a view, losing nothing) says it would lose something
    refuses a downgrade through it, and not one that stops above it."""
    copy = tmp_path / "migrations"
    shutil.copytree(store.migrations_dir(), copy)
    path = next((copy / "versions").glob("0003_*.py"))
    path.write_text(path.read_text().replace(
        "    return []", "    return ['the test\\'s own rows']", 1))
    monkeypatch.setattr("registry_db.store.migrate.migrations_dir", lambda: str(copy))
    assert db(db_url, "downgrade", "0003").exit_code == 0  # undoes the later ones only
    result = db(db_url, "downgrade", "0002")
    assert result.exit_code == 1, result.stderr
    assert "the test's own rows (undoing 0003)" in result.stderr
    assert current(db_url) == "0003"


# --- 28.14: alembic's forms -----------------------------------------------------------------------

def test_downgrade_minus_one_needs_no_double_dash(db_url):
    known = [rev for rev, _, _ in reversed(store.revision_history())]  # oldest first
    result = db(db_url, "downgrade", "-1")
    assert result.exit_code == 0, result.stderr
    assert current(db_url) == known[-2]
    assert db(db_url, "downgrade", "-2").exit_code == 0
    assert current(db_url) == known[-4]
    too_far = db(db_url, "downgrade", f"-{len(known)}")
    assert too_far.exit_code == 1 and "the known revisions are" in too_far.stderr
    assert db(db_url, "downgrade", "--bogus").exit_code == 2


def test_db_heads_prints_the_head():
    result = run_cli("db", "heads")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{store.HEAD_REVISION} (head)\n"
    assert run_cli("db", "heads", "--json").stdout.split() == [
        "{", '"heads":', "[", f'"{store.HEAD_REVISION}"', "]", "}"]


def test_db_check_passes_at_the_head_and_names_a_difference(db_url):
    result = db(db_url, "check")
    assert result.exit_code == 0, result.stderr
    assert "No new upgrade operations detected" in result.stdout
    engine = store.make_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE INDEX ix_by_hand ON profiles (method)"))
    engine.dispose()
    result = db(db_url, "check")
    assert result.exit_code == 1, result.stdout
    assert "remove_index" in result.stderr and "ix_by_hand" in result.stderr
    assert '"matches": false' in db(db_url, "check", "--json").stdout


def test_db_check_of_an_old_schema_names_the_upgrade(db_url):
    assert db(db_url, "downgrade", "0003").exit_code == 0
    result = db(db_url, "check")
    assert result.exit_code == 3 and "registry db upgrade" in result.stderr


# --- 27.6: a migration's lock waits are bounded ---------------------------------------------------

def _migrate_in_process(url: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    # Bounded, not measured: unbounded, the migration waits for the held lock forever.
    return subprocess.run([sys.executable, "-m", "registry_db", "-d", url, "db", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**env, "REGISTRY_LOCK_TIMEOUT": "1"})


@pytest.mark.only_backend("postgresql")
@pytest.mark.parametrize("step", [["upgrade"], ["downgrade", "0003"]])
def test_a_migration_behind_the_writers_lock_gives_up_at_the_timeout(backend, db_url, step):
    if step == ["upgrade"]:
        assert db(db_url, "downgrade", "0003").exit_code == 0
    engine = store.make_engine(db_url)
    try:
        with engine.connect() as holder:
            holder.begin()
            holder.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": WRITE_LOCK_KEY})
            result = _migrate_in_process(db_url, *step)
            pid = holder.execute(text("SELECT pg_backend_pid()")).scalar()
            holder.rollback()
    finally:
        engine.dispose()
    assert result.returncode == 3, result.stderr
    assert "locked" in result.stderr and "REGISTRY_LOCK_TIMEOUT" in result.stderr
    assert f"held by backend {pid}" in result.stderr


@pytest.mark.only_backend("postgresql")
def test_a_migration_behind_a_readers_table_lock_gives_up_at_the_timeout(backend, db_url):
    """A reader's long query holds ACCESS SHARE on profile_sets; the downgrade of 0004 drops a
    column there and waits for it, and every resolution would queue behind the migration."""
    engine = store.make_engine(db_url)
    try:
        with engine.connect() as reader:
            reader.begin()
            reader.execute(text("SELECT COUNT(*) FROM profile_sets")).scalar()
            result = _migrate_in_process(db_url, "downgrade", "0003")
            reader.rollback()
    finally:
        engine.dispose()
    assert result.returncode == 3, result.stderr
    assert "locked" in result.stderr
    assert current(db_url) == store.HEAD_REVISION


@pytest.mark.only_backend("sqlite")
def test_a_sqlite_migration_behind_a_writer_gives_up_at_the_timeout(backend, db_url):
    import sqlite3

    path = store.urls.sqlite_path(db_url)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = _migrate_in_process(db_url, "downgrade", "0003")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.returncode == 3, result.stderr
    assert "locked" in result.stderr
    assert Path(path).exists()
