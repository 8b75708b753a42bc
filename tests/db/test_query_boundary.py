"""`registry query` under hostile SQL: the login role is the boundary on PostgreSQL.

A superuser URL (the one the README's PostgreSQL set-up uses) is refused before any of the SQL
runs, with the way to a reader; a real reader role made by ``registry db reader`` cannot do what
a superuser could (run programs, read or write server files, write the registry, stop other
sessions), whatever the SQL. Also, on both backends: the statement timeout, COPY TO STDOUT,
streamed output equal to the buffered one.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest
from sqlalchemy import create_engine, text

from registry_db import store
from registry_db.errors import QueryInterrupted
from registry_db.importing import write as importer
from tests.helpers import SEED, run_cli, unique_name

pg_only = pytest.mark.only_backend("postgresql")


def counts(url: str) -> tuple[int, int]:
    engine = store.make_engine(url)
    try:
        with engine.connect() as conn:
            return (conn.execute(text("SELECT COUNT(*) FROM profile_sets")).scalar(),
                    conn.execute(text("SELECT COUNT(*) FROM profiles")).scalar())
    finally:
        engine.dispose()


@pytest.fixture
def seeded(db_url, engine):
    importer.import_paths(engine, [SEED])
    return db_url


@pytest.fixture
def reader(seeded, backend):
    """A reader role made by `registry db reader`, its URL; dropped afterwards."""
    name = unique_name("registry_reader")
    result = run_cli("-d", seeded, "db", "reader", name)
    assert result.exit_code == 0, result.stderr
    url = result.stdout.strip()
    yield url
    admin = create_engine(seeded, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP OWNED BY "{name}"'))
        conn.execute(text(f'DROP ROLE "{name}"'))
    admin.dispose()


#: What a superuser's "read-only" query could do (each ran, exit 0, before the boundary).
HOSTILE = {
    "copy_to_program": "COPY (SELECT 1) TO PROGRAM 'true'",
    "copy_to_file": "COPY (SELECT 1) TO '/tmp/registry_query_escape'",
    "read_file": "SELECT pg_read_file('/etc/passwd') AS x",
    # Others' sessions (an import's, the test's own): a role may end only its own.
    "terminate": "SELECT pg_terminate_backend(pid) AS x FROM pg_stat_activity "
                 "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
    "reload": "SELECT pg_reload_conf() AS x",
    "checkpoint": "CHECKPOINT",
    "lock": "LOCK TABLE profile_sets IN ACCESS EXCLUSIVE MODE",
    "set_role": "SELECT set_config('role', 'postgres', false) AS x",
    "delete": "DELETE FROM profile_sets",
    "write_via_function": "SELECT lo_import('/etc/passwd') AS x",
}


@pg_only
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_superuser_url_is_refused_before_running_anything(backend, seeded, name):
    before = counts(seeded)
    result = run_cli("-d", seeded, "query", HOSTILE[name])
    assert result.exit_code == 1, result.stdout
    assert "is a superuser" in result.stderr
    assert "registry db reader" in result.stderr and "REGISTRY_QUERY_URL" in result.stderr
    assert counts(seeded) == before
    assert not os.path.exists("/tmp/registry_query_escape")


@pg_only
def test_a_role_that_may_write_is_refused(backend, seeded, reader):
    admin = create_engine(seeded, isolation_level="AUTOCOMMIT")
    role = reader.split("://", 1)[1].split("@", 1)[0]
    with admin.connect() as conn:
        conn.execute(text(f'GRANT DELETE ON profile_rates TO "{role}"'))
    admin.dispose()
    result = run_cli("-d", seeded, "query", "--query-url", reader, "SELECT 1 AS one")
    assert result.exit_code == 1
    assert f"{role} may write profile_rates" in result.stderr


@pg_only
def test_a_role_that_may_become_a_writer_is_refused(backend, seeded, reader):
    # NOINHERIT hides the writer's privileges from has_table_privilege, not from SET ROLE.
    admin = create_engine(seeded, isolation_level="AUTOCOMMIT")
    role = reader.split("://", 1)[1].split("@", 1)[0]
    writer = role + "_w"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE ROLE "{writer}" NOLOGIN'))
        conn.execute(text(f'GRANT INSERT ON profile_sets TO "{writer}"'))
        conn.execute(text(f'ALTER ROLE "{role}" NOINHERIT'))
        conn.execute(text(f'GRANT "{writer}" TO "{role}"'))
    try:
        result = run_cli("-d", seeded, "query", "--query-url", reader, "SELECT 1 AS one")
        assert result.exit_code == 1
        assert f"{writer} may write profile_sets" in result.stderr
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'REVOKE "{writer}" FROM "{role}"'))
            conn.execute(text(f'DROP OWNED BY "{writer}"'))
            conn.execute(text(f'DROP ROLE "{writer}"'))
        admin.dispose()


@pg_only
@pytest.mark.parametrize("name", sorted(set(HOSTILE) - {"terminate"}))
def test_the_reader_role_cannot_do_any_of_it(backend, seeded, reader, name):
    before = counts(seeded)
    result = run_cli("-d", seeded, "query", "--query-url", reader, HOSTILE[name])
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith("Error: ")
    assert counts(seeded) == before
    assert not os.path.exists("/tmp/registry_query_escape")


@pg_only
def test_the_reader_cannot_end_another_session(backend, seeded, reader):
    engine = store.make_engine(seeded)
    try:
        with engine.connect() as other:
            pid = other.execute(text("SELECT pg_backend_pid()")).scalar()
            result = run_cli("-d", seeded, "query", "--query-url", reader,
                             "SELECT pg_terminate_backend(:pid) AS x", "-p", f"pid={pid}")
            assert result.exit_code == 1, (result.stdout, result.stderr)
            assert other.execute(text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()


@pg_only
def test_the_reader_reads_every_view_and_table(backend, seeded, reader, monkeypatch):
    monkeypatch.setenv("REGISTRY_QUERY_URL", reader)
    result = run_cli("-d", seeded, "query", "--json",
                     "SELECT COUNT(*) AS n FROM acceptance_profiles")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [{"n": counts(seeded)[1]}]
    engine = store.make_engine(seeded)
    with engine.connect() as conn:
        relations = conn.execute(text(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "AND relkind IN ('r', 'v')")).scalars().all()
    engine.dispose()
    for relation in relations:
        one = run_cli("-d", seeded, "query", f"SELECT COUNT(*) AS n FROM {relation}")
        assert one.exit_code == 0, (relation, one.stderr)


@pg_only
def test_db_reader_is_idempotent_and_refuses_a_writer_name(backend, seeded, reader):
    role = reader.split("://", 1)[1].split("@", 1)[0]
    again = run_cli("-d", seeded, "db", "reader", role, "--password", "p%s'w\"d")
    assert again.exit_code == 0, again.stderr
    assert again.stdout.strip() == reader
    assert "***" not in again.stdout and "p%s" not in again.stdout + again.stderr
    result = run_cli("-d", seeded, "db", "reader", "postgres")
    assert result.exit_code == 1
    assert "may write" in result.stderr


@pg_only
def test_trust_sql_runs_with_full_privileges_and_says_so(backend, seeded):
    result = run_cli("-d", seeded, "query", "--trust-sql", "SELECT current_user AS u")
    assert result.exit_code == 0, result.stderr
    assert "--trust-sql" in result.stderr and "superuser" in result.stderr
    assert result.stdout.split() == ["u", "--------", "postgres"]


# --- both backends ---------------------------------------------------------------------------

@pytest.fixture
def query_args(backend, seeded, request):
    if backend == "postgresql":
        return ["-d", seeded, "query", "--query-url", request.getfixturevalue("reader")]
    return ["-d", seeded, "query"]


RUNAWAY = ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
           "SELECT MAX(n) AS n FROM r")


def test_a_runaway_query_stops_at_the_timeout(query_args):
    result = run_cli(*query_args, "--timeout", "1", RUNAWAY)
    assert result.exit_code == 1
    assert "timeout" in result.stderr and "--timeout" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pg_only
def test_the_statement_timeout_is_a_few_minutes_unless_told(backend, seeded, reader):
    """The default bounds every query (issue 11: "a few minutes"); --timeout replaces it."""
    def timeout(*flags: str) -> str:
        result = run_cli("-d", seeded, "query", "--query-url", reader, "--json", *flags,
                         "SELECT current_setting('statement_timeout') AS t")
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)[0]["t"]

    assert timeout() == "5min"
    assert timeout("--timeout", "7") == "7s"


def test_copy_to_stdout_is_refused_cleanly(query_args):
    result = run_cli(*query_args, "COPY (SELECT 1) TO STDOUT")
    assert result.exit_code == 1
    assert "COPY" in result.stderr and "--csv" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


MANY = ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < {n}) "
        "SELECT n, n * 0.5 AS half, CAST(n AS DOUBLE PRECISION) / 3 AS third, 'x' || n AS label, "
        "NULL AS empty FROM r")


# The readable table aligns its columns on the first block of rows (so a table whose later rows
# are no wider is byte for byte what it was); JSON and CSV are the same bytes at any length. The
# thirds hold every rule of rounding for reading (issue 16): table and CSV round, JSON does not,
# the rows after the first block included.
@pytest.mark.parametrize("fmt, n", [("table", 900), ("table", 1500), ("json", 2500),
                                    ("csv", 2500)])
def test_streamed_output_equals_the_whole_result_rendered_at_once(query_args, seeded, fmt, n):
    import click
    from click.testing import CliRunner

    from registry_db.cli.output import emit_rows

    flags = {"table": [], "json": ["--json"], "csv": ["--csv"]}[fmt]
    result = run_cli(*query_args, *flags, MANY.format(n=n))
    assert result.exit_code == 0, result.stderr
    rows = [(i, i * 0.5, i / 3, f"x{i}", None) for i in range(1, n + 1)]

    @click.command()
    def render():
        emit_rows(["n", "half", "third", "label", "empty"], rows, as_json=fmt == "json",
                  as_csv=fmt == "csv")

    assert result.stdout == CliRunner().invoke(render).stdout


def _interrupt(args: list[str], ready, signum: int | None = None) -> tuple[int, str]:
    """Run ``registry ARGS`` in a real process, press Ctrl-C once (or send ``signum``) when
    ``ready()`` says the query is running, and return the exit code and stderr (bounded: a query
    that ignores the signal runs for ten minutes, and the test fails instead of waiting)."""
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "registry_db", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(1200):
            if ready(proc.pid) or proc.poll() is not None:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the query never started")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT if signum is None else signum)  # one press
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the query did not stop on Ctrl-C")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def _assert_interrupted(code: int, err: str) -> None:
    assert code == 130, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "interrupted" in err


@pytest.mark.only_backend("sqlite")
def test_ctrl_c_stops_a_runaway_sqlite_query(backend, seeded):
    """Inside sqlite3_step Python never sees SIGINT: without the progress handler's flag the
    recursive CTE runs until its timeout (here ten minutes), and this test fails."""
    from registry_db.store.urls import sqlite_path

    path = os.path.realpath(sqlite_path(seeded))

    def has_the_database_open(pid: int) -> bool:  # the query is near
        try:
            return any(os.path.realpath(f"/proc/{pid}/fd/{fd}") == path
                       for fd in os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            return False

    _assert_interrupted(*_interrupt(["-d", seeded, "query", "--timeout", "600", RUNAWAY],
                                    has_the_database_open))


@pg_only
def test_ctrl_c_stops_a_runaway_postgresql_query_on_the_server(backend, seeded, reader):
    """Ctrl-C must cancel the statement on the server, not only end the client: a backend whose
    client is gone keeps computing this aggregate (it sends nothing, so it never notices)
    until its statement timeout, here ten minutes."""
    role = reader.split("://", 1)[1].split("@", 1)[0]
    watcher = store.make_engine(seeded)

    def running() -> list[str]:
        with watcher.connect() as conn:
            return list(conn.execute(text(
                "SELECT query FROM pg_stat_activity WHERE usename = :r AND state = 'active'"),
                {"r": role}).scalars())

    try:
        code, err = _interrupt(["-d", seeded, "query", "--query-url", reader,
                                "--timeout", "600", RUNAWAY],
                               lambda _pid: RUNAWAY in running())
        _assert_interrupted(code, err)
        # The client waited for the cancellation before it exited: nothing is left running.
        assert running() == []
    finally:
        watcher.dispose()


def _assert_terminated(code: int, err: str) -> None:
    assert code == 143, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "terminated" in err


@pytest.mark.only_backend("sqlite")
def test_sigterm_stops_a_runaway_sqlite_query(backend, seeded):
    """SIGTERM as Ctrl-C (issue 27.18): the progress handler's flag, exit 143."""
    import signal

    from registry_db.store.urls import sqlite_path

    path = os.path.realpath(sqlite_path(seeded))

    def catches_sigterm_with_the_database_open(pid: int) -> bool:
        # The query is under way once its SIGTERM handler is in place (the kernel's SigCgt
        # mask, bit 15): a SIGTERM before then, while the registry is being opened, ends the
        # process as any SIGTERM does, with nothing begun.
        try:
            status = open(f"/proc/{pid}/status").read()
            caught = int(status.split("SigCgt:", 1)[1].split()[0], 16)
            return bool(caught >> (signal.SIGTERM - 1) & 1) and any(
                os.path.realpath(f"/proc/{pid}/fd/{fd}") == path
                for fd in os.listdir(f"/proc/{pid}/fd"))
        except (OSError, IndexError, ValueError):
            return False

    _assert_terminated(*_interrupt(["-d", seeded, "query", "--timeout", "600", RUNAWAY],
                                   catches_sigterm_with_the_database_open, signal.SIGTERM))


