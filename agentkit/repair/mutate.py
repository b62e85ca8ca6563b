"""Single-line mutation operators over Python source, shared by the model-free repair baseline, the repair
benchmark's bug maker and the repair adapter's training data.

An operator rewrites one expression or statement that sits on one line, keeping the rest of the line's text as it
was (the operator token is found in the gap between two operands; a node is replaced by its own source segment or
by a small rewrite of it). :func:`line_variants` gives every variant of one line, each tagged with its kind:

``off_by_one`` (±1 on indices, slice bounds, ``range`` arguments; a ``+ 1`` / ``- 1`` dropped), ``comparison``
(``<`` ↔ ``<=`` …), ``arithmetic`` (``+`` ↔ ``-``, ``//`` ↔ ``/`` …, augmented assignments too), ``boolean``
(``and`` ↔ ``or``), ``variable`` (a name read replaced by another name of the function's scope), ``negation`` (a
``not`` dropped or added), ``constant`` (``True`` ↔ ``False``, an integer changed), ``arguments`` (two adjacent
positional arguments swapped), ``return`` (a ``return`` dropped, or added to an expression statement).

Every operator family holds its own inverse for most sites (``<`` → ``<=`` is undone by ``<=`` → ``<``), which is
what makes the operators a repair baseline (template-based repair, as in TBar / PraPR).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

KINDS = ("off_by_one", "comparison", "arithmetic", "boolean", "variable", "negation", "constant", "arguments",
         "return")

CMP_SWAPS = {"<": ("<=", ">"), "<=": ("<", ">="), ">": (">=", "<"), ">=": (">", "<="), "==": ("!=",),
             "!=": ("==",), "is": ("is not",), "is not": ("is",), "in": ("not in",), "not in": ("in",)}
ARITH_SWAPS = {"+": ("-",), "-": ("+",), "*": ("/", "//", "+"), "//": ("/", "*", "%"), "/": ("//", "*"), "%": ("//",),
               "**": ("*",), "<<": (">>",), ">>": ("<<",), "&": ("|",), "|": ("&",), "^": ("|",)}
BOOL_SWAPS = {"and": ("or",), "or": ("and",)}
#: Names never offered as a replacement variable.
NOT_VARIABLES = frozenset({"self", "cls", "True", "False", "None"})


@dataclass(frozen=True)
class LineEdit:
    """Line ``line`` (1-based) of a file replaced by ``text`` (no newline); ``kind``: the operator (or ``model``)."""

    line: int
    text: str
    kind: str


def _op_in_gap(gap: str, old: str, new: str) -> str | None:
    """``gap`` (the text between two operands) with operator ``old`` replaced by ``new``; None if not found."""
    words = old.replace(" ", r"\s+")
    rx = rf"(?<![<>=!*/%&|^\w]){words}(?![<>=*/\w])" if old[0].isalpha() else rf"(?<![<>=!*/%&|^]){re.escape(old)}(?![<>=*/])"
    m = re.search(rx, gap)
    return None if m is None else gap[: m.start()] + new + gap[m.end():]


_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
        ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Div: "/", ast.Mod: "%", ast.Pow: "**",
        ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}


class _Line:
    """One line's text as UTF-8 bytes (AST column offsets count bytes) and rewrites of spans of it."""

    def __init__(self, text: str, lineno: int) -> None:
        self.raw = text.encode("utf-8")
        self.lineno = lineno

    def on_line(self, node: ast.AST) -> bool:
        return getattr(node, "lineno", None) == self.lineno and getattr(node, "end_lineno", None) == self.lineno

    def seg(self, a: int, b: int) -> str:
        return self.raw[a:b].decode("utf-8")

    def node(self, node: ast.AST) -> str:
        return self.seg(node.col_offset, node.end_col_offset)

    def replace(self, a: int, b: int, new: str) -> str:
        return (self.raw[:a] + new.encode("utf-8") + self.raw[b:]).decode("utf-8")

    def swap_gap(self, left: ast.AST, right: ast.AST, old: str, new: str) -> str | None:
        a, b = left.end_col_offset, right.col_offset
        gap = _op_in_gap(self.seg(a, b), old, new)
        return None if gap is None else self.replace(a, b, gap)


