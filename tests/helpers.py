"""What many tests share: where things are, one way to run the command line, one way to write a
set, and the database checks (a full dump of every table, broken foreign keys, orphaned
provenances). Test modules import from here (or use conftest fixtures), never from each other.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner, Result
from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.engine import Engine

from registry_db import store
from registry_db.cli.group import main
from registry_db.model import Profile, ProfileSet, Provenance, Sampling
from registry_db.resolve.rates import min_variance_rates
from registry_db.store.schema import metadata
from registry_db.store.urls import normalize_url, sqlite_path

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "seed" / "acceptance"
DATA = Path(__file__).resolve().parent / "data"
SEED_FILE = SEED / "inferencex-golden-al.yaml"

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
#: Put before every database and role name the tests create on a server, so that a shared
#: server's owner can grant the suite one namespace (``REGISTRY_TEST_PREFIX=ci_``).
TEST_PREFIX = os.environ.get("REGISTRY_TEST_PREFIX", "")


def unique_name(stem: str) -> str:
    """A database or role name of this test session's own: the prefix, ``stem``, the process
    and a random tag (sessions and pytest-xdist workers run side by side on one server)."""
    return f"{TEST_PREFIX}{stem}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def pg_admin_url() -> str:
    """The PostgreSQL server the tests use (``REGISTRY_TEST_POSTGRES_URL``, else the local one),
    at its admin database: a user there may ``CREATE DATABASE``."""
    return normalize_url(os.environ.get("REGISTRY_TEST_POSTGRES_URL") or DEFAULT_PG)


def with_database(url: str, name: str) -> str:
    """``url`` naming the database ``name`` instead."""
    base, _, query = url.partition("?")
    head = base.rsplit("/", 1)[0] if base.count("/") >= 3 else base
    return f"{head}/{name}" + (f"?{query}" if query else "")


@contextlib.contextmanager
def migrated_to(url: str, revision: str) -> Iterator[Engine]:
    """An engine on the empty database ``url`` brought to ``revision`` (not the head), for data
    migration tests: write rows as that revision held them, then upgrade and check."""
    engine = store.make_engine(url)
    try:
        store.upgrade(engine, revision)
        yield engine
    finally:
        engine.dispose()


def _drop_file_capabilities() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def as_user(*args: str, cwd=None, env: dict[str, str] | None = None, input: str | None = None,
            ) -> subprocess.CompletedProcess:
    """``registry ARGS`` in a subprocess that file modes bind: as root (CI containers) it drops
    the capabilities that bypass them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so a mode means
    for it what it means for any user. ``env`` adds to an environment without REGISTRY_*."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    return subprocess.run([sys.executable, "-m", "registry_db", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, env={**base, **(env or {})}, timeout=120,
                          input=input,
                          preexec_fn=_drop_file_capabilities if os.geteuid() == 0 else None)


def run_cli(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    """``registry ARGS`` in process, stdout and stderr apart. No expected failure may show a
    traceback, and an unexpected exception is raised here rather than read as an exit code."""
    result = CliRunner().invoke(main, [str(a) for a in args], input=input, env=env)
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result



def set_yaml(name: str, n: int = 3, *, al: float = 2.5, model: str = "model-a",
             source: str = "https://example.org/run.yaml", caveats: tuple[str, ...] = ("c1",),
             first_category: int = 0) -> str:
    """A valid set of ``n`` measured profiles (categories cat<i>) sharing one provenance."""
    lines = ["kind: AcceptanceProfileSet", f"name: {name}"]
    if caveats:
        lines.append("caveats:")
        lines += [f"  - {c}" for c in caveats]
    lines.append("profiles:")
    for i in range(n):
        lines += [
            f"  - model: {model}", "    speculative_method: mtp", "    num_spec_tokens: 3",
            '    thinking: "on"', f"    category: cat{first_category + i}",
            f"    acceptance_length: {al}", "    method: measured",
        ]
        if i == 0:
            lines += [
                "    provenance: &p",
                f"      source: {source}", "      hardware: b300", "      engine_image: img:1",
                "      sampling: {temperature: 0.0}",
                "      settings: {rejection_sample_method: block, seed: 7}",
            ]
        else:
            lines.append("    provenance: *p")
    return "\n".join(lines) + "\n"


def write_set(folder: Path, name: str, n: int = 3, **kw) -> Path:
    """Write :func:`set_yaml` to ``folder/<name>.yaml``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(set_yaml(name, n, **kw), encoding="utf-8")
    return path


#: The columns migration 0012 added (git provenance, labels), for dumps of older schemas.
SINCE_0012 = ("revisions.git_commit", "revisions.git_dirty", "revisions.git_path",
              *(f"{t.name}.{c.name}" for t in metadata.sorted_tables
                if t.name in ("labels", "label_events") for c in t.columns))

#: Tables that are caches, not the registry's content: ``import_files`` remembers what files
#: held (importing/unchanged.py), so another file, a downgrade or a truncation forgets it.
CACHES = ("import_files",)


def dump(engine, *, skip: tuple[str, ...] = ()) -> dict[str, list[tuple]]:
    """Every table's rows ordered by primary key (``table.column`` names in ``skip`` omitted;
    a table all of whose columns are, left out), caches (:data:`CACHES`) left out."""
    out = {}
    with engine.connect() as conn:
        for table in metadata.sorted_tables:
            if table.name in CACHES:
                continue
            cols = [c for c in table.columns if f"{table.name}.{c.name}" not in skip]
            if not cols:
                continue
            order = list(table.primary_key.columns) or cols
            out[table.name] = [tuple(r) for r in conn.execute(select(*cols).order_by(*order))]
    return out


#: Child column -> parent column, for the orphan check.
_FOREIGN_KEYS = [
    ("set_caveats", "set_id", "profile_sets", "id"),
    ("profiles", "set_id", "profile_sets", "id"),
    ("profiles", "provenance_id", "provenances", "id"),
    ("profiles", "method", "methods", "name"),
    ("profile_rates", "profile_id", "profiles", "id"),
    ("provenance_settings", "provenance_id", "provenances", "id"),
    ("revision_caveats", "revision_id", "revisions", "id"),
    ("revision_profiles", "revision_id", "revisions", "id"),
    ("revision_profiles", "provenance_id", "provenances", "id"),
    ("revision_rates", "profile_id", "revision_profiles", "id"),
    ("profile_counts", "profile_id", "profiles", "id"),
    ("revision_counts", "profile_id", "revision_profiles", "id"),
    ("profile_versions", "provenance_id", "provenances", "id"),
    ("profile_versions", "method", "methods", "name"),
    ("version_rates", "profile_id", "profile_versions", "id"),
    ("version_counts", "profile_id", "profile_versions", "id"),
]


def broken_foreign_keys(engine) -> list[tuple]:
    """Rows whose parent is missing: SQLite's own check, plus orphan joins on both backends."""
    found: list[tuple] = []
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            found += [tuple(r) for r in conn.exec_driver_sql("PRAGMA foreign_key_check")]
        present = set(inspect(conn).get_table_names())
        for child, col, parent, pcol in _FOREIGN_KEYS:
            if child not in present:  # an older schema revision (migration tests)
                continue
            n = conn.execute(text(
                f"SELECT COUNT(*) FROM {child} c LEFT JOIN {parent} p ON p.{pcol} = c.{col} "
                f"WHERE c.{col} IS NOT NULL AND p.{pcol} IS NULL")).scalar()
            if n:
                found.append((child, col, n))
        if "profile_versions" in present:
            # A version's range names revisions of its set: the first, and the one after the
            # last (which closed it).
            for col, offset in (("first_revision", 0), ("last_revision", 1)):
                n = conn.execute(text(
                    f"SELECT COUNT(*) FROM profile_versions p WHERE p.{col} IS NOT NULL AND "
                    "NOT EXISTS (SELECT 1 FROM revisions v WHERE v.set_name = p.set_name "
                    f"AND v.revision = p.{col} + {offset})")).scalar()
                if n:
                    found.append(("profile_versions", col, n))
    return found


