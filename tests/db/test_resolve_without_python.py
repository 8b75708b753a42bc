"""docs/resolving.md, "Resolving without Python", runs as written: its ``psql`` call, its
``sqlite3`` recipe over the shipped ``registry_resolve.sql`` and its Go program (compiled and
run when ``go`` is installed; otherwise its statement through ``psql``) answer the seed's run as
``registry resolve --json`` does."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path

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


#: Where Debian's Go packages put their source (GOPATH mode: no module proxy needed).
DEBIAN_GOCODE = Path("/usr/share/gocode")
#: The driver the program imports, as Debian ships it there.
PGX = DEBIAN_GOCODE / "src" / "github.com" / "jackc" / "pgx" / "v4"


def _go_values(out: str) -> dict:
    """The Go program's JSON line, its rates' JSON text read as the list it holds."""
    row = json.loads(out)
    row["per_position_rates"] = json.loads(row["per_position_rates"])
    return row


def _as_resolve_json(answer: dict) -> dict:
    """``registry resolve --json``'s answer in the columns the Go program prints."""
    return {"outcome": "resolved", "reason": None, "profile": answer["profile"],
            "acceptance_length": answer["acceptance_length"],
            "acceptance_rate": answer["acceptance_rate"],
            "num_spec_tokens": answer["num_spec_tokens"],
            "per_position_rates": answer["per_position_rates"],
            "rates_derived": answer["rates_derived"], "profile_set": answer["profile_set"],
            "revision": answer["revision"], "source": answer["source"],
            "measured_on": answer["hardware_mismatch"]["measured_on"]}


def _run(step: list[str], **kwargs) -> str:
    done = subprocess.run(step, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(step)}: {done.stderr}"
    return done.stdout


def _go_build(program: str, tmp_path: Path) -> Path:
    """The program compiled: in GOPATH mode over Debian's packages when they hold the driver,
    else as a module (which needs the module proxy)."""
    env = dict(os.environ)
    if "HOME" not in env and "GOCACHE" not in env:
        env["GOCACHE"] = str(tmp_path / "gocache")
    binary = tmp_path / "resolve"
    if PGX.is_dir():
        src = tmp_path / "src" / "resolve"
        src.mkdir(parents=True)
        (src / "main.go").write_text(program, encoding="utf-8")
        env.update(GO111MODULE="off", GOPATH=f"{tmp_path}{os.pathsep}{DEBIAN_GOCODE}",
                   GOFLAGS="")
        _run(["go", "build", "-o", str(binary), "."], cwd=src, env=env)
        return binary
    (tmp_path / "main.go").write_text(program, encoding="utf-8")
    for step in (["go", "mod", "init", "resolve"], ["go", "mod", "tidy"],
                 ["go", "build", "-o", str(binary), "."]):
        _run(step, cwd=tmp_path, env=env)
    return binary


@pytest.mark.only_backend("postgresql")
def test_the_go_program(seeded, backend, tmp_path):
    url, answer = seeded
    program = _block("go")
    expected = _as_resolve_json(answer)
    if shutil.which("go") is not None:
        binary = _go_build(program, tmp_path)
        out = _run([str(binary)], env={"REGISTRY_PG_URL": _libpq(url)})
        assert _go_values(out) == expected
        return
    # CI installs Go (.ci/run): there the program itself must run, not the fallback below.
    assert os.environ.get("REGISTRY_TEST_REQUIRE_GO", "") not in ("1", "true", "yes"), \
        "REGISTRY_TEST_REQUIRE_GO is set but go is not installed"
    if shutil.which("psql") is None:
        pytest.skip("neither go nor psql is installed")
    # The program's own statement and arguments, through psql, as one JSON object.
    statement = re.search(r"const resolve = `(.*?)`", program, re.S).group(1)
    values = re.search(r"db\.QueryRow\(resolve, (.*?)\)\.Scan", program, re.S).group(1)
    for i, value in enumerate(v.strip() for v in values.split(",")):
        statement = statement.replace(f"${i + 1}", value.replace('"', "'"))
    out = _run(["psql", _libpq(url), "-Atc", f"SELECT row_to_json(x) FROM ({statement}) x"])
    assert _go_values(out) == expected
