"""The shared test helpers do what migration tests rely on."""

from __future__ import annotations

from registry_db import store
from tests.helpers import migrated_to


def test_migrated_to_stops_at_the_revision(empty_url):
    with migrated_to(empty_url, "0001") as engine:
        assert store.current_revision(engine) == "0001"
        store.upgrade(engine, "head")
        assert store.current_revision(engine) == store.HEAD_REVISION