def orphan_provenances(engine) -> int:
    """Provenances that neither a profile nor a revision's profile cites."""
    with engine.connect() as conn:
        present = set(inspect(conn).get_table_names())
        history = "profile_versions" if "profile_versions" in present else "revision_profiles"
        return conn.execute(text(
            "SELECT COUNT(*) FROM provenances pr WHERE NOT EXISTS "
            "(SELECT 1 FROM profiles p WHERE p.provenance_id = pr.id) AND NOT EXISTS "
            f"(SELECT 1 FROM {history} p WHERE p.provenance_id = pr.id)")).scalar()


@contextlib.contextmanager
def reader_role(admin_url: str) -> Iterator[str]:
    """A PostgreSQL reader role for ``registry query`` on the registry at ``admin_url`` (made by
    the library's :func:`registry_db.store.roles.create_reader`), its URL; dropped afterwards."""
    from registry_db.store import roles

    name = unique_name("registry_reader")
    engine = store.make_engine(admin_url)
    try:
        roles.create_reader(engine, name)
        yield roles.reader_url(admin_url, name)
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP OWNED BY "{name}"'))
            conn.execute(text(f'DROP ROLE "{name}"'))
            conn.commit()
        engine.dispose()


def run_in_terminal(*args: str, env: dict[str, str] | None = None, columns: int = 80,
                    stdout_tty: bool = True, stderr_tty: bool = False,
                    timeout: float = 120) -> tuple[int, str, str]:
    """``python -m registry_db ARGS`` as a real process whose stdout and/or stderr is a terminal
    (a pseudo-terminal ``columns`` wide, ``COLUMNS`` set to match), the other a pipe.

    Returns the exit code, stdout and stderr, a terminal's ``\\r\\n`` read back as ``\\n``.
    """
    import fcntl
    import os
    import selectors
    import struct
    import subprocess
    import sys
    import termios

    streams, parent_ends, child_ends = {}, [], []
    for name, tty in (("stdout", stdout_tty), ("stderr", stderr_tty)):
        if tty:
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        else:
            master, slave = os.pipe()
        streams[name] = (master, slave)
        parent_ends.append(master)
        child_ends.append(slave)
    full_env = {**os.environ, "COLUMNS": str(columns), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "registry_db", *args],
                            stdin=subprocess.DEVNULL, stdout=streams["stdout"][1],
                            stderr=streams["stderr"][1], env=full_env)
    for fd in child_ends:
        os.close(fd)
    chunks: dict[int, list[bytes]] = {fd: [] for fd in parent_ends}
    with selectors.DefaultSelector() as sel:
        for fd in parent_ends:
            sel.register(fd, selectors.EVENT_READ)
        open_fds = set(parent_ends)
        while open_fds:
            events = sel.select(timeout)
            if not events:
                proc.kill()
                raise AssertionError(f"registry {' '.join(args)} did not finish")
            for key, _ in events:
                try:
                    data = os.read(key.fd, 65536)
                except OSError:  # EIO: the terminal's other end is closed
                    data = b""
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
                    open_fds.discard(key.fd)
    code = proc.wait(timeout)
    for fd in parent_ends:
        os.close(fd)

    def text(name: str) -> str:
        raw = b"".join(chunks[streams[name][0]]).decode("utf-8", "replace")
        return raw.replace("\r\n", "\n")

    return code, text("stdout"), text("stderr")


# --- PostgreSQL databases for the fixtures (tests/conftest.py) ---------------------------------

class PgServer:
    """The test server's admin connection and the names this session creates on it."""

    def __init__(self, admin: Engine, admin_url: str):
        self.admin, self.admin_url = admin, admin_url
        self.prefix = unique_name("registry_test")
        self._numbers = itertools.count(1)

    def create(self, template: str) -> str:
        """A new database copied from ``template`` (which nobody may be connected to): its URL."""
        name = f"{self.prefix}_{next(self._numbers)}"
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
            # A commit waits for no disk flush (PostgreSQL's "non-durable settings"): what a
            # transaction does and shows is unchanged, only a crash of the server could lose it.
            conn.execute(text(f'ALTER DATABASE "{name}" SET synchronous_commit = off'))
        return with_database(self.admin_url, name)

    def drop(self, url: str) -> None:
        """Drop the database at ``url``, ending what is still connected (a killed importer's
        backend may not have noticed yet)."""
        name = url.partition("?")[0].rsplit("/", 1)[1]
        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


#: What a test can change in its database beyond the rows: relations and their columns and
#: grants, constraints, functions, schemas, the database's own grants and settings, large objects.
#: A grant given and revoked leaves the default spelled out: no grants reads as the default.
PG_SHAPE = text("""
SELECT md5(string_agg(x, '|' ORDER BY x)) FROM (
  SELECT c.relkind::text || ' ' || c.relname || ' ' || coalesce(c.relacl, acldefault(
      (CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END)::"char", c.relowner))::text || ' ' || (
      SELECT coalesce(string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                 || ' ' || a.attnotnull, ',' ORDER BY a.attnum), '')
      FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS x
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'
  UNION ALL SELECT 'k ' || conname || ' ' || pg_get_constraintdef(c.oid) FROM pg_constraint c
    JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'public'
  UNION ALL SELECT 'f ' || p.oid::regprocedure::text || ' ' || md5(p.prosrc) FROM pg_proc p
    JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
  UNION ALL SELECT 'v ' || viewname || ' ' || md5(definition) FROM pg_views
    WHERE schemaname = 'public'
  UNION ALL SELECT 'n ' || nspname || ' ' || nspowner::regrole::text || ' '
    || coalesce(nspacl, acldefault('n', nspowner))::text FROM pg_namespace
    WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'
  UNION ALL SELECT 'd ' || coalesce(datacl, acldefault('d', datdba))::text FROM pg_database
    WHERE datname = current_database()
  UNION ALL SELECT 's ' || array_to_string(setconfig, ',') FROM pg_db_role_setting
    WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
  UNION ALL SELECT 'e ' || extname FROM pg_extension
  UNION ALL SELECT 'o ' || count(*) FROM pg_largeobject_metadata
) shape""")


