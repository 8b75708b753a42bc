"""Migration 0012 on both backends, with data: the downgrade keeps every revision (losing only
the git columns), drops the labels, puts ``set_revisions`` back as 0004 made it and says what
it loses (refusing to without ``--force``); the upgrade brings back empty provenance and
labels, and the registry works at the head again."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from registry_db import store
from registry_db.errors import DataWouldBeLost
from registry_db.history.labels import set_label
from registry_db.importing.write import import_paths
from tests.helpers import broken_foreign_keys, write_set

OLD_COLUMNS = ["profile_set", "revision", "action", "imported_at", "source_file",
               "content_hash", "profile_count", "caveat_count", "message", "is_latest"]
GIT = ["git_commit", "git_dirty", "git_path"]


def _revisions(engine) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT " + ", ".join(OLD_COLUMNS) + " FROM set_revisions "
            "ORDER BY profile_set, revision"))]


def _view_columns(engine, name: str) -> list[str]:
    return [c["name"] for c in inspect(engine).get_columns(name)]


@pytest.fixture
def filled(engine, tmp_path):
    write_set(tmp_path / "a", "alpha")
    import_paths(engine, [tmp_path / "a"])
    write_set(tmp_path / "a", "alpha", al=2.75)
    import_paths(engine, [tmp_path / "a"], message="two\nlines")
    with engine.begin() as conn:  # as an import from a work tree writes them
        conn.execute(text("UPDATE revisions SET git_commit = :c, git_dirty = :d, "
                          "git_path = 'a/alpha.yaml' WHERE revision = 2"),
                     {"c": "ab" * 20, "d": True})
    set_label(engine, "golden", set_name="alpha", revision=1, message="first")
    set_label(engine, "golden", set_name="alpha", revision=2, force=True)
    return engine


def test_the_downgrade_keeps_the_revisions_and_the_upgrade_comes_back(filled):
    engine = filled
    before = _revisions(engine)
    assert _view_columns(engine, "set_revisions") == OLD_COLUMNS + GIT
    with pytest.raises(DataWouldBeLost) as lost:
        store.downgrade(engine, "0011", refuse_loss=True)
    assert "1 label(s) and their 2 position(s)" in str(lost.value)
    assert "the git provenance of 1 revision(s)" in str(lost.value)
    assert store.current_revision(engine) == store.HEAD_REVISION

    store.downgrade(engine, "0011")
    assert store.current_revision(engine) == "0011"
    assert _view_columns(engine, "set_revisions") == OLD_COLUMNS
    assert not {"labels", "label_events"} & set(inspect(engine).get_table_names())
    assert not set(GIT) & {c["name"] for c in inspect(engine).get_columns("revisions")}
    assert _revisions(engine) == before
    assert not broken_foreign_keys(engine)

    store.upgrade(engine)
    assert _revisions(engine) == before
    with engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM set_revisions WHERE git_commit IS "
                                 "NOT NULL OR git_dirty IS NOT NULL")).scalar() == 0
        assert conn.execute(text("SELECT COUNT(*) FROM label_events")).scalar() == 0
    done = set_label(engine, "golden", set_name="alpha", revision=1)
    assert done.action == "created"


def test_an_empty_registry_goes_down_and_up(empty_url):
    engine = store.make_engine(empty_url)
    try:
        store.upgrade(engine)
        assert store.downgrade(engine, "0011", refuse_loss=True) == []
        store.upgrade(engine)
        assert store.current_revision(engine) == store.HEAD_REVISION
    finally:
        engine.dispose()
