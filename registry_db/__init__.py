"""registry_db: the SQL-backed registry of speculative-decoding acceptance profiles.

The public API is re-exported here; see README.md for examples.
"""

from registry_db.errors import (
    DatabaseError,
    InvalidInput,
    RegistryError,
    ResolutionRefused,
    SchemaOutOfDate,
)
from registry_db.findings import Finding
from registry_db.spec import InlineValue, Pin, Profile, ProfileSet, Provenance, Sampling

__all__ = [
    "DatabaseError",
    "Finding",
    "InlineValue",
    "InvalidInput",
    "Pin",
    "Profile",
    "ProfileSet",
    "Provenance",
    "RegistryError",
    "ResolutionRefused",
    "Sampling",
    "SchemaOutOfDate",
]
