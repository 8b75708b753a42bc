"""Exit 130 only when nothing was committed (issue 28.2): real `registry` processes and a real
SIGINT, on SQLite and PostgreSQL, at moments the test controls rather than guesses.

* After the commit: the command's stdout is a pipe of one page that the test does not read, so
  the process blocks printing its report, after its transaction has committed (the test sees the
  rows in the database). SIGINT then lands while the process is writing that report; the command
  must finish it and exit 0, saying "interrupted after commit".
* Before the commit: the test holds the writers' lock (SQLite ``BEGIN IMMEDIATE``, PostgreSQL the
  advisory lock) so the command cannot commit; SIGINT once the process is waiting must stop it
  with exit 130 and nothing written, promptly even though its lock wait is long.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from registry_db.store.engine import WRITE_LOCK_KEY
from registry_db.store.urls import sqlite_path
from tests.helpers import run_cli, write_set

pytestmark = pytest.mark.slow

#: Sets per command: their report lines overflow a one-page pipe.
SETS = 60
#: A wait longer than any test: a command that ignores Ctrl-C while waiting would hang here.
LOCK_WAIT = "600"
#: How long the test waits for a process to reach the moment it needs (a hang guard only).
GUARD = 120.0


def _count(url: str, sql: str) -> int:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1)
                           if url.startswith("postgresql://") else url)
    try:
        with engine.connect() as conn:
            return conn.execute(text(sql)).scalar() or 0
    finally:
        engine.dispose()


def _wait_for(what: str, check) -> None:  # noqa: ANN001
    deadline = time.monotonic() + GUARD
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        time.sleep(0.05)


class Blocked:
    """``registry ARGS`` with stdout a one-page pipe nobody reads (yet), stderr a file."""

    def __init__(self, tmp_path: Path, *args: str):
        read, write = os.pipe()
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
        self.read = read
        self.err = tmp_path / "stderr.txt"
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "registry_db", *args], stdin=subprocess.DEVNULL,
                stdout=write, stderr=err,
                env={**os.environ, "REGISTRY_LOCK_TIMEOUT": LOCK_WAIT})
        os.close(write)

    def interrupt_and_finish(self) -> tuple[int, str, str]:
        """SIGINT, then read what it prints until it ends (killed past the guard)."""
        self.proc.send_signal(signal.SIGINT)
        chunks, deadline = [], time.monotonic() + GUARD
        try:
            while True:
                ready, _, _ = select.select([self.read], [], [], deadline - time.monotonic())
                if not ready:
                    raise AssertionError("the command did not end after SIGINT")
                data = os.read(self.read, 65536)
                if not data:
                    break
                chunks.append(data)
            code = self.proc.wait(max(deadline - time.monotonic(), 0.1))
        finally:
            os.close(self.read)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        return code, b"".join(chunks).decode(), self.err.read_text()


def _sets(tmp_path: Path) -> Path:
    folder = tmp_path / "a-folder-with-a-name-long-enough-to-fill-a-pipe-page-quickly"
    for i in range(SETS):
        write_set(folder, f"set-number-{i:03d}-with-a-long-name", 1, model=f"m{i}")
    return folder


def test_import_interrupted_after_its_commit_finishes_and_exits_0(db_url, tmp_path):
    cmd = Blocked(tmp_path, "-d", db_url, "import", str(_sets(tmp_path)))
    _wait_for("the import's commit", lambda: _count(
        db_url, "SELECT COUNT(*) FROM profile_sets") == SETS)
    code, out, err = cmd.interrupt_and_finish()
    assert code == 0, err
    assert len([ln for ln in out.splitlines() if ln.startswith("added ")]) == SETS
    assert "interrupted after commit" in err and "Traceback" not in err
    assert f"{SETS} set(s): {SETS} added" in err


def test_delete_interrupted_after_its_commit_finishes_and_exits_0(db_url, tmp_path):
    assert run_cli("-d", db_url, "import", str(_sets(tmp_path))).exit_code == 0
    names = [f"set-number-{i:03d}-with-a-long-name" for i in range(SETS)]
    cmd = Blocked(tmp_path, "-d", db_url, "delete", *names, "-m", "x" * 20)
    _wait_for("the deletion's commit", lambda: _count(
        db_url, "SELECT COUNT(*) FROM profile_sets") == 0)
    code, out, err = cmd.interrupt_and_finish()
    assert code == 0, err
    assert len([ln for ln in out.splitlines() if ln.startswith("deleted ")]) == SETS
    assert "interrupted after commit" in err


def _hold_the_writers_lock(url: str):
    """Hold the lock every registry writer takes; returns what releases it."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(sqlite_path(url), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        return conn.close
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    conn = engine.connect()
    conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": WRITE_LOCK_KEY})

    def release() -> None:
        conn.close()
        engine.dispose()

    return release


def _waiting(url: str, pid: int):  # noqa: ANN202
    """Whether process ``pid`` has reached the writers' lock (PostgreSQL: a backend waits for
    the advisory lock; SQLite: the process has the database file open, after its files are
    checked; from there to the commit it can only wait)."""
    if url.startswith("sqlite"):
        path = os.path.realpath(sqlite_path(url))

        def opened() -> bool:
            try:
                return any(os.path.realpath(os.path.join(f"/proc/{pid}/fd", fd)) == path
                           for fd in os.listdir(f"/proc/{pid}/fd"))
            except OSError:
                return False
        return opened
    # This test's database only: another worker's test may be waiting on its own lock.
    return lambda: _count(url, "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' "
                               "AND NOT granted AND database = (SELECT oid FROM pg_database "
                               "WHERE datname = current_database())") > 0


@pytest.mark.parametrize("command", ["import", "delete"])
def test_interrupted_before_its_commit_writes_nothing_and_exits_130(db_url, tmp_path, command):
    folder = _sets(tmp_path)
    if command == "delete":
        assert run_cli("-d", db_url, "import", str(folder)).exit_code == 0
        args = ["delete", *(f"set-number-{i:03d}-with-a-long-name" for i in range(SETS))]
    else:
        args = ["import", str(folder)]
    before = _count(db_url, "SELECT COUNT(*) FROM revisions")
    release = _hold_the_writers_lock(db_url)
    try:
        cmd = Blocked(tmp_path, "-d", db_url, *args)
        _wait_for("the command waiting for the lock", _waiting(db_url, cmd.proc.pid))
        code, out, err = cmd.interrupt_and_finish()
    finally:
        release()
    assert code == 130, err
    assert out == "" and "interrupted" in err and "after commit" not in err
    assert "Traceback" not in err
    assert _count(db_url, "SELECT COUNT(*) FROM revisions") == before


def test_ctrl_c_while_the_pool_closes_a_connection_is_raised_not_logged(db_url, caplog):
    """SQLAlchemy's pool logs "Exception closing connection" with a traceback when Ctrl-C lands
    in a connection's close, then re-raises the KeyboardInterrupt: the registry's engines
    drop that record (the command says "interrupted" once) and the interrupt still stops."""
    from registry_db.store.engine import make_engine

    engine = make_engine(db_url)
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))

    def interrupted(_dbapi_conn):  # noqa: ANN001
        raise KeyboardInterrupt

    engine.dialect.do_close = interrupted  # type: ignore[method-assign]
    caplog.set_level("DEBUG", logger="sqlalchemy.pool")
    with pytest.raises(KeyboardInterrupt):
        engine.dispose()
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    # Another failure there is still the pool's to log (and to swallow, as it does).
    engine = make_engine(db_url)
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))

    def broken(_dbapi_conn):  # noqa: ANN001
        raise OSError("the socket is gone")

    real_close = engine.dialect.do_close
    engine.dialect.do_close = broken  # type: ignore[method-assign]
    engine.dispose()
    assert any(r.getMessage().startswith("Exception closing connection")
               for r in caplog.records if r.exc_info)
    engine.dialect.do_close = real_close  # type: ignore[method-assign]
    engine.dispose()


def test_an_error_raised_while_handling_ctrl_c_is_the_interrupt():
    """Ctrl-C inside a library's cleanup can leave it failing on its own state (SQLAlchemy's
    ``assert not self.is_active`` when SIGINT lands as a connection's transaction closes, seen
    on the schema check of an import): before any commit that is still exit 130,
    "interrupted"; any other error is not hidden."""
    import click
    from click.testing import CliRunner

    from registry_db.cli.output import handle_errors

    @click.command()
    @click.argument("how")
    @handle_errors
    def cmd(how: str) -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            if how == "cleanup":
                raise AssertionError("a library's state after the interrupt")  # noqa: B904
        raise ValueError("not an interrupt")

    runner = CliRunner()
    got = runner.invoke(cmd, ["cleanup"])
    assert (got.exit_code, got.stderr) == (130, "interrupted\n")
    got = runner.invoke(cmd, ["other"])
    assert got.exit_code == 1 and isinstance(got.exception, ValueError)


#: ``registry ARGS`` with SIGINT sent to itself the moment the command's callback has returned
#: (its write committed, its report printed): the window between the command and the exit.
_SIGINT_AFTER_THE_COMMAND = """
import os, signal, sys
import click
invoke = click.Context.invoke
def then_sigint(self, callback, *args, **kwargs):
    out = invoke(self, callback, *args, **kwargs)
    if self.info_name == sys.argv[-2]:
        os.kill(os.getpid(), signal.SIGINT)
    return out
click.Context.invoke = then_sigint
from registry_db.cli import main
main(prog_name="registry")
"""


@pytest.mark.parametrize("command", ["delete", "import"])
def test_ctrl_c_after_the_command_returned_from_its_commit_exits_0(db_url, tmp_path, command):
    """A committed write's process is not killed (nor made exit 130) by a SIGINT while it
    returns and exits: it once died by SIGINT there, every row deleted."""
    write_set(tmp_path / "in", "kept", 1)
    if command == "delete":
        assert run_cli("-d", db_url, "import", str(tmp_path / "in")).exit_code == 0
    target = "kept" if command == "delete" else str(tmp_path / "in")
    done = subprocess.run([sys.executable, "-c", _SIGINT_AFTER_THE_COMMAND, "-d", db_url,
                           command, target], capture_output=True, text=True, timeout=GUARD,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    assert _count(db_url, "SELECT COUNT(*) FROM profile_sets") == (command == "import")
