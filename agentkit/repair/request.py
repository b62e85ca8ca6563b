"""What a coding request asks for: one constrained, grounded extraction step (the planner), then a fixed order of
what to do with it.

:func:`plan_request` runs ``agentkit.extract`` with the schema of :func:`plan_schema`: ``action`` (one of
:data:`ACTIONS`), ``old_name`` / ``new_name`` (a rename), ``function`` and ``file``. Every value is grounded:
``action`` is an enum, narrowed by the grounding to the members the request names when it names any (``rename``,
``docstring``); ``old_name`` and ``function`` are enums of the names the repository's code defines and ``file`` of
its non-test Python files, narrowed to those the request names; ``new_name`` is an enum of the request's words that
could be a new name (:func:`new_names`: identifiers that are not keywords, builtins, English function words or names
the code defines; a span of the request instead let the model write the old name, or a prefix of the new one, as
the new name). The
model chooses where the grounding leaves a choice.

:func:`route` then decides, in this order:

1. ``rename`` when the plan says rename and both names are written in the request (a name the grounding could not
   find there is not trusted);
2. ``docstring`` when the plan says docstring and the function is written in the request;
3. ``unnamed`` (nothing is done, and the reply says why) when the plan says rename or docstring, the request says
   that word too and names no bug, and it writes none of the names (for a docstring, the functions) the code
   defines: the general agent, given "add a docstring to f" where no ``f`` exists, answered "The answer is: f.",
   and given "rename f to g" ran 38 s of edits its guard refused;
4. ``repair`` (the repair loop) when the request names a bug, a failure or a fix (:data:`REPAIR_REQUEST`), or the
   plan says repair and the request says "repair";
5. ``agent`` (the general agent) for anything else.

The model's own choice of action is weak evidence: on requests that name no action, the default 135M model
answered ``repair`` for every one (renames and requests for other work alike; ``evals/results/repair/planner.json``),
so a ``repair`` the request does not say is not enough to run the repair loop.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from .rename import definitions, python_code

ACTIONS = ("repair", "rename", "docstring", "other")
MAX_ENUM = 200  # names offered per enum (the prompt shows the schema)
INSTRUCTIONS = (
    "Decide what the user's request about their Python repository asks for, and answer with JSON only. action: "
    "repair (fix a bug or make failing tests pass), rename (rename a function or class), docstring (add or write "
    "a docstring), or other. old_name and new_name: the current and the new name, for a rename. function and "
    "file: the function and the file the request names.")

#: A request that names a bug, a failure or a fix: the repair loop's, whatever the planner said.
REPAIR_REQUEST = re.compile(r"\b(fix\w*|bugs?|fail\w*|broken|crash\w*)\b|\bmake\b.*\bpass\b", re.IGNORECASE)


@dataclass
class CodingPlan:
    """The planner's output and what :func:`route` made of it."""

    action: str
    old_name: str | None = None
    new_name: str | None = None
    function: str | None = None
    file: str | None = None
    route: str = ""
    why: str = ""
    seconds: float = 0.0
    raw: dict[str, Any] = field(default_factory=dict)


def functions_of(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _choice(values: list[str], description: str) -> dict[str, Any]:
    values = values[:MAX_ENUM]
    branch = {"type": "string", "enum": values} if values else {"type": "null"}
    return {"anyOf": [branch, {"type": "null"}], "description": description}


#: English function words and the words a request uses for the edit itself: never a new name (the default model,
#: offered every word, answered ``to`` for "rename the function f to g in all files")
NOT_NAMES = frozenset({
    "a", "an", "the", "to", "into", "onto", "of", "in", "on", "at", "by", "for", "from", "with", "as", "and",
    "or", "but", "not", "no", "all", "every", "each", "everywhere", "please", "it", "its", "this", "that",
    "these", "those", "them", "me", "my", "our", "your", "can", "could", "would", "should", "will", "just",
    "now", "then", "so", "rename", "renamed", "renaming", "name", "names", "call", "called", "change",
    "changed", "function", "functions", "method", "class", "file", "files", "code", "definition",
    "definitions", "use", "uses", "usage", "usages", "instead"
})


def new_names(request: str, taken: set[str]) -> list[str]:
    """The words of ``request`` that could be a new name: identifiers, not keywords, builtins, :data:`NOT_NAMES`
    or ``taken`` (the names the code defines: a rename to one of them would clash), in order, each once."""
    words = re.findall(r"(?<![\w.])[A-Za-z_][A-Za-z0-9_]*(?![\w(])", request)
    return list(dict.fromkeys(w for w in words if not keyword.iskeyword(w) and not hasattr(builtins, w)
                              and w.lower() not in NOT_NAMES and w not in taken))


def plan_schema(texts: dict[str, str], request: str = "") -> dict[str, Any]:
    """The planner's JSON Schema for ``request`` over a repository with files ``texts`` (path -> text)."""
    code = python_code(texts)
    names = sorted(set().union(*(definitions(t) for t in code.values()))) if code else []
    functions = sorted(set().union(*(functions_of(t) for t in code.values()))) if code else []
    return {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS), "description": "what the request asks for"},
            "old_name": _choice(names, "the name to change, for a rename"),
            "new_name": _choice(new_names(request, set(names)), "the new name, for a rename"),
            "function": _choice(functions, "the function the request names"),
            "file": _choice(sorted(code), "the file the request names"),
        },
        "required": ["action", "old_name", "new_name", "function", "file"],
    }


