"""No traceback, whatever the arguments: every command, walked from the lazy COMMANDS table (so a
new command is covered the day it is added), with hostile values for each of its arguments and
options. In process through click's runner (an exception other than SystemExit escaping is a
traceback the user would see), plus a few real subprocesses for what only argv can carry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from registry_db.cli.group import COMMANDS, main
from registry_db.store import write as importer
from tests.conftest import ROOT, SEED


def walk() -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command and subcommand the ``registry`` group offers."""
    out = []
    ctx = click.Context(main)
    for name in sorted(COMMANDS):
        cmd = main.get_command(ctx, name)
        assert cmd is not None, name
        if isinstance(cmd, click.Group):
            out.extend(((name, sub), cmd.commands[sub]) for sub in sorted(cmd.commands))
        else:
            out.append(((name,), cmd))
    return out


COMMAND_PATHS = walk()

#: Values a careless or hostile user passes. Nothing here may write outside the test's folder.
HOSTILE = ["", "-", "\udcff", "caf\udce9", "x\x00y", "x" * 5000, "-1", "0", "nan", "inf",
           "1e999", "99999999999999999999", "%s%n%x", "'; DROP TABLE profile_sets; --",
           "{\"model\": [[[[", "\u2028\u0085", "../up/../x", "/dev/null", ".hidden",
           "seed", "x.yaml"]


def _calls(cmd: click.Command) -> list[list[str]]:
    calls: list[list[str]] = [[], ["--help"]]
    for param in cmd.params:
        if isinstance(param, click.Argument):
            calls.extend([value] for value in HOSTILE)
        elif isinstance(param, click.Option):
            flag = max(param.opts, key=len)
            if param.is_flag:
                calls.append([flag])
            else:
                calls.extend([flag, value] for value in HOSTILE)
    return calls


@pytest.fixture
def registry_db(tmp_path):
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    from registry_db import store

    engine = store.open_registry(url)
    importer.import_paths(engine, [SEED])
    engine.dispose()
    return url


@pytest.fixture
def seeded_db(db_url, backend):
    """The seed imported, on the backend under test. On PostgreSQL `db reader NAME` makes
    login roles, which belong to the server rather than the database: every role the sweep
    made (named by one of its hostile values) is dropped afterwards."""
    from sqlalchemy import text

    from registry_db import store

    engine = store.open_registry(db_url)
    importer.import_paths(engine, [SEED])
    if backend != "postgresql":
        engine.dispose()
        yield db_url
        return
    roles = text("SELECT rolname FROM pg_roles")
    with engine.connect() as conn:
        before = set(conn.execute(roles).scalars())
    try:
        yield db_url
    finally:
        with engine.connect() as conn:
            # Only the sweep's own names: other test sessions on the server make roles too.
            for role in (set(conn.execute(roles).scalars()) - before) & set(HOSTILE):
                quoted = '"' + role.replace('"', '""') + '"'
                conn.execute(text(f"DROP OWNED BY {quoted}"))
                conn.execute(text(f"DROP ROLE {quoted}"))
            conn.commit()
        engine.dispose()


@pytest.mark.parametrize("path", [p for p, _ in COMMAND_PATHS], ids=" ".join)
def test_no_hostile_argument_gives_a_traceback(path, seeded_db, tmp_path, monkeypatch):
    """Every command, on both backends (PostgreSQL has its own paths: roles, the reader check,
    COPY, statement timeouts)."""
    registry_db = seeded_db
    (cmd,) = [c for p, c in COMMAND_PATHS if p == path]
    work = tmp_path / "work"
    work.mkdir()
    # A copy, never a link: `export -o seed` must not rewrite the checkout's seed.
    shutil.copytree(SEED, work / "seed")
    monkeypatch.chdir(work)
    monkeypatch.setenv("REGISTRY_LOCK_TIMEOUT", "1")
    # `registry serve` would serve until stopped: the sweep checks what it does with its
    # arguments, not the server (tests/web starts real ones).
    from registry_db.analyze import web_plugin

    monkeypatch.setattr(web_plugin, "serve", lambda *_args, **_kwargs: None)
    failures = []
    for call in _calls(cmd):
        args = ["-d", registry_db, *path, *call]
        result = CliRunner().invoke(main, args, input="")
        escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
        if escaped or "Traceback" in result.output + result.stderr:
            failures.append((call, repr(result.exception), result.stderr[-300:]))
    assert not failures, failures
    assert_seed_untouched()


