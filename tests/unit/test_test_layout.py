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


def test_without_a_server_the_postgresql_tests_skip_with_the_reason(tmp_path):
    """README: without a reachable PostgreSQL its tests are skipped with the reason, never
    failed. Run on every module that reaches the server by the admin URL itself (not only
    through the fixtures), against a port where nothing listens."""
    import os
    import subprocess
    import sys

    direct = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "db").glob("test_*.py")
                    if "pg_admin_url" in p.read_text(encoding="utf-8"))
    assert direct, "no module reaches the server by its URL: nothing to check"
    env = {k: v for k, v in os.environ.items() if k != "REGISTRY_TEST_REQUIRE_POSTGRES"}
    env["REGISTRY_TEST_POSTGRES_URL"] = "postgresql://postgres@127.0.0.1:1/postgres"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-m", "postgres", "-rs", *direct], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    summary = done.stdout.strip().splitlines()[-1]
    assert "failed" not in summary and "error" not in summary, done.stdout[-3000:]
    assert "skipped" in summary and "PostgreSQL not reachable" in done.stdout
