"""The gate for pull requests: ``validate --strict``, the pre-commit hooks and ``--format
github`` annotations.

The hook runs through the real ``pre-commit`` package in a temporary git repository, with the
definition of ``.pre-commit-hooks.yaml`` at the repository root (as a ``repo: local`` hook whose
entry is this checkout's ``registry``, so that pre-commit need not build an environment). The
annotations follow GitHub's workflow commands as ``@actions/core`` writes them:
actions/toolkit, packages/core/src/command.ts (commit a944251692e50709e44d95e64d43c80236b9f6af),
``::error file=F,line=L,col=C::MESSAGE``, ``%``, CR and LF escaped in the message and also
``:`` and ``,`` in a property.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from registry_db.sources.profile_set import validate_paths
from tests.helpers import run_cli, set_yaml

ROOT = Path(__file__).resolve().parents[2]
#: GitHub's workflow command for an annotation, as command.ts builds it.
ANNOTATION_RE = re.compile(r"^::(error|warning)(?: ((?:[a-z]+=[^,:]*)(?:,[a-z]+=[^,:]*)*))?::"
                           r"[^\r\n]*$")


def other_keys(name: str) -> str:
    """A set whose profiles' keys no :func:`set_yaml` set of model-a holds."""
    return set_yaml(name, model="model-b")


# --- validate --strict ---------------------------------------------------------------------------

def test_strict_refuses_a_profile_key_two_sets_hold(tmp_path):
    (tmp_path / "a.yaml").write_text(set_yaml("a"))
    (tmp_path / "b.yaml").write_text(set_yaml("b"))
    assert run_cli("validate", tmp_path).exit_code == 0  # as import: it only warns
    strict = run_cli("validate", "--strict", tmp_path)
    assert strict.exit_code == 1
    assert f"{tmp_path / 'b.yaml'}:19:5: profiles[1]: profile model-a/mtp/k3/thinking-on/cat1 " \
           "is also held by set 'a'" in strict.stderr
    assert strict.stderr.endswith("3 error(s), 0 warning(s)\n")


def test_strict_reads_the_folder_of_a_given_file_and_reports_only_that_file(tmp_path):
    (tmp_path / "z-old.yaml").write_text(set_yaml("z-old"))
    (tmp_path / "broken.yaml").write_text("kind: [\n")  # not this change's doing
    new = tmp_path / "a-new.yaml"
    new.write_text(set_yaml("a-new"))
    _, alone = validate_paths([new])
    assert alone == []
    _, findings = validate_paths([new], strict=True)
    assert {(f.file, f.code, f.severity) for f in findings} == {
        (str(new), "shared_profile_key", "error")}
    new.write_text(other_keys("z-old"))  # a set name the folder declares already
    _, findings = validate_paths([new], strict=True)
    assert [(f.file, f.code) for f in findings if f.is_error] == [
        (str(new), "duplicate_set_name")]


def test_strict_passes_a_clean_change(tmp_path):
    (tmp_path / "old.yaml").write_text(set_yaml("old"))
    new = tmp_path / "new.yaml"
    new.write_text(other_keys("new"))
    result = run_cli("validate", "--strict", new)
    assert result.exit_code == 0, result.stderr
    assert "1 file(s), 1 set(s), 3 profile(s): valid" in result.stderr


# --- --format github -----------------------------------------------------------------------------

def test_validate_prints_github_annotations(tmp_path):
    (tmp_path / "a.yaml").write_text(set_yaml("a"))
    (tmp_path / "b.yaml").write_text(set_yaml("b").replace("acceptance_length: 2.5",
                                                           "acceptance_length: 9.5", 1))
    (tmp_path / "c.yaml").write_text(set_yaml("c"))
    result = run_cli("validate", "--strict", "--format", "github", tmp_path)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 4 and all(ANNOTATION_RE.match(line) for line in lines), lines
    b, c = tmp_path / "b.yaml", tmp_path / "c.yaml"
    assert lines[0].startswith(
        f"::error file={b},line=11,col=24,title=al_out_of_range::profiles[0].acceptance_length: "
        "acceptance_length 9.5 lies outside [1, 4] for K = 3")
    assert lines[1].startswith(
        f"::error file={c},line=6,col=5,title=shared_profile_key::profiles[0]: profile "
        "model-a/mtp/k3/thinking-on/cat0 is also held by set 'a'")
    assert result.stderr == "4 error(s), 0 warning(s)\n"


def test_annotation_escapes_as_actions_core_does():
    from registry_db.cli.output import annotation

    assert annotation("error", "50% off\nnext", file="a,b:c.yaml", line=3, col=0,
                      title="t") == "::error file=a%2Cb%3Ac.yaml,line=3,title=t::50%25 off%0Anext"
    assert annotation("warning", "plain") == "::warning::plain"


def test_json_and_github_together_are_a_usage_error(tmp_path):
    (tmp_path / "a.yaml").write_text(set_yaml("a"))
    assert run_cli("validate", "--json", "--format", "github", tmp_path).exit_code == 2


# --- the hook, through pre-commit ----------------------------------------------------------------

def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "PRE_COMMIT_HOME": str(repo.parent / "pre-commit-home")}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=check, text=True,
                          capture_output=True)


@pytest.fixture
def repo(tmp_path):
    """A git repository whose pre-commit config runs this checkout's ``registry-validate``."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    [hook] = [h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
              if h["id"] == "registry-validate"]
    registry = Path(sys.executable).with_name("registry")
    assert hook["entry"].startswith("registry ")
    local = {**hook, "language": "system",
             "entry": str(registry) + hook["entry"][len("registry"):]}
    repo = tmp_path / "team"
    (repo / "acceptance").mkdir(parents=True)
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(
        {"repos": [{"repo": "local", "hooks": [local]}]}))
    (repo / "acceptance" / "golden.yaml").write_text(set_yaml("golden"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")  # before the hook is installed
    subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=repo, check=True,
                   capture_output=True, env={**os.environ,
                                             "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")})
    return repo


def commit(repo: Path, name: str, text: str) -> subprocess.CompletedProcess:
    (repo / "acceptance" / name).write_text(text)
    git(repo, "add", "acceptance")
    return git(repo, "commit", "-m", f"add {name}", check=False)


@pytest.mark.slow
def test_the_hook_blocks_a_shared_profile_key(repo):
    done = commit(repo, "extra.yaml", set_yaml("extra"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "is also held by set 'golden'" in done.stdout + done.stderr
    assert git(repo, "rev-list", "--count", "HEAD").stdout.strip() == "1"


@pytest.mark.slow
def test_the_hook_blocks_a_duplicate_set_name(repo):
    done = commit(repo, "copy.yaml", other_keys("golden"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "set 'golden' is declared by both" in done.stdout + done.stderr


@pytest.mark.slow
def test_the_hook_passes_a_clean_commit(repo):
    done = commit(repo, "other.yaml", other_keys("other"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(repo, "rev-list", "--count", "HEAD").stdout.strip() == "2"
