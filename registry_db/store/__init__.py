"""How the registry talks to its database: engines, locks and error translation (:mod:`.engine`),
URLs (:mod:`.urls`), migrations and the schema check (:mod:`.migrate`), the tables
(:mod:`.schema`), bulk writes (:mod:`.bulk`), reading back (:mod:`.read`), analysts' queries
(:mod:`.query`), roles (:mod:`.roles`), the columns' meanings (:mod:`.catalog`), and the
DB-API readers that skip SQLAlchemy (:mod:`.sqlite_read`, :mod:`.pg_read`). It knows nothing
of files: importing them is :mod:`registry_db.importing`, their history :mod:`registry_db.history`.

The store's public functions are re-exported here and loaded on first use, so that
``from registry_db import store; store.open_registry(url)`` costs only what it calls.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY: dict[str, str] = {}
for _module, _names in {
    "engine": "make_engine run_write write_connection translate translated lock_timeout "
              "WRITE_LOCK_KEY DEFAULT_LOCK_TIMEOUT",
    "migrate": "open_registry upgrade downgrade migration_sql current_revision schema_state "
               "ensure_schema script_head script_heads schema_differences alembic_config "
               "migrations_dir seed_dir HEAD_REVISION run_migrations_on registry stamp "
               "revision_history require_existing",
    "read": "list_sets set_summary conflicts load_set load_sets set_names SetSummary Conflict",
    "query": "run_query QueryResult QueryError",
}.items():
    _LAZY.update(dict.fromkeys(_names.split(), _module))

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'registry_db.store' has no attribute {name!r}")
    return getattr(importlib.import_module(f"registry_db.store.{module}"), name)
