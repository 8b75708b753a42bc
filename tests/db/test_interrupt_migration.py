"""Ctrl-C around a migration: exit 130 means nothing was written, exit 0 that it committed.

In process and deterministic: the interrupt is raised by the driver's own calls at the moment
under test, never timed. Inside the migration (a statement of 0007's), the way a real SIGINT
lands in a driver call: SQLAlchemy closes the connection, and putting its state back
(SQLite's ``PRAGMA foreign_keys``) once failed with "Cannot operate on a closed database",
exit 3. Right after the COMMIT of the upgrade (the driver's commit has returned): a real
SIGINT sent to the process, which once made a committed upgrade exit 130.
"""

from __future__ import annotations

import os
import signal

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Engine
from sqlalchemy.engine.default import DefaultDialect

from registry_db import store
from tests.helpers import migrated_to, run_cli, write_set

#: A schema with a history, and the statement of the next migrations to be interrupted in.
START = "0004"
INSIDE = "CREATE TABLE profile_versions"


def _at_start(url: str) -> None:
    with migrated_to(url, START) as engine, engine.begin() as conn:
        conn.execute(text("INSERT INTO profile_sets (id, name, source_file, content_hash, "
                          "imported_at) VALUES (1, 'kept', 'kept.yaml', 'h', "
                          "'2026-06-01 00:00:00')"))


def _revision(url: str) -> str | None:
    engine = store.make_engine(url)
    try:
        return store.current_revision(engine)
    finally:
        engine.dispose()


@pytest.fixture
def interrupt_at(monkeypatch):
    """``interrupt_at(statement)``: KeyboardInterrupt from the driver's execution of the first
    statement starting with it, as SIGINT raises it there."""
    listeners = []

    def arm(start: str) -> None:
        def raising(_conn, _cursor, statement, *_args):  # noqa: ANN001
            if statement.lstrip().startswith(start):
                raise KeyboardInterrupt

        event.listen(Engine, "before_cursor_execute", raising)
        listeners.append(raising)

    yield arm
    for fn in listeners:
        event.remove(Engine, "before_cursor_execute", fn)


def test_ctrl_c_inside_a_migration_is_exit_130_and_nothing_written(empty_url, interrupt_at):
    _at_start(empty_url)
    interrupt_at(INSIDE)
    result = run_cli("-d", empty_url, "db", "upgrade")
    assert (result.exit_code, result.stderr) == (130, "interrupted\n")
    assert _revision(empty_url) == START


def test_ctrl_c_inside_the_migration_of_a_new_file_is_exit_130(tmp_path, interrupt_at):
    """A first import creates a new SQLite file's registry (every migration): interrupted
    there, the same."""
    url = f"sqlite:///{tmp_path / 'new.db'}"
    write_set(tmp_path / "in", "first")
    interrupt_at(INSIDE)
    result = run_cli("-d", url, "import", str(tmp_path / "in"))
    assert (result.exit_code, result.stderr) == (130, "interrupted\n")
    assert _revision(url) is None


def test_ctrl_c_right_after_the_upgrade_commits_is_exit_0(empty_url, monkeypatch):
    """SIGINT once the driver's COMMIT of the migration has returned: it is written, exit 0."""
    _at_start(empty_url)
    real = DefaultDialect.do_commit
    state = {"migrated": False, "sent": False}

    def seen(_conn, _cursor, statement, *_args):  # noqa: ANN001
        if "alembic_version" in statement and statement.lstrip().startswith("UPDATE"):
            state["migrated"] = True

    def commit_then_sigint(self, dbapi_connection):  # noqa: ANN001
        real(self, dbapi_connection)
        if state["migrated"] and not state["sent"]:
            state["sent"] = True
            os.kill(os.getpid(), signal.SIGINT)

    event.listen(Engine, "before_cursor_execute", seen)
    monkeypatch.setattr(DefaultDialect, "do_commit", commit_then_sigint)
    try:
        result = run_cli("-d", empty_url, "db", "upgrade")
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert state["sent"]
    assert result.exit_code == 0, result.stderr
    assert "interrupted after commit" in result.stderr
    assert _revision(empty_url) == store.HEAD_REVISION
