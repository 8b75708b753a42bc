"""The schema describes itself: PostgreSQL comments on every table, view and column, from the
catalog (store/catalog.py) by way of the migrations' own copies of its words."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import text

from registry_db import store
from registry_db.store import catalog


def _migration_modules() -> list:
    """Every migration module, in revision order (loaded from the files, as Alembic does)."""
    out = []
    for path in sorted(Path(store.migrations_dir(), "versions").glob("0*.py")):
        spec = importlib.util.spec_from_file_location(f"_migration_{path.stem}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out.append(module)
    return out


def _comments_by_migrations() -> dict[str, tuple[str, str, dict[str, str]]]:
    """What the migrations leave behind: each migration's ``COMMENTS`` over the earlier ones'."""
    found: dict[str, tuple[str, str, dict[str, str]]] = {}
    for module in _migration_modules():
        for name in getattr(module, "DROPPED", ()):  # their comments went with them
            found.pop(name, None)
        for name, (kind, words, columns) in getattr(module, "COMMENTS", {}).items():
            old = found.get(name, (kind, words, {}))[2]
            found[name] = (kind, words, {**old, **columns})
    return found


def test_the_migrations_carry_the_catalogs_words():
    """A description changed in the catalog needs a migration that writes it: the comments the
    migrations write are exactly the catalog's, relation by relation and column by column."""
    assert _comments_by_migrations() == catalog.comments()


def test_the_comments_are_the_catalogs_words_in_plain_text():
    """The Markdown code marks are dropped and the unit follows the meaning."""
    kind, words, columns = catalog.comments()["acceptance_profiles"]
    assert kind == "view"
    assert columns["acceptance_length"].endswith("in [1, K + 1]. Unit: tokens per step.")
    assert columns["profile_set"] == "The set's name (profile_sets.name)."
    assert "`" not in words + "".join(columns.values())


def test_the_comments_migration_loses_nothing(engine):
    """``db downgrade`` asks each migration what its downgrade would destroy: here, nothing."""
    modules = [m for m in _migration_modules() if getattr(m, "COMMENTS", None)]
    assert modules
    with engine.connect() as conn:
        for module in modules:
            assert module.would_lose(conn) == []


def _stored_comments(conn) -> dict[str, tuple[str | None, dict[str, str | None]]]:
    """Each catalog relation's comment and its columns' comments, as PostgreSQL holds them
    (the relations it has: an older schema lacks the newer ones)."""
    out = {}
    for name, (_kind, _words, columns) in catalog.comments().items():
        if conn.execute(text("SELECT to_regclass(:n)"), {"n": name}).scalar() is None:
            continue
        own = conn.execute(text("SELECT obj_description(CAST(:n AS regclass), 'pg_class')"),
                           {"n": name}).scalar()
        cols = dict(conn.execute(text(
            "SELECT a.attname, col_description(a.attrelid, a.attnum) FROM pg_attribute a "
            "WHERE a.attrelid = CAST(:n AS regclass) AND a.attnum > 0 AND NOT a.attisdropped"),
            {"n": name}).all())
        newer = set(NEWER_COLUMNS.get(name, ())) - set(cols)  # an older schema's relation
        assert set(cols) == set(columns) - newer, name
        out[name] = (own, cols)
    return out


#: The catalog's relations that 0005 does not have (0007, 0008 and 0012 made them).
NEWER_THAN_0005 = ("profile_versions", "profile_keys", "version_rates", "version_counts",
                   "import_files", "labels", "label_events")
#: Columns later migrations added to older relations (0012: git provenance).
NEWER_COLUMNS = {name: ("git_commit", "git_dirty", "git_path")
                 for name in ("revisions", "set_revisions")}


@pytest.mark.only_backend("postgresql")
def test_postgresql_holds_every_description_and_the_downgrade_removes_them(engine):
    expected = {name: (words, columns)
                for name, (_kind, words, columns) in catalog.comments().items()}
    with engine.connect() as conn:
        assert _stored_comments(conn) == expected
    store.downgrade(engine, "0005")
    try:
        with engine.connect() as conn:
            # The relations of later migrations are gone; every one left is undescribed.
            assert {n: (own, set(cols.values())) for n, (own, cols) in
                    _stored_comments(conn).items()} == {n: (None, {None}) for n in expected
                                                        if n not in NEWER_THAN_0005}
    finally:
        store.upgrade(engine)
    with engine.connect() as conn:
        assert _stored_comments(conn) == expected


@pytest.mark.only_backend("postgresql")
def test_psql_describes_the_view(engine, db_url):
    """What an analyst sees: ``\\d+ acceptance_profiles`` in psql, the view's columns explained."""
    psql = shutil.which("psql")
    assert psql, "psql is part of the PostgreSQL client that .ci/run installs"
    url = db_url.replace("postgresql+psycopg://", "postgresql://")
    shown = subprocess.run([psql, url, "-X", "-c", r"\d+ acceptance_profiles"],
                           capture_output=True, text=True, timeout=60, check=True).stdout
    assert "AL: tokens a request gains per verification step" in shown
    assert "Unit: tokens per step." in shown
    tables = subprocess.run([psql, url, "-X", "-c", r"\dv+"], capture_output=True, text=True,
                            timeout=60, check=True).stdout
    assert "The contract's stable view." in tables
