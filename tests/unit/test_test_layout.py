"""The tests' own layout: test modules share code through tests/helpers.py (and conftest
fixtures), never by importing each other."""

from __future__ import annotations

import ast

from tests.helpers import ROOT


def test_test_modules_import_only_the_helpers_from_tests():
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(ROOT)}: {name}" for name in names
                      if name.split(".")[0] == "tests" and name != "tests.helpers"]
    assert found == []
