"""Input problems are the user's, never the database's (issue 27.17, 27.19, 27.20, 27.3, 28.1).

A bad URL, a bad wait, a bad timeout or a number beyond what a column holds exits 1 or 2 with one
line saying what is wrong; only the database itself is exit 3. Passwords never show, in any
form. Output that cannot be written, SQL that is not UTF-8 and a closed stdin are one line too.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, text

from registry_db import store
from registry_db.importing import write as importer
from tests.helpers import ROOT, SEED, run_cli, unique_name

pg_only = pytest.mark.only_backend("postgresql")

COMMANDS = [["list"], ["query", "SELECT 1"], ["import", str(SEED)], ["db", "current"],
            ["resolve", "--model", "m", "--method", "x", "--k", "1", "--thinking", "on",
             "--category", "coding"], ["profiles"], ["delete", "x"]]


@pytest.fixture
def seeded(db_url, engine):
    importer.import_paths(engine, [SEED])
    return db_url


@pytest.fixture
def reader(seeded, backend):
    """A reader role made by `registry db reader` (PostgreSQL), its URL; dropped afterwards."""
    if backend != "postgresql":
        yield None
        return
    name = unique_name("registry_reader")
    result = run_cli("-d", seeded, "db", "reader", name)
    assert result.exit_code == 0, result.stderr
    yield result.stdout.strip()
    admin = create_engine(seeded, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP OWNED BY "{name}"'))
        conn.execute(text(f'DROP ROLE "{name}"'))
    admin.dispose()


def _one_line_error(result, code: int) -> None:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, result.stderr
    assert "invalid literal" not in result.stderr and "database error" not in result.stderr


# --- URLs (27.20, 27.3) ---------------------------------------------------------------------------

@pytest.mark.parametrize("url, words", [
    ("postgresql://x:notaport/db", "the port 'notaport' is not a number"),
    ("postgresql://u@127.0.0.1:99999/db", "'99999' is not a number from 1 to 65535"),
    ("postgresql:///db?host=127.0.0.1&port=abc", "(?port=) 'abc'"),
    ("sqlite:///:memory:", "in-memory SQLite database"),
    ("sqlite://", "in-memory SQLite database"),
], ids=["port-text", "port-range", "port-param", "memory", "memory-empty"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0] if c[0] != "db" else "db-current")
def test_a_bad_url_is_a_usage_error_on_every_command(url, words, command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli("-d", url, *command)
    _one_line_error(result, 2)
    assert words in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing created, here or anywhere


@pytest.mark.parametrize("value", ["", "   "])
def test_a_blank_database_url_is_a_usage_error(value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in COMMANDS:
        result = run_cli(*command, env={"REGISTRY_DATABASE_URL": value})
        _one_line_error(result, 2)
        assert "REGISTRY_DATABASE_URL is blank" in result.stderr
    assert run_cli("-d", value, "list").exit_code == 2


@pytest.mark.parametrize("url", [
    "postgresql:///registry?host=127.0.0.1&port=1&password=s3cret-pw",
    "postgresql:///registry?host=127.0.0.1&port=1&PASSWORD=s3cret-pw",
    "postgresql://u:s3cret-pw@127.0.0.1:1/registry",
    "postgresql://u:s3cret@pw@127.0.0.1:1/registry",
    "postgresql://u:s3cret-pw@127.0.0.1:x/registry",
])
def test_no_password_form_is_printed(url):
    for command in COMMANDS + [["db", "upgrade"], ["db", "reader", "r"]]:
        result = run_cli("-d", url, *command)
        assert result.exit_code in (2, 3), (command, result.stderr)
        for part in ("s3cret", "pw@127"):
            assert part not in result.stdout + result.stderr, (command, result.stderr)


# --- the writers' wait (27.19, 27.20) -------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "-1", "inf", "1e300", "3000000", "soon"])
def test_a_bad_lock_timeout_is_a_usage_error(value, db_url, tmp_path):
    for command in (["import", str(SEED)], ["delete", "inferencex-golden-al"],
                    ["db", "upgrade"]):
        result = run_cli("-d", db_url, *command, env={"REGISTRY_LOCK_TIMEOUT": value})
        _one_line_error(result, 2)
        assert f"REGISTRY_LOCK_TIMEOUT={value!r}" in result.stderr


def test_a_lock_timeout_of_zero_still_takes_the_lock(db_url):
    """0 means "do not wait" (SQLite's busy timeout), not PostgreSQL's "wait forever"."""
    result = run_cli("-d", db_url, "import", str(SEED), env={"REGISTRY_LOCK_TIMEOUT": "0"})
    assert result.exit_code == 0, result.stderr


# --- query --timeout (27.17) ----------------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e300", "3000000", "0", "-1"])
def test_a_query_timeout_outside_what_the_server_takes_is_a_usage_error(value, seeded, reader):
    login = ["--query-url", reader] if reader else []
    result = run_cli("-d", seeded, "query", *login, "--timeout", value, "SELECT 1 AS one")
    assert result.exit_code == 2, result.stderr
    assert "Traceback" not in result.stderr and "2147483" in result.stderr


def test_the_longest_timeout_the_server_takes_is_taken(seeded, reader):
    login = ["--query-url", reader] if reader else []
    result = run_cli("-d", seeded, "query", *login, "--timeout", "2147483", "SELECT 1 AS one")
    assert result.exit_code == 0, result.stderr


def test_the_library_refuses_a_nan_timeout(seeded, reader):
    from registry_db.errors import UsageError
    from registry_db.store.query import run_query

    with pytest.raises(UsageError, match="not a timeout"):
        run_query(reader or seeded, "SELECT 1", timeout=float("nan"))


# --- numbers beyond a column (27.20) --------------------------------------------------------------

@pytest.mark.parametrize("args", [["profiles", "--k", "2147483648"],
                                  ["profiles", "--k", "65"],
                                  ["diff", "inferencex-golden-al", "--to", "9223372036854775808"],
                                  ["diff", "inferencex-golden-al", "--from", "2147483648"]],
                         ids=["profiles-k-int32", "profiles-k-65", "diff-to", "diff-from"])
def test_a_number_beyond_what_the_registry_stores_is_a_usage_error(args, seeded):
    result = run_cli("-d", seeded, *args)
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert "database" not in result.stderr


# --- stdin and stdout (27.19) ---------------------------------------------------------------------

def _process(args: list[str], **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    return subprocess.run([sys.executable, "-m", "registry_db", *args], capture_output="stdout"
                          not in kw, cwd=ROOT, env=env, timeout=120, **kw)


@pytest.mark.only_backend("sqlite")
def test_sql_on_stdin_that_is_not_utf8_is_a_usage_error(backend, seeded):
    result = _process(["-d", seeded, "query", "-"], input=b"SELECT '\xff' AS x")
    assert result.returncode == 2, result.stderr
    assert b"Traceback" not in result.stderr
    assert b"not UTF-8 text (byte 0xff at offset 8)" in result.stderr


@pytest.mark.only_backend("sqlite")
def test_sql_on_stdin_may_start_with_a_bom(backend, seeded):
    result = _process(["-d", seeded, "query", "-"], input="\ufeffSELECT 1 AS one".encode())
    assert result.returncode == 0, result.stderr


@pytest.mark.only_backend("sqlite")
def test_query_from_a_closed_stdin_is_a_usage_error(backend, seeded):
    result = _process(["-d", seeded, "query", "-"], preexec_fn=lambda: os.close(0))
    assert result.returncode == 2, result.stderr
    assert b"Traceback" not in result.stderr and b"stdin is closed" in result.stderr


def test_sql_holding_a_nul_is_a_usage_error(seeded, reader):
    login = ["--query-url", reader] if reader else []
    result = run_cli("-d", seeded, "query", *login, "-", input="SELECT 1 AS x\0")
    assert result.exit_code == 2, result.stderr


@pytest.mark.parametrize("args", [
    ["--help"], ["list"], ["list", "--json"], ["query", "SELECT 1 AS one"], ["db", "history"],
    ["db", "current"], ["show", "inferencex-golden-al"], ["export", "inferencex-golden-al",
                                                           "-o", "-"],
    ["resolve", "--model", "glm-5.3", "--method", "mtp", "--k", "3", "--thinking", "on",
     "--category", "coding", "--json"],
], ids=lambda a: "-".join(a[:2]))
def test_a_full_stdout_is_one_line_not_a_traceback(args, seeded, reader, backend):
    if backend == "postgresql" and args[0] == "query":
        args = ["query", "--query-url", reader, *args[1:]]
    with open("/dev/full", "wb") as full:
        result = _process(["-d", seeded, *args], stdout=full, stderr=subprocess.PIPE)
    assert result.returncode == 1, result.stderr
    assert result.stderr.decode().splitlines() == [
        "Error: cannot write the output: No space left on device"], result.stderr


# --- REGISTRY_QUERY_URL names only the reader's login (28.1) --------------------------------------

@pg_only
def test_a_query_url_for_another_database_than_d_is_a_usage_error(backend, seeded, reader,
                                                                  tmp_path):
    other = tmp_path / "team.db"
    engine = store.open_registry(f"sqlite:///{other}")
    engine.dispose()
    for how in ({"env": {"REGISTRY_QUERY_URL": reader}}, {"flag": ["--query-url", reader]}):
        flag = how.get("flag", [])
        result = run_cli("-d", str(other), "query", *flag, "SELECT COUNT(*) AS n FROM profiles",
                         env=how.get("env"))
        assert result.exit_code == 2, result.stdout + result.stderr
        assert result.stdout == ""
        assert str(other) in result.stderr and reader.split("@", 1)[1] in result.stderr
        assert ("$REGISTRY_QUERY_URL" if "env" in how else "--query-url") in result.stderr
    # The same rule for $REGISTRY_DATABASE_URL, the other way to name the registry.
    result = run_cli("query", "SELECT 1", env={"REGISTRY_DATABASE_URL": str(other),
                                              "REGISTRY_QUERY_URL": reader})
    assert result.exit_code == 2, result.stderr


@pg_only
def test_d_naming_a_missing_file_is_exit_3_whatever_the_query_url(backend, seeded, reader,
                                                                 tmp_path):
    missing = tmp_path / "missing.db"
    result = run_cli("-d", str(missing), "query", "SELECT 1",
                     env={"REGISTRY_QUERY_URL": reader})
    assert result.exit_code == 3, result.stdout + result.stderr
    assert f"no registry at {missing}" in result.stderr and not missing.exists()


@pg_only
def test_a_query_url_for_the_registry_d_names_logs_in_as_the_reader(backend, seeded, reader):
    result = run_cli("-d", seeded, "query", "--json", "SELECT current_user AS u",
                     env={"REGISTRY_QUERY_URL": reader})
    assert result.exit_code == 0, result.stderr
    assert reader.split("://", 1)[1].split("@", 1)[0] in result.stdout
    # Without -d or $REGISTRY_DATABASE_URL, the query URL alone names the registry.
    alone = run_cli("query", "SELECT 1 AS one", env={"REGISTRY_QUERY_URL": reader})
    assert alone.exit_code == 0, alone.stderr
