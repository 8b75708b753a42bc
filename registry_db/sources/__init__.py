"""Sources: readers that turn what a producer writes into :class:`~registry_db.model.ProfileSet`s.

Every reader is one module that satisfies :class:`Source` (a ``NAME``, a ``DESCRIPTION`` and a
``read(paths, **options)`` returning the sets and the findings) and one entry in
:data:`SOURCES`, in the manner of pre-commit's languages. What a reader produces goes through
the same validator, importer and resolver as a hand-written file: a source adds no rule of its
own to the rows.

To add a source: write ``registry_db/sources/NAME.py`` with those three names, add it to
:data:`SOURCES`, and give it a command in ``registry_db/cli/``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from typing import Any, Protocol, cast

from registry_db.errors import Finding
from registry_db.model import ProfileSet


class Source(Protocol):
    """What a source module provides."""

    NAME: str
    DESCRIPTION: str

    def read(self, paths: Iterable[str | os.PathLike], **options: Any
             ) -> tuple[list[ProfileSet], list[Finding]]:
        """Every set the inputs hold, and every finding (the caller writes nothing on an error)."""
        ...


#: name -> module; modules are imported on first use.
SOURCES: dict[str, str] = {
    "profile-set": "registry_db.sources.profile_set",
    "inferencex": "registry_db.sources.inferencex.read",
    "vllm-metrics": "registry_db.sources.counters.vllm",
    "vllm-bench": "registry_db.sources.counters.vllm_bench",
    "vllm-log": "registry_db.sources.counters.vllm_log",
    "atom-metrics": "registry_db.sources.counters.atom",
    "sglang": "registry_db.sources.counters.sglang",
    "trtllm-stats": "registry_db.sources.counters.trtllm",
    "trtllm-metrics": "registry_db.sources.counters.trtllm_metrics",
}


def get_source(name: str) -> Source:
    """The source registered as ``name``."""
    return cast(Source, importlib.import_module(SOURCES[name]))
