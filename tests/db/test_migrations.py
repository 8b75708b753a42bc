"""Migration invariants, on SQLite and PostgreSQL (the four of pytest-alembic, plus data survival).

Written as our own tests because pytest-alembic 0.13.1 crashes under pytest 9.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.exc import DBAPIError

from registry_db import store
from registry_db.store.schema import metadata


def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(store.alembic_config())


def _revisions() -> list[str]:
    """Base to head, in order."""
    return [r.revision for r in reversed(list(_script().walk_revisions()))]


def test_single_head():
    """There is exactly one head, and the code's HEAD_REVISION constant names it."""
    heads = _script().get_heads()
    assert heads == [store.HEAD_REVISION]


def test_revisions_are_numbered_and_linear():
    """Files are numbered 0001, 0002, ... and each revises the one before."""
    revs = _revisions()
    assert revs == [f"{i:04d}" for i in range(1, len(revs) + 1)]
    files = sorted(p.name for p in Path(store.migrations_dir(), "versions").glob("0*.py"))
    assert [f[:4] for f in files] == revs
    for rev in _script().walk_revisions():
        expected = None if rev.revision == "0001" else f"{int(rev.revision) - 1:04d}"
        assert rev.down_revision == expected


def test_migrations_do_not_import_live_models():
    """Migrations carry their own copy of what they create, so history never changes."""
    for path in Path(store.migrations_dir(), "versions").glob("0*.py"):
        source = path.read_text()
        assert "registry_db" not in source, f"{path.name} imports the live code"


def test_upgrade_from_empty_to_head(empty_url):
    """An empty database upgrades to the head and gets every table and view."""
    engine = store.make_engine(empty_url)
    try:
        store.upgrade(engine)
        assert store.current_revision(engine) == store.HEAD_REVISION
        with engine.connect() as conn:
            insp = inspect(conn)
            assert set(metadata.tables) <= set(insp.get_table_names())
            assert {"acceptance_profiles", "profile_conflicts"} <= set(insp.get_view_names())
            methods = conn.execute(text("SELECT name FROM methods ORDER BY name")).scalars()
            assert list(methods) == sorted(
                ["measured", "literature", "vendor_spec", "copied", "assumed", "not_charged"])
    finally:
        engine.dispose()


def test_models_match_ddl(empty_url):
    """After upgrading, autogenerate finds no difference between the models and the database."""
    engine = store.make_engine(empty_url)
    try:
        store.upgrade(engine)
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(ctx, metadata)
        assert diff == []
    finally:
        engine.dispose()


def test_up_down_consistency(empty_url):
    """Every step down and up again works, from head to base and back."""
    engine = store.make_engine(empty_url)
    try:
        store.upgrade(engine)
        revs = _revisions()
        for target in reversed(["base"] + revs[:-1]):
            store.downgrade(engine, target)
            assert store.current_revision(engine) == (None if target == "base" else target)
        with engine.connect() as conn:
            assert [t for t in inspect(conn).get_table_names() if t != "alembic_version"] == []
        for target in revs:
            store.upgrade(engine, target)
            assert store.current_revision(engine) == target
    finally:
        engine.dispose()


def test_data_survives_downgrade_of_later_revision(engine):
    """Rows inserted at the head survive a downgrade of the views revision and the way back."""
    from registry_db.importing.write import import_paths
    from tests.helpers import SEED

    import_paths(engine, [SEED])

    def dump() -> dict[str, list]:
        # The current registry's tables as 0001 made them (0004's history, 0005's counts,
        # 0007's versions, 0008's import_files and 0012's labels come and go).
        out = {}
        with engine.connect() as conn:
            for table in metadata.sorted_tables:
                if table.name.startswith(("revision", "version_", "label")) or table.name in (
                        "profile_counts", "profile_versions", "profile_keys", "import_files"):
                    continue
                cols = [c.name for c in table.columns if (table.name, c.name) != (
                    "profile_sets", "revision")]
                order = ", ".join(cols)
                out[table.name] = [tuple(r) for r in conn.execute(
                    text(f"SELECT {order} FROM {table.name} ORDER BY {order}"))]
        return out

    before = dump()
    assert before["profiles"], "the seed should have imported profiles"
    store.downgrade(engine, "0001")
    assert dump() == before
    store.upgrade(engine)
    assert dump() == before
    with engine.connect() as conn:
        n = conn.execute(text("SELECT COUNT(*) FROM acceptance_profiles")).scalar()
    assert n == len(before["profiles"])


def test_failed_migration_rolls_back_ddl(empty_url, monkeypatch, tmp_path):
    """A migration that fails half-way leaves the database as it was, on SQLite too."""
    import shutil

    # The broken revision follows whatever the head is, so new migrations never collide with it.
    head, broken = store.HEAD_REVISION, f"{int(store.HEAD_REVISION) + 1:04d}"
    versions = tmp_path / "migrations" / "versions"
    shutil.copytree(store.migrations_dir(), tmp_path / "migrations",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (versions / f"{broken}_broken.py").write_text(
        '"""Broken on purpose."""\n'
        "import sqlalchemy as sa\nfrom alembic import op\n"
        f'revision = "{broken}"\ndown_revision = "{head}"\nbranch_labels = None\n'
        "depends_on = None\n"
        "def upgrade():\n"
        '    op.create_table("half_done", sa.Column("id", sa.Integer, primary_key=True))\n'
        '    op.execute("SELECT * FROM no_such_table_at_all")\n'
        "def downgrade():\n    pass\n")
    from registry_db.store import migrate

    monkeypatch.setattr(migrate, "migrations_dir", lambda: str(tmp_path / "migrations"))
    engine = store.make_engine(empty_url)
    try:
        store.upgrade(engine, head)
        with pytest.raises(DBAPIError):
            store.upgrade(engine, broken)
        assert store.current_revision(engine) == head
        with engine.connect() as conn:
            assert "half_done" not in inspect(conn).get_table_names()
    finally:
        engine.dispose()


def test_offline_sql_for_both_dialects():
    """``--sql`` renders the whole upgrade for SQLite and PostgreSQL without a database."""
    for url in ("sqlite:///nowhere.db", "postgresql+psycopg://u@nohost.invalid/x"):
        sql = store.migration_sql(url)
        assert "CREATE TABLE profiles" in sql
        assert "uq_profiles_key" in sql
        assert "CREATE VIEW acceptance_profiles" in sql
    assert "SERIAL" in store.migration_sql("postgresql+psycopg://u@nohost.invalid/x")


def test_alembic_command_line_from_the_checkout(tmp_path):
    """`alembic upgrade head` in the checkout migrates the database REGISTRY_DATABASE_URL names."""
    import os
    import subprocess
    import sys

    from tests.helpers import ROOT

    url = f"sqlite:///{tmp_path / 'via-alembic.db'}"
    env = {**os.environ, "REGISTRY_DATABASE_URL": url}
    proc = subprocess.run([sys.executable, "-m", "alembic", "upgrade", "head"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Running upgrade 0001 -> 0002" in proc.stderr
    engine = store.make_engine(url)
    try:
        assert store.current_revision(engine) == store.HEAD_REVISION
    finally:
        engine.dispose()
