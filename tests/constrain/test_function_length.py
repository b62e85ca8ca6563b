"""Every function in ``agentkit/constrain/`` (methods and nested functions too) is at most ``MAX_LINES`` long, from
its ``def`` line to its last line."""

from __future__ import annotations

import ast
from pathlib import Path

import agentkit.constrain

MAX_LINES = 60
PACKAGE = Path(agentkit.constrain.__file__).parent


def long_functions(source: str, limit: int = MAX_LINES) -> list[tuple[str, int, int]]:
    """``(name, first line, length)`` of each function in ``source`` longer than ``limit`` lines."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            if n > limit:
                out.append((node.name, node.lineno, n))
    return out


def test_the_measure_finds_long_functions_nested_or_not():
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    src = f"def short():\n    return 1\n\ndef long():\n{body}\n\nclass C:\n    def m(self):\n        def inner():\n" + \
        "\n".join(f"            y{i} = {i}" for i in range(61))
    assert [(name, n) for name, _line, n in long_functions(src)] == [("long", 61), ("m", 63), ("inner", 62)]


def test_no_function_in_constrain_is_over_the_limit():
    files = sorted(PACKAGE.glob("*.py"))
    assert len(files) > 10
    over = [f"{p.name}:{line} {name} ({n} lines)" for p in files for name, line, n in long_functions(p.read_text())]
    assert not over, "over {} lines: {}".format(MAX_LINES, ", ".join(over))