class PgWorkspace:
    """The session's working PostgreSQL database: a clone of the template, put back to the
    template's state before each test. Dropping a database forces a checkpoint on the server
    (docs/decisions.md has the figures), so rows are deleted instead, sequences reset and the
    reference rows the migrations wrote checked; a test that changed anything else (the schema,
    grants, functions) gets a fresh clone."""

    def __init__(self, server: PgServer, template: str, *, prepare: str = ""):
        self.server, self.template, self.prepare = server, template, prepare
        self._clone()

    def _clone(self) -> None:
        from sqlalchemy.pool import NullPool

        self.url = self.server.create(self.template)
        # No pooled connection left open: some tests look at who is connected.
        self.engine = create_engine(self.url, poolclass=NullPool)
        try:
            self._learn()
        except BaseException:  # a clone nobody will reset must not outlive the session
            self.close()
            raise

    def _learn(self) -> None:
        """What the fresh clone holds: its tables in delete order, reference rows, sequences."""
        with self.engine.connect() as conn:
            tables = [r for (r,) in conn.execute(text(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY 1"))]
            edges = conn.execute(text(
                "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM "
                "pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
                "WHERE n.nspname = 'public' AND c.contype = 'f'")).all()
            filled = [t for t in tables
                      if conn.execute(text(f'SELECT EXISTS (SELECT 1 FROM "{t}")')).scalar()]
            sequences = conn.execute(text(
                "SELECT sequencename, start_value, last_value FROM pg_sequences "
                "WHERE schemaname = 'public'")).all()
            self._reference = text(" UNION ALL ".join(
                f"SELECT '{t}', md5(coalesce(string_agg(r::text, ',' ORDER BY r::text), '')) "
                f'FROM "{t}" r' for t in filled)) if filled else None
            self.shape = self._state(conn)
        # Children first, so that no foreign key refuses a delete.
        children = {t: {c for c, p in edges if p == t and c != t} for t in tables}
        order: list[str] = []
        while len(order) < len(tables):
            ready = [t for t in tables if t not in order and children[t] <= set(order)]
            order += ready or [t for t in tables if t not in order]  # a cycle: leave it to SQL
        self._reset = ";".join(
            [f'DELETE FROM "{t}"' for t in order if t not in filled]
            + [f"SELECT setval('\"{name}\"', {last if last is not None else start}, "
               f"{'true' if last is not None else 'false'})" for name, start, last in sequences])

    def _state(self, conn) -> tuple:
        reference = () if self._reference is None else tuple(conn.execute(self._reference).all())
        return conn.execute(PG_SHAPE).scalar(), reference

    def fresh(self) -> str:
        """The database, at the template's state."""
        try:
            with self.engine.begin() as conn:
                # What PUBLIC holds on a new database (`registry db reader` takes TEMP away).
                name = self.url.partition("?")[0].rsplit("/", 1)[1]
                conn.exec_driver_sql(f'GRANT CONNECT, TEMPORARY ON DATABASE "{name}" TO PUBLIC')
                if self.prepare:
                    conn.exec_driver_sql(self.prepare)
                same = self._state(conn) == self.shape
                if same and self._reset:
                    conn.exec_driver_sql(self._reset)
        except Exception:  # noqa: BLE001 - a test dropped a table the checks read: rebuild
            same = False
        if not same:
            self.close()
            self._clone()
        return self.url

    def close(self) -> None:
        self.engine.dispose()
        self.server.drop(self.url)


#: An empty database's public schema as PostgreSQL 15 makes it (what template0 holds).
EMPTY_PUBLIC = ("DROP SCHEMA public CASCADE; CREATE SCHEMA public; "
                 "ALTER SCHEMA public OWNER TO pg_database_owner; "
                 "GRANT USAGE ON SCHEMA public TO PUBLIC")


# --- real `registry` processes: concurrent, and killed mid-write ---------------------------------

#: A wait long enough for any writer in these tests: they wait for each other, never time out.
_PROCESS_ENV = {"REGISTRY_LOCK_TIMEOUT": "60"}

#: One process running several ``registry`` command lines in turn (Python starts once), each
#: followed by a line "@@exit <code>" so that the outputs can be told apart.
_MANY = """
import json, sys
from registry_db.cli.group import main
for args in json.loads(sys.argv[2]):
    try:
        main(["-d", sys.argv[1], *args], prog_name="registry", standalone_mode=False)
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    print("@@exit", code, flush=True)
"""


def registry(url: str, *args: str) -> subprocess.Popen:
    """Start ``registry -d URL ARGS`` as its own process (stdout and stderr pipes)."""
    return subprocess.Popen([sys.executable, "-m", "registry_db", "-d", url, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            env={**os.environ, **_PROCESS_ENV})


def registry_runs(url: str, runs: list[list[str]]) -> list[tuple[int, str]]:
    """Run several ``registry`` command lines in ONE new process, one after another.

    Returns ``(exit code, stdout)`` per command line; any stderr with a traceback fails.
    """
    proc = subprocess.run([sys.executable, "-c", _MANY, url, json.dumps(runs)],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **_PROCESS_ENV}, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    out, buffer = [], []
    for line in proc.stdout.splitlines(keepends=True):
        if line.startswith("@@exit "):
            out.append((int(line.split()[1]), "".join(buffer)))
            buffer = []
        else:
            buffer.append(line)
    return out


def concurrent_runs(url: str, per_worker: list[list[list[str]]]) -> list[tuple[int, str]]:
    """Each worker's command lines in a process of its own, all workers at once (threads
    waiting on the processes); every ``(exit code, stdout)``, and no worker may raise."""
    results: list[tuple[int, str]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(runs: list[list[str]]) -> None:
        try:
            done = registry_runs(url, runs)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread below
            errors.append(exc)
            return
        with lock:
            results.extend(done)

    threads = [threading.Thread(target=worker, args=(runs,)) for runs in per_worker]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return results


#: How long a test waits for a process to reach the state it needs (a hang guard only).
GUARD = 180.0


def wait_for(what: str, check: Callable[[], object], *, guard: float = GUARD) -> object:
    """Poll ``check`` (the database's or a process's own state) until it is true; fail after
    ``guard`` seconds, which only a hang reaches."""
    deadline = time.monotonic() + guard
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        time.sleep(0.001)
    return found


class _SqliteWriter:
    """A registry file watched from outside: whether a writer holds its lock (a probe
    ``BEGIN IMMEDIATE`` fails at once) and whether its commit has happened (a reader sees more
    revisions than before it began). Not the WAL's size: a transaction whose pages outgrow the
    writer's cache spills them into the WAL before its commit."""

    def __init__(self, path: str):
        self.path = path
        self.revisions_at_start = self._revisions()

    def _revisions(self, timeout: float = 10.0) -> int | None:
        """How many revisions a reader sees; None when the reader is kept waiting, which a
        writer stopped inside its commit does (it holds the WAL index's header)."""
        if not Path(self.path).exists():
            return 0
        reader = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=timeout)
        try:
            return reader.execute("SELECT COUNT(*) FROM revisions").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # not migrated yet: nothing committed
                return 0
            if "locked" in str(exc) or "busy" in str(exc):
                return None
            raise
        finally:
            reader.close()

    def _locked(self) -> bool:
        probe = sqlite3.connect(self.path, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return True
            raise
        finally:
            probe.close()

    def writing(self) -> bool:
        return self._locked()

    def still_writing(self) -> bool:
        return self._locked() and self._revisions(timeout=1.0) == self.revisions_at_start

    def close(self) -> None:
        pass


class _PgWriter:
    """A registry database watched from outside on one connection: the backend that holds the
    writers' lock, whether its transaction has written (it has an xid), and its state."""

    _HOLDER = text(
        "SELECT a.pid, a.backend_xid::text AS xid, a.state, a.wait_event "
        "FROM pg_stat_activity a "
        "JOIN pg_locks l ON l.pid = a.pid WHERE l.locktype = 'advisory' AND l.granted "
        "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND l.classid = :hi AND l.objid = :lo AND l.objsubid = 1")

    def __init__(self, url: str):
        self.engine = store.make_engine(url).execution_options(isolation_level="AUTOCOMMIT")
        self.conn = self.engine.connect()
        self.seen: tuple | None = None

    def _holder(self) -> tuple | None:
        row = self.conn.execute(self._HOLDER, {"hi": store.WRITE_LOCK_KEY >> 32,
                                               "lo": store.WRITE_LOCK_KEY & 0xFFFFFFFF}).first()
        return tuple(row) if row else None

    def writing(self) -> bool:
        holder = self._holder()
        if holder and holder[1] is not None:
            self.seen = holder
            return True
        return False

    def still_writing(self) -> bool:
        # Stopped, the client sends nothing more: once its backend waits for it ('idle in
        # transaction', or mid-COPY on ClientRead) twice in a row in the same transaction, no
        # commit is on its way.
        assert self.seen is not None
        for _ in range(2):
            holder = self._settled()
            if holder is None or holder[:2] != self.seen[:2]:
                return False
        return True

    def _settled(self) -> tuple | None:
        """The lock's holder once it runs no statement or waits for its stopped client in the
        middle of one (a COPY's rows: 'active', waiting on ClientRead); None: nobody holds the
        lock."""
        deadline = time.monotonic() + GUARD
        while (holder := self._holder()) is not None and holder[2] == "active" and (
                holder[3] != "ClientRead"):
            if time.monotonic() > deadline:
                raise AssertionError("the stopped writer's statement never ended")
            time.sleep(0.001)
        return holder

    def close(self) -> None:
        self.conn.close()
        self.engine.dispose()


#: Stops :func:`kill_mid_write` may make before one lands inside the write transaction.
KILL_ATTEMPTS = 50


def kill_mid_write(url: str, proc: subprocess.Popen) -> None:
    """SIGKILL ``proc`` inside its write transaction, before its commit, as the database itself
    shows it (no wall-clock pause decides the moment).

    Waits until the writer is inside its transaction (SQLite: it holds the write lock, a probe
    ``BEGIN IMMEDIATE`` fails at once; PostgreSQL: its backend holds the writers' advisory lock
    and has a transaction id, so it has written), stops it (SIGSTOP: a stopped process cannot
    commit), checks that the transaction is still open and not committed (SQLite: the lock
    still held and no new revision visible to a reader; PostgreSQL: the backend idle in the
    same transaction, waiting for the stopped client), then kills it. A stop that lands
    outside the transaction (SQLite: the probe also fails while a connection opening or
    closing the file recovers or checkpoints its WAL, a few milliseconds) lets the process go
    on (SIGCONT) and looks again. Fails when the process ended first or its transaction was
    over: then nothing was killed mid-write.
    """
    path = sqlite_path(url)
    watch: _SqliteWriter | _PgWriter = _SqliteWriter(path) if path else _PgWriter(url)
    open_transaction = False
    try:
        for _ in range(KILL_ATTEMPTS):
            wait_for("the import writing", lambda: proc.poll() is not None or watch.writing())
            if proc.poll() is not None:
                break
            proc.send_signal(signal.SIGSTOP)
            if watch.still_writing():
                open_transaction = True
                break
            proc.send_signal(signal.SIGCONT)
            time.sleep(0.01)  # past the moment the stop landed on
    finally:
        # Killed whatever the checks found: a stopped writer left behind holds the lock forever.
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        watch.close()
        proc.stdout.close()
        proc.stderr.close()
    assert open_transaction, "the import finished before it could be killed mid-write"


# --- data several test modules share --------------------------------------------------------------

def prof(model: str, category: str, al: float, *, thinking: str = "off", k: int = 3,
         method: str = "eagle", rates: tuple[float, ...] | None = None,
         hardware: str | None = "b300", how: str = "measured") -> Profile:
    """A profile with a measured provenance on ``hardware`` (or a literature one without)."""
    source = f"https://example.org/{model}/{category}"
    if how == "measured":
        pv = Provenance(source, hardware=hardware, engine_image="vllm:1", sampling=Sampling(1.0))
        return Profile(model, method, k, thinking, category, al, "measured",
                       per_position_rates=rates, provenance=pv)
    return Profile(model, method, k, thinking, category, al, how, per_position_rates=rates,
                   provenance=Provenance(source, hardware=hardware), rationale="a paper says so")


def make_set(name: str, *profiles: Profile) -> ProfileSet:
    """A set as the validator would return it."""
    return ProfileSet(name, ("test data",), tuple(profiles), file=f"{name}.yaml")


#: "solo" keys are held by one set each (beta's solo/coding aside), "duo" keys by several.
SETS = [
    make_set("alpha",
             prof("solo", "coding", 2.5),
             prof("solo", "coding", 2.4, thinking="on"),
             prof("solo", "chat", 2.2, rates=(0.9, 0.3, 0.0)),
             prof("duo", "coding", 2.6),
             prof("duo", "chat", 2.1),
             prof("lit", "coding", 2.0, k=2, hardware=None, how="literature")),
    make_set("beta",
             prof("solo", "coding", 2.9, hardware="h100"),
             prof("solo", "math", 2.05),
             prof("duo", "coding", 2.7),
             prof("duo", "chat", 2.15)),
    make_set("gamma",
             prof("duo", "coding", 2.8)),
]


MODELS = [f"model-{i}" for i in range(30)]
METHODS = ("eagle", "mtp")
CATEGORIES = ("coding", "chat", "math", "law", "poetry")
SET_NAMES = ("north", "south", "east", "west", "centre")
CHIPS = ("b300", "h100", "mi355x")


def random_key(rng: random.Random) -> tuple:
    """A profile key drawn from the generated sets' vocabulary."""
    return (rng.choice(MODELS), rng.choice(METHODS), rng.randint(1, 5), rng.choice(("on", "off")),
            rng.choice(CATEGORIES))


def _profile(rng: random.Random, key: tuple, chip: str) -> Profile:
    model, method, k, thinking, category = key
    rates = None
    if rng.random() < 0.3:
        rates = tuple(sorted((round(rng.random(), 3) for _ in range(k)), reverse=True))
        al = 1 + sum(rates)
    else:
        al = round(rng.uniform(1, k + 1), 3)
    roll = rng.random()
    if roll < 0.7:
        pv = Provenance(f"https://example.org/{chip}/{model}", hardware=chip,
                        engine_image="vllm:1", sampling=Sampling(1.0))
        return Profile(model, method, k, thinking, category, al, "measured",
                       per_position_rates=rates, provenance=pv)
    if roll < 0.85:
        return Profile(model, method, k, thinking, category, al, "copied",
                       per_position_rates=rates, provenance=Provenance("https://example.org/c"),
                       rationale="close enough", copied_from=f"x/{method}/k{k}/thinking-on/coding")
    return Profile(model, method, k, thinking, category, al, "assumed", per_position_rates=rates,
                   rationale="a guess")


def generated_sets(per_set: int = 900, seed: int = 7) -> list[ProfileSet]:
    """Five sets over a pool of 3,000 keys: many keys held by two or more sets."""
    rng = random.Random(seed)
    out = []
    for i, name in enumerate(SET_NAMES):
        keys: dict[tuple, None] = {}
        while len(keys) < per_set:
            keys[random_key(rng)] = None
        out.append(ProfileSet(name, ("generated",), tuple(
            _profile(rng, key, CHIPS[i % len(CHIPS)]) for key in keys), file=f"{name}.yaml"))
    return out


_GRID_PROVENANCE = """
    provenance:
      source: https://example.org/{name}.yaml
      hardware: b300
      engine_image: engine:1
      sampling: {{temperature: 1.0}}"""


def grid_profile(name: str, model: str, smethod: str, k: int, thinking: str, category: str,
            al: float, method: str = "measured") -> str:
    """One profile of a set, as YAML, with what its method requires."""
    text = f"""
  - model: {model}
    speculative_method: {smethod}
    num_spec_tokens: {k}
    thinking: "{thinking}"
    category: {category}
    acceptance_length: {al}
    method: {method}"""
    if method != "measured":
        text += "\n    rationale: generated for a test."
    if method == "copied":
        text += f"\n    copied_from: m0/{smethod}/k{k}/thinking-{thinking}/{category}"
    if method != "assumed":
        text += _GRID_PROVENANCE.format(name=name)
    return text


def write_grid_set(folder: Path, name: str, profiles: list[tuple]) -> Path:
    """A set file ``folder/<name>.yaml`` holding ``profiles`` (:func:`grid_profile` arguments)."""
    body = "".join(grid_profile(name, *p) for p in profiles)
    path = folder / f"{name}.yaml"
    path.write_text(f"kind: AcceptanceProfileSet\nname: {name}\nprofiles:{body}\n",
                    encoding="utf-8")
    return path


ALPHA = [("m1", "eagle", 1, "off", "coding", 1.8), ("m1", "eagle", 2, "off", "coding", 2.4),
         ("m1", "eagle", 4, "off", "coding", 3.1), ("m1", "eagle", 6, "off", "coding", 3.5,
                                                    "copied"),
         ("m1", "eagle", 2, "on", "coding", 2.0, "assumed")]
BETA = [("m1", "eagle", 2, "off", "coding", 2.5, "literature"),
        ("m2", "mtp", 1, "on", "chat", 1.9), ("m2", "mtp", 2, "on", "chat", 2.6),
        ("m2", "mtp", 3, "on", "chat", 3.0)]


def png_size(data: bytes) -> tuple[int, int]:
    """A PNG's width and height, from its IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


SOURCE = ("https://github.com/SemiAnalysisAI/InferenceX/blob/main/inferencex-e2e/infx/"
          "golden_al_distribution/dsv41flash_dspark.yaml")
DSV = ["--model", "deepseek-v4.1-flash", "--method", "dspark", "--k", "5"]
GLM = ["--model", "glm-5.3", "--method", "mtp", "--k", "3", "--thinking", "on"]


def run_on(url: str, *args: str, env: dict[str, str] | None = None):
    """``registry -d URL ARGS`` in process; stdout and stderr apart."""
    return run_cli("-d", url, *args, env=env)


def run_resolve(url: str, *args: str, input: str | None = None):
    """``registry -d URL resolve ARGS`` in process; stdout and stderr apart."""
    return run_cli("-d", url, "resolve", *args, input=input)


def seed_answer(**changes) -> dict:
    """The contract's object for the seed's deepseek/dspark/k5/off/coding."""
    answer = {
        "acceptance_length": 4.07, "acceptance_rate": (4.07 - 1) / 5, "num_spec_tokens": 5,
        "per_position_rates": min_variance_rates(4.07, 5), "rates_derived": True,
        "layer": "registry", "profile_set": "inferencex-golden-al",
        "profile": "deepseek-v4.1-flash/dspark/k5/thinking-off/coding", "revision": 1,
        "source": SOURCE, "uncertainty": None, "counts": None,
        "fallback": None, "hardware_mismatch": None, "warnings": [],
    }
    answer.update(changes)
    return answer


# --- the web tests' registries and servers -------------------------------------------------------

#: The web tests' generated registries' vocabulary (what the resolve comparisons sweep over).
WEB_MODELS = ("model-a", "model-b")
WEB_METHODS = ("mtp", "dspark")
WEB_KS = (1, 2, 3)
WEB_THINKING = ("on", "off")
WEB_CATEGORIES = ("coding", "chat", "math")
WEB_SETS = ("alpha", "beta", "gamma")


def web_sets(seed: int) -> dict[str, str]:
    """Three sets' YAML: each holds a random third of the keys, so that some keys are held by
    two or three sets (conflicts) and some categories are missing (fallbacks)."""
    rng = random.Random(seed)
    out = {}
    for name in WEB_SETS:
        lines = ["kind: AcceptanceProfileSet", f"name: {name}", "profiles:"]
        for model in WEB_MODELS:
            for method in WEB_METHODS:
                for k in WEB_KS:
                    for thinking in WEB_THINKING:
                        for category in WEB_CATEGORIES:
                            if rng.random() < 0.3:
                                lines += _web_profile(rng, model, method, k, thinking, category)
        out[name] = "\n".join(lines) + "\n"
    return out


def _web_profile(rng: random.Random, model: str, method: str, k: int, thinking: str,
             category: str) -> list[str]:
    al = round(rng.uniform(1, k + 1), 2)
    how = rng.choice(("measured", "measured", "copied", "literature", "assumed"))
    lines = [f"  - model: {model}", f"    speculative_method: {method}",
             f"    num_spec_tokens: {k}", f'    thinking: "{thinking}"',
             f"    category: {category}", f"    acceptance_length: {al}", f"    method: {how}"]
    if rng.random() < 0.3:
        rates = ", ".join(repr(r) for r in min_variance_rates(al, k))
        lines.append(f"    per_position_rates: [{rates}]")
    if how == "measured" and rng.random() < 0.5:  # raw counts that give this AL
        drafts = 1000
        lines.append(f"    counts: {{drafts: {drafts}, draft_tokens: {k * drafts}, "
                     f"accepted_tokens: {round((al - 1) * drafts)}}}")
    if how != "measured":
        lines.append("    rationale: generated for the web tests")
    if how == "copied":
        lines.append(f"    copied_from: {model}-base/{method}/k{k}/thinking-{thinking}/{category}")
    if how != "assumed":
        lines += ["    provenance:", f"      source: https://example.org/{model}/{method}.yaml"]
        if how == "measured":
            lines += [f"      hardware: {rng.choice(('b300', 'h200'))}",
                      "      engine_image: vllm/vllm-openai:v0.31.0",
                      "      sampling: {temperature: 1.0}"]
    return lines


def make_registry(folder: Path, seed: int) -> Path:
    """An SQLite registry file holding :func:`web_sets` (``seed``), imported as a user
    does (``registry import``)."""
    sets = folder / f"sets-{seed}"
    sets.mkdir(parents=True)
    for name, content in web_sets(seed).items():
        (sets / f"{name}.yaml").write_text(content, encoding="utf-8")
    path = folder / f"registry-{seed}.db"
    result = run_cli("-d", str(path), "import", str(sets))
    assert result.exit_code == 0, result.output + result.stderr
    return path


def free_port() -> int:
    """A port nothing on 127.0.0.1 listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``registry serve`` in its own process; ``url`` is where it answers."""

    def __init__(self, path: Path, port: int):
        self.path, self.port = path, port
        self.url = f"http://127.0.0.1:{port}"
        self.log = path.parent / f"serve-{port}.log"
        self._log = self.log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "registry_db", "-d", str(path), "serve", "--port", str(port)],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def wait(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"registry serve exited {self.process.returncode}: "
                                     f"{self.log.read_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/versions.json", timeout=5):
                    return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"registry serve did not answer in {timeout} s: "
                             f"{self.log.read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def build_sets(engine: Engine) -> None:
    """Fill a shared registry with :data:`SETS`."""
    from registry_db.importing.write import import_sets

    import_sets(engine, SETS)


def build_seed(engine: Engine) -> None:
    """Fill a shared registry with the seed's files."""
    from registry_db.importing.write import import_paths

    import_paths(engine, [SEED])


def build_generated(engine: Engine) -> None:
    """Fill a shared registry with :func:`generated_sets`; on PostgreSQL its statistics too, so
    that the planner sees tables of thousands."""
    from registry_db.importing.write import import_sets

    import_sets(engine, generated_sets())
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))


def seed_with_overlap(url: str, tmp_path: Path) -> str:
    """``url``'s registry holding the seed and two small sets that share a key (a conflict)."""
    from registry_db import store
    from registry_db.importing import write as importer

    write_set(tmp_path / "sets", "first")
    write_set(tmp_path / "sets", "second", al=3.0)
    engine = store.open_registry(url)
    try:
        importer.import_paths(engine, [SEED, tmp_path / "sets"])
    finally:
        engine.dispose()
    return url


def spy_on_open(monkeypatch, module) -> list[bool]:
    """Each answer of ``module.open_readonly`` (a read path's way in), True when it opened a
    connection: the test sees whether the fast path was really taken."""
    calls: list[bool] = []
    original = module.open_readonly

    def spy(url):
        conn = original(url)
        calls.append(conn is not None)
        return conn

    monkeypatch.setattr(module, "open_readonly", spy)
    return calls


# --- a history as schema revision 0006 held it (migration tests) -------------------------------

#: The times of its imports and deletion.
HISTORY_TIMES = _T = [datetime(2026, m, 1, 9, 30, tzinfo=UTC) for m in (1, 2, 3, 4, 5)]

#: (model, method, K, thinking, category, AL, how, provenance, rationale, rates, counts)
_A1 = ("m", "mtp", 3, "on", "coding", 2.5, "measured", 1, None, (0.8, 0.5, 0.2), None)
_A2 = ("m", "mtp", 3, "on", "coding", 2.6, "measured", 1, None, (0.8, 0.6, 0.2), None)
_B = ("m", "mtp", 3, "on", "chat", 2.25, "measured", 1, None, None, (4, 12, 5, "[3,1,1]", 0.5))
_C = ("m", "mtp", 3, "on", "math", 2.0, "assumed", None, "a guess", None, None)
_V = ("v", "eagle", 2, "off", "coding", 1.75, "assumed", None, "vendor", None, None)

#: set -> its revisions: (time, action, caveats, profiles in file order). golden: A edited,
#: then back to its first value (a new version: not consecutive), B kept for two revisions
#: then removed, C added; vendor: added, deleted, added again with the same content.
HISTORY_0006 = {
    "golden": [(_T[0], "added", ("c1",), (_A1, _B)), (_T[1], "updated", ("c1",), (_A2, _B)),
               (_T[3], "updated", ("c2",), (_A1, _C))],
    "vendor": [(_T[0], "added", (), (_V,)), (_T[2], "deleted", (), ()),
               (_T[4], "added", (), (_V,))],
}


def fill_history_0006(engine) -> None:
    """The registry and its history :data:`HISTORY_0006` as 0006's importer and deleter wrote
    them (the migration tests of 0007 and 0010 start from it)."""
    rev_id = profile_id = current_id = 0
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO provenances (id, content_hash, source, hardware, engine_image, "
            "temperature) VALUES (1, :h, 'https://example.org/run', 'b300', 'vllm:1', 0.0)"),
            {"h": "p" * 64})
        for set_id, (name, revisions) in enumerate(HISTORY_0006.items(), 1):
            for number, (at, action, caveats, profiles) in enumerate(revisions, 1):
                rev_id += 1
                h = None if action == "deleted" else f"{set_id}{number}" * 32
                conn.execute(text(
                    "INSERT INTO revisions (id, set_name, revision, action, imported_at, "
                    "source_file, content_hash, profile_count, message) VALUES (:i, :n, :r, "
                    ":a, :t, :f, :h, :c, :m)"),
                    {"i": rev_id, "n": name, "r": number, "a": action, "t": at,
                     "f": f"acceptance/{name}.yaml", "h": h, "c": len(profiles),
                     "m": f"{name} {number}"})
                for pos, caveat in enumerate(caveats):
                    conn.execute(text("INSERT INTO revision_caveats VALUES (:r, :p, :t)"),
                                 {"r": rev_id, "p": pos, "t": caveat})
                for pos, p in enumerate(profiles):
                    profile_id += 1
                    _history_profile(conn, "revision_profiles", "revision_id", rev_id, profile_id,
                             pos, p, "revision_rates", "revision_counts")
            at, action, caveats, profiles = revisions[-1]
            if action == "deleted":
                continue
            conn.execute(text(
                "INSERT INTO profile_sets (id, name, source_file, content_hash, imported_at, "
                "revision) VALUES (:i, :n, :f, :h, :t, :r)"),
                {"i": set_id, "n": name, "f": f"acceptance/{name}.yaml",
                 "h": f"{set_id}{len(revisions)}" * 32, "t": at, "r": len(revisions)})
            for pos, caveat in enumerate(caveats):
                conn.execute(text("INSERT INTO set_caveats VALUES (:s, :p, :t)"),
                             {"s": set_id, "p": pos, "t": caveat})
            for pos, p in enumerate(profiles):
                current_id += 1
                _history_profile(conn, "profiles", "set_id", set_id, current_id, pos, p,
                         "profile_rates", "profile_counts")
        if conn.dialect.name == "postgresql":
            for table in ("provenances", "revisions", "revision_profiles", "profile_sets",
                          "profiles"):
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                  f"(SELECT MAX(id) FROM {table}))"))


