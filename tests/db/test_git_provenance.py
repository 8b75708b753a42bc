"""Git provenance on revisions (issue 46, item 3): an import from a git work tree records the
commit, whether each file differed from it, and its path from the repository's root; history,
show and the ``set_revisions`` view show them. Outside git (no work tree, no ``git`` on PATH,
git failing or hanging) nothing is recorded and the import goes on. A message may span lines.
Real repositories made with the real ``git``, on both backends."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from registry_db.importing import git as git_reading
from tests.helpers import run_cli, write_set

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")

#: The user's own git settings (signing, hooks, templates) stay out of the repositories here.
_GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env={**os.environ, **_GIT_ENV}, check=True, timeout=30)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A work tree with ``acceptance/alpha.yaml`` and ``beta.yaml`` committed; git's search
    for a repository stops at ``tmp_path`` (whatever holds the test's folders)."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    root = tmp_path / "team"
    root.mkdir()
    git(root, "init", "-q")
    write_set(root / "acceptance", "alpha")
    write_set(root / "acceptance", "beta", model="model-b")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


def revisions(url: str, name: str | None = None) -> list[dict]:
    result = run_cli("-d", url, "history", *([name] if name else []), "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["revisions"]


def by_set(url: str) -> dict[tuple[str, int], dict]:
    return {(r["set"], r["revision"]): r for r in revisions(url)}


def test_an_import_from_a_commit_records_it(db_url, repo):
    head = git(repo, "rev-parse", "HEAD")
    assert run_cli("-d", db_url, "import", "-q", str(repo / "acceptance")).exit_code == 0
    found = by_set(db_url)
    assert found[("alpha", 1)]["git_commit"] == head and len(head) == 40
    assert found[("alpha", 1)]["git_dirty"] is False
    assert found[("alpha", 1)]["git_path"] == "acceptance/alpha.yaml"
    assert found[("beta", 1)]["git_path"] == "acceptance/beta.yaml"
    # show --json and the analysts' view carry the same.
    shown = json.loads(run_cli("-d", db_url, "show", "alpha", "--json").stdout)
    assert (shown["git_commit"], shown["git_dirty"], shown["git_path"]) == (
        head, False, "acceptance/alpha.yaml")
    text = run_cli("-d", db_url, "show", "alpha").stdout
    assert f"git:      {head}  acceptance/alpha.yaml" in text
    rows = json.loads(run_cli("-d", db_url, "query", "--json", "--trust-sql",
                              "SELECT profile_set, git_commit, git_dirty, git_path "
                              "FROM set_revisions ORDER BY profile_set").stdout)
    assert [(r["profile_set"], r["git_commit"], bool(r["git_dirty"]), r["git_path"])
            for r in rows] == [("alpha", head, False, "acceptance/alpha.yaml"),
                               ("beta", head, False, "acceptance/beta.yaml")]


def test_a_file_that_is_not_the_commits_is_dirty_the_others_are_not(db_url, repo):
    assert run_cli("-d", db_url, "import", "-q", str(repo / "acceptance")).exit_code == 0
    head = git(repo, "rev-parse", "HEAD")
    write_set(repo / "acceptance", "alpha", al=2.75)  # edited, not committed
    write_set(repo / "acceptance", "gamma", model="model-g")  # untracked
    (repo / ".gitignore").write_text("ignored/\n")
    write_set(repo / "ignored", "delta", model="model-d")  # ignored: not the commit's either
    result = run_cli("-d", db_url, "import", "-q", str(repo / "acceptance"),
                     str(repo / "ignored"))
    assert result.exit_code == 0, result.stderr
    found = by_set(db_url)
    assert (found[("alpha", 2)]["git_commit"], found[("alpha", 2)]["git_dirty"]) == (head, True)
    assert found[("gamma", 1)]["git_dirty"] is True
    assert (found[("delta", 1)]["git_dirty"], found[("delta", 1)]["git_path"]) == (
        True, "ignored/delta.yaml")
    # beta was unchanged: no new revision, and its first keeps its clean record.
    assert ("beta", 2) not in found and found[("beta", 1)]["git_dirty"] is False
    # Committed, the next change is clean again, at the new commit.
    git(repo, "add", "acceptance")
    git(repo, "commit", "-q", "-m", "second")
    write_set(repo / "acceptance", "beta", model="model-b", al=2.25)
    git(repo, "commit", "-q", "-am", "third")
    assert run_cli("-d", db_url, "import", "-q", str(repo / "acceptance")).exit_code == 0
    beta = by_set(db_url)[("beta", 2)]
    assert (beta["git_commit"], beta["git_dirty"]) == (git(repo, "rev-parse", "HEAD"), False)


def test_a_staged_change_is_dirty_and_odd_file_names_are_kept(db_url, repo):
    odd = repo / "acceptance" / "sub dir"
    path = write_set(odd, "ünï code", model="model-u")
    git(repo, "add", str(path))  # staged, not committed: not the commit's bytes
    result = run_cli("-d", db_url, "import", "-q", "-r", str(repo / "acceptance"))
    assert result.exit_code == 0, result.stderr
    found = by_set(db_url)[("ünï code", 1)]
    assert (found["git_path"], found["git_dirty"]) == ("acceptance/sub dir/ünï code.yaml", True)
    assert by_set(db_url)[("alpha", 1)]["git_dirty"] is False


def test_outside_git_nothing_is_recorded_and_nothing_fails(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    write_set(tmp_path / "plain", "alpha")
    result = run_cli("-d", db_url, "import", str(tmp_path / "plain"))
    assert result.exit_code == 0 and result.stderr.count("\n") == 1, result.stderr
    [r] = revisions(db_url)
    assert (r["git_commit"], r["git_dirty"], r["git_path"]) == (None, None, None)
    assert json.loads(run_cli("-d", db_url, "show", "alpha", "--json").stdout)[
        "git_commit"] is None
    assert "git:" not in run_cli("-d", db_url, "show", "alpha").stdout


def test_without_git_on_path_nothing_is_recorded(db_url, repo, tmp_path, monkeypatch):
    empty = tmp_path / "no-programs"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert run_cli("-d", db_url, "import", "-q", str(repo / "acceptance")).exit_code == 0
    assert {r["git_commit"] for r in revisions(db_url)} == {None}


def _fake_git(folder: Path, body: str) -> None:
    folder.mkdir()
    script = folder / "git"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)


@pytest.mark.parametrize("body", ["echo 'fatal: broken' >&2; exit 128",
                                  "exec sleep 30"], ids=["fails", "hangs"])
def test_a_git_that_fails_or_hangs_records_nothing(db_url, repo, tmp_path, monkeypatch, body):
    _fake_git(tmp_path / "bin", body)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(git_reading, "TIMEOUT", 0.5)
    result = run_cli("-d", db_url, "import", "-q", str(repo / "acceptance"))
    assert result.exit_code == 0, result.stderr
    assert {r["git_commit"] for r in revisions(db_url)} == {None}


def test_a_repository_without_a_commit_records_nothing(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    root = tmp_path / "new"
    root.mkdir()
    git(root, "init", "-q")
    write_set(root, "alpha")
    assert run_cli("-d", db_url, "import", "-q", str(root)).exit_code == 0
    assert revisions(db_url)[0]["git_commit"] is None


def test_git_runs_twice_per_import_not_per_file(repo, monkeypatch):
    calls = []
    real = subprocess.run

    def counting(args, *a, **kw):
        calls.append(args[3:5])
        return real(args, *a, **kw)

    for i in range(20):
        write_set(repo / "acceptance" / f"d{i % 3}", f"s{i}")
    files = sorted((repo / "acceptance").rglob("*.yaml"))
    monkeypatch.setattr(git_reading.subprocess, "run", counting)
    found = git_reading.origins(files)
    assert len(found) == len(files) == 22
    assert [c[0] for c in calls] == ["rev-parse", "--literal-pathspecs"]


def test_deletions_and_restores_record_no_provenance(db_url, repo):
    assert run_cli("-d", db_url, "import", "-q", str(repo / "acceptance")).exit_code == 0
    assert run_cli("-d", db_url, "delete", "alpha").exit_code == 0
    assert run_cli("-d", db_url, "restore", "alpha").exit_code == 0
    found = by_set(db_url)
    assert found[("alpha", 1)]["git_commit"] is not None
    # The restore's content is the history's, not the file's now.
    assert found[("alpha", 2)]["git_commit"] is None and found[("alpha", 3)]["git_commit"] is None


def test_a_message_may_span_lines_and_is_kept_whole(db_url, tmp_path):
    write_set(tmp_path / "plain", "alpha")
    message = "re-ran K=6..8\n\nOn the new image; see the PR.\r\nSigned-off-by: t\tz"
    result = run_cli("-d", db_url, "import", "-q", "-m", message, str(tmp_path / "plain"))
    assert result.exit_code == 0, result.stderr
    [r] = revisions(db_url)
    assert r["message"] == message.replace("\r\n", "\n")
    table = run_cli("-d", db_url, "history").stdout
    assert "re-ran K=6..8 …" in table and "Signed-off-by" not in table
    assert run_cli("-d", db_url, "history", "--csv").stdout.count("Signed-off-by: t\tz") == 1


def test_reading_git_never_writes_the_repository(db_url, repo):
    """``git status`` refreshes a stale index and writes it back, taking ``index.lock``, unless
    optional locks are off: an import must not race the user's own git command."""
    index = repo / ".git" / "index"
    before = index.read_bytes()
    for path in (repo / "acceptance").glob("*.yaml"):  # same bytes, new times: a stale index
        os.utime(path, (1_000_000_000, 1_000_000_000))
    assert run_cli("-d", db_url, "import", "-q", str(repo / "acceptance")).exit_code == 0
    assert by_set(db_url)[("alpha", 1)]["git_dirty"] is False
    assert index.read_bytes() == before
