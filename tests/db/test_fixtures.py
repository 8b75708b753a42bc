"""The database fixtures' fast paths equal the plain ones: a copied or reset database is the one
a fresh migration gives, whatever the test before did to it."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import text

from registry_db import store
from registry_db.importing import write as importer
from tests.helpers import EMPTY_PUBLIC, PG_SHAPE, SEED, PgWorkspace, dump


def _sqlite_schema(path: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                            "ORDER BY type, name").fetchall() + [
            conn.execute("PRAGMA user_version").fetchone(),
            conn.execute("PRAGMA journal_mode").fetchone()]
    finally:
        conn.close()


@pytest.mark.only_backend("sqlite")
def test_the_sqlite_copy_is_a_freshly_migrated_file(db_url, backend, tmp_path):
    fresh = tmp_path / "fresh" / "registry.db"
    fresh.parent.mkdir()
    store.open_registry(f"sqlite:///{fresh}").dispose()
    copied = store.urls.sqlite_path(db_url)
    assert _sqlite_schema(copied) == _sqlite_schema(str(fresh))
    one, other = store.open_registry(db_url), store.open_registry(f"sqlite:///{fresh}")
    try:
        assert dump(one) == dump(other)
    finally:
        one.dispose()
        other.dispose()


def _state(url: str) -> tuple:
    """Everything a test could see of a database: its shape, every row, each sequence's next
    value (read without taking it: a copy of the sequence's own row)."""
    engine = store.make_engine(url)
    try:
        with engine.connect() as conn:
            shape = conn.execute(PG_SHAPE).scalar()
            sequences = conn.execute(text(
                "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public' "
                "ORDER BY 1")).all()
        rows = dump(engine) if store.current_revision(engine) else {}
    finally:
        engine.dispose()
    return shape, sequences, rows


@pytest.mark.only_backend("postgresql")
def test_the_reset_database_is_a_fresh_clone_of_the_template(backend, pg_server, pg_template):
    workspace = PgWorkspace(pg_server, pg_template)
    plain = pg_server.create(pg_template)
    try:
        url = workspace.fresh()
        engine = store.open_registry(url)
        try:  # what tests do: write sets, revisions, provenances; take sequence values
            importer.import_paths(engine, [SEED])
            with engine.begin() as conn:
                conn.execute(text("DELETE FROM profile_sets"))
        finally:
            engine.dispose()
        assert workspace.fresh() == url  # rows only: the same database, reset
        assert _state(url) == _state(plain)
        engine = store.make_engine(url)
        try:  # a changed shape: a fresh clone
            with engine.begin() as conn:
                conn.execute(text("CREATE TABLE left_behind (x int)"))
        finally:
            engine.dispose()
        again = workspace.fresh()
        assert again != url and _state(again) == _state(plain)
    finally:
        workspace.close()
        pg_server.drop(plain)


@pytest.mark.only_backend("postgresql")
def test_the_reset_empty_database_is_a_fresh_empty_one(backend, pg_server):
    workspace = PgWorkspace(pg_server, "template0", prepare=EMPTY_PUBLIC)
    plain = pg_server.create("template0")
    try:
        url = workspace.fresh()
        engine = store.make_engine(url)
        try:
            store.upgrade(engine)
        finally:
            engine.dispose()
        assert workspace.fresh() == url
        assert _state(url) == _state(plain)
    finally:
        workspace.close()
        pg_server.drop(plain)


def test_a_shared_registry_is_the_one_its_build_gives_and_a_write_is_caught(
        backend, _shared_registries, db_url):
    """A registry shared by read-only tests holds what a fresh database with the same build
    holds (the same sets, the same rows in every table but for the times), and a test that
    writes to it is caught: the check the ``shared_registry`` fixture makes after each test then
    says it changed."""
    from tests.helpers import build_seed

    shared = _shared_registries.get(backend, "fixture-check", build_seed)
    own = store.open_registry(db_url)
    try:
        build_seed(own)
        assert store.load_sets(shared) == store.load_sets(own)
        assert {t: len(r) for t, r in dump(shared).items()} == {
            t: len(r) for t, r in dump(own).items()}
        assert _shared_registries.unchanged(shared)
        importer.import_paths(shared, [SEED], message="a write")
        assert _shared_registries.unchanged(shared)  # unchanged: the same content is not written
        with shared.begin() as conn:
            conn.execute(text("DELETE FROM profile_rates"))
            conn.execute(text("DELETE FROM profiles WHERE id = (SELECT MAX(id) FROM profiles)"))
        assert not _shared_registries.unchanged(shared)
    finally:
        own.dispose()
