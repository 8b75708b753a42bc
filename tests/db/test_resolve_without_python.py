"""docs/resolving.md, "Resolving without Python", runs as written: its ``psql`` call, its
``sqlite3`` recipe over the shipped ``registry_resolve.sql`` and its Go program (compiled and
run when ``go`` is installed; otherwise its statement through ``psql``) answer the seed's run as
``registry resolve --json`` does."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from importlib import resources

import pytest

from registry_db.importing import write as importer
from registry_db.resolve.statements import SQLITE_FILE
from tests.helpers import ROOT, SEED, run_cli

PAGE = (ROOT / "docs" / "resolving.md").read_text(encoding="utf-8")
#: The run every example asks, as `registry resolve` takes it.
ARGS = ("--model", "glm-5.3", "--method", "mtp", "--k", "3", "--thinking", "on",
        "--category", "coding", "--hardware", "h100")


def _block(name: str) -> str:
    found = re.search(rf"<!-- without-python: {name} -->\n```\w+\n(.*?)```", PAGE, re.S)
    assert found, name
    return found.group(1)


@pytest.fixture
def seeded(db_url, engine):
    importer.import_paths(engine, [SEED])
    result = run_cli("-d", db_url, "resolve", *ARGS, "--json")
    assert result.exit_code == 0, result.stderr
    return db_url, json.loads(result.stdout)


def _expected(answer: dict) -> list[str]:
    """What the examples print: outcome, reason, profile, AL and the rates."""
    return ["resolved", "", answer["profile"], repr(answer["acceptance_length"]),
            json.dumps(answer["per_position_rates"])]


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


@pytest.mark.only_backend("sqlite")
@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell")
def test_the_sqlite3_recipe(seeded, backend, tmp_path):
    url, answer = seeded
    path = url.removeprefix("sqlite:///")
    sql = resources.files("registry_db.resolve").joinpath(SQLITE_FILE)
    script = _block("sqlite3").replace("registry.db", path).replace(
        f".read {SQLITE_FILE}", f".read {sql}")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout
    row = dict(re.findall(r"^\s*(\w+) = (.*)$", out, re.M))
    assert [row["outcome"], row["reason"], row["profile"], row["acceptance_length"]] \
        == _expected(answer)[:4]
    assert json.loads(row["per_position_rates"]) == answer["per_position_rates"]
    assert row["hardware_mismatch"] == "1" and row["measured_on"] == "b300"


@pytest.mark.only_backend("postgresql")
@pytest.mark.skipif(shutil.which("psql") is None, reason="no psql")
def test_the_psql_call(seeded, backend):
    url, answer = seeded
    out = subprocess.run(["bash", "-c", _block("psql")], capture_output=True, text=True,
                         check=True, env={"PATH": "/usr/bin:/bin", "REGISTRY_PG_URL": _libpq(url)})
    outcome, reason, profile, al, rates = out.stdout.strip().split("|")
    assert [outcome, reason, profile, al] == _expected(answer)[:4]
    assert json.loads(rates) == answer["per_position_rates"]


@pytest.mark.only_backend("postgresql")
def test_the_go_program(seeded, backend, tmp_path):
    url, answer = seeded
    program = _block("go")
    if shutil.which("go") is not None:
        (tmp_path / "main.go").write_text(program, encoding="utf-8")
        for step in (["go", "mod", "init", "resolveexample"], ["go", "mod", "tidy"],
                     ["go", "build", "-o", "resolve", "."]):
            subprocess.run(step, cwd=tmp_path, check=True, capture_output=True)
        out = subprocess.run([str(tmp_path / "resolve")], capture_output=True, text=True,
                             check=True, env={"REGISTRY_PG_URL": _libpq(url)}).stdout
        outcome, *middle, al, rates = out.strip().split(" ", 4)
        assert outcome == "resolved" and float(al) == answer["acceptance_length"]
        return
    if shutil.which("psql") is None:
        pytest.skip("neither go nor psql is installed")
    # The program's own statement and arguments, through psql.
    statement = re.search(r"const resolve = `(.*?)`", program, re.S).group(1)
    values = re.search(r"db\.QueryRow\(resolve, (.*?)\)\.Scan", program, re.S).group(1)
    for i, value in enumerate(v.strip() for v in values.split(",")):
        literal = value.replace('"', "'")
        statement = statement.replace(f"${i + 1}", literal)
    out = subprocess.run(["psql", _libpq(url), "-Atc", statement], capture_output=True,
                         text=True, check=True).stdout
    outcome, reason, profile, al, rates = out.strip().split("|")
    assert [outcome, reason, profile, al] == _expected(answer)[:4]
    assert json.loads(rates) == answer["per_position_rates"]
