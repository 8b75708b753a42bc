"""``registry validate``: exit codes, the FILE:LINE:COL: PATH: MESSAGE lines, the --json object,
and no traceback for any input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry_db.cli.group import main
from tests.helpers import run_cli

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data"
ALL_DATA = sorted((DATA / "valid").glob("*.y*ml")) + sorted((DATA / "invalid").glob("*.yaml"))
LINE_RE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<path>\S+): (?P<msg>.+)$")


def run(*args):
    return run_cli("validate", *args)


def test_the_seed_is_valid(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = run("seed/acceptance/")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr == "1 file(s), 1 set(s), 3 profile(s): valid\n"


def test_an_invalid_file_exits_1_with_located_lines(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = run("tests/data/invalid/al-out-of-range.yaml", "tests/data/invalid/rates-rise.yaml")
    assert result.exit_code == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines == [
        "tests/data/invalid/al-out-of-range.yaml:10:24: profiles[0].acceptance_length: "
        "acceptance_length 4.5 lies outside [1, 4] for K = 3; AL counts the bonus token, so it "
        "is at least 1 and at most K + 1",
        "tests/data/invalid/rates-rise.yaml:11:31: profiles[0].per_position_rates[1]: rate 0.6 "
        "at position 2 is above the 0.5 before it; rates never rise, since p_i is the chance "
        "that the first i drafts are all accepted",
        "2 error(s), 0 warning(s)",
    ]


def test_every_invalid_file_gives_contract_lines_and_no_traceback():
    result = run(DATA / "invalid")
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert lines[-1] == f"{len(lines) - 1} error(s), 0 warning(s)"
    assert all(LINE_RE.match(line) for line in lines[:-1]), lines


@pytest.mark.parametrize("path", ALL_DATA, ids=[p.name for p in ALL_DATA])
def test_no_traceback_for_any_data_file(path):
    result = run(path)
    assert result.exit_code == (0 if path.parent.name == "valid" else 1)
    # CliRunner swallows tracebacks: an unexpected exception shows up here instead.
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output


@pytest.mark.parametrize("data", [
    b"\xff\xfe\x00", b"[" * 10_000, b"a: &a [*a]", b"\x00", b"- " * 5000, b"",
])
def test_no_traceback_for_hostile_bytes(tmp_path, data):
    path = tmp_path / "hostile.yaml"
    path.write_bytes(data)
    result = run(path)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)
    assert LINE_RE.match(result.stderr.splitlines()[0])


def test_json_prints_the_contract_object():
    result = run(DATA / "invalid" / "bad-k.yaml", "--json")
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["valid"] is False and len(out["problems"]) == 1
    (problem,) = out["problems"]
    assert set(problem) == {"file", "line", "column", "path", "code", "severity", "message"}
    assert (problem["code"], problem["line"], problem["column"], problem["path"],
            problem["severity"]) == ("bad_k", 7, 22, "profiles[0].num_spec_tokens", "error")


def test_json_for_valid_files():
    result = run(DATA / "valid", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"valid": True, "problems": []}


def test_warnings_alone_exit_0(tmp_path):
    path = tmp_path / "renamed.yaml"
    path.write_bytes((DATA / "valid" / "assumed-no-provenance.yaml").read_bytes())
    result = run(path)
    assert result.exit_code == 0
    assert f"{path}:2:7: name: warning: set name 'assumed-no-provenance'" in result.stderr
    assert result.stderr.endswith("0 error(s), 1 warning(s)\n1 file(s), 1 set(s), "
                                  "1 profile(s): valid\n")
    out = json.loads(run(path, "--json").stdout)
    assert out["valid"] is True and out["problems"][0]["severity"] == "warning"


def test_a_missing_path_is_an_error_not_a_usage_error():
    result = run("no/such/file.yaml")
    assert result.exit_code == 1
    assert result.stderr.startswith("no/such/file.yaml: (document): no such file")


def test_no_path_is_a_usage_error():
    assert run().exit_code == 2


def test_help_ends_with_an_example():
    result = CliRunner().invoke(main, ["validate", "--help"])
    assert result.exit_code == 0
    assert "Example:\n      registry validate seed/acceptance/" in result.output


def test_python_dash_m_validates_the_seed_without_sqlalchemy():
    """The command runs as ``python -m registry_db`` and never imports SQLAlchemy."""
    code = ("import sys, runpy; sys.argv = ['registry', 'validate', 'seed/acceptance/'];\n"
            "try:\n    runpy.run_module('registry_db', run_name='__main__')\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "assert 'sqlalchemy' not in sys.modules, 'validate imported SQLAlchemy'\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "1 file(s), 1 set(s), 3 profile(s): valid\n"
    proc = subprocess.run([sys.executable, "-m", "registry_db", "validate", "seed/acceptance/"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
