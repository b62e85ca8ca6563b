"""Renaming a function or class everywhere in a repository's code: a deterministic refactoring over Python's tokens.

:func:`plan_rename` finds the definition of ``old`` in the non-test Python files and every ``NAME`` token equal to
``old`` in them (definitions, calls, imports, attribute uses, names inside f-string fields), plus string literals
whose whole value is ``old`` (``__all__`` entries), and gives each changed file's new text. It refuses (the plan's
``refused`` says why, and nothing is proposed) when a name is not an identifier, ``old`` is not defined in the
code, ``new`` is a keyword or a builtin, ``new`` is already used in the code (a clash), or a test file uses ``old``
(the rename would have to edit a test file, and the tests are read-only to the assistant).

:func:`rename` checks the plan on scratch copies (``agentkit.repair.checked``: the tests must not get worse) and only
then writes it.
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from agentkit.tools.edit_guard import is_test_path

from .checked import EditOutcome, check_and_apply, texts_of


@dataclass
class RenamePlan:
    old: str
    new: str
    texts: dict[str, str] = field(default_factory=dict)  # changed file -> its new text
    uses: int = 0  # tokens renamed
    defined_in: list[str] = field(default_factory=list)
    refused: str = ""


def python_code(texts: dict[str, str]) -> dict[str, str]:
    """The non-test Python files of ``texts``."""
    return {rel: t for rel, t in texts.items() if rel.endswith(".py") and not is_test_path(rel)}


def definitions(source: str) -> set[str]:
    """Names of the functions and classes ``source`` defines (at any depth); empty when it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}


def name_spans(source: str, name: str) -> list[tuple[int, int, int]]:
    """(line, start column, end column) of every ``NAME`` token equal to ``name`` in ``source``, f-string fields
    included; raises ``tokenize.TokenError`` / ``SyntaxError`` for source that does not tokenize."""
    out: list[tuple[int, int, int]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and tok.string == name:
            out.append((tok.start[0], tok.start[1], tok.end[1]))
        elif tok.type == tokenize.STRING and tok.start[0] == tok.end[0]:
            out += [(tok.start[0], tok.start[1] + a, tok.start[1] + b) for a, b in literal_spans(tok.string, name)]
    return out


def literal_spans(token: str, name: str) -> list[tuple[int, int]]:
    """Spans of ``name`` in one string token: the whole body of a plain literal equal to ``name``, or ``NAME``
    tokens inside an f-string's replacement fields."""
    body = token.lstrip("rRuUbBfF")
    prefix = token[: len(token) - len(body)].lower()
    quote = 3 if body[:3] in ('"""', "'''") else 1
    if "f" not in prefix:
        inner = body[quote:-quote]
        return [(len(prefix) + quote, len(token) - quote)] if inner == name and "b" not in prefix else []
    out: list[tuple[int, int]] = []
    for start, expr in fstring_fields(token):
        try:
            out += [(start + a, start + b) for line, a, b in name_spans(expr, name) if line == 1]
        except (tokenize.TokenError, SyntaxError):
            continue
    return out


def fstring_fields(token: str) -> list[tuple[int, str]]:
    """(offset in ``token``, text) of each top-level replacement field of an f-string token: its expression with
    any conversion and format spec (whose tokens are no names but those of a nested field)."""
    out: list[tuple[int, str]] = []
    i, depth, start = 0, 0, 0
    while i < len(token):
        c = token[i]
        if depth == 0 and c == "{" and token[i + 1:i + 2] == "{":
            i += 2
            continue
        if c == "{":
            depth += 1
            if depth == 1:
                start = i + 1
        elif c == "}" and depth:
            depth -= 1
            if depth == 0:
                out.append((start, token[start:i]))
        i += 1
    return out


def replaced(source: str, spans: list[tuple[int, int, int]], new: str) -> str:
    lines = source.splitlines(keepends=True)
    for line, a, b in sorted(spans, reverse=True):
        text = lines[line - 1]
        lines[line - 1] = text[:a] + new + text[b:]
    return "".join(lines)


def plan_rename(texts: dict[str, str], old: str, new: str) -> RenamePlan:
    """The rename of ``old`` to ``new`` over ``texts`` (path -> text), or a plan whose ``refused`` says why not."""
    plan = RenamePlan(old, new)
    plan.refused = name_problem(old, new)
    if plan.refused:
        return plan
    code = python_code(texts)
    plan.defined_in = sorted(rel for rel, t in code.items() if old in definitions(t))
    if not plan.defined_in:
        plan.refused = f"no function or class named {old!r} is defined in the code"
        return plan
    try:
        uses = {rel: name_spans(t, old) for rel, t in code.items()}
        clashes = sorted(rel for rel, t in code.items() if name_spans(t, new))
        tests = sorted(rel for rel, t in texts.items() if rel.endswith(".py") and is_test_path(rel)
                       and name_spans(t, old))
    except (tokenize.TokenError, SyntaxError) as err:
        plan.refused = f"a file does not tokenize: {err}"
        return plan
    if clashes:
        plan.refused = f"the name {new!r} is already used in {', '.join(clashes)}: renaming would clash"
    elif tests:
        plan.refused = (f"the tests use {old!r} ({', '.join(tests)}): the rename would have to edit a test file, "
                        "and test files are read-only")
    else:
        plan.texts = {rel: replaced(code[rel], spans, new) for rel, spans in uses.items() if spans}
        plan.uses = sum(len(s) for s in uses.values())
    return plan


def name_problem(old: str, new: str) -> str:
    """Why ``old`` -> ``new`` is not a rename of one identifier to another ("" when it is)."""
    for what, name in (("old", old), ("new", new)):
        if not (isinstance(name, str) and name.isidentifier()) or keyword.iskeyword(name):
            return f"the {what} name {name!r} is not a Python identifier"
    if old == new:
        return f"the old and the new name are both {old!r}"
    if hasattr(builtins, new):
        return f"the new name {new!r} is a builtin: the rename would shadow it"
    return ""


def rename(root: str | Path, old: str, new: str, *, time_limit_s: float = 60.0, apply: bool = True) -> EditOutcome:
    """Rename ``old`` to ``new`` in the code of the repository at ``root``: planned (:func:`plan_rename`), checked
    on scratch copies, then written (see the module docstring)."""
    plan = plan_rename(texts_of(Path(root)), old, new)
    if plan.refused:
        return EditOutcome("rename", False, plan.refused)
    return check_and_apply(root, plan.texts, "rename", time_limit_s=time_limit_s, apply=apply)
