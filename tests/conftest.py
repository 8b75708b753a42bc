"""Database fixtures: every database test runs on a real SQLite file and a real PostgreSQL.

``backend`` is parametrized over ``sqlite`` and ``postgresql``; ``empty_url`` is an empty
database of that backend, ``db_url`` one at the schema head with no sets, ``engine`` an engine
on it. PostgreSQL is the server named by ``REGISTRY_TEST_POSTGRES_URL`` (default: the local one
at 127.0.0.1:5432 as user postgres); each test session creates its own database there and drops
it at the end. Without a reachable server the PostgreSQL tests are skipped with the reason,
unless ``REGISTRY_TEST_REQUIRE_POSTGRES=1`` (CI sets it), which makes them fail instead.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from registry_db import store
from registry_db.store.urls import normalize_url, redact

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "seed" / "acceptance"
DATA = Path(__file__).resolve().parent / "data"

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


def _pg_admin_url() -> str:
    return normalize_url(os.environ.get("REGISTRY_TEST_POSTGRES_URL") or DEFAULT_PG)


def _require_pg() -> bool:
    return os.environ.get("REGISTRY_TEST_REQUIRE_POSTGRES", "") in ("1", "true", "yes")


def _with_database(url: str, name: str) -> str:
    base, _, query = url.partition("?")
    head = base.rsplit("/", 1)[0] if base.count("/") >= 3 else base
    return f"{head}/{name}" + (f"?{query}" if query else "")


@pytest.fixture(scope="session")
def pg_session_url():
    """A fresh PostgreSQL database for this test session (dropped at the end)."""
    from sqlalchemy import create_engine, text

    admin_url = _pg_admin_url()
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT",
                          connect_args={"connect_timeout": 5})
    name = f"registry_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # noqa: BLE001 - any failure means "no server to test against"
        admin.dispose()
        reason = (f"PostgreSQL not reachable at {redact(admin_url)} ({type(exc).__name__}: "
                  f"{str(exc).splitlines()[0] if str(exc) else ''}); set "
                  "REGISTRY_TEST_POSTGRES_URL to a server where the user may CREATE DATABASE")
        if _require_pg():
            pytest.fail(reason)
        pytest.skip(reason)
    yield _with_database(admin_url, name)
    with admin.connect() as conn:
        conn.execute(text(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = :n AND pid <> pg_backend_pid()"), {"n": name})
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
    admin.dispose()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "only_backend(name): the test applies to one backend only; the other "
                   "backend's instance is deselected (not skipped: there is nothing to check)")


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("only_backend")
        param = getattr(getattr(item, "callspec", None), "params", {}).get("backend")
        (drop if marker and param and param != marker.args[0] else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request) -> str:
    """The backend under test."""
    return request.param


def _reset_pg(url: str) -> None:
    from sqlalchemy import create_engine, text

    eng = create_engine(url, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    eng.dispose()


@pytest.fixture
def empty_url(request, backend, tmp_path) -> str:
    """An empty database of the backend under test (no tables at all)."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.db'}"
    url = request.getfixturevalue("pg_session_url")
    _reset_pg(url)
    return url


@pytest.fixture
def db_url(request, backend, tmp_path) -> str:
    """A database at the schema head, holding no profile sets."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'registry.db'}"
        store.open_registry(url).dispose()
        return url
    from sqlalchemy import text

    url = request.getfixturevalue("pg_session_url")
    eng = store.make_engine(url)
    try:
        current = store.current_revision(eng)
        # A test may leave the database stamped at the head over an older schema (`db stamp`):
        # the head's tables must all be there too, else it is rebuilt.
        from sqlalchemy import inspect

        from registry_db.store.schema import metadata

        if current != store.HEAD_REVISION or not set(metadata.tables) <= set(
                inspect(eng).get_table_names()):
            _reset_pg(url)
            store.upgrade(eng)
        else:
            with eng.begin() as conn:
                conn.execute(text(
                    "TRUNCATE profile_sets, provenances, revisions, profile_keys, import_files "
                    "RESTART IDENTITY CASCADE"))
    finally:
        eng.dispose()
    return url


@pytest.fixture
def engine(db_url):
    """An engine on :func:`db_url`."""
    eng = store.open_registry(db_url)
    yield eng
    eng.dispose()
