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
    InvalidInput,
    NotFound,
    RegistryError,
    ResolutionRefused,
    SchemaOutOfDate,
)
from registry_db.findings import Finding
from registry_db.spec import InlineValue, Pin, Profile, ProfileSet, Provenance, Sampling

_LAZY = {
    # database access
    "open_registry": "db",
    "make_engine": "db",
    # validation (pure)
    "check_paths": "validate",
    "check_profile_set": "validate",
    "load_file": "yamlio",
    # import and read-back
    "import_paths": "importer",
    "import_sets": "importer",
    "ImportReport": "importer",
    "SetResult": "importer",
    "load_set": "store",
    "list_sets": "store",
    "conflicts": "store",
    "SetSummary": "store",
    "Conflict": "store",
    "export_sets": "export",
    "render_set": "export",
    # resolution
    "Request": "requests",
    "resolve": "resolve",
    "resolve_many": "resolve",
    "Resolution": "resolve",
    "Fallback": "resolve",
    "HardwareMismatch": "resolve",
    "min_variance_rates": "rates",
    # analysts
    "run_query": "query",
    "QueryResult": "query",
    "QueryError": "query",
}

__all__ = [
    "DatabaseError",
    "Finding",
    "InlineValue",
    "InvalidInput",
    "NotFound",
    "Pin",
    "Profile",
    "ProfileSet",
    "Provenance",
    "RegistryError",
    "ResolutionRefused",
    "Sampling",
    "SchemaOutOfDate",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'registry_db' has no attribute {name!r}")
    return getattr(importlib.import_module(f"registry_db.{module}"), name)
