"""Histories written before revisions were stamped under the writers' lock: times out of order.

The old writers stamped each revision with their own clock, so a history at schema 0004-0006
can hold a revision stamped before the one it follows. Three shapes the old code could write
(issue: a delete queued behind a writer, skewed clocks, a clock stepped back), set up as the
issue did (a registry written by the importer, downgraded to 0004, one time moved back):

- ``gone``: its deletion (revision 3) stamped before the update it follows (revision 2);
- ``early``: revision 3 stamped before both its predecessors;
- ``between``: revision 3 stamped between revisions 1 and 2 (and it re-adds a removed key).

``db upgrade`` must succeed (it once failed at 0010, a dead end), put the times in revision
order with the change in each moved revision's message, and afterwards every reader must answer
"as of T" by one rule: ``resolve --as-of`` (the resolver's SQL), ``show --as-of`` and
``history.held`` agree at every probe time, and equal an independent reading of the repaired
history (the latest revision by number stamped at or before T, unless a deletion).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from registry_db import history, store
from registry_db.errors import NotFound
from registry_db.history.record import stored_time
from registry_db.importing import write as importer
from tests.helpers import run_cli, set_yaml

T1 = datetime(2026, 1, 1, tzinfo=UTC)
T2 = datetime(2026, 2, 1, tzinfo=UTC)

#: set -> (AL of cat0 at revisions 1, 2, 3 (None: deleted), revision 3's time).
SHAPES = {
    "gone": ((2.5, 3.0, None), T2 - timedelta(hours=1)),
    "early": ((2.5, 3.0, 3.5), T1 - timedelta(days=1)),
    "between": ((2.5, 3.0, 3.5), T1 + (T2 - T1) / 2),
}
KEY = ["--model", "model-a", "--method", "mtp", "--k", "3", "--thinking", "on",
       "--category", "cat0"]


def _write_history(url: str, tmp_path) -> None:
    """Each set's three revisions through the importer (``between`` drops cat1 at revision 2
    and brings it back at 3), then down to 0004 and the times set as the old writers did."""
    engine = store.open_registry(url)
    try:
        for name, (als, _) in SHAPES.items():
            for i, al in enumerate(als):
                folder = tmp_path / f"{name}{i}"
                if al is None:
                    history.delete_sets(engine, [name])
                    continue
                n = 1 if (name == "between" and i == 1) else 2
                folder.mkdir()
                (folder / f"{name}.yaml").write_text(
                    set_yaml(name, n, al=al, model="model-a"))
                importer.import_paths(engine, [folder / f"{name}.yaml"])
        store.downgrade(engine, "0004")
        with engine.begin() as conn:
            for name, (_, third) in SHAPES.items():
                for number, at in ((1, T1), (2, T2), (3, third)):
                    conn.execute(text("UPDATE revisions SET imported_at = :t WHERE "
                                      "set_name = :n AND revision = :r"),
                                 {"t": _stored(conn, at), "n": name, "r": number})
                conn.execute(text("UPDATE profile_sets SET imported_at = :t WHERE name = :n"),
                             {"t": _stored(conn, third), "n": name})
    finally:
        engine.dispose()


def _stored(conn, at: datetime):
    """``at`` as the column holds it (SQLite: SQLAlchemy's text form, without the zone)."""
    return stored_time(at) if conn.dialect.name == "sqlite" else at


def _resolved(url: str, name: str, at: datetime) -> float | None:
    result = run_cli("-d", url, "resolve", *KEY, "--set", name, "--as-of", at.isoformat(),
                     "--json")
    body = json.loads(result.stdout)
    return None if "refused" in body else body["acceptance_length"]


def _shown(url: str, name: str, at: datetime) -> float | None:
    result = run_cli("-d", url, "show", name, "--as-of", at.isoformat(), "--json")
    if result.exit_code != 0:
        return None
    profiles = json.loads(result.stdout)["profiles"]
    return next(p["acceptance_length"] for p in profiles if p["category"] == "cat0")


def _held(engine, name: str, at: datetime) -> float | None:
    try:
        (found,) = history.held(engine, [name], as_of=at)
    except NotFound:
        return None
    return next(p.acceptance_length for p in found.set.profiles if p.category == "cat0")


def _answers_by_one_rule(url: str, shapes: dict) -> None:
    """Times in revision order, the moved ones noted, and every reader's as-of answers equal
    to an independent reading of the history at 21 probe times."""
    engine = store.open_registry(url)
    try:
        probes = sorted({T1, T2, *(t for _, t in SHAPES.values()),
                         datetime(2030, 1, 1, tzinfo=UTC)})
        probes = sorted({p + d for p in probes
                         for d in (-timedelta(seconds=1), timedelta(0), timedelta(seconds=1))})
        for name, (als, _) in shapes.items():
            revs = history.history(engine, name)
            times = [r.imported_at for r in sorted(revs, key=lambda r: r.revision)]
            assert times == sorted(times) and len(set(times)) == 3, name
            moved = [r for r in revs if r.message and "time moved forward from" in r.message]
            assert [r.revision for r in moved] == [3], name
            for at in probes:
                number = max((r.revision for r in revs if r.imported_at <= at), default=None)
                expected = None if number is None else als[number - 1]
                seen = (_resolved(url, name, at), _shown(url, name, at), _held(engine, name, at))
                assert seen == (expected,) * 3, (name, at, seen)
    finally:
        engine.dispose()


def test_a_legacy_history_upgrades_and_every_reader_answers_as_of_alike(empty_url, tmp_path):
    _write_history(empty_url, tmp_path)
    result = run_cli("-d", empty_url, "db", "upgrade")
    assert result.exit_code == 0, result.stderr
    assert "moved the times of 3 revision(s) of 3 set(s)" in result.stderr
    _answers_by_one_rule(empty_url, SHAPES)


def test_a_registry_upgraded_before_the_repair_is_repaired_by_db_repair(empty_url, tmp_path):
    """``between`` went through the old upgrade (SQLite's let it through with its times as they
    were): ``db repair`` takes it down and back up with the times in order. (PostgreSQL's old
    upgrade refused it and left it at 0004: ``db repair`` repairs it there.)"""
    from alembic import command

    _write_history(empty_url, tmp_path)
    engine = store.make_engine(empty_url)
    try:
        with engine.begin() as conn:  # only the shape the old upgrade let through
            conn.execute(text("DELETE FROM revisions WHERE set_name <> 'between'"))
            conn.execute(text("DELETE FROM profile_sets WHERE name <> 'between'"))
        try:
            with engine.connect() as conn:  # the old upgrade: no repair before the migrations
                command.upgrade(store.alembic_config(connection=conn), "head")
        except DBAPIError:  # PostgreSQL's old upgrade refuses it (more than one row): at 0004
            pass
        old_upgrade_passed = store.current_revision(engine) == store.HEAD_REVISION
    finally:
        engine.dispose()
    if old_upgrade_passed:  # at the head with its times out of order: upgrade says what to do
        hint = run_cli("-d", empty_url, "db", "upgrade")
        assert hint.exit_code == 0 and "run `registry db repair`" in hint.stderr
    result = run_cli("-d", empty_url, "db", "repair")
    assert result.exit_code == 0, result.stderr
    assert "moved the times of 1 revision(s) of 1 set(s)" in result.stderr
    assert "db repair" not in run_cli("-d", empty_url, "db", "upgrade").stderr
    if not old_upgrade_passed:  # repaired in place at 0004: the upgrade now goes through
        assert run_cli("-d", empty_url, "db", "upgrade").exit_code == 0
    engine = store.make_engine(empty_url)
    try:
        assert store.current_revision(engine) == store.HEAD_REVISION
    finally:
        engine.dispose()
    _answers_by_one_rule(empty_url, {"between": SHAPES["between"]})
    again = run_cli("-d", empty_url, "db", "repair")
    assert again.exit_code == 0 and "already follows revision order" in again.stderr
