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
import uuid

import click
import pytest
from click.testing import CliRunner

from registry_db.cli.group import COMMANDS, main
from registry_db.importing import write as importer
from tests.helpers import ROOT, SEED


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
           "seed", "x.yaml",
           # the third round's (issue 27): terminal escapes, a line break and a bidi override
           # where names enter and are printed, numbers past 32 and 64 bits, a timeout past
           # what PostgreSQL takes, a set name whose export's temporary file is too long
           "\x1b]0;owned\x07\x1b[31mred", "a\nb", "\u202eevil", "2147483648",
           "9223372036854775808", "3000000", "n" * 237]


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


#: Appended to every value the sweep gives `db reader` as a role name: roles belong to the
#: whole server, where other sessions run this sweep at the same time. (The values themselves
#: are the test: the suite's REGISTRY_TEST_PREFIX is not put before them.)
ROLE_SUFFIX = f"_{os.getpid()}_{uuid.uuid4().hex[:6]}"


def _role_names(values: list[str]) -> list[str]:
    from registry_db.store.roles import check_role_name

    out = []
    for value in values:
        try:
            out.append(check_role_name(value))
        except Exception:  # noqa: BLE001 - not a role name: the command refuses it
            pass
    return out


@pytest.fixture
def seeded_db(db_url, backend):
    """The seed imported, on the backend under test. On PostgreSQL `db reader NAME` makes
    login roles, which belong to the server rather than the database: the roles the sweep may
    have made (its names, with :data:`ROLE_SUFFIX`) are dropped afterwards, and no other."""
    from sqlalchemy import text

    from registry_db import store

    engine = store.open_registry(db_url)
    importer.import_paths(engine, [SEED])
    if backend != "postgresql":
        engine.dispose()
        yield db_url
        return
    try:
        yield db_url
    finally:
        made = _role_names([v + ROLE_SUFFIX for v in HOSTILE])
        with engine.connect() as conn:
            for role in conn.execute(text("SELECT rolname FROM pg_roles WHERE rolname = ANY(:n)"),
                                     {"n": made}).scalars():
                conn.execute(text(f'DROP OWNED BY "{role}"'))
                conn.execute(text(f'DROP ROLE "{role}"'))
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
        if path == ("db", "reader") and call and not call[0].startswith("-"):
            call = [call[0] + ROLE_SUFFIX, *call[1:]]  # a role of this test's own
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
    "postgresql:///db?host=127.0.0.1&port=abc&password=s3cret-pw", "sqlite:///:memory:",
    "sqlite://", "", "   ", "postgresql://u:s3cret-pw@127.0.0.1:99999/db",
    "postgresql://u:s3cret@pw@127.0.0.1:1/db", "postgresql:///db?host=127.0.0.1&port=1&"
    "password=s3cret-pw",
])
def test_no_hostile_database_url_gives_a_traceback(database, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in (["list"], ["query", "SELECT 1"], ["import", str(SEED)], ["db", "current"],
                    ["db", "check"], ["db", "downgrade", "-1"], ["delete", "x"],
                    ["resolve", "--model", "m", "--method", "x", "--k", "1"]):
        result = CliRunner().invoke(main, ["-d", database, *command])
        assert isinstance(result.exception, SystemExit), (command, result.exception)
        assert result.exit_code in (2, 3), (command, result.stderr)
        assert "Traceback" not in result.output + result.stderr
        assert "s3cret" not in result.output + result.stderr
        assert len(result.stderr.strip().splitlines()) <= 4, result.stderr  # usage: 4
    assert list(tmp_path.iterdir()) == []  # nothing created


@pytest.mark.parametrize("variable", ["REGISTRY_LOCK_TIMEOUT", "REGISTRY_QUERY_URL",
                                      "REGISTRY_DATABASE_URL"])
def test_no_hostile_environment_gives_a_traceback(variable, registry_db, tmp_path, monkeypatch):
    """The environment is input too (issue 27.19, 27.20, 28.1): each variable the registry
    reads, set to every hostile value, on the commands that read it."""
    monkeypatch.chdir(tmp_path)
    failures = []
    for value in HOSTILE:
        if "\x00" in value or "\udcff" in value or "\udce9" in value:
            continue  # an environment cannot hold these
        for command in (["list"], ["query", "SELECT 1"], ["import", str(SEED)],
                        ["delete", "nothing-here"], ["db", "upgrade"]):
            dash_d = [] if variable == "REGISTRY_DATABASE_URL" else ["-d", registry_db]
            result = CliRunner().invoke(main, [*dash_d, *command], env={variable: value})
            escaped = result.exception is not None and not isinstance(result.exception,
                                                                      SystemExit)
            if escaped or "Traceback" in result.output + result.stderr or \
                    result.exit_code not in (0, 1, 2, 3):
                failures.append((value, command, repr(result.exception), result.stderr[-300:]))
    assert not failures, failures


def test_an_unsupported_dialect_is_named():
    result = CliRunner().invoke(main, ["-d", "mysql://user@host/db", "list"])
    assert result.exit_code == 2
    for word in ("SQLite", "PostgreSQL", "'mysql'"):
        assert word in result.stderr


@pytest.mark.parametrize("step", [["upgrade", "0999"], ["downgrade", "0042"],
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
