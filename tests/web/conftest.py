"""The web tests' registries and servers: generated SQLite registries (several sets, keys two
sets hold, categories with and without profiles, stored and derived rates, values that were not
measured) and ``registry serve`` on a free local port, as a user starts it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Server, free_port, make_registry


@pytest.fixture(scope="session")
def registry_file(tmp_path_factory) -> Path:
    """One generated registry for the session's servers (none of them writes it)."""
    return make_registry(tmp_path_factory.mktemp("web"), seed=7)


@pytest.fixture(scope="session")
def server(registry_file) -> Iterator[Server]:
    """``registry -d FILE serve --port PORT`` on a free port of 127.0.0.1."""
    running = Server(registry_file, free_port())
    try:
        running.wait()
        yield running
    finally:
        running.stop()
