"""One name per concept: no class name defined in two modules, one ``MODES``, one ``compile_schema``, and examples
that import what the package's flat namespace offers from it."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import agentkit

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("agentkit", "serving", "tools")


def _modules(*roots: str, base: Path = REPO):
    for root in roots:
        for p in sorted((base / root).rglob("*.py")):
            yield p, ast.parse(p.read_text())


def _top_level(tree: ast.Module, kind) -> list[str]:
    names = []
    for n in tree.body:
        if isinstance(n, kind) and hasattr(n, "name"):
            names.append(n.name)
        elif kind is ast.Assign and isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def duplicates(kind, roots=PACKAGES, base: Path = REPO) -> dict[str, list[str]]:
    """Top-level names of ``kind`` (``ast.ClassDef``, ``ast.Assign``) defined in more than one module."""
    where: dict[str, list[str]] = defaultdict(list)
    for p, tree in _modules(*roots, base=base):
        for name in _top_level(tree, kind):
            where[name].append(str(p.relative_to(base)))
    return {k: v for k, v in where.items() if len(v) > 1}


def test_no_class_name_is_defined_twice():
    assert duplicates(ast.ClassDef) == {}


def test_the_duplicate_finder_finds_duplicates(tmp_path):
    for pkg in ("a", "b"):
        (tmp_path / pkg).mkdir()
        src = f"MODES: tuple = ('x',)\nclass Plan:\n    pass\nclass Own{pkg}:\n    pass\n"
        (tmp_path / pkg / "m.py").write_text(src)
    assert duplicates(ast.ClassDef, ("a", "b"), tmp_path) == {"Plan": ["a/m.py", "b/m.py"]}
    assert duplicates(ast.Assign, ("a", "b"), tmp_path) == {"MODES": ["a/m.py", "b/m.py"]}


def test_modes_is_defined_once_and_eval_modes_map_onto_it():
    where = [str(p.relative_to(REPO)) for p, tree in _modules(*PACKAGES, "evals")
             if "MODES" in _top_level(tree, ast.Assign)]
    assert where == ["agentkit/settings.py"]  # the settings table; agentkit.config re-exports it
    from agentkit.config import MODES
    from agentkit.evals.runner import ALL_EVAL_MODES, ENGINE_MODE, EVAL_MODES

    assert set(ENGINE_MODE.values()) == set(MODES)
    assert set(EVAL_MODES) <= set(ALL_EVAL_MODES) == set(ENGINE_MODE)


def test_one_compile_schema():
    from agentkit import constrain
    from agentkit.constrain import compiler

    assert agentkit.compile_schema is constrain.compile_schema is compiler.compile_schema
    assert compiler.compile_schema_cached is compiler.compile_schema  # the earlier name, kept for callers
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert compiler.compile_schema(schema) is compiler.compile_schema(dict(schema))  # cached
    fresh = compiler.compile_schema_uncached(schema)
    assert fresh is not compiler.compile_schema_uncached(schema) and fresh.regex == compiler.compile_schema(schema).regex


def test_examples_import_flat_names_from_agentkit():
    flat = set(agentkit.__all__)
    deep = []
    for p, tree in _modules("examples"):
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("agentkit."):
                deep += [f"{p.name}: {a.name} from {n.module}" for a in n.names if a.name in flat]
    assert not deep, deep
    assert any(isinstance(n, ast.ImportFrom) and n.module == "agentkit"
               for _p, tree in _modules("examples") for n in ast.walk(tree))


def test_evals_and_examples_share_no_module_name():
    """Tests put both folders on ``sys.path``; a script named as an example shadowed it (``evals/unit_converter.py``
    made ``from unit_converter import build_agent`` fail in CI, depending on the order the tests ran)."""
    root = Path(__file__).resolve().parents[1]
    assert not {p.stem for p in (root / "evals").glob("*.py")} & {p.stem for p in (root / "examples").glob("*.py")}
