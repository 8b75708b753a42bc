"""Resolution: one acceptance per run. :mod:`.plan` decides which layer states acceptance and
builds the answer (:mod:`.answer`), :mod:`.lookup` runs the SQL (:mod:`.statements`) that finds
the profile, :mod:`.rates` derives the quantities that were not stated, :mod:`.deployment`
resolves a run once per speculating pool, :mod:`.batch` answers JSON lines, :mod:`.reading`
opens the registry to read, :mod:`.timeline` reads the sets of a past time, :mod:`.engines`
hands an answer to the engine that realises it. The request, the checked run and their checks
live in :mod:`registry_db.inputs` (:mod:`registry_db.inputs.run`).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "resolve": "plan", "resolve_many": "plan", "Resolution": "answer", "Fallback": "answer",
    "HardwareMismatch": "answer", "min_variance_rates": "rates",
    "resolve_deployment": "deployment", "resolve_runs": "deployment",
    "DeploymentAnswer": "deployment", "engine_settings": "engines",
    "answer_lines": "batch", "reading": "reading",
}
__all__ = ["Request", "Run", "check", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in ("Request", "Run", "check"):
        from registry_db.inputs import run

        return getattr(run, name)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'registry_db.resolve' has no attribute {name!r}")
    return getattr(importlib.import_module(f"registry_db.resolve.{module}"), name)
