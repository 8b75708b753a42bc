"""The public API: every exported name resolves, and light paths stay light."""

from __future__ import annotations

import subprocess
import sys

import registry_db
from tests.helpers import ROOT, SEED


def test_every_exported_name_resolves():
    for name in registry_db.__all__:
        assert getattr(registry_db, name) is not None, name


def _modules_after(code: str) -> set[str]:
    script = code + "\nimport sys; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return set(out.split())


def test_import_and_validate_do_not_load_the_database_layer():
    mods = _modules_after(
        "import registry_db\n"
        "from registry_db.cli import main\n"
        f"try:\n    main(['validate', {str(SEED)!r}], prog_name='registry')\n"
        "except SystemExit as e:\n    assert e.code in (0, None), e.code\n")
    assert "sqlalchemy" not in mods
    assert "alembic" not in mods


def test_resolve_does_not_load_alembic(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    from registry_db import store

    store.open_registry(url).dispose()  # the schema exists: resolving must not need Alembic
    mods = _modules_after(
        "from registry_db.cli import main\n"
        f"try:\n    main(['-d', {url!r}, 'resolve', '--model', 'm', '--method', 'x', '--k', '3',"
        " '--thinking', 'on', '--category', 'coding', '--json'], prog_name='registry')\n"
        "except SystemExit:\n    pass\n")
    for unused in ("alembic", "mako", "yaml", "registry_db.importing.write",
                   "registry_db.inputs.profile_set", "registry_db.store.schema"):
        assert unused not in mods, unused


def test_engine_commands_do_not_load_the_orm(tmp_path):
    """The schema is Core tables: a command that opens an engine (an import, a listing) loads
    the tables but not SQLAlchemy's ORM, which nothing here uses."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    for args in (["import", str(SEED)], ["list"]):
        mods = _modules_after(
            "from registry_db.cli import main\n"
            f"try:\n    main(['-d', {url!r}] + {args!r}, prog_name='registry')\n"
            "except SystemExit as e:\n    assert e.code in (0, None), e.code\n")
        assert "registry_db.store.schema" in mods, args
        assert "sqlalchemy.orm" not in mods, args


def test_sqlite_resolve_does_not_load_sqlalchemy(tmp_path):
    """A SQLite registry at the head is read through sqlite3 alone (store.sqlite_read): a hit,
    a refusal and a batch import no SQLAlchemy; with the fast path switched off they do."""
    from registry_db import store
    from registry_db.importing.write import import_paths

    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = store.open_registry(url)
    import_paths(engine, [SEED])
    engine.dispose()
    (tmp_path / "b.jsonl").write_text('{"model": "glm-5.3", "method": "mtp", "k": 3, '
                                      '"thinking": "on", "category": "coding"}\n')
    runs = {
        "hit": "['--model', 'glm-5.3', '--method', 'mtp', '--k', '3', '--thinking', 'on', "
               "'--category', 'coding', '--json']",
        "refusal": "['--model', 'm', '--method', 'x', '--k', '3', '--thinking', 'on', "
                   "'--category', 'coding']",
        "batch": f"['--batch', {str(tmp_path / 'b.jsonl')!r}]",
    }
    for what, args in runs.items():
        code = ("from registry_db.cli import main\n"
                f"try:\n    main(['-d', {url!r}, 'resolve'] + {args}, prog_name='registry')\n"
                "except SystemExit as e:\n    assert e.code in (0, 1, None), e.code\n")
        assert "sqlalchemy" not in _modules_after(code), what
        switched_off = "import os; os.environ['REGISTRY_NO_FAST_PATH'] = '1'\n" + code
        assert "sqlalchemy" in _modules_after(switched_off), what


def test_the_store_facade_lists_every_lazy_name_and_types_them():
    """``registry_db.store``'s ``__all__`` is its lazy table's names, each of which resolves;
    the names are imported for type checkers too (mypy checks the callers against them)."""
    import ast

    from registry_db import store

    assert sorted(store._LAZY) == store.__all__
    for name in store.__all__:
        assert getattr(store, name) is not None
    source = ast.parse((ROOT / "registry_db" / "store" / "__init__.py").read_text())
    typed = {a.asname or a.name for node in ast.walk(source) if isinstance(node, ast.If)
             for sub in node.body if isinstance(sub, ast.ImportFrom) for a in sub.names}
    assert typed == set(store.__all__)