def _scope_names(fn: ast.AST | None) -> list[str]:
    """Arguments and assigned names of function ``fn``, in order of first appearance."""
    if fn is None:
        return []
    names: list[str] = []
    if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        a = fn.args
        names += [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
        names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.append(n.id)
    return [n for n in dict.fromkeys(names) if n not in NOT_VARIABLES]


def _index_like(tree: ast.AST) -> set[int]:
    """ids of expressions that are an index, a slice bound or an argument of ``range``: off-by-one sites."""
    out: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript):
            s = n.slice
            parts = [s.lower, s.upper] if isinstance(s, ast.Slice) else [s]
            out.update(id(p) for p in parts if p is not None and not isinstance(p, ast.Tuple))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "range":
            out.update(id(a) for a in n.args)
    return out


def _variants(line: _Line, tree: ast.AST, fn: ast.AST | None) -> Iterator[tuple[str, str]]:
    index_like = _index_like(tree)
    scope = _scope_names(fn)
    for node in ast.walk(tree if fn is None else fn):
        if isinstance(node, ast.stmt) and node.lineno == line.lineno:
            yield from _statement_variants(line, node)
        if not line.on_line(node):
            continue
        if isinstance(node, ast.Compare):
            for left, op, right in zip([node.left, *node.comparators], node.ops, node.comparators):
                for new in CMP_SWAPS.get(_CMP[type(op)], ()):
                    out = line.swap_gap(left, right, _CMP[type(op)], new)
                    if out is not None:
                        yield "comparison", out
        elif isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            old = _BIN[type(node.op)]
            for new in ARITH_SWAPS.get(old, ()):
                out = line.swap_gap(node.left, node.right, old, new)
                if out is not None:
                    yield "arithmetic", out
            if old in "+-" and isinstance(node.right, ast.Constant) and node.right.value == 1:
                yield "off_by_one", line.replace(node.col_offset, node.end_col_offset, line.node(node.left))
        elif isinstance(node, ast.BoolOp):
            old = "and" if isinstance(node.op, ast.And) else "or"
            for left, right in zip(node.values, node.values[1:]):
                out = line.swap_gap(left, right, old, BOOL_SWAPS[old][0])
                if out is not None:
                    yield "boolean", out
            for v in node.values:
                if not (isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not)):
                    yield "negation", line.replace(v.col_offset, v.end_col_offset, _negated(line, v))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield "negation", line.replace(node.col_offset, node.end_col_offset, line.node(node.operand))
        elif isinstance(node, ast.Call):
            yield from _argument_swaps(line, node)
        if id(node) in index_like:
            yield from _plus_minus_one(line, node)
        elif isinstance(node, ast.Constant):
            yield from _constant_changes(line, node)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in scope:
            for other in scope:
                if other != node.id:
                    yield "variable", line.replace(node.col_offset, node.end_col_offset, other)


def _plus_minus_one(line: _Line, node: ast.AST) -> Iterator[tuple[str, str]]:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        for v in (node.value + 1, node.value - 1):
            yield "off_by_one", line.replace(node.col_offset, node.end_col_offset, str(v))
        return
    if isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant) and node.right.value == 1:
        return  # ``i + 1`` / ``i - 1``: dropping the 1 is the BinOp rule's
    text = line.node(node)
    if isinstance(node, ast.BinOp | ast.BoolOp | ast.IfExp | ast.Lambda | ast.NamedExpr):
        text = f"({text})"
    for delta in (" + 1", " - 1"):
        yield "off_by_one", line.replace(node.col_offset, node.end_col_offset, text + delta)


def _constant_changes(line: _Line, node: ast.Constant) -> Iterator[tuple[str, str]]:
    v = node.value
    if isinstance(v, bool):
        yield "constant", line.replace(node.col_offset, node.end_col_offset, str(not v))
    elif type(v) is int:
        for new in dict.fromkeys((v + 1, v - 1, 0, 1)):
            if new != v:
                yield "constant", line.replace(node.col_offset, node.end_col_offset, str(new))


