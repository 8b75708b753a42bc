"""The collector's pause is the command's, taken at its edge: a library caller's collector is
left as it found it, inside the import and after it (registry_db.gcpause)."""

from __future__ import annotations

import gc

import pytest

from registry_db.importing import write as importer
from tests.helpers import write_set


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    gc.enable() if was else gc.disable()


def test_a_library_import_leaves_the_callers_collector_running(engine, tmp_path, collector_on):
    for i in range(3):
        write_set(tmp_path / "in", f"set-{i}", n=400)
    seen: list[bool] = []
    report = importer.import_paths(engine, [tmp_path / "in"],
                                   progress=lambda *_: seen.append(gc.isenabled()))
    assert [s.status for s in report.sets] == ["added"] * 3
    assert seen and all(seen)  # still collecting while the sets were written
    assert gc.isenabled()


def test_a_library_load_leaves_the_callers_collector_running(tmp_path, collector_on):
    write_set(tmp_path / "in", "big", n=2_000)
    seen: list[bool] = []
    sets, _ = importer.load_paths([tmp_path / "in"], lambda *_: seen.append(gc.isenabled()))
    assert len(sets[0].profiles) == 2_000
    assert seen and all(seen)


def test_a_caller_that_paused_the_collector_keeps_it_paused(engine, tmp_path, collector_on):
    gc.disable()
    importer.import_paths(engine, [write_set(tmp_path, "one", n=1_500)])
    assert not gc.isenabled()
