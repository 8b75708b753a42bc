"""The public API: every exported name resolves, and light paths stay light."""

from __future__ import annotations

import subprocess
import sys

import registry_db

from tests.conftest import SEED


def test_every_exported_name_resolves():
    for name in registry_db.__all__:
        assert getattr(registry_db, name) is not None, name


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
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
    for unused in ("alembic", "mako", "yaml", "registry_db.store.write", "registry_db.inputs.profile_set",
                   "registry_db.store.schema"):
        assert unused not in mods, unused
