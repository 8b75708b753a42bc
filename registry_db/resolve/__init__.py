"""Resolution: one acceptance per run. :mod:`.plan` decides which layer states acceptance and
builds the answer (:mod:`.answer`), :mod:`.lookup` holds the SQL that finds the profile,
:mod:`.rates` derives the quantities that were not stated, :mod:`.deployment` resolves a run
once per speculating pool, :mod:`.timeline` reads the sets of a past time, :mod:`.engines`
hands an answer to the engine that realises it. The request and its checks live in
:mod:`registry_db.inputs`.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "resolve": "plan", "resolve_many": "plan", "Resolution": "answer", "Fallback": "answer",
    "HardwareMismatch": "answer", "min_variance_rates": "rates",
    "resolve_deployment": "deployment", "resolve_runs": "deployment",
    "DeploymentAnswer": "deployment", "engine_settings": "engines",
}
__all__ = ["Request", *_LAZY]


def __getattr__(name: str) -> Any:
    if name == "Request":
        from registry_db.inputs.request import Request

        return Request
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'registry_db.resolve' has no attribute {name!r}")
    return getattr(importlib.import_module(f"registry_db.resolve.{module}"), name)