def assert_seed_untouched() -> None:
    """The sweep's commands ran in a scratch folder: the checkout's seed is as git has it."""
    result = subprocess.run(["git", "status", "--porcelain", "--", str(SEED)], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode != 0 or result.stdout == "", result.stdout


@pytest.mark.parametrize("database", [
    "mysql://user@host/db", "postgresql://x:notaport/db", "\udcff.db", "oracle+cx://a/b",
    "sqlite:////nonexistent/folder/r.db", "postgresql://nobody@127.0.0.1:1/registry",
])
def test_no_hostile_database_url_gives_a_traceback(database):
    for command in (["list"], ["query", "SELECT 1"], ["import", str(SEED)], ["db", "current"],
                    ["resolve", "--model", "m", "--method", "x", "--k", "1"]):
        result = CliRunner().invoke(main, ["-d", database, *command])
        assert isinstance(result.exception, SystemExit), (command, result.exception)
        assert result.exit_code in (2, 3), (command, result.stderr)
        assert "Traceback" not in result.output + result.stderr
        assert len(result.stderr.strip().splitlines()) <= 4, result.stderr  # usage: 4


def test_an_unsupported_dialect_is_named():
    result = CliRunner().invoke(main, ["-d", "mysql://user@host/db", "list"])
    assert result.exit_code == 2
    for word in ("SQLite", "PostgreSQL", "'mysql'"):
        assert word in result.stderr


@pytest.mark.parametrize("step", [["upgrade", "0009"], ["downgrade", "0042"],
                                  ["upgrade", "--sql", "nope"]])
def test_an_unknown_revision_names_the_known_ones(step, registry_db):
    result = CliRunner().invoke(main, ["-d", registry_db, "db", *step])
    assert result.exit_code == 1, result.stderr
    assert "the known revisions are base, 0001, 0002" in result.stderr


# --- real processes: what only argv and a missing package can carry ----------------------------

def _run(argv: list[bytes | str], code: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "registry_db"]
    return subprocess.run(cmd + argv, capture_output=True, cwd=ROOT, env=env, timeout=120)


@pytest.mark.parametrize("argv", [
    [b"resolve", b"--model", b"\xff", b"--method", b"x", b"--k", b"1"],
    [b"resolve", b"--model", b"m", b"--method", b"x", b"--k", b"1", b"--set", b"\xfe\xff"],
    [b"show", b"\xff"],
    [b"query", b"SELECT '\xff'"],
    [b"export", b"\xff", b"-o", b"-"],
], ids=["resolve-model", "resolve-set", "show", "query", "export"])
def test_bytes_that_are_not_utf8_are_a_usage_error(argv, registry_db):
    result = _run([b"-d", registry_db.encode(), *argv])
    assert result.returncode == 2, result.stderr
    assert b"Traceback" not in result.stderr
    assert b"is not UTF-8 text" in result.stderr


def test_postgresql_without_its_driver_names_the_extra():
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from registry_db.cli.group import main\n"
            "main(sys.argv[1:], prog_name='registry')")
    result = _run(["-d", "postgresql://nobody@127.0.0.1:1/registry", "list"], code=code)
    assert result.returncode == 3, result.stderr
    assert b"Traceback" not in result.stderr
    assert b"pip install 'registry_db[postgres]'" in result.stderr
