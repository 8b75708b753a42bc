"""The layout's promise (docs/architecture.md): the folders are the pipeline's stages, a stage
imports only from the stages above it, and no two modules import each other, not even inside a
function. Read from the source's own import statements, so a new module is held to it too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "registry_db"
#: The stages, top to bottom, as docs/architecture.md draws them.
STAGES = ("yaml", "inputs", "sources", "store", "history", "importing", "resolve", "analyze",
          "cli")
#: Stages beside each other: neither imports the other (the database layer reads no producer).
APART = (("sources", "store"),)
#: Modules beside every stage: any stage may import them, and they import no stage.
BESIDE = ("errors", "model", "gcpause", "interrupts", "_seed", "_migrations")
#: Modules below every stage, as the package's ``__init__`` is: the public entry object, which
#: may import any stage and which no stage imports.
FACADE = ("client",)


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every registry_db module ``path`` imports, at the top or inside a function."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("registry_db"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("registry_db"))
    return out


GRAPH = {name: _imports(path) for name, path in MODULES.items()}


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_the_layout_has_the_stages_the_docs_draw():
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(STAGES)
    loose = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    outside = loose - set(BESIDE) - set(FACADE)
    assert not outside, f"a module outside the stages: {sorted(outside)}"


def test_no_stage_imports_the_facade():
    for module, targets in GRAPH.items():
        if module != "registry_db" and _stage(module) not in FACADE:
            assert not {t for t in targets if _stage(t) in FACADE}, module


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_stage_imports_only_from_the_stages_above_it(module):
    here = _stage(module)
    upward = []
    for target in GRAPH[module]:
        there = _stage(target)
        if here in BESIDE:
            assert there in BESIDE, f"{module} sits beside the stages but imports {target}"
        elif here in STAGES and there in STAGES and STAGES.index(there) > STAGES.index(here):
            upward.append(target)
    assert not upward, f"{module} ({here}/) imports from a later stage: {sorted(upward)}"


@pytest.mark.parametrize("a, b", APART)
def test_stages_apart_import_nothing_of_each_other(a, b):
    crossing = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() for t in targets
                      if {_stage(m), _stage(t)} == {a, b})
    assert crossing == []


def test_the_database_layer_knows_no_files_and_no_history():
    # store/ is how we talk to the database; reading files and keeping history live above it.
    above = {"sources", "history", "importing"}
    crossing = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if _stage(m) == "store"
                      for t in targets if _stage(t) in above)
    assert crossing == []


def test_no_two_modules_import_each_other():
    # Tarjan's strongly connected components over the module graph: any component of more than
    # one module is a cycle, lazy imports included.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in MODULES or w == "registry_db":
                continue  # the package's lazy facade names every module and is named by none
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(MODULES):
        if module not in index:
            visit(module)
    assert cycles == []


def test_the_check_sees_imports_inside_functions():
    # The one lazy import every one-run command relies on must be in the graph, or the cycle
    # check above would be blind to the imports it exists for.
    assert "registry_db.inputs.run_files" in GRAPH["registry_db.inputs.layers"]