def _history_profile(conn, table, parent, parent_id, pid, pos, p, rates, counts) -> None:
    model, method, k, thinking, category, al, how, prov, rationale, rs, cs = p
    conn.execute(text(
        f"INSERT INTO {table} (id, {parent}, position, model, speculative_method, "
        "num_spec_tokens, thinking, category, acceptance_length, method, provenance_id, "
        "rationale, copied_from) VALUES (:i, :s, :p, :m, :sm, :k, :th, :c, :al, :how, :pr, "
        ":ra, NULL)"),
        {"i": pid, "s": parent_id, "p": pos, "m": model, "sm": method, "k": k, "th": thinking,
         "c": category, "al": al, "how": how, "pr": prov, "ra": rationale})
    for i, rate in enumerate(rs or (), 1):
        conn.execute(text(f"INSERT INTO {rates} VALUES (:i, :p, :r)"),
                     {"i": pid, "p": i, "r": rate})
    if cs is not None:
        conn.execute(text(
            f"INSERT INTO {counts} (profile_id, drafts, draft_tokens, accepted_tokens, "
            "accepted_per_position, al_stderr) VALUES (:i, :d, :t, :a, :pp, :e)"),
            {"i": pid, "d": cs[0], "t": cs[1], "a": cs[2], "pp": cs[3], "e": cs[4]})


