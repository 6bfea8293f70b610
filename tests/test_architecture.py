"""The layer contract over every module, config.py, interrupts.py and main.py included: no import cycle (lazy
imports inside functions count), config.py and interrupts.py import no project module, nothing imports main.py, and
each module imports only from its own package or a layer below. `lint-imports` (pyproject.toml) checks the packages
the same way in CI; this test also covers the single-file modules, which import-linter cannot take as packages."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = (
    ("config", "interrupts"),
    ("sim",),
    ("workloads", "schedulers"),
    ("scenario",),
    ("metrics",),
    ("env",),
    ("agents",),
    ("evaluation",),
    ("cli",),
    ("server", "sweep", "dispatch"),
    ("main",),
)
"""lowest first; names in one tuple are siblings that do not import each other"""
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def project_modules() -> dict[str, Path]:
    """dotted name -> file of every module of the layers (tests, bench and studies are outside them)."""
    modules = {}
    for top in RANK:
        single = ROOT / f"{top}.py"
        files = [single] if single.is_file() else sorted((ROOT / top).rglob("*.py"))
        for path in files:
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports anywhere in its file (top level or inside functions)."""

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                candidates = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            for candidate in candidates:
                target = owner(candidate)
                if target and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), i.e. every import cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a sibling package or a layer above its own."""
    return [
        f"{source} -> {target}"
        for source, targets in sorted(graph.items())
        for target in sorted(targets)
        if (top := source.split(".")[0]) != (other := target.split(".")[0]) and RANK[other] >= RANK[top]
    ]


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(project_modules())


def test_no_import_cycle(graph):
    assert cycles(graph) == []


def test_each_module_imports_only_its_package_or_lower_layers(graph):
    assert upward_imports(graph) == []


def test_config_imports_no_project_module_and_nothing_imports_main(graph):
    assert graph["config"] == set()
    assert graph["interrupts"] == set()
    assert [source for source, targets in graph.items() if "main" in targets] == []


def test_every_package_says_what_it_owns_and_may_import():
    for names in LAYERS:
        for name in names:
            init = ROOT / name / "__init__.py"
            if init.is_file():
                doc = ast.get_docstring(ast.parse(init.read_text())) or ""
                assert "Imports" in doc or "imports" in doc, f"{init}: the docstring names no allowed imports"


def test_the_checks_find_a_cycle_and_an_upward_import():
    """The helpers above on a made-up graph: they are not vacuous."""
    made_up = {"sim.a": {"cli.b"}, "cli.b": {"sim.a"}, "workloads.c": {"schedulers.d"}, "schedulers.d": set()}
    assert cycles(made_up) == [["cli.b", "sim.a"]]
    assert upward_imports(made_up) == ["sim.a -> cli.b", "workloads.c -> schedulers.d"]
