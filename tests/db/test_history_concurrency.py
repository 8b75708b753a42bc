"""Revisions under concurrent and killed writers, on both backends, with real processes: four
importers of the same sets leave revision numbers 1..N per set with no gap or duplicate (one per
import that changed the set), and a writer killed mid-import leaves no half revision."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from registry_db import history, store
from tests.helpers import (
    broken_foreign_keys,
    concurrent_runs,
    kill_mid_write,
    registry,
    write_set,
)

pytestmark = pytest.mark.slow


def assert_history_whole(engine) -> None:
    """Every revision holds exactly the profiles it counts, numbers run 1..N per set, and each
    stored set's current row is its latest revision's content."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT v.set_name, v.revision, v.action, v.profile_count, "
            "(SELECT COUNT(*) FROM profile_versions p WHERE p.set_name = v.set_name "
            "AND p.first_revision <= v.revision "
            "AND (p.last_revision IS NULL OR p.last_revision >= v.revision)) "
            "FROM revisions v ORDER BY v.set_name, v.revision")).all()
        current = dict(conn.execute(text("SELECT name, revision FROM profile_sets")).all())
    by_set: dict[str, list[int]] = {}
    for name, number, _action, count, held in rows:
        assert count == held, (name, number)
        by_set.setdefault(name, []).append(number)
    for name, numbers in by_set.items():
        assert numbers == list(range(1, len(numbers) + 1)), (name, numbers)
    for name, number in current.items():
        assert number == by_set[name][-1]
        assert store.load_set(engine, name) == history.load_revision(engine, name, number)
    assert not broken_foreign_keys(engine)


def test_four_importers_number_revisions_without_gaps(db_url, tmp_path):
    # Two versions of two shared sets: each import of the other version changes both.
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    write_set(v1, "shared-a", 12, model="a", al=2.5)
    write_set(v1, "shared-b", 8, model="b", al=2.0)
    write_set(v2, "shared-a", 10, model="a", al=2.75)
    write_set(v2, "shared-b", 9, model="b", al=3.0)
    results = concurrent_runs(db_url, [
        [["import", "--json", "-m", f"worker {w}", str((v1, v2)[(w + j) % 2])] for j in range(6)]
        for w in range(4)])
    assert [rc for rc, _ in results] == [0] * 24

    import json

    changed = {"shared-a": 0, "shared-b": 0}
    for _, out in results:
        for s in json.loads(out)["sets"]:
            if s["status"] != "unchanged":
                changed[s["name"]] += 1
    engine = store.open_registry(db_url)
    try:
        assert_history_whole(engine)
        found = history.history(engine)
        for name, n in changed.items():
            numbers = sorted(r.revision for r in found if r.set == name)
            # One revision per import that reported the set added or updated, no more.
            assert numbers == list(range(1, n + 1)), (name, numbers)
        assert {r.message for r in found} <= {f"worker {w}" for w in range(4)}
    finally:
        engine.dispose()


def test_killed_import_leaves_no_half_revision(db_url, tmp_path):
    folder = tmp_path / "big"
    for i in range(20):
        write_set(folder, f"big-{i:02d}", 500, model=f"m{i}", source=f"https://e/{i}.yaml")
    assert registry(db_url, "import", str(folder)).wait(timeout=180) == 0
    for i in range(20):  # every set changes, so the second import writes 20 revisions
        write_set(folder, f"big-{i:02d}", 500, model=f"m{i}", al=3.0,
                  source=f"https://e/{i}.yaml")
    kill_mid_write(db_url, registry(db_url, "import", "-m", "killed", str(folder)))

    engine = store.open_registry(db_url)
    try:
        assert_history_whole(engine)
        assert {r.revision for r in history.history(engine)} == {1}
        assert registry(db_url, "import", "-m", "again", str(folder)).wait(timeout=180) == 0
        assert_history_whole(engine)
        assert sorted({(r.revision, r.message) for r in history.history(engine)}) == [
            (1, None), (2, "again")]
    finally:
        engine.dispose()