#: What a read-only test may not change in a shared registry: every revision ever written and
#: every current profile (a write of any kind moves one of them).
_SHARED_STATE = text("SELECT (SELECT COUNT(*) FROM revisions), (SELECT MAX(id) FROM revisions), "
                     "(SELECT COUNT(*) FROM profiles), (SELECT MAX(id) FROM profiles)")


class SharedRegistries:
    """Registries built once per session and read by many tests (Datasette's read-only test
    apps, the same idea): :meth:`get` builds ``name`` on a backend the first time it is asked
    for, and hands every later test the same engine. A test that writes to one fails (it needs
    a registry of its own: ``db_url``), since the next test would read its writes."""

    def __init__(self, make_url: Callable[[str, str], str]):
        self._make_url = make_url
        self._built: dict[tuple[str, str], tuple[Engine, tuple, str]] = {}

    def get(self, backend: str, name: str, build: Callable[[Engine], object]) -> Engine:
        """The engine on the registry ``name`` (built by ``build(engine)`` on first use)."""
        return self._get(backend, name, build)[0]

    def url(self, backend: str, name: str, build: Callable[[Engine], object]) -> str:
        """The URL of the registry ``name`` (built as :meth:`get` builds it)."""
        return self._get(backend, name, build)[2]

    def _get(self, backend: str, name: str, build: Callable[[Engine], object]
             ) -> tuple[Engine, tuple, str]:
        key = (backend, name)
        if key not in self._built:
            url = self._make_url(backend, name)
            engine = store.open_registry(url)
            build(engine)
            self._built[key] = (engine, self.state(engine), url)
        return self._built[key]

    @staticmethod
    def state(engine: Engine) -> tuple:
        with engine.connect() as conn:
            return tuple(conn.execute(_SHARED_STATE).one())

    def unchanged(self, engine: Engine) -> bool:
        """Whether ``engine``'s shared registry still holds what it was built with. One that
        changed is forgotten (the next test to ask builds it again), so that only the test that
        wrote fails."""
        key, (_, built, _) = next((k, v) for k, v in self._built.items() if v[0] is engine)
        if self.state(engine) == built:
            return True
        del self._built[key]
        engine.dispose()
        return False

    def close(self) -> None:
        for engine, _, _ in self._built.values():
            engine.dispose()