def _argument_swaps(line: _Line, call: ast.Call) -> Iterator[tuple[str, str]]:
    args = [a for a in call.args if not isinstance(a, ast.Starred) and line.on_line(a)]
    for a, b in pairwise(args):
        ta, tb = line.node(a), line.node(b)
        if ta != tb:
            mid = line.seg(a.end_col_offset, b.col_offset)
            yield "arguments", line.replace(a.col_offset, b.end_col_offset, tb + mid + ta)


def _statement_variants(line: _Line, stmt: ast.stmt) -> Iterator[tuple[str, str]]:
    if isinstance(stmt, ast.Return) and stmt.value is not None and line.on_line(stmt):
        yield "return", line.replace(stmt.col_offset, stmt.end_col_offset, line.node(stmt.value))
    elif isinstance(stmt, ast.Expr) and line.on_line(stmt):  # docstrings never get here (docstring_lines)
        yield "return", line.replace(stmt.col_offset, stmt.end_col_offset, "return " + line.node(stmt.value))
    elif isinstance(stmt, ast.If | ast.While | ast.Assert) and line.on_line(stmt.test):
        test = stmt.test
        if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
            yield "negation", line.replace(test.col_offset, test.end_col_offset, _negated(line, test))
    elif isinstance(stmt, ast.AugAssign) and line.on_line(stmt) and type(stmt.op) in _BIN:
        old = _BIN[type(stmt.op)]
        for new in ARITH_SWAPS.get(old, ()):
            out = line.swap_gap(stmt.target, stmt.value, old + "=", new + "=")
            if out is not None:
                yield "arithmetic", out


def _negated(line: _Line, node: ast.AST) -> str:
    text = line.node(node)
    return f"not ({text})" if isinstance(node, ast.BoolOp | ast.IfExp | ast.NamedExpr | ast.Lambda) else f"not {text}"


def enclosing_function(tree: ast.AST, lineno: int) -> ast.AST | None:
    """The innermost function whose lines hold ``lineno``; None at module level."""
    best = None
    for n in ast.walk(tree):
        inside = isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.lineno <= lineno <= (n.end_lineno or 0)
        if inside and (best is None or n.lineno >= best.lineno):
            best = n
    return best


def docstring_lines(tree: ast.AST) -> set[int]:
    """Line numbers taken by docstrings (never mutated)."""
    out: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return out


def line_variants(source: str, lineno: int, tree: ast.AST | None = None) -> list[LineEdit]:
    """Every operator variant of line ``lineno`` of ``source`` that still parses as a whole file, deduplicated,
    in operator order (the caller shuffles or ranks them). Empty for a docstring or a line without code."""
    tree = tree if tree is not None else ast.parse(source)
    lines = source.splitlines()
    if not 1 <= lineno <= len(lines) or lineno in docstring_lines(tree):
        return []
    original = lines[lineno - 1]
    line = _Line(original, lineno)
    fn = enclosing_function(tree, lineno)
    seen = {original}
    out: list[LineEdit] = []
    for kind, text in _variants(line, tree, fn):
        if text in seen:
            continue
        seen.add(text)
        if parses(lines, lineno, text):
            out.append(LineEdit(lineno, text, kind))
    return out


def parses(lines: list[str], lineno: int, text: str) -> bool:
    """Whether the file ``lines`` with line ``lineno`` replaced by ``text`` is valid Python."""
    try:
        ast.parse("\n".join([*lines[: lineno - 1], text, *lines[lineno:]]))
    except (SyntaxError, ValueError):
        return False
    return True


def apply_line(source: str, edit: LineEdit) -> str:
    """``source`` with ``edit`` applied (the file's line endings and final newline kept)."""
    lines = source.splitlines(keepends=True)
    old = lines[edit.line - 1]
    ending = old[len(old.rstrip("\r\n")):]
    lines[edit.line - 1] = edit.text + ending
    return "".join(lines)


def function_mutants(source: str, fn_name: str) -> list[LineEdit]:
    """Every single-line mutant of function ``fn_name`` of ``source`` (its body's lines, docstring excluded)."""
    tree = ast.parse(source)
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
               and n.name == fn_name), None)
    if fn is None:
        raise ValueError(f"no function {fn_name!r} in the source")
    out: list[LineEdit] = []
    for lineno in range(fn.body[0].lineno, (fn.end_lineno or fn.lineno) + 1):
        out += line_variants(source, lineno, tree)
    return out
