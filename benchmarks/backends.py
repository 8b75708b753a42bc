"""Where the benchmarks run: fresh databases on SQLite and PostgreSQL, and the machine's facts.

:class:`Backend` owns one benchmark database per backend and run. SQLite: a template file at the
schema head, copied for every fresh database (no Alembic in the timed part). PostgreSQL: one
database created for the run (``registry_bench_<pid>``), emptied with ``TRUNCATE`` between
measurements and dropped at the end. Timing code never sees any of this; it gets URLs.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

from registry_db import store
from registry_db.store.urls import normalize_url

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


def default_postgres_url() -> str:
    """``REGISTRY_TEST_POSTGRES_URL`` or the local server as user postgres."""
    return os.environ.get("REGISTRY_TEST_POSTGRES_URL") or DEFAULT_PG


def _with_database(url: str, name: str) -> str:
    base, _, query = url.partition("?")
    head = base.rsplit("/", 1)[0] if base.count("/") >= 3 else base
    return f"{head}/{name}" + (f"?{query}" if query else "")


class Backend:
    """One backend's benchmark database: ``fresh()`` hands out an empty registry at the head."""

    def __init__(self, name: str, work: Path, postgres_url: str | None = None):
        self.name = name
        self.work = work
        self._n = 0
        self._admin = None
        if name == "sqlite":
            self._template = work / "template.db"
            if not self._template.exists():
                store.open_registry(f"sqlite:///{self._template}").dispose()
                _checkpoint(self._template)
        elif name == "postgresql":
            from sqlalchemy import create_engine, text

            admin_url = normalize_url(postgres_url or default_postgres_url())
            self._admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
            self._dbname = f"registry_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
            with self._admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{self._dbname}"'))
            self.url = _with_database(admin_url, self._dbname)
            store.open_registry(self.url).dispose()
        else:
            raise ValueError(f"unknown backend {name!r}")

    def fresh(self) -> str:
        """The URL of an empty registry database at the schema head."""
        if self.name == "sqlite":
            self._n += 1
            path = self.work / f"sqlite-{self._n}.db"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            shutil.copyfile(self._template, path)
            return f"sqlite:///{path}"
        from sqlalchemy import create_engine, text

        eng = create_engine(self.url, isolation_level="AUTOCOMMIT")
        with eng.connect() as conn:
            # profile_keys references nothing, so no CASCADE from the others reaches it.
            conn.execute(text("TRUNCATE profile_sets, provenances, revisions, import_files, "
                              "profile_keys RESTART IDENTITY CASCADE"))
        eng.dispose()
        return self.url

    def settle(self, url: str) -> None:
        """After a bulk load: fresh planner statistics (PostgreSQL), a WAL checkpoint (SQLite)."""
        if self.name == "sqlite":
            _checkpoint(Path(url.split(":///", 1)[1]))
            return
        from sqlalchemy import create_engine, text

        eng = create_engine(url, isolation_level="AUTOCOMMIT")
        with eng.connect() as conn:
            conn.execute(text("VACUUM ANALYZE"))
        eng.dispose()

    def close(self) -> None:
        """Drop the run's PostgreSQL database; remove SQLite files."""
        if self._admin is not None:
            from sqlalchemy import text

            with self._admin.connect() as conn:
                conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                  "WHERE datname = :n AND pid <> pg_backend_pid()"),
                             {"n": self._dbname})
                conn.execute(text(f'DROP DATABASE IF EXISTS "{self._dbname}"'))
            self._admin.dispose()
        else:
            for path in self.work.glob("sqlite-*.db*"):
                path.unlink(missing_ok=True)


def _checkpoint(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def machine(postgres_url: str | None = None) -> dict:
    """CPU model, cores, memory, OS, Python, SQLite, PyYAML, SQLAlchemy and PostgreSQL versions."""
    import sqlalchemy
    import yaml

    cpu = "unknown"
    try:
        text = Path("/proc/cpuinfo").read_text()
        found = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
        cpu = found.group(1).strip() if found else cpu
    except OSError:
        pass
    mem = None
    try:
        found = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        mem = round(int(found.group(1)) / 1024 / 1024, 1) if found else None
    except OSError:
        pass
    info = {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gib": mem,
        "os": platform.platform(), "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version, "pyyaml": yaml.__version__,
        "pyyaml_libyaml": bool(getattr(yaml, "__with_libyaml__", False)),
        "sqlalchemy": sqlalchemy.__version__, "postgresql": None,
    }
    if postgres_url:
        try:
            import psycopg

            with psycopg.connect(_conninfo(normalize_url(postgres_url)), connect_timeout=5) as c:
                row = c.execute("SHOW server_version").fetchone()
                info["postgresql"] = row[0] if row else None
                info["psycopg"] = psycopg.__version__
        except Exception as exc:  # noqa: BLE001 - the machine report must not fail the run
            info["postgresql"] = f"unreachable ({type(exc).__name__})"
    return info


def _conninfo(url: str) -> str:
    return "postgresql://" + url.split("://", 1)[1]


def git_revision(root: Path) -> str | None:
    """The checkout's commit (with ``+dirty`` when files differ), for the JSON record."""
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--",
                                "registry_db"], capture_output=True, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None
