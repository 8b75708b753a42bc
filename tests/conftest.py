"""Database fixtures: every database test runs on a real SQLite file and a real PostgreSQL.

``backend`` is parametrized over ``sqlite`` and ``postgresql``. ``db_url`` is a database of
that backend at the schema head with no sets: the schema is migrated once per session into a
template. On SQLite each test gets its own copy of the template file. On PostgreSQL the session
clones the template database once (``CREATE DATABASE ... TEMPLATE``) and puts that clone back to
the template's state before each test (rows deleted, sequences reset, its shape checked; a test
that changed the schema, a grant or a function gets a fresh clone): dropping a database per test
costs a forced checkpoint. ``engine`` is an engine on ``db_url``. ``empty_url`` is an empty
database (no tables at all), the same way, for the tests of migrations, ``db upgrade`` and
first use. ``pg_session_url`` is the test's PostgreSQL database (the one ``db_url`` or
``empty_url`` gave).

PostgreSQL is the server named by ``REGISTRY_TEST_POSTGRES_URL`` (default: the local one at
127.0.0.1:5432 as user postgres); every database a session creates there has a name unique to
the session (so that sessions and pytest-xdist workers run side by side) and is dropped at the
end of the session. Without a reachable server the PostgreSQL tests are skipped with
the reason, unless ``REGISTRY_TEST_REQUIRE_POSTGRES=1`` (CI sets it), which makes them fail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from registry_db import store
from registry_db.store.urls import redact

# Re-exported: tests written before tests/helpers.py held them import them from here.
from tests.helpers import (
    DATA,
    DEFAULT_PG,
    EMPTY_PUBLIC,
    ROOT,
    SEED,
    PgServer,
    PgWorkspace,
    SharedRegistries,
    build_seed,
    pg_admin_url,
    with_database,
)

__all__ = ["DATA", "DEFAULT_PG", "ROOT", "SEED"]

_pg_admin_url = pg_admin_url
_with_database = with_database


def _require_pg() -> bool:
    return os.environ.get("REGISTRY_TEST_REQUIRE_POSTGRES", "") in ("1", "true", "yes")


def pytest_configure(config):
    # A suite started in the background without job control (`cmd &` in a script) inherits
    # SIGINT ignored, and so would every registry process the tests press Ctrl-C in, which
    # then never hears it; a user's terminal does not ignore it. A handler here is reset to
    # the default in each child at exec.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
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


# --- SQLite: one migrated file, copied -----------------------------------------------------------

@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    """An SQLite registry at the head, migrated once per session; :func:`db_url` copies it."""
    path = tmp_path_factory.mktemp("template") / "registry.db"
    store.open_registry(f"sqlite:///{path}").dispose()
    # The last connection's close folds the WAL into the file: the file alone is the registry.
    assert not Path(f"{path}-wal").exists()
    return path


# --- PostgreSQL: one migrated database, cloned ---------------------------------------------------

@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The PostgreSQL server under test, or a skip (a failure in CI) saying why there is none."""
    admin_url = pg_admin_url()
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT",
                          connect_args={"connect_timeout": 5})
    try:
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any failure means "no server to test against"
        admin.dispose()
        reason = (f"PostgreSQL not reachable at {redact(admin_url)} ({type(exc).__name__}: "
                  f"{str(exc).splitlines()[0] if str(exc) else ''}); set "
                  "REGISTRY_TEST_POSTGRES_URL to a server where the user may CREATE DATABASE")
        if _require_pg():
            pytest.fail(reason)
        pytest.skip(reason)
    yield PgServer(admin, admin_url)
    admin.dispose()


@pytest.fixture(scope="session")
def pg_template(pg_server) -> Iterator[str]:
    """A PostgreSQL database at the head, migrated once per session: the template of every
    :func:`db_url`. Its engine is disposed at once: a template being cloned must have no
    connections."""
    url = pg_server.create("template0")
    try:
        engine = store.make_engine(url)
        try:
            store.upgrade(engine)
        finally:
            engine.dispose()
        yield url.partition("?")[0].rsplit("/", 1)[1]
    finally:
        pg_server.drop(url)


