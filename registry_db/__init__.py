"""registry_db: the SQL-backed registry of speculative-decoding acceptance profiles.

The public API is re-exported here; see README.md for examples. Names that need SQLAlchemy
(import, read-back, export, resolution, queries) are loaded on first use, so that validating a
file never pays for the database layer.
"""

from __future__ import annotations

import importlib
from typing import Any

from registry_db.errors import (
    DatabaseError,
    Finding,
    InvalidInput,
    NotFound,
    RegistryError,
    ResolutionRefused,
    SchemaOutOfDate,
)
from registry_db.model import (
    Counts,
    InlineValue,
    Layer,
    Pin,
    Profile,
    ProfileSet,
    Provenance,
    Refusal,
    RefusalReason,
    Sampling,
    Uncertainty,
)

_LAZY = {
    # database access
    "open_registry": "store.migrate",
    "make_engine": "store.engine",
    # validation (pure)
    "check_paths": "sources.profile_set",
    "check_profile_set": "inputs.profile_set",
    "load_file": "yaml.load",
    # import and read-back
    "import_paths": "importing.write",
    "import_sets": "importing.write",
    "ImportReport": "importing.write",
    "SetResult": "importing.write",
    "load_set": "store.read",
    "list_sets": "store.read",
    "conflicts": "store.read",
    "SetSummary": "store.read",
    "Conflict": "store.read",
    "export_sets": "importing.export",
    "render_set": "yaml.render",
    # resolution
    "Request": "inputs.request",
    "resolve": "resolve.plan",
    "resolve_many": "resolve.plan",
    "Resolution": "resolve.plan",
    "Fallback": "resolve.plan",
    "HardwareMismatch": "resolve.plan",
    "min_variance_rates": "resolve.rates",
    # analysts
    "run_query": "store.query",
    "QueryResult": "store.query",
    "QueryError": "store.query",
}

__all__ = [
    "Counts",
    "DatabaseError",
    "Finding",
    "InlineValue",
    "InvalidInput",
    "Layer",
    "NotFound",
    "Pin",
    "Profile",
    "ProfileSet",
    "Provenance",
    "Refusal",
    "RefusalReason",
    "RegistryError",
    "ResolutionRefused",
    "Sampling",
    "SchemaOutOfDate",
    "Uncertainty",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'registry_db' has no attribute {name!r}")
    return getattr(importlib.import_module(f"registry_db.{module}"), name)
