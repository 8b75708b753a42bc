"""``registry import`` on both backends: output, --json, --dry-run, refusals and exit codes."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry_db import store
from registry_db.cli.group import main
from tests.helpers import ROOT, SEED, SEED_FILE, dump, set_yaml, write_set
from tests.helpers import run_on as run


def test_seed_import_prints_one_line_per_set(db_url):
    first = run(db_url, "import", str(SEED))
    assert first.exit_code == 0, first.output
    assert first.stdout == (
        f"added  inferencex-golden-al  (3 profiles)  {SEED_FILE}\n")
    assert "1 added, 0 updated, 0 unchanged" in first.stderr
    again = run(db_url, "import", str(SEED))
    assert again.stdout.startswith("unchanged  inferencex-golden-al  (3 profiles)")


def test_json_is_the_contracts_object(db_url, tmp_path):
    write_set(tmp_path, "a-one", 1)
    result = run(db_url, "import", "--json", str(SEED), str(tmp_path))
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"sets": [
        {"name": "inferencex-golden-al", "file": str(SEED_FILE), "status": "added",
         "profiles": 3},
        {"name": "a-one", "file": str(tmp_path / "a-one.yaml"), "status": "added",
         "profiles": 1},
    ]}


def test_invalid_input_prints_every_problem_and_writes_nothing(db_url, tmp_path):
    run(db_url, "import", str(SEED))
    engine = store.open_registry(db_url)
    before = dump(engine)
    write_set(tmp_path, "good")
    (tmp_path / "bad.yaml").write_text(set_yaml("bad").replace("acceptance_length: 2.5",
                                                               "acceptance_length: 7"))
    (tmp_path / "worse.yaml").write_text("kind: AcceptanceProfileSet\nname: worse\n")
    result = run(db_url, "import", str(tmp_path))
    assert result.exit_code == 1
    assert f"{tmp_path / 'bad.yaml'}:" in result.stderr
    assert f"{tmp_path / 'worse.yaml'}:" in result.stderr
    assert result.stdout == ""
    assert dump(engine) == before
    as_json = run(db_url, "import", "--json", str(tmp_path))
    assert as_json.exit_code == 1
    doc = json.loads(as_json.stdout)
    assert doc["valid"] is False
    assert {p["file"] for p in doc["problems"]} >= {str(tmp_path / "bad.yaml"),
                                                    str(tmp_path / "worse.yaml")}
    assert dump(engine) == before
    engine.dispose()


def test_invalid_input_does_not_create_the_database(tmp_path):
    (tmp_path / "bad.yaml").write_text("kind: nope\n")
    target = tmp_path / "new.db"
    result = run(str(target), "import", str(tmp_path / "bad.yaml"))
    assert result.exit_code == 1
    assert not target.exists()


def test_missing_path_is_exit_1(db_url, tmp_path):
    result = run(db_url, "import", str(tmp_path / "nowhere"))
    assert result.exit_code == 1
    assert "nowhere" in result.stderr


def test_no_path_is_a_usage_error(db_url):
    assert run(db_url, "import").exit_code == 2


def test_two_files_one_name_names_both(db_url, tmp_path):
    write_set(tmp_path, "twin")
    (tmp_path / "other.yaml").write_text(set_yaml("twin"))
    result = run(db_url, "import", str(tmp_path))
    assert result.exit_code == 1
    assert "other.yaml" in result.stderr and "twin.yaml" in result.stderr
    engine = store.open_registry(db_url)
    assert store.list_sets(engine) == []
    engine.dispose()


def test_overlap_is_a_warning_naming_the_sets_and_key(db_url, tmp_path):
    write_set(tmp_path, "left", 2)
    write_set(tmp_path, "right", 1, first_category=1)
    result = run(db_url, "import", str(tmp_path))
    assert result.exit_code == 0
    [line] = [ln for ln in result.stderr.splitlines() if "warning:" in ln]
    assert "model-a/mtp/k3/thinking-on/cat1" in line
    assert "left" in line and "right" in line
    assert "warning:" not in result.stdout


def test_dry_run_reports_and_writes_nothing(db_url, tmp_path):
    run(db_url, "import", str(SEED))
    engine = store.open_registry(db_url)
    before = dump(engine)
    edited = tmp_path / SEED_FILE.name
    edited.write_text(SEED_FILE.read_text().replace("2.99", "2.98"))
    write_set(tmp_path, "fresh")
    result = run(db_url, "import", "--dry-run", "--json", str(tmp_path))
    assert result.exit_code == 0
    assert [(s["name"], s["status"]) for s in json.loads(result.stdout)["sets"]] == [
        ("fresh", "added"), ("inferencex-golden-al", "updated")]
    assert dump(engine) == before
    human = run(db_url, "import", "--dry-run", str(SEED))
    assert human.stdout.startswith("unchanged  inferencex-golden-al")
    assert "dry run: nothing written" in human.stderr
    engine.dispose()


def test_dry_run_does_not_create_an_sqlite_file(tmp_path):
    target = tmp_path / "never.db"
    result = run(str(target), "import", "--dry-run", str(SEED))
    assert result.exit_code == 0
    assert result.stdout.startswith("added  inferencex-golden-al")
    assert not target.exists()


def test_lock_held_past_the_wait_is_exit_3_and_writes_nothing(db_url):
    engine = store.open_registry(db_url)
    before = dump(engine)
    with store.write_connection(engine):
        result = run(db_url, "import", str(SEED), env={"REGISTRY_LOCK_TIMEOUT": "1"})
    assert result.exit_code == 3, result.output
    assert "locked" in result.stderr and "REGISTRY_LOCK_TIMEOUT" in result.stderr
    assert dump(engine) == before
    engine.dispose()


def test_no_progress_bar_when_stderr_is_not_a_terminal(db_url, tmp_path):
    for i in range(25):
        write_set(tmp_path, f"s{i:02d}", 1, model=f"m{i}")
    result = run(db_url, "import", str(tmp_path))
    assert result.exit_code == 0
    assert "writing" not in result.stderr and "validating" not in result.stderr


@pytest.mark.slow
def test_progress_bar_on_a_terminal(tmp_path):
    """With stderr on a terminal, a large import draws a bar there (stdout stays clean)."""
    for i in range(25):
        write_set(tmp_path / "in", f"s{i:02d}", 1, model=f"m{i}")
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    proc = subprocess.run(
        [sys.executable, "-m", "registry_db", "-d", str(tmp_path / "r.db"), "import",
         str(tmp_path / "in")],
        stdout=subprocess.PIPE, stderr=slave, cwd=ROOT, timeout=120)
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    err = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, err
    assert "validating" in err and "writing" in err
    assert b"writing" not in proc.stdout and b"validating" not in proc.stdout
    assert proc.stdout.decode().count("added") == 25


def test_every_command_has_an_example():
    runner = CliRunner()
    for cmd in ("import", "list", "show", "conflicts", "export"):
        result = runner.invoke(main, [cmd, "--help"])
        assert result.exit_code == 0
        assert "Example:" in result.output, cmd


def test_database_path_argument_is_a_real_file(tmp_path):
    """`-d FILE` creates the SQLite file at the head on first import."""
    target = tmp_path / "team.db"
    assert run(str(target), "import", str(SEED)).exit_code == 0
    assert Path(target).exists()
    engine = store.open_registry(f"sqlite:///{target}")
    assert [s.name for s in store.list_sets(engine)] == ["inferencex-golden-al"]
    engine.dispose()


@pytest.mark.slow
def test_readme_main_job_uses_the_embedded_default(tmp_path):
    """`registry import seed/acceptance/` with no -d and no REGISTRY_DATABASE_URL writes
    ./registry.db, and a second run reports the set unchanged."""
    env = {k: v for k, v in os.environ.items() if k != "REGISTRY_DATABASE_URL"}
    cmd = [sys.executable, "-m", "registry_db", "import", str(SEED) + "/"]
    first = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("added  inferencex-golden-al  (3 profiles)")
    assert (tmp_path / "registry.db").exists()
    second = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert second.stdout.startswith("unchanged  inferencex-golden-al")