# --- producers' own exposition --------------------------------------------------------------------

def vllm_scrape(engines: dict[int, tuple[int, int, int, tuple[int, ...]]], *,
                model: str = "example/model", created: float | None = None,
                started: float | None = None, openmetrics: bool = False) -> str:
    """A /metrics text as a vLLM server writes it: ``engines`` maps an engine index to its
    (drafts, draft tokens, accepted tokens, accepted per position) counts.

    The counters are registered as ``SpecDecodingProm`` registers them (vllm-project/vllm
    ee4ceaae5953d367d8edd2132fd86d6c42506e1e, vllm/v1/spec_decode/metrics.py: a
    ``prometheus_client.Counter`` per name with the logger's labelnames ``model_name`` and
    ``engine``, ``position`` added for the per-position one, one child per engine made with
    ``.labels``) and rendered by prometheus_client itself, so the ``_created`` samples are its
    own; ``created`` fixes the time the children were made (else now). ``started`` adds the
    process collector's ``process_start_time_seconds`` gauge (prometheus_client
    process_collector.py) with that value.
    """
    from unittest import mock

    import prometheus_client as pc
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest

    registry = pc.CollectorRegistry()
    names = (("vllm:spec_decode_num_drafts", "Number of spec decoding drafts."),
             ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens."),
             ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens."))
    with mock.patch("time.time", return_value=created) if created is not None \
            else contextlib.nullcontext():
        counters = [pc.Counter(name, doc, labelnames=["model_name", "engine"],
                               registry=registry) for name, doc in names]
        per_pos = pc.Counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                             "Accepted tokens per draft position.",
                             labelnames=["model_name", "engine", "position"], registry=registry)
        children = {idx: ([c.labels(model, str(idx)) for c in counters],
                          [per_pos.labels(model, str(idx), str(p))
                           for p in range(len(counts[3]))])
                    for idx, counts in engines.items()}
    for idx, (drafts, tokens, accepted, positions) in engines.items():
        plain, by_pos = children[idx]
        for child, value in zip(plain, (drafts, tokens, accepted)):
            child.inc(value)
        for child, value in zip(by_pos, positions):
            child.inc(value)
    if started is not None:
        class Start:
            def collect(self):
                yield GaugeMetricFamily(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.", value=started)

        registry.register(Start())
    render = openmetrics_latest if openmetrics else pc.generate_latest
    return str(render(registry).decode("utf-8"))


def vllm_bench_result(before: tuple[int, int, int, tuple[int, ...]],
                      after: tuple[int, int, int, tuple[int, ...]]) -> dict:
    """The spec_decode_* part of a ``vllm bench serve --save-result`` JSON, with vLLM's field
    names and arithmetic (vllm-project/vllm 009e6d4a, vllm/benchmarks/serve.py: the deltas of
    the server's counters between two scrapes, ``delta_pos / delta_drafts`` per position,
    ``1 + delta_accepted / delta_drafts``, ``delta_accepted / delta_draft_tokens * 100``), and
    the result's first keys as ``main_async`` writes them."""
    drafts, tokens, accepted = (a - b for a, b in zip(after[:3], before[:3]))
    rates = [(a - b) / drafts for a, b in zip(after[3], before[3])]
    return {"date": "20261205-083000", "endpoint_type": "openai-chat", "backend": "openai-chat",
            "label": None, "model_id": "example/model", "tokenizer_id": "example/model",
            "num_prompts": 80, "request_rate": "inf", "burstiness": 1.0,
            "max_concurrency": 8, "duration": 312.5, "completed": 80, "failed": 0,
            "spec_decode_acceptance_rate": (accepted / tokens) * 100,
            "spec_decode_acceptance_length": 1 + accepted / drafts,
            "spec_decode_num_drafts": int(drafts), "spec_decode_draft_tokens": int(tokens),
            "spec_decode_accepted_tokens": int(accepted),
            "spec_decode_per_position_acceptance_rates": rates}


def vllm_log_line(accepted: int, drafted: int, drafts: int, per_position: tuple[int, ...],
                  prefix: str = "(APIServer pid=7) INFO 12-05 08:30:01 [metrics.py:101] ") -> str:
    """One interval's line as ``SpecDecodingLogging.log`` formats it (vllm-project/vllm
    ee4ceaae5953d367d8edd2132fd86d6c42506e1e, vllm/v1/spec_decode/metrics.py: its format
    string and arguments, the rates ``f"{p:.3f}"`` joined by ", "), after a logging prefix."""
    elapsed = 10.0
    rates_str = ", ".join(f"{n / drafts:.3f}" for n in per_position)
    # vLLM's logger formats its %-string with these arguments; so does the test
    message = ("SpecDecoding metrics: "  # noqa: UP031
               "Mean acceptance length: %.2f, "
               "Accepted throughput: %.2f tokens/s, "
               "Drafted throughput: %.2f tokens/s, "
               "Accepted: %d tokens, "
               "Drafted: %d tokens, "
               "Per-position acceptance rate: %s, "
               "Avg Draft acceptance rate: %.1f%%") % (
        1 + (accepted / drafts), accepted / elapsed, drafted / elapsed, accepted, drafted,
        rates_str, accepted / drafted * 100 if drafted > 0 else float("nan"))
    return prefix + message


def atom_scrape(steps: tuple[int, ...], *, draft_tokens: int | None = None) -> str:
    """ATOM's /metrics after a refresh: ``steps[n]`` verification steps accepted n drafts (K is
    ``len(steps) - 1``). Built as ``_AtomMetricsCollector.collect`` builds its MTP families
    (ROCm/ATOM 1b2be632623a0dd8d5d105eb82e83d85b5465d3e, atom/entrypoints/openai/metrics.py:
    ``CounterMetricFamily`` for ``atom:mtp_draft_tokens``, ``atom:mtp_accepted_tokens`` and
    ``atom:mtp_decode_steps`` labelled ``accepted_tokens``) and rendered by prometheus_client's
    ``generate_latest``; draft tokens default to K per step, as ``SpecStats`` counts them."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    k = len(steps) - 1
    tokens = k * sum(steps) if draft_tokens is None else draft_tokens
    accepted = sum(n * c for n, c in enumerate(steps))

    class Collector:
        def collect(self):
            metric = GaugeMetricFamily(
                "atom:metrics_snapshot_available",
                "Whether a runtime metrics snapshot has been collected successfully.")
            metric.add_metric([], 1.0)
            yield metric
            for name, doc, value in (
                    ("atom:mtp_draft_tokens", "Number of speculative draft tokens considered.",
                     tokens),
                    ("atom:mtp_accepted_tokens", "Number of accepted speculative bonus tokens.",
                     accepted)):
                metric = CounterMetricFamily(name, doc)
                metric.add_metric([], float(value))
                yield metric
            distribution = CounterMetricFamily(
                "atom:mtp_decode_steps",
                "Number of speculative decode steps by accepted bonus-token count.",
                labels=["accepted_tokens"])
            for n, c in sorted(enumerate(steps)):
                distribution.add_metric([str(n)], float(c))
            yield distribution

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return str(generate_latest(registry).decode("utf-8"))


def value_shape(value, seen=None):
    """``value`` with every container numbered by first sight: equal shapes share alike."""
    seen = {} if seen is None else seen
    if isinstance(value, (dict, list)):
        if id(value) in seen:
            return ("alias", seen[id(value)])
        seen[id(value)] = len(seen)
        if isinstance(value, dict):
            return ("map", [(k, value_shape(v, seen)) for k, v in value.items()])
        return ("seq", [value_shape(v, seen) for v in value])
    return (type(value).__name__, value if value == value else "nan")


# --- a random grid of runs over a history (the differential and batch tests) -------------------

DIFF_MODELS = ("model-a", "model-b")
DIFF_METHODS = ("mtp", "eagle")
DIFF_KS = (1, 2, 3)
DIFF_THINKING = ("on", "off")
DIFF_CATEGORIES = ("coding", "chat", "math")


def differential_profile(rng: random.Random, model: str, method: str, k: int, thinking: str,
                         category: str) -> list[str]:
    how = rng.choice(("measured", "measured", "copied", "literature", "assumed"))
    lines = [f"  - model: {model}", f"    speculative_method: {method}",
             f"    num_spec_tokens: {k}", f'    thinking: "{thinking}"',
             f"    category: {category}", f"    method: {how}"]
    roll = rng.random()
    if roll < 0.3:  # stored rates, AL their sum
        rates = sorted((round(rng.random(), 3) for _ in range(k)), reverse=True)
        lines += [f"    acceptance_length: {1 + sum(rates)!r}",
                  f"    per_position_rates: [{', '.join(map(repr, rates))}]"]
    else:
        al = round(rng.uniform(1, k + 1), 3)
        lines.append(f"    acceptance_length: {al}")
        if how == "measured" and roll < 0.8:  # counts that give this AL, some per position
            drafts = 1000
            accepted = round((al - 1) * drafts)
            counts = (f"drafts: {drafts}, draft_tokens: {k * drafts}, "
                      f"accepted_tokens: {accepted}")
            if rng.random() < 0.5:
                full = min(accepted // drafts, k)
                per = [drafts] * full + [accepted - drafts * full] + [0] * k
                counts += f", accepted_per_position: {per[:k]}"
            lines.append(f"    counts: {{{counts}}}")
    if how != "measured":
        lines.append("    rationale: generated for the differential test")
    if how == "copied":
        lines.append(f"    copied_from: {model}-base/{method}/k{k}/thinking-{thinking}/{category}")
    if how != "assumed":
        lines += ["    provenance:", f"      source: https://example.org/{model}/{method}.yaml"]
        if how == "measured":
            lines += [f"      hardware: {rng.choice(('b300', 'h200'))}",
                      "      engine_image: vllm/vllm-openai:v0.31.0",
                      "      sampling: {temperature: 1.0}"]
    return lines


def write_differential_sets(folder: Path, rng: random.Random, names: tuple[str, ...]) -> Path:
    """Each set holds a random third of the keys: some keys in several sets (conflicts), some
    categories in none (fallbacks and misses)."""
    folder.mkdir(parents=True)
    for name in names:
        lines = ["kind: AcceptanceProfileSet", f"name: {name}", "profiles:"]
        for model in DIFF_MODELS:
            for method in DIFF_METHODS:
                for k in DIFF_KS:
                    for thinking in DIFF_THINKING:
                        for category in DIFF_CATEGORIES:
                            if rng.random() < 0.3:
                                lines += differential_profile(rng, model, method, k,
                                                              thinking, category)
        (folder / f"{name}.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def differential_history(db_url: str, engine, tmp_path: Path) -> list[datetime]:
    """Import three sets, change two, delete one, add one: the time before each step."""
    from registry_db.importing import write as importer

    rng = random.Random(43)
    times = [datetime.now(UTC)]
    importer.import_paths(engine, [write_differential_sets(tmp_path / "one", rng,
                                                           ("alpha", "beta", "gamma"))])
    times.append(datetime.now(UTC))
    importer.import_paths(engine, [write_differential_sets(tmp_path / "two", rng,
                                                           ("alpha", "beta"))])
    times.append(datetime.now(UTC))
    deleted = run_cli("-d", db_url, "delete", "gamma", "-m", "retracted")
    assert deleted.exit_code == 0, deleted.stderr
    times.append(datetime.now(UTC))
    importer.import_paths(engine, [write_differential_sets(tmp_path / "three", rng, ("delta",))])
    return times


def differential_runs(times: list[datetime], n: int, seed: int) -> list[dict]:
    """``n`` runs of the differential grid; ``sets``: more sets in scope beside ``set``
    (drawn by a generator of their own, so the rest of the grid is the same with or without
    them)."""
    rng, more = random.Random(seed), random.Random(seed + 1)
    names = ("alpha", "beta", "gamma", "delta", "nope")
    return [dict(run, sets=tuple(more.sample(names, more.choice((1, 2))))
                 if more.random() < 0.2 else None) for run in _grid(rng, times, n)]


def scope_of(run: dict) -> tuple[str, ...] | None:
    """The sets a differential run names: ``set`` and ``sets``, each once (None: every set)."""
    named = tuple(dict.fromkeys(((run["set"],) if run["set"] else ()) + (run["sets"] or ())))
    return named or None


def _grid(rng: random.Random, times: list[datetime], n: int) -> list[dict]:
    return [{"model": rng.choice((*DIFF_MODELS, "model-z")),
             "method": rng.choice(DIFF_METHODS), "k": rng.choice((*DIFF_KS, 4)),
             "thinking": rng.choice((*DIFF_THINKING, None)),
             "category": rng.choice((*DIFF_CATEGORIES, "poetry", None)),
             "fallback": rng.choice((None, None, *DIFF_CATEGORIES)),
             "set": rng.choice((None, None, "alpha", "beta", "gamma", "delta", "nope")),
             "hardware": rng.choice((None, "b300", "B300", "h100")),
             "as_of": rng.choice((None, None, *times))} for _ in range(n)]


def typed_value(value):
    """``value`` with each scalar's type and each float's repr (``-0.0``, ``nan``): equal
    when the values are equal as a content hash sees them, shared containers or copies alike."""
    if isinstance(value, dict):
        return ("map", [(typed_value(k), typed_value(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("seq", [typed_value(v) for v in value])
    return (type(value).__name__, repr(value) if isinstance(value, float) else value)
