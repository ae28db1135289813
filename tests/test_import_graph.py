"""The project's packages import each other without cycles (issue 19).

The graph is read from the source with :mod:`ast`, without importing anything:
one node per module of the project's packages, one edge per ``import`` of
another project module, wherever it is written (module level or inside a
function: an import moved into a function to dodge a cycle still is one).
Imports under ``if TYPE_CHECKING:`` are left out (they never run). Importing a
module also runs its packages' ``__init__``; those are graph nodes of their
own, reached only through the imports they are named in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The project's Python packages (tests, bench and examples import them, never the other way round).
PACKAGES = ("accounts", "config", "gpuprofiles", "planner", "simulator")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node of ``tree``, outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def imported_names(module: str, path: Path) -> list[tuple[str, int]]:
    """``(dotted name, line)`` of everything ``module`` imports (relative imports made absolute)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(anchor + ([base] if base else []))
        # ``from a import b``: b is a submodule of a, or a name defined in a.
        names += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
        names.append((base, node.lineno))
    return names


def import_graph() -> dict[str, dict[str, int]]:
    """``{module: {imported project module: line}}``."""
    modules = project_modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges: dict[str, int] = {}
        for name, line in imported_names(module, path):
            target = owner(name)
            if target and target != module:
                edges.setdefault(target, line)
        graph[module] = edges
    return graph


def find_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle (as a path of modules, first repeated last) per strongly connected group of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(start: str) -> None:  # Tarjan's algorithm, iterative (no recursion limit)
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return [_cycle_in(group, graph) for group in groups]


def _cycle_in(group: list[str], graph: dict[str, dict[str, int]]) -> list[str]:
    members, path = set(group), [min(group)]
    while True:
        nxt = min(t for t in graph[path[-1]] if t in members)
        if nxt in path:
            return path[path.index(nxt):] + [nxt]
        path.append(nxt)


def describe(cycle: list[str], graph: dict[str, dict[str, int]]) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False)) + \
        f" -> {cycle[-1]}"


@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, int]]:
    """The project's import graph, read once for the module's tests (each parses every module of the project; the
    tests only read it)."""
    return import_graph()


def test_the_project_has_no_import_cycles(graph):
    assert {"planner.sweeps.services", "gpuprofiles.api", "accounts.authentication"} <= set(graph)
    cycles = find_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(describe(c, graph) for c in cycles)


#: The packages on floors: each imports only those below it (directly or through other modules). ``config`` holds
#: what every app shares (settings, throttling, shedding, JSON input checks); the simulator, at the bottom, imports
#: none of them.
FLOORS = {
    "simulator": set(),
    "config": {"simulator"},
    "accounts": {"config", "simulator"},
    "gpuprofiles": {"config", "accounts", "simulator"},
    "planner": {"config", "accounts", "gpuprofiles", "simulator"},
}


def reached_from(graph: dict[str, dict[str, int]], package: str) -> set[str]:
    """Every module that ``package``'s modules import, directly or through other modules."""
    reached, todo = set(), [m for m in graph if m.split(".")[0] == package]
    while todo:
        module = todo.pop()
        for target in graph[module]:
            if target not in reached:
                reached.add(target)
                todo.append(target)
    return reached


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_each_package_imports_only_the_floors_below_it(graph, package):
    above = {m.split(".")[0] for m in reached_from(graph, package)} - FLOORS[package] - {package}
    assert not above, f"{package} imports {sorted(above)}, which are not below it"


def test_the_catalog_authenticates_tokens_without_the_planner(graph):
    reached = reached_from(graph, "gpuprofiles")
    assert "accounts.authentication" in reached  # the catalog API authenticates tokens
    assert not [m for m in reached if m.split(".")[0] == "planner"]


@pytest.mark.parametrize("source, expected", [
    ({"a": {"b": 1}, "b": {"c": 2}, "c": {}}, []),
    ({"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}}, [["a", "b", "c", "a"]]),
    ({"a": {"b": 1, "c": 4}, "b": {"a": 2}, "c": {"d": 5}, "d": {"c": 6}}, [["a", "b", "a"], ["c", "d", "c"]]),
])
def test_find_cycles_finds_each_cycle_once(source, expected):
    assert sorted(find_cycles(source)) == expected


def test_imports_inside_functions_and_relative_imports_count(graph):
    # accounts/apps.py imports its schema inside ready() as ``from . import schema``.
    assert "accounts.schema" in graph["accounts.apps"]
