"""Imports run one way (ARCHITECTURE.md), read from the source with `ast`, so nothing is imported.

Every import statement counts: at the top of a module, inside a function, under ``if TYPE_CHECKING``.
``from a import b`` is an edge to the module ``a.b`` when there is one, otherwise to ``a``: a submodule
that imports a name from its own package's ``__init__`` depends on that ``__init__``.
"""
from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("inferlab", "inferbook")
BOTTOM = ("inferlab.errors", "inferlab.records", "inferlab.request", "inferlab.timing", "inferlab.provenance", "inferlab.cpuinfo",
          "inferlab.compat")
ENGINE, ANALYSIS, TOP = ("inferlab.engine",), ("inferlab.analysis",), ("inferlab.bench", "inferlab.cli")

#: ARCHITECTURE.md's layers: a module under ``importers`` imports nothing under ``forbidden``, except under ``allowed``.
LAYERS: tuple[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = (
    # importers                                                  forbidden                  allowed
    (BOTTOM,                                                     ("inferlab",),             BOTTOM),
    (("inferlab.models", "inferlab.text", "inferlab.sampling"),  ENGINE + ANALYSIS + TOP,   ()),
    (("inferlab.sampling",),                                     ("inferlab.models", "inferlab.text"), ()),
    (("inferlab.models",),                                       ("inferlab.sampling", "inferlab.text"), ()),
    (ENGINE,                                                     ANALYSIS + TOP,            ()),
    (ANALYSIS,                                                   ENGINE + TOP,              ()),
)


@dataclass(frozen=True)
class Edge:
    """One import: the importing module, the absolute name it imports, and where it says so."""

    source: str
    target: str
    where: str


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    """Whether a dotted name is one of ``prefixes`` or inside one of them."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def module_files() -> dict[str, Path]:
    """Every module of the two packages by dotted name; a package's ``__init__.py`` under the package's name."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    """Every import statement of one module, relative ones made absolute."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    edges = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        edges += [Edge(module, name, f"{path.relative_to(ROOT)}:{node.lineno}") for name in names]
    return edges


@pytest.fixture(scope="module")
def modules() -> dict[str, Path]:
    return module_files()


@pytest.fixture(scope="module")
def edges(modules) -> list[Edge]:
    return [edge for module, path in modules.items() for edge in imports_of(module, path, modules)
            if under(edge.target, PACKAGES) and edge.target != edge.source]


def report(edges: list[Edge]) -> str:
    return "\n".join(f"  {e.where}: {e.source} imports {e.target}" for e in sorted(edges, key=lambda e: e.where))


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected parts of a graph with more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    parts: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = {stack.pop()}
            while node not in part:
                part.add(stack.pop())
            parts.append(part)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [part for part in parts if len(part) > 1]


def shortest_cycle(graph: dict[str, set[str]], part: set[str]) -> list[str]:
    """A shortest cycle through the first node of a strongly connected part, by breadth-first search."""
    start = min(part)
    paths = deque([[start]])
    while True:
        path = paths.popleft()
        if start in graph[path[-1]]:
            return path + [start]
        paths.extend(path + [n] for n in sorted(graph[path[-1]] & part) if n not in path)


def test_the_runtime_never_imports_the_book(edges):
    bad = [e for e in edges if under(e.source, ("inferlab",)) and under(e.target, ("inferbook",))]
    assert not bad, "inferlab imports the book-only package inferbook:\n" + report(bad)


def test_every_import_of_the_two_packages_names_a_module_that_exists(edges, modules):
    missing = [e for e in edges if e.target not in modules]
    assert not missing, "imports of modules that do not exist:\n" + report(missing)


def test_no_import_cycle_among_inferlab_modules(edges, modules):
    graph: dict[str, set[str]] = {m: set() for m in modules if under(m, ("inferlab",))}
    where = {}
    for e in edges:
        if e.source in graph and e.target in graph:
            graph[e.source].add(e.target)
            where.setdefault((e.source, e.target), e.where)
    found = [shortest_cycle(graph, part) for part in strongly_connected(graph)]
    lines = [" -> ".join(cycle) + "\n    " + ", ".join(where[a, b] for a, b in zip(cycle, cycle[1:]))
             for cycle in found]
    assert not found, f"{len(found)} import cycle(s) among inferlab modules:\n  " + "\n  ".join(lines)


def test_layers_import_only_downwards(edges):
    bad = [e for e in edges for importers, forbidden, allowed in LAYERS
           if under(e.source, importers) and under(e.target, forbidden) and not under(e.target, allowed)]
    assert not bad, "imports against the layers of ARCHITECTURE.md:\n" + report(bad)


def package_folders() -> list[Path]:
    """Every folder of the two packages except caches: each one holding modules must be a package."""
    return [d for pkg in PACKAGES for d in [ROOT / pkg, *(ROOT / pkg).rglob("*")]
            if d.is_dir() and d.name != "__pycache__"]


def test_setuptools_finds_every_folder_with_an_init():
    from setuptools import find_packages

    tomllib = pytest.importorskip("tomllib")
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    found = set(find_packages(where=str(ROOT), include=find["include"]))
    with_init = {".".join(d.relative_to(ROOT).parts) for d in package_folders() if (d / "__init__.py").exists()}
    assert found == with_init, (f"packages setuptools misses: {sorted(with_init - found)}; "
                                f"found but not package folders: {sorted(found - with_init)}")


def test_every_folder_of_modules_has_an_init():
    without = sorted(str(d.relative_to(ROOT)) for d in package_folders()
                     if any(d.glob("*.py")) and not (d / "__init__.py").exists())
    assert not without, f"folders of modules without __init__.py, which setuptools leaves out of the wheel: {without}"
