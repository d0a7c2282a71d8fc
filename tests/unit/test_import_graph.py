"""The package has no import circles: each folder is a room, and arrows only run one way.

Every ``import`` in every module counts (a function-level import is a dependency too); a
package's ``__init__`` counts as a module of its own. Circles are looked for twice: between
modules, and between the top-level folders of ``queen_threads/`` (a top-level module such
as ``runtime.py`` is a folder of its own there), so two folders cannot lean on each other
through different modules either.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "queen_threads"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules that `name` imports."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(nearest(alias.name, known) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import mod` depends on pkg.mod; `from mod import name` on mod
            submodules = {f"{base}.{a.name}" for a in node.names} & known.keys()
            found.update(submodules or {nearest(base, known)})
    found.discard("")
    found.discard(name)
    return found


def nearest(target: str, known: dict[str, Path]) -> str:
    """The deepest project module that `target` names ('' when it is not the project's)."""
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles_in_the_package() -> None:
    known = modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert circles(graph) == []


def folder(module: str) -> str:
    """The top-level folder (or top-level module) of `queen_threads/` a module lives in."""
    parts = module.split(".")
    return ".".join(parts[:2])


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    folders: dict[str, set[str]] = {}
    for name, targets in graph.items():
        edges = folders.setdefault(folder(name), set())
        edges.update(folder(t) for t in targets if folder(t) != folder(name))
    return folders


def test_no_import_circles_between_folders() -> None:
    known = modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert circles(folder_graph(graph)) == []


def test_the_folder_check_finds_a_circle_through_different_modules() -> None:
    graph = {
        "queen_threads.reads.routes": {"queen_threads.runtime"},
        "queen_threads.reads.store": set(),
        "queen_threads.runtime": {"queen_threads.reads.store"},
    }
    assert circles(graph) == []
    assert circles(folder_graph(graph)) == [["queen_threads.reads", "queen_threads.runtime"]]


def test_no_route_module_takes_the_runtime() -> None:
    """A module that declares routes (imports `http/routes.py`) is handed what its
    resources use; only the app (the composition root) reads the Runtime."""
    known = modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    route_modules = {
        name for name, targets in graph.items() if "queen_threads.http.routes" in targets
    } - {"queen_threads.app", "queen_threads.http.auth", "queen_threads.http.ignored"}
    assert len(route_modules) > 10
    takers = sorted(name for name in route_modules if "queen_threads.runtime" in graph[name])
    assert takers == [], f"route modules that import the Runtime: {takers}"


def test_the_check_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_only_the_database_room_imports_the_driver() -> None:
    importers = {
        name
        for name, path in modules().items()
        if "psycopg2" in {n.split(".")[0] for n in _imported_names(path)}
    }
    assert importers and all(name.startswith("queen_threads.db") for name in importers), importers


def _imported_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_every_folder_of_python_files_is_a_package() -> None:
    """The wheel ships packages only (setup.cfg: packages = find:): a folder of modules
    without an __init__.py would be left out."""
    folders = {p.parent for p in PACKAGE.rglob("*.py")}
    missing = sorted(
        str(f.relative_to(PACKAGE)) for f in folders if not (f / "__init__.py").exists()
    )
    assert missing == []


# What the shared plumbing's measuring points observe (metrics/metered.py): each takes its
# observer, as the stores do.
OBSERVED = {"Database", "RequestStats", "Authenticator", "ExclusiveService"}


def test_no_class_subclasses_a_store_or_the_observed_plumbing() -> None:
    """Stores and the observed plumbing take their observer (queue/metrics.py,
    metrics/metered.py, ...): no subclass of one exists, to count or otherwise."""
    stores = {
        node.name
        for path in PACKAGE.rglob("store.py")
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Store")
    }
    assert {"QueueStore", "StreamStore", "KvStore"} <= stores
    stores |= OBSERVED
    subclasses = sorted(
        f"{module_name(path)}.{node.name}"
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ClassDef) and any(_base_name(base) in stores for base in node.bases)
    )
    assert subclasses == []


def _base_name(base: ast.expr) -> str:
    if isinstance(base, ast.Attribute):
        return base.attr
    return base.id if isinstance(base, ast.Name) else ""
