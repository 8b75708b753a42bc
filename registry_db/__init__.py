"""registry_db: the SQL-backed registry of speculative-decoding acceptance profiles.

The public API is re-exported here; see README.md for examples (:class:`Registry` is the entry
object). Names that need SQLAlchemy (import, read-back, export, resolution, queries) are loaded
on first use, so that validating a file never pays for the database layer. A public name is
the same object however the package was imported: ``registry_db.resolve`` is the function even
after ``import registry_db.resolve.lookup`` (see :class:`_Package`).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

# The package's own names are loaded on first use too: `registry db upgrade` at the head, which
# answers before click is imported (registry_db.cli.fast), pays for none of them.
_LAZY = {
    # errors and values (no database)
    **dict.fromkeys(("DatabaseError", "Finding", "InvalidInput", "NotFound", "RegistryError",
                     "ResolutionRefused", "SchemaOutOfDate"), "errors"),
    **dict.fromkeys(("Counts", "InlineValue", "Layer", "Pin", "Profile", "ProfileSet",
                     "Provenance", "Refusal", "RefusalReason", "Sampling", "Uncertainty"),
                    "model"),
    # the entry object
    "Registry": "client",
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
    "LineAnswer": "resolve.batch",
    "answer_lines": "resolve.batch",
    # checking measured runs
    "check_run": "resolve.check",
    "CheckResult": "resolve.check",
    "Threshold": "resolve.check",
    # analysts
    "run_query": "store.query",
    "QueryResult": "store.query",
    "QueryError": "store.query",
}

__all__ = [*_LAZY]


#: Public names that are also the names of subpackages: the name is the public object, the
#: subpackage is reached by importing from it (``from registry_db.resolve import plan``).
SHADOWED = ("resolve",)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'registry_db' has no attribute {name!r}")
    return getattr(importlib.import_module(f"registry_db.{module}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _shadowing(name: str) -> property:
    """A property that reads the public ``name`` and takes no other value, but lets the import
    system's setting of the subpackage of that name on its parent pass (it stays in
    ``sys.modules``)."""

    def get(module: types.ModuleType) -> Any:
        return __getattr__(name)

    def put(module: types.ModuleType, value: Any) -> None:
        if isinstance(value, types.ModuleType) and value.__name__ == f"{__name__}.{name}":
            return
        raise AttributeError(f"registry_db.{name} is the public {name}(); patch the module "
                             f"that defines it, registry_db.{_LAZY[name]}")

    return property(get, put, doc=f"The public {name} (not the subpackage of that name).")


class _Package(types.ModuleType):
    """The package's module type. Importing a subpackage sets it as an attribute of its
    parent, so ``import registry_db.resolve.lookup`` would replace the public ``resolve`` with
    the subpackage, and ``registry_db.resolve(...)`` would work once, then not: a property of
    the type comes before the module's own attributes, and keeps the public name."""


for _name in SHADOWED:
    setattr(_Package, _name, _shadowing(_name))
sys.modules[__name__].__class__ = _Package

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from registry_db.client import Registry as Registry
    from registry_db.errors import DatabaseError as DatabaseError
    from registry_db.errors import Finding as Finding
    from registry_db.errors import InvalidInput as InvalidInput
    from registry_db.errors import NotFound as NotFound
    from registry_db.errors import RegistryError as RegistryError
    from registry_db.errors import ResolutionRefused as ResolutionRefused
    from registry_db.errors import SchemaOutOfDate as SchemaOutOfDate
    from registry_db.importing.export import export_sets as export_sets
    from registry_db.importing.write import ImportReport as ImportReport
    from registry_db.importing.write import SetResult as SetResult
    from registry_db.importing.write import import_paths as import_paths
    from registry_db.importing.write import import_sets as import_sets
    from registry_db.inputs.profile_set import check_profile_set as check_profile_set
    from registry_db.inputs.request import Request as Request
    from registry_db.model import Counts as Counts
    from registry_db.model import InlineValue as InlineValue
    from registry_db.model import Layer as Layer
    from registry_db.model import Pin as Pin
    from registry_db.model import Profile as Profile
    from registry_db.model import ProfileSet as ProfileSet
    from registry_db.model import Provenance as Provenance
    from registry_db.model import Refusal as Refusal
    from registry_db.model import RefusalReason as RefusalReason
    from registry_db.model import Sampling as Sampling
    from registry_db.model import Uncertainty as Uncertainty
    from registry_db.resolve.batch import LineAnswer as LineAnswer
    from registry_db.resolve.batch import answer_lines as answer_lines
    from registry_db.resolve.check import CheckResult as CheckResult
    from registry_db.resolve.check import Threshold as Threshold
    from registry_db.resolve.check import check_run as check_run
    from registry_db.resolve.plan import Fallback as Fallback
    from registry_db.resolve.plan import HardwareMismatch as HardwareMismatch
    from registry_db.resolve.plan import Resolution as Resolution
    from registry_db.resolve.plan import resolve as resolve
    from registry_db.resolve.plan import resolve_many as resolve_many
    from registry_db.resolve.rates import min_variance_rates as min_variance_rates
    from registry_db.sources.profile_set import check_paths as check_paths
    from registry_db.store.engine import make_engine as make_engine
    from registry_db.store.migrate import open_registry as open_registry
    from registry_db.store.query import QueryError as QueryError
    from registry_db.store.query import QueryResult as QueryResult
    from registry_db.store.query import run_query as run_query
    from registry_db.store.read import Conflict as Conflict
    from registry_db.store.read import SetSummary as SetSummary
    from registry_db.store.read import conflicts as conflicts
    from registry_db.store.read import list_sets as list_sets
    from registry_db.store.read import load_set as load_set
    from registry_db.yaml.load import load_file as load_file
    from registry_db.yaml.render import render_set as render_set
