"""No import cycles: between agentkit's subpackages, or between the modules of one subpackage.

Every import counts, including the lazy ones inside functions (they hide a cycle, they do not remove it); only
imports under ``if TYPE_CHECKING:`` are left out, since they never run. A cycle that is really wanted goes into
``ALLOWED`` with its reason; today the list is empty.

The check reads the source with ``ast`` (nothing is imported), so it runs in well under a second.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# frozenset of the modules (or subpackages) in a cycle -> why it is allowed
ALLOWED: dict[frozenset[str], str] = {}


def _module_files(root: Path) -> dict[str, Path]:
    """``agentkit.x.y`` -> file, for the package and the card's top-level folders installed under it."""
    files: dict[str, Path] = {}
    sources = [(root / "agentkit", "agentkit")]
    for extra in ("serving", "tools"):  # installed as agentkit.serving / agentkit.tools
        if (root / extra).is_dir() and not (root / "agentkit" / extra).is_dir():
            sources.append((root / extra, f"agentkit.{extra}"))
    for base, prefix in sources:
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join([prefix, *parts])] = path
    return files


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Import nodes that run (anything under ``if TYPE_CHECKING:`` is skipped)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _absolute(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _alias(name: str) -> str:
    for extra in ("serving", "tools"):  # the repo's top-level folders, as installed
        if name == extra or name.startswith(extra + "."):
            return "agentkit." + name
    return name


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports."""
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in files.items():
        is_pkg = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [_alias(a.name) for a in node.names]
            else:
                base = _alias(_absolute(module, is_pkg, node))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files:  # `import a.b.c` of a name inside a module
                    t = t.rpartition(".")[0]
                if t and t != module:
                    graph[module].add(t)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Tarjan's algorithm, iterative: the components with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[frozenset[str]] = []
    nodes = set(graph) | {t for ts in graph.values() for t in ts}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def _room(module: str) -> str:
    """The subpackage a module belongs to (``agentkit.engine``), or the top-level module itself."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else "agentkit (root)"


def room_graph(graph: dict[str, set[str]], files: dict[str, Path]) -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = defaultdict(set)
    for m, ts in graph.items():
        for t in ts:
            a, b = _room(m), _room(t)
            if a != b and b != "agentkit (root)":  # importing the root package's re-exports is a user's view
                rooms[a].add(b)
    return rooms


def cycles(root: Path) -> list[str]:
    files = _module_files(root)
    graph = import_graph(files)
    found = [("subpackages", c) for c in strongly_connected(room_graph(graph, files))]
    by_room: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for m, ts in graph.items():
        for t in ts:
            if _room(m) == _room(t):
                by_room[_room(m)][m].add(t)
    for sub in by_room.values():
        found += [("modules", c) for c in strongly_connected(sub)]
    return [f"{kind}: {' <-> '.join(sorted(c))}" for kind, c in found if c not in ALLOWED]


def test_no_import_cycles():
    found = cycles(ROOT)
    assert not found, "import cycles (break them, or list them in ALLOWED with a reason):\n" + "\n".join(found)


def test_the_check_finds_a_lazy_cycle_and_ignores_type_checking(tmp_path):
    pkg = tmp_path / "agentkit"
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    for p in (pkg, pkg / "a", pkg / "b"):
        (p / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from ..b.y import f\n")
    (pkg / "b" / "y.py").write_text("def f():\n    from ..a import x\n")
    (pkg / "a" / "z.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import w\n")
    (pkg / "a" / "w.py").write_text("from . import z\n")
    found = cycles(tmp_path)
    assert found == ["subpackages: agentkit.a <-> agentkit.b"]
