"""The public API: every exported name resolves, and light paths stay light."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
    the tables but not SQLAlchemy's ORM, which nothing here uses. (``list`` reads through
    sqlite3 now: ``export`` is the listing that still opens an engine.)"""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    for args in (["import", str(SEED)], ["export", "-o", str(tmp_path / "out")]):
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


# --- public names: the same objects in every import order -------------------------------------

#: Ways a program may have imported the package before it reads ``registry_db.resolve``.
IMPORT_ORDERS = {
    "plain": "import registry_db",
    "from": "from registry_db import resolve",
    "subpackage first": "import registry_db.resolve.lookup\nimport registry_db",
    "from the subpackage": "from registry_db.resolve import Request, plan\nimport registry_db",
    "the command line": "from registry_db.cli import main\nimport registry_db",
    "star": "from registry_db import *\nimport registry_db",
    "the entry object": "from registry_db import Registry\nimport registry_db.resolve.batch",
}

_SAME_AFTER = """
import importlib, sys
import registry_db
from registry_db import resolve as first
from registry_db.resolve.plan import resolve as function
importlib.import_module("registry_db.resolve.lookup")  # a subpackage imported once more
import registry_db.resolve.deployment
from registry_db import resolve as again
assert first is again is registry_db.resolve is function, registry_db.resolve
assert registry_db.resolve.__module__ == "registry_db.resolve.plan"
assert type(sys.modules["registry_db.resolve"]).__name__ == "module"  # the subpackage is there
assert set(registry_db.__all__) <= set(dir(registry_db))
print("ok")
"""


@pytest.mark.parametrize("order", sorted(IMPORT_ORDERS))
def test_resolve_stays_the_function_whatever_was_imported_first(order):
    script = IMPORT_ORDERS[order] + "\n" + _SAME_AFTER
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")


def test_the_resolver_can_be_called_twice_through_the_package(tmp_path):
    """The issue's report: ``registry_db.resolve(...)`` worked once, then was the module."""
    from registry_db import store
    from registry_db.importing.write import import_paths

    url = f"sqlite:///{tmp_path / 'r.db'}"
    import_paths(engine := store.open_registry(url), [SEED])
    engine.dispose()
    script = (
        "import registry_db\n"
        f"e = registry_db.open_registry({url!r}, readonly=True)\n"
        "q = registry_db.Request('deepseek-v4.1-flash', 'dspark', 5, thinking='off', "
        "category='coding')\n"
        "from registry_db import resolve\n"
        "print(resolve(e, q).acceptance_length, resolve(e, q).acceptance_length, "
        "registry_db.resolve(e, q).acceptance_length, registry_db.resolve(e, q).revision)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert (done.stdout, done.stderr) == ("4.07 4.07 4.07 1\n", "")


def test_a_public_name_cannot_be_replaced_by_accident():
    with pytest.raises(AttributeError, match="registry_db.resolve is the public resolve"):
        registry_db.resolve = 1  # type: ignore[assignment]


def test_every_public_name_that_is_a_subpackage_is_kept():
    """A public name that is also a subpackage's name needs the package's property, or the
    first import of the subpackage replaces it."""
    from pathlib import Path

    folder = Path(registry_db.__file__).parent
    subpackages = {p.parent.name for p in folder.glob("*/__init__.py")}
    subpackages |= {p.stem for p in folder.glob("*.py")}
    assert {n for n in registry_db.__all__ if n in subpackages} == set(registry_db.SHADOWED)


def test_the_public_names_are_typed(tmp_path):
    """What a type checker sees: the real signatures, not the lazy facade's Any."""
    snippet = tmp_path / "use.py"
    snippet.write_text("import registry_db\nfrom registry_db import Registry, resolve\n"
                       "reveal_type(resolve)\nreveal_type(registry_db.resolve_many)\n"
                       "reveal_type(Registry(None).resolve)\n"
                       "reveal_type(registry_db.Registry(None).profiles)\n")
    # The project's own cache (as `mypy` from the checkout keeps it): warm, this takes seconds.
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", str(snippet)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    revealed = [line.split("Revealed type is ", 1)[1] for line in done.stdout.splitlines()
                if "Revealed type is" in line]
    assert len(revealed) == 4, done.stdout + done.stderr
    assert all("Any" not in r.split("->")[-1] for r in revealed), revealed
    assert revealed[0].endswith("-> registry_db.resolve.answer.Resolution\"")
    assert revealed[3].endswith("-> list[registry_db.store.summaries.ProfileSummary]\"")