@pg_only
def test_sigterm_cancels_a_postgresql_query_on_the_server(backend, seeded, reader):
    """SIGTERM (a supervisor stopping the job, `timeout 60 registry query ...`) must cancel the
    statement on the server as Ctrl-C does, not end the client with the aggregate still
    computing there until its statement timeout, here ten minutes (issue 27.18)."""
    import signal

    role = reader.split("://", 1)[1].split("@", 1)[0]
    watcher = store.make_engine(seeded)

    def running() -> list[str]:
        with watcher.connect() as conn:
            return list(conn.execute(text(
                "SELECT query FROM pg_stat_activity WHERE usename = :r AND state = 'active'"),
                {"r": role}).scalars())

    try:
        code, err = _interrupt(["-d", seeded, "query", "--query-url", reader,
                                "--timeout", "600", RUNAWAY],
                               lambda _pid: RUNAWAY in running(), signal.SIGTERM)
        _assert_terminated(code, err)
        assert running() == []
    finally:
        with watcher.connect() as conn:  # do not leave it computing for ten minutes
            conn.execute(text("SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                              "WHERE usename = :r"), {"r": role})
            conn.commit()
        watcher.dispose()


@pg_only
def test_ctrl_c_between_sending_and_waiting_still_cancels_on_the_server(backend, seeded, reader,
                                                                         monkeypatch):
    """psycopg cancels on Ctrl-C only while it waits for the server. A Ctrl-C that lands just
    after the statement was sent (a loaded machine widens that window) must cancel it too: else
    the connection is dropped with the statement still computing on the server."""
    import time

    from registry_db.store import query as query_module

    role = reader.split("://", 1)[1].split("@", 1)[0]
    marker = f"/* {uuid.uuid4().hex} */"

    def sent_then_interrupted(conn, url, sql, params):
        raw = conn.connection.dbapi_connection
        raw.pgconn.send_query((RUNAWAY + marker).encode())  # sent; nothing waits for it yet
        raise KeyboardInterrupt

    monkeypatch.setattr(query_module, "_pg_stream", sent_then_interrupted)
    with pytest.raises(QueryInterrupted):
        with query_module.stream_query(reader, RUNAWAY, timeout=600):
            pass
    watcher = store.make_engine(seeded)
    try:
        # The cancellation is asynchronous: wait for the server to end the statement, bounded
        # far below the ten minutes it would run uncancelled (a loaded machine is slow, not wrong).
        deadline = time.monotonic() + 120
        while True:
            with watcher.connect() as conn:
                left = conn.execute(text(
                    "SELECT count(*) FROM pg_stat_activity WHERE usename = :r "
                    "AND state = 'active' AND position(:m in query) > 0"),
                    {"r": role, "m": marker}).scalar()
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert left == 0, "the statement kept running on the server after Ctrl-C"
    finally:
        with watcher.connect() as conn:  # do not leave it computing for ten minutes
            conn.execute(text("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE "
                              "position(:m in query) > 0 AND pid <> pg_backend_pid()"),
                         {"m": marker})
            conn.commit()
        watcher.dispose()


ENDLESS = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r"


def test_rows_stream_before_the_statement_ends(query_args, seeded):
    """An endless result yields its first rows at once: were rows loaded whole, the statement
    would run until its timeout and raise instead."""
    import itertools

    from registry_db.store.query import stream_query

    url = query_args[query_args.index("--query-url") + 1] if "--query-url" in query_args \
        else seeded
    with stream_query(url, ENDLESS, timeout=60) as stream:
        first = list(itertools.islice(stream.rows, 5))
    assert stream.columns == ("n",)
    assert first == [(1,), (2,), (3,), (4,), (5,)]


def test_the_command_prints_rows_before_the_statement_ends(query_args):
    """`registry query` itself streams (a 5M-row result once took 1 GB before its first row):
    the first CSV lines of an endless result arrive, and when the reader goes away the query
    ends too. Were the rows collected first, nothing would arrive before the timeout."""
    import select
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "registry_db", *query_args, "--csv",
                             "--timeout", "600", ENDLESS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for _ in range(3):
            # Bounded, not measured: unstreamed, the first line comes after ten minutes.
            if not select.select([proc.stdout], [], [], 120)[0]:
                pytest.fail(f"no row arrived: {lines}")
            lines.append(proc.stdout.readline())
        assert lines == ["n\n", "1\n", "2\n"]
        proc.stdout.close()  # as `| head -3` does
        proc.wait(120)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in err, err