@pytest.fixture
def pg_session_url(request) -> str:
    """The test's own PostgreSQL database: the one ``db_url`` or ``empty_url`` gave it, else a
    new one at the head. (Named when each session had one database for all its tests.)"""
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    if params.get("backend") == "postgresql":
        for name in ("db_url", "empty_url"):
            if name in request.fixturenames:
                return request.getfixturevalue(name)
    return request.getfixturevalue("_pg_head_url")


@pytest.fixture
def _pg_head_url(pg_server, pg_template) -> Iterator[str]:
    url = pg_server.create(pg_template)
    yield url
    pg_server.drop(url)


@pytest.fixture(scope="session")
def _pg_workspace(pg_server, pg_template) -> Iterator[PgWorkspace]:
    workspace = PgWorkspace(pg_server, pg_template)
    yield workspace
    workspace.close()


@pytest.fixture(scope="session")
def _pg_empty_workspace(pg_server) -> Iterator[PgWorkspace]:
    workspace = PgWorkspace(pg_server, "template0", prepare=EMPTY_PUBLIC)
    yield workspace
    workspace.close()


# --- the fixtures tests use ----------------------------------------------------------------------

@pytest.fixture
def empty_url(request, backend, tmp_path) -> str:
    """An empty database of the backend under test (no tables at all)."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.db'}"
    return request.getfixturevalue("_pg_empty_workspace").fresh()


@pytest.fixture
def db_url(request, backend, tmp_path) -> str:
    """A database at the schema head, holding no profile sets: the test's own copy."""
    if backend == "sqlite":
        path = tmp_path / "registry.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    return request.getfixturevalue("_pg_workspace").fresh()


@pytest.fixture
def engine(db_url):
    """An engine on :func:`db_url`."""
    eng = store.open_registry(db_url)
    yield eng
    eng.dispose()


# --- registries built once, read by many tests ---------------------------------------------------

@pytest.fixture(scope="session")
def _shared_registries(request, tmp_path_factory) -> Iterator[SharedRegistries]:
    made: list[tuple[PgServer, str]] = []

    def make_url(backend: str, name: str) -> str:
        if backend == "sqlite":
            path = tmp_path_factory.mktemp("shared") / f"{name}.db"
            shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
            return f"sqlite:///{path}"
        server = request.getfixturevalue("pg_server")
        made.append((server, server.create(request.getfixturevalue("pg_template"))))
        return made[-1][1]

    shared = SharedRegistries(make_url)
    yield shared
    shared.close()
    for server, url in made:
        server.drop(url)


@contextlib.contextmanager
def _checked(request, shared: SharedRegistries, backend: str) -> Iterator[Callable]:
    """A getter of ``shared``'s registries of ``backend``; on leaving, the test fails if it wrote
    to one of those it got."""
    used = []

    def get(name: str, build) -> object:
        used.append(shared.get(backend, name, build))
        return used[-1]

    yield get
    for engine in used:
        assert shared.unchanged(engine), (
            f"{request.node.nodeid} wrote to a shared read-only registry; give it its own "
            "(the db_url or engine fixture)")


@pytest.fixture
def shared_registry(request, backend, _shared_registries):
    """``shared_registry(name, build)``: the engine on a registry of the backend under test that
    ``build(engine)`` filled once this session, for tests that only read it. The test fails if it
    wrote to it."""
    with _checked(request, _shared_registries, backend) as get:
        yield get


@pytest.fixture
def shared_url(shared_registry, backend, _shared_registries):
    """``shared_url(name, build)``: the URL of :func:`shared_registry`'s registry, for tests that
    run the command line on it (held to the same rule: they only read)."""
    def get(name: str, build) -> str:
        shared_registry(name, build)
        return _shared_registries.url(backend, name, build)

    return get


@pytest.fixture
def shared_sqlite_url(request, _shared_registries):
    """``shared_sqlite_url(name, build)``: :func:`shared_url` for a test of SQLite alone (one
    with no ``backend``), held to the same rule."""
    with _checked(request, _shared_registries, "sqlite") as get:
        def url(name: str, build) -> str:
            get(name, build)
            return _shared_registries.url("sqlite", name, build)

        yield url


@pytest.fixture
def seeded(shared_url) -> str:
    """The URL of a registry holding the seed, shared by the tests that only read it."""
    return shared_url("seed", build_seed)


@pytest.fixture
def own_seeded(db_url, engine) -> str:
    """The URL of a registry holding the seed, of this test's own (for a test that adds to it)."""
    build_seed(engine)
    return db_url