def written(name: str | None, request: str) -> bool:
    """Whether ``name`` is written in ``request`` as a word of its own."""
    return bool(name) and re.search(r"(?<![\w.])" + re.escape(name or "") + r"(?!\w)", request) is not None


def mentioned(word: str, request: str) -> bool:
    """Whether ``request`` says ``word`` (as a word, any case): what the grounding narrows an enum to."""
    return re.search(r"(?<!\w)" + re.escape(word.casefold()) + r"(?!\w)", request.casefold()) is not None


def route(plan: CodingPlan, request: str, names: Collection[str] = (), functions: Collection[str] = ()) -> CodingPlan:
    """``plan`` with its ``route`` and ``why`` set (the module docstring's order); ``names`` and ``functions``: what
    the repository's code defines (none given: step 3 never applies)."""
    if plan.action == "rename" and written(plan.old_name, request) and written(plan.new_name, request) \
            and plan.old_name != plan.new_name:
        plan.route, plan.why = "rename", f"rename {plan.old_name} to {plan.new_name}"
    elif plan.action == "docstring" and written(plan.function, request):
        plan.route, plan.why = "docstring", f"a docstring for {plan.function}"
    elif (unnamed := _unnamed(plan, request, names, functions)) is not None:
        plan.route, plan.why = "unnamed", unnamed
    elif REPAIR_REQUEST.search(request):
        plan.route, plan.why = "repair", f"the planner says {plan.action}; the request names a bug or a failure"
    elif plan.action == "repair" and mentioned(plan.action, request):
        plan.route, plan.why = "repair", "the planner says repair, as the request does"
    else:
        plan.route, plan.why = "agent", f"the planner says {plan.action}"
    return plan


def _unnamed(plan: CodingPlan, request: str, names: Collection[str], functions: Collection[str]) -> str | None:
    """Why a request that says "rename" or "docstring" cannot be done, when it writes none of the names (for a
    docstring, the functions) the code defines; else None."""
    defined = {"rename": names, "docstring": functions}.get(plan.action)
    if not defined or not mentioned(plan.action, request) or REPAIR_REQUEST.search(request) \
            or any(written(n, request) for n in defined):
        return None
    kind = "names" if plan.action == "rename" else "functions"
    shown = ", ".join(sorted(defined)[:20]) + (", ..." if len(defined) > 20 else "")
    return f"the request asks for a {plan.action} but writes none of the {kind} the code defines ({shown})"


def plan_request(request: str, texts: dict[str, str], model: Any) -> CodingPlan:
    """The planner's extraction of ``request`` over a repository with files ``texts``, routed."""
    from agentkit.sdk import extract

    t0 = time.perf_counter()
    raw = extract(plan_schema(texts, request), request, model=model, instructions=INSTRUCTIONS)
    plan = CodingPlan(raw.get("action") or "other", raw.get("old_name"), raw.get("new_name"), raw.get("function"),
                raw.get("file"), raw=raw)
    plan.new_name = plan.new_name or taken_new_name(plan, request, texts)
    plan.seconds = time.perf_counter() - t0
    code = python_code(texts)
    return route(plan, request, set().union(*(definitions(t) for t in code.values())),
                 set().union(*(functions_of(t) for t in code.values())))


def taken_new_name(plan: CodingPlan, request: str, texts: dict[str, str]) -> str | None:
    """For a rename with no new name on offer (every word that could be one is a name the code defines): the one
    other defined name the request writes, so that the rename is refused as a clash rather than sent elsewhere."""
    if plan.action != "rename" or not written(plan.old_name, request):
        return None
    code = python_code(texts)
    names = set().union(*(definitions(t) for t in code.values())) if code else set()
    others = [n for n in sorted(names) if n != plan.old_name and written(n, request)]
    return others[0] if len(others) == 1 else None


def function_file(plan: CodingPlan, texts: dict[str, str]) -> str | None:
    """The non-test Python file holding ``plan.function``: the plan's file when it defines it, else the one file
    that does (None when none or several do)."""
    code = python_code(texts)
    if plan.file in code and plan.function in functions_of(code[plan.file]):
        return plan.file
    holders = [rel for rel, t in code.items() if plan.function in functions_of(t)]
    return holders[0] if len(holders) == 1 else None
