"""The statements an import and a revision's read run against ``profile_versions`` search a
set's versions by ``ix_profile_versions_set_name_first_revision`` (migration 0009), never scan the
history, and an import finds each new version's stretch by its key: on SQLite, whose planner
picks an index by the statement alone (PostgreSQL's choice depends on the table's statistics:
reading a fifth of a small table, it rightly scans)."""

from __future__ import annotations

import dataclasses
import re

from sqlalchemy import event

from registry_db import history, store
from registry_db.importing import write as importer
from tests.helpers import generated_sets

INDEX = "ix_profile_versions_set_name_first_revision"


def _changed(sets, round_: int):
    """Each set with every tenth profile's value moved (a new version of it)."""
    out = []
    for s in sets:
        profiles = list(s.profiles)
        for i in range(round_ % 10, len(profiles), 10):
            p = profiles[i]
            al = 1.0 + (p.acceptance_length - 1.0) * 0.9
            profiles[i] = dataclasses.replace(p, acceptance_length=round(al, 6))
        out.append(dataclasses.replace(s, profiles=tuple(profiles)))
    return out


def _plans(engine, work, wanted=lambda statement: "profile_versions" in statement
           ) -> list[tuple[str, str]]:
    """(statement, the backend's plan) of every statement ``work`` runs that is ``wanted``
    (by default: those that read the versions)."""
    seen: list[tuple[str, object]] = []

    def keep(conn, cursor, statement, parameters, context, executemany):
        if wanted(statement) and not executemany:
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", keep)
    try:
        work()
    finally:
        event.remove(engine, "before_cursor_execute", keep)
    out = []
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as conn:
        cur = conn.connection.dbapi_connection.cursor()
        for statement, parameters in seen:
            cur.execute(("EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN ") + statement,
                        parameters)
            rows = cur.fetchall()
            out.append((statement, "\n".join(str(r[-1] if sqlite else r[0]) for r in rows)))
    return out


def test_an_import_and_a_revision_search_the_versions_by_set(tmp_path):
    engine = store.open_registry(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        sets = generated_sets(per_set=300)
        importer.import_sets(engine, sets)
        for n in range(1, 4):
            sets = _changed(sets, n)
            importer.import_sets(engine, sets)
        later = _changed(sets, 4)
        plans = _plans(engine, lambda: importer.import_sets(engine, later))
        plans += _plans(engine, lambda: history.load_revision(engine, sets[0].name, 2))
        plans += _plans(engine, lambda: history.delete_sets(engine, [sets[1].name]))
        assert len(plans) >= 6, plans  # open versions, rates, counts, new ones, a revision's...
        for statement, plan in plans:
            # Whatever else a plan does, it never walks the whole history table.
            assert not re.search(r"^SCAN (profile_versions|profile_keys|p)\b", plan, re.M), (
                statement, plan)
        for statement, plan in plans:
            if statement.startswith("INSERT INTO profile_versions"):
                # Each new version's stretch by its key, not by walking the set's open ones.
                assert re.search(r"SEARCH profile_keys USING COVERING INDEX \S+ \(model=\?",
                                 plan), (statement, plan)
        searched = [plan for _, plan in plans if INDEX in plan]
        assert len(searched) >= 4, plans
    finally:
        engine.dispose()


def test_each_new_version_finds_its_stretch_by_the_key_index(engine):
    """The versions an import begins name their key's stretch, found in one probe of
    ``uq_profile_keys_key`` per row on both backends, never among the set's open stretches
    (PostgreSQL's choice for ``valid_until IS NULL``, which cost an import a search of the
    whole set per row: docs/decisions.md, "Versions found by their key's stretch")."""
    sets = generated_sets(per_set=300)
    importer.import_sets(engine, sets)
    plans = _plans(engine, lambda: importer.import_sets(engine, _changed(sets, 1)),
                   lambda statement: statement.startswith("INSERT INTO profile_versions"))
    assert plans
    index = ("sqlite_autoindex_profile_keys_1" if engine.dialect.name == "sqlite"
             else "uq_profile_keys_key")
    for _, plan in plans:
        assert index in plan, plan
        assert "ix_profile_keys_set_name_valid_until" not in plan, plan
