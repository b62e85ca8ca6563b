"""No module calls another module's private names: ``obj._name(...)`` where ``_name`` is not defined in the calling
module (a method, a function or an attribute it assigns), and ``from module import _name`` across modules. A part
that another module needs is public (named without the underscore) and documented as a hook; the check reads the
source with ``ast`` (nothing is imported).

``self._x`` / ``cls._x`` are the module's own; dunders (``__init__``) are not private. Third-party privates that a
module has no way around are listed in ``ALLOWED`` with the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("agentkit", "serving", "tools")

TORCH_KERNELS = "torch's int4 / int8 CPU kernels and oneDNN prepacking have no public name (torch.ops.aten)"
# "path:name" -> why the call is allowed: a library's private with no public way
ALLOWED: dict[str, str] = {
    "agentkit/models/head.py:._weight_int8pack_mm(": TORCH_KERNELS,
    "agentkit/models/packed.py:._reorder_linear_weight(": TORCH_KERNELS,
    "agentkit/models/packed.py:._linear_pointwise(": TORCH_KERNELS,
    "agentkit/models/q4.py:._weight_int4pack_mm_for_cpu(": TORCH_KERNELS,
    "agentkit/models/q4.py:._weight_int8pack_mm(": TORCH_KERNELS,
    "agentkit/models/q4.py:._convert_weight_to_int4pack_for_cpu(": TORCH_KERNELS,
}
# sites waiting to become public hooks; the list only shrinks
PENDING: dict[str, str] = {}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_names(tree: ast.AST) -> set[str]:
    """The private names a module defines: its functions, classes, methods, and attributes it assigns."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.arg):
            own.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
    return {n for n in own if _private(n)}


def _is_module(path: Path, node: ast.ImportFrom, name: str) -> bool:
    """Whether ``from X import name`` names a module of the package (a private module: the package's own)."""
    base = path.parent
    for _ in range(max(node.level - 1, 0)):
        base = base.parent
    folder = base.joinpath(*(node.module or "").split(".")) if node.module else base
    return (folder / f"{name}.py").exists() or (folder / name / "__init__.py").exists()


def _key(finding: str) -> str:
    """``path:.name(`` of a finding ``path:line: .name(``."""
    where, what = finding.split(": ", 1)
    return where.rsplit(":", 1)[0] + ":" + what


def private_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = _own_names(tree)
    rel = path.relative_to(ROOT)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [f"{rel}:{node.lineno}: from {'.' * node.level}{node.module or ''} import {a.name}"
                      for a in node.names if _private(a.name) and not _is_module(path, node, a.name)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, base = node.func.attr, node.func.value
            if not _private(name) or name in own:
                continue
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            found.append(f"{rel}:{node.lineno}: .{name}(")
    return [f for f in found if _key(f) not in ALLOWED]


def test_no_module_calls_another_modules_private_names():
    found = [f for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py")) for f in private_uses(path)]
    assert [f for f in found if _key(f) not in PENDING] == []
    assert {_key(f) for f in found} == set(PENDING), "a pending site is gone: strike it from PENDING"


def test_the_check_finds_a_private_call_and_import(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "_mod.py").write_text("def f():\n    pass\n")
    src = tmp_path / "pkg" / "a.py"
    src.write_text("from . import _mod\nfrom .b import _helper\n\nclass A:\n    def _own(self):\n"
                   "        return other._hidden() + self._own() + _mod.f()\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path, raising=False)
    found = [f.split(": ", 1)[1] for f in private_uses(src)]
    assert found == ["from .b import _helper", ".hidden(".replace(".", "._", 1)]


def test_the_server_reads_no_private_sdk_module_and_no_signature():
    """serving/ maps requests to steps (agentkit.steps) and calls the engine through its face
    (agentkit.engine.faces.EngineLike): it imports no agentkit.sdk._* module and reads no signature."""
    found = []
    for path in sorted((ROOT / "serving").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentkit.sdk"):
                found += [f"{path.name}: from {node.module} import {a.name}" for a in node.names
                          if (node.module or "").startswith("agentkit.sdk._") or a.name.startswith("_")]
            if isinstance(node, ast.Attribute) and node.attr == "signature":
                found.append(f"{path.name}:{node.lineno}: .signature")
    assert found == []
