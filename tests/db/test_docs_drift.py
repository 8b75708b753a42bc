"""The docs say what the code does (issue 28, "Docs that drifted"): each example here is run or
checked against the code it describes, so a change of the code that the docs miss fails."""

from __future__ import annotations

import ast
import json
import re

import pytest
from click.testing import CliRunner

from registry_db import store
from registry_db.cli.group import main
from registry_db.store import catalog
from tests.helpers import ROOT, run_cli

README = ROOT / "README.md"


def _outside_fences(text: str) -> tuple[list[str], int]:
    """The lines outside code fences, and how many fences are left open at the end."""
    outside, fence = [], None
    for line in text.splitlines():
        mark = re.match(r"^(`{3,}|~{3,})", line)
        if mark and (fence is None or line.startswith(fence)):
            fence = None if fence is not None else mark.group(1)
            continue
        if fence is None:
            outside.append(line)
    return outside, int(fence is not None)


@pytest.mark.parametrize("path", ["README.md", "docs/schema.md", "docs/decisions.md",
                                  "docs/architecture.md"])
def test_every_code_fence_is_closed_and_no_heading_is_swallowed(path):
    text = (ROOT / path).read_text(encoding="utf-8")
    outside, open_fences = _outside_fences(text)
    assert open_fences == 0, f"{path} ends inside a code fence"
    # A heading swallowed by an unclosed fence is a heading line inside a fence ("## " and
    # deeper: a shell comment inside a fence starts "# ").
    headings = [ln for ln in text.splitlines() if re.match(r"^#{2,6} ", ln)]
    inside = [h for h in headings if h not in outside]
    assert inside == [], f"{path}: headings inside a code fence: {inside}"
    if path == "docs/schema.md":
        assert any(h.startswith("### 18.") for h in outside)


def test_readme_db_current_json_is_what_the_command_prints(db_url):
    """README shows the head's revision: a new migration must update the example."""
    text = README.read_text(encoding="utf-8")
    shown = re.search(r"registry db current --json +# (\{.*\})", text)
    assert shown, "README lost its `db current --json` example"
    result = run_cli("-d", db_url, "db", "current", "--json")
    assert json.loads(result.stdout) == json.loads(shown.group(1)) == {
        "revision": store.HEAD_REVISION, "head": store.HEAD_REVISION, "is_head": True}


def test_readme_names_no_migration_that_is_not_there_or_lists_them_all():
    text = README.read_text(encoding="utf-8")
    named = set(re.findall(r"\b(\d{4})_[*\w]*\.py", text))
    present = {p.name[:4] for p in (ROOT / "migrations" / "versions").glob("[0-9]*_*.py")}
    assert named <= present, f"README names migrations that do not exist: {named - present}"
    assert named in (set(), present), (
        f"README lists {sorted(named)} of the migrations {sorted(present)}: list them all or "
        "none (`registry db history` lists them)")


def test_query_help_lists_every_view():
    text = " ".join(CliRunner().invoke(main, ["query", "--help"]).stdout.split())
    missing = [v for v in catalog.VIEWS if v not in text]
    assert missing == [], f"`registry query --help` does not name {missing}"


def test_a_k_over_the_limit_says_the_limit_not_a_file_a_wheel_lacks(tmp_path):
    result = run_cli("-d", str(tmp_path / "none.db"), "resolve", "--model", "m", "--method",
                     "x", "--k", "100", "--thinking", "on", "--category", "c")
    assert result.exit_code == 2
    assert "K is at most 64" in result.stderr
    assert "decisions.md" not in result.stderr


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value,
                                                                     ast.Constant):
                out.add(id(body[0].value))
    return out


def test_no_message_points_at_a_file_the_wheel_does_not_ship():
    """Installed users have no docs/ folder (the wheel ships registry_db, its migrations and
    the seed: pyproject.toml), so no string the code prints may send them there; docstrings
    and comments, read in the checkout, may."""
    found = []
    for path in sorted((ROOT / "registry_db").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in skip and "docs/" in node.value:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == []
