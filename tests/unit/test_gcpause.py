"""The collector's pause around bulk work: restored as found, and nothing left for its next run
to walk; a heap that someone else froze stays frozen."""

from __future__ import annotations

import gc

import pytest

from registry_db.gcpause import PAUSE_FROM, gc_paused


@pytest.fixture
def collector():
    """The collector enabled and nothing frozen; restored afterwards."""
    was = gc.isenabled()
    gc.enable()
    gc.collect()
    yield
    gc.unfreeze()
    gc.enable() if was else gc.disable()


def test_pause_ages_what_it_made_into_the_oldest_generation(collector):
    with gc_paused(PAUSE_FROM):
        assert not gc.isenabled()
        made = [[i] for i in range(50_000)]
        assert gc.get_count()[0] > 50_000  # all of it young: the next collection would walk it
    after = [[i] for i in range(10)]  # the allocations that would start that collection
    assert gc.isenabled()
    oldest = {id(x) for x in gc.get_objects(generation=2)}
    assert id(made) in oldest and id(made[-1]) in oldest and id(after) not in oldest
    assert gc.get_freeze_count() == 0  # unfrozen again: the collector still sees every object
    # Still collectable: a cycle made in the pause is freed by a full collection.
    del made
    with gc_paused(PAUSE_FROM):
        cycle: list = []
        cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1


def test_small_work_and_a_disabled_collector_are_left_alone(collector):
    with gc_paused(PAUSE_FROM - 1):
        assert gc.isenabled()
    gc.disable()
    with gc_paused(PAUSE_FROM):
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_heap_frozen_by_someone_else_stays_frozen(collector):
    kept = [[i] for i in range(100)]
    gc.freeze()
    frozen = gc.get_freeze_count()
    with gc_paused(PAUSE_FROM):
        made = [[i] for i in range(5_000)]
    assert gc.get_freeze_count() == frozen
    assert gc.isenabled()
    del kept, made
