"""Files and folders as a careless user leaves them: modes, read-only places, links, empty
version tables. Each test holds one rule the contract or the README states.

Permission tests run the CLI in a subprocess; as root (CI containers) that subprocess drops the
capabilities that bypass file modes (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so a mode means for
it what it means for any user.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat

import pytest

from registry_db import store
from registry_db.importing import write as importer
from registry_db.store.urls import sqlite_path
from tests.helpers import SEED, as_user, run_cli

SEED_FILE = SEED / "inferencex-golden-al.yaml"


# --- the schema's version table ------------------------------------------------------------------

def test_downgrade_base_leaves_a_database_every_command_treats_as_empty(db_url):
    assert run_cli("-d", db_url, "db", "downgrade", "base").exit_code == 0
    listed = run_cli("-d", db_url, "list")  # only reads: finds no registry, creates none (27.7)
    assert listed.exit_code == 3, listed.stderr
    assert "no registry here" in listed.stderr
    assert run_cli("-d", db_url, "import", str(SEED)).exit_code == 0
    assert run_cli("-d", db_url, "db", "current").stdout.startswith(store.HEAD_REVISION)


# --- export's file modes -------------------------------------------------------------------------



@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_export_mode_follows_the_umask(seeded, tmp_path, umask):
    old = os.umask(umask)
    try:
        assert run_cli("-d", seeded, "export", "-o", str(tmp_path)).exit_code == 0
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "inferencex-golden-al.yaml").stat().st_mode)
    assert mode == 0o666 & ~umask


def test_export_keeps_an_existing_files_mode(seeded, tmp_path):
    target = tmp_path / "inferencex-golden-al.yaml"
    target.write_text("old\n")
    target.chmod(0o640)
    # --force: the file's content differs, which export replaces only when told (issue 16).
    assert run_cli("-d", seeded, "export", "--force", "-o", str(tmp_path)).exit_code == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert target.read_text() != "old\n"


# --- read-only SQLite ----------------------------------------------------------------------------

@pytest.mark.only_backend("sqlite")
def test_import_into_a_read_only_file_is_a_database_problem(backend, seeded, tmp_path):
    other = tmp_path / "other.yaml"
    other.write_text(SEED_FILE.read_text().replace("name: inferencex-golden-al", "name: other"))
    path = sqlite_path(seeded)
    os.chmod(path, 0o444)
    try:
        result = as_user("-d", seeded, "import", str(other))
    finally:
        os.chmod(path, 0o644)
    assert result.returncode == 3, result.stderr
    assert "read-only" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.only_backend("sqlite")
def test_wal_database_in_a_read_only_folder_can_be_read(backend, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    url = f"sqlite:///{folder / 'registry.db'}"
    engine = store.open_registry(url)
    importer.import_paths(engine, [SEED])
    engine.dispose()
    raw = sqlite3.connect(folder / "registry.db")
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()
    assert not (folder / "registry.db-wal").exists()  # the last connection checkpointed
    folder.chmod(0o555)
    try:
        listed = as_user("-d", url, "list", "--csv")
        queried = as_user("-d", url, "query", "SELECT COUNT(*) AS n FROM profile_sets")
        shown = as_user("-d", url, "show", "inferencex-golden-al")
    finally:
        folder.chmod(0o755)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].startswith("inferencex-golden-al,")
    assert queried.returncode == 0, queried.stderr
    assert queried.stdout.split() == ["n", "-", "1"]
    assert shown.returncode == 0, shown.stderr


@pytest.mark.only_backend("sqlite")
@pytest.mark.parametrize("fast_path", [True, False], ids=["sqlite3", "engine"])
def test_every_read_command_works_on_a_wal_registry_in_a_read_only_folder(backend, tmp_path,
                                                                          fast_path):
    """Issue 27.8: `resolve`, `resolve --batch` and `db current` exited 3 there (the fast path
    opened mode=ro without immutable, then fell back to a writable open), as the README says
    every read command works; both ways into the file are held."""
    folder = tmp_path / "ro"
    folder.mkdir()
    url = f"sqlite:///{folder / 'registry.db'}"
    engine = store.open_registry(url)
    importer.import_paths(engine, [SEED])
    engine.dispose()
    before = sorted(p.name for p in folder.iterdir())
    env = {} if fast_path else {"REGISTRY_NO_FAST_PATH": "1"}
    run = ["--model", "glm-5.3", "--method", "mtp", "--k", "3", "--thinking", "on",
           "--category", "coding", "--json"]
    line = ('{"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", '
            '"category": "coding"}\n')
    folder.chmod(0o555)
    try:
        results = {
            "resolve": as_user("-d", url, "resolve", *run, env=env),
            "batch": as_user("-d", url, "resolve", "--batch", "-", env=env, input=line),
            "current": as_user("-d", url, "db", "current", "--json", env=env),
            "history": as_user("-d", url, "history", env=env),
            "profiles": as_user("-d", url, "profiles", env=env),
            "export": as_user("-d", url, "export", "inferencex-golden-al", "-o", "-", env=env),
        }
    finally:
        folder.chmod(0o755)
    for what, result in results.items():
        assert result.returncode == 0, (what, result.stderr)
    assert '"acceptance_length": 2.99' in results["resolve"].stdout
    assert '"acceptance_length": 2.99' in results["batch"].stdout
    assert '"is_head": true' in results["current"].stdout
    assert sorted(p.name for p in folder.iterdir()) == before


# --- folders -------------------------------------------------------------------------------------

def test_dangling_and_looping_links_are_reported(tmp_path):
    shutil.copy(SEED_FILE, tmp_path / "good.yaml")
    (tmp_path / "gone.yaml").symlink_to(tmp_path / "missing.yaml")
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    result = run_cli("validate", str(tmp_path))
    assert result.exit_code == 0, result.stderr  # warnings: the valid file still counts
    lines = result.stderr.splitlines()
    assert any(str(tmp_path / "gone.yaml") in line and "warning:" in line and "link" in line
               for line in lines), lines
    assert any(str(tmp_path / "loop.yaml") in line and "warning:" in line for line in lines)


def test_links_alone_are_not_an_empty_folder_in_silence(tmp_path):
    (tmp_path / "gone.yaml").symlink_to(tmp_path / "missing.yaml")
    result = run_cli("validate", str(tmp_path))
    assert result.exit_code == 1
    assert "gone.yaml" in result.stderr


@pytest.mark.parametrize("command", ["validate", "import"])
def test_unreadable_folder_is_a_finding(command, tmp_path, db_url):
    folder = tmp_path / "locked"
    folder.mkdir()
    shutil.copy(SEED_FILE, folder / "a.yaml")
    folder.chmod(0o000)
    try:
        result = as_user("-d", db_url, command, str(folder))
    finally:
        folder.chmod(0o755)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{folder}:" in result.stderr and "cannot read the folder" in result.stderr


# --- export to stdout ----------------------------------------------------------------------------

def test_export_to_stdout_of_several_sets_is_refused_and_one_set_round_trips(own_seeded, tmp_path):
    other = tmp_path / "other.yaml"
    other.write_text(SEED_FILE.read_text().replace("name: inferencex-golden-al", "name: other"))
    assert run_cli("-d", own_seeded, "import", str(other)).exit_code == 0
    for args in (["-o", "-"], ["inferencex-golden-al", "other", "-o", "-"]):
        result = run_cli("-d", own_seeded, "export", *args)
        assert result.exit_code == 1 and result.stdout == ""
        assert "-o - prints one set" in result.stderr and "-o DIR" in result.stderr
    one = run_cli("-d", own_seeded, "export", "other", "-o", "-")
    assert one.exit_code == 0
    (tmp_path / "back.yaml").write_text(one.stdout)
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert run_cli("-d", fresh, "import", str(tmp_path / "back.yaml")).exit_code == 0
