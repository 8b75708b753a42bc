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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names' real types for callers and mypy; loaded lazily at run time
    from registry_db.store.engine import (
        DEFAULT_LOCK_TIMEOUT,
        WRITE_LOCK_KEY,
        lock_timeout,
        make_engine,
        run_write,
        translate,
        translated,
        write_connection,
    )
    from registry_db.store.migrate import (
        HEAD_REVISION,
        alembic_config,
        current_revision,
        downgrade,
        ensure_schema,
        migration_sql,
        migrations_dir,
        open_registry,
        registry,
        repair_history,
        require_existing,
        revision_history,
        run_migrations_on,
        schema_differences,
        schema_state,
        script_head,
        script_heads,
        seed_dir,
        stamp,
        times_out_of_order,
        upgrade,
    )
    from registry_db.store.query import QueryError, QueryResult, run_query
    from registry_db.store.read import (
        Conflict,
        SetSummary,
        conflicts,
        list_sets,
        load_set,
        load_sets,
        set_names,
        set_summary,
    )

_LAZY: dict[str, str] = {}
for _module, _names in {
    "engine": "make_engine run_write write_connection translate translated lock_timeout "
              "WRITE_LOCK_KEY DEFAULT_LOCK_TIMEOUT",
    "migrate": "open_registry upgrade downgrade migration_sql current_revision schema_state "
               "ensure_schema script_head script_heads schema_differences alembic_config "
               "migrations_dir seed_dir HEAD_REVISION run_migrations_on registry stamp "
               "revision_history require_existing repair_history times_out_of_order",
    "read": "list_sets set_summary conflicts load_set load_sets set_names SetSummary Conflict",
    "query": "run_query QueryResult QueryError",
}.items():
    _LAZY.update(dict.fromkeys(_names.split(), _module))

__all__ = [
    "Conflict",
    "DEFAULT_LOCK_TIMEOUT",
    "HEAD_REVISION",
    "QueryError",
    "QueryResult",
    "SetSummary",
    "WRITE_LOCK_KEY",
    "alembic_config",
    "conflicts",
    "current_revision",
    "downgrade",
    "ensure_schema",
    "list_sets",
    "load_set",
    "load_sets",
    "lock_timeout",
    "make_engine",
    "migration_sql",
    "migrations_dir",
    "open_registry",
    "registry",
    "repair_history",
    "require_existing",
    "revision_history",
    "run_migrations_on",
    "run_query",
    "run_write",
    "schema_differences",
    "schema_state",
    "script_head",
    "script_heads",
    "seed_dir",
    "set_names",
    "set_summary",
    "stamp",
    "times_out_of_order",
    "translate",
    "translated",
    "upgrade",
    "write_connection",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'registry_db.store' has no attribute {name!r}")
    return getattr(importlib.import_module(f"registry_db.store.{module}"), name)
