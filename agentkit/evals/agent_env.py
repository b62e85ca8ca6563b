"""The agent-loop benchmark's tool environment: what a task's tools return, the calls they saw, and how a call is
scored; the same tools as agentkit ``Tool`` objects, pydantic-ai tools and OpenAI tool specs.

A :class:`TaskEnv` lives for one run. Every call of a task's tool goes through :meth:`TaskEnv.call`, which logs it
(name, arguments as the framework passed them) and answers:

- the item's ground-truth call (BFCL scoring, :func:`agentkit.evals.bfcl.check_arguments`): the task's canned
  ``result`` (``fail_once``: the first call of any item tool raises :class:`ServiceUnavailable` instead);
- ``lookup_reference`` with the task's reference: ``{"ref": ..., "value": ...}``; another reference: no value;
- anything else: a neutral ``{"status": "ok", "result": "no record matches these arguments"}``.

Arguments equal to their declared default may be filled in by a framework (agentkit's tool validation does);
a call is right when it scores right as given or with those arguments left out (:func:`call_right`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Annotated, Any

from .agent_tasks import FAIL_MESSAGE, LOOKUP, AgentTask
from .bfcl import check_arguments

NEUTRAL: dict[str, Any] = {"status": "ok", "result": "no record matches these arguments"}


class ServiceUnavailable(RuntimeError):
    """The simulated service of a ``fail_once`` task failing its first call (the message says to call again)."""


@dataclass
class CallRecord:
    name: str
    args: dict[str, Any]
    outcome: str  # result | lookup | neutral | failed


@dataclass
class TaskEnv:
    """One run's tools: answers calls as the module docstring says and logs them in ``calls``."""

    task: AgentTask
    calls: list[CallRecord] = field(default_factory=list)
    _failed: bool = False

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        task = self.task
        args = dict(args or {})
        if task.kind == "fail_once" and not self._failed and name != LOOKUP:
            self._failed = True
            self.calls.append(CallRecord(name, args, "failed"))
            raise ServiceUnavailable(FAIL_MESSAGE)
        if name == LOOKUP and task.lookup is not None:
            ok = str(args.get("ref", "")).strip().upper() == task.lookup["ref"]
            self.calls.append(CallRecord(name, args, "lookup" if ok else "neutral"))
            return dict(task.lookup) if ok else {"ref": args.get("ref"), "value": None,
                                                 "note": "no value is saved under this reference"}
        if task.result is not None and task.expected and call_right(task, name, args, task.expected[-1]):
            self.calls.append(CallRecord(name, args, "result"))
            return dict(task.result)
        self.calls.append(CallRecord(name, args, "neutral"))
        return dict(NEUTRAL)

    def got_result(self) -> bool:
        """Whether a call received the task's canned result."""
        return any(c.outcome == "result" for c in self.calls)


# -- scoring ----------------------------------------------------------------------------------------------------


def _function(task: AgentTask, name: str) -> dict[str, Any] | None:
    return next((f for f in task.functions if f["name"] == name), None)


def call_right(task: AgentTask, name: str, args: Any, expected: dict[str, dict[str, list]]) -> bool:
    """BFCL scoring of ``name(**args)`` against one ground-truth entry, as given or with the arguments that equal
    their declared default left out."""
    (want, _), = expected.items()
    fn = _function(task, want)
    if fn is None or not isinstance(args, dict):
        return False
    if check_arguments(fn, name, args, expected):
        return True
    props = (fn.get("parameters") or {}).get("properties") or {}
    trimmed = {k: v for k, v in args.items() if not (k in props and "default" in props[k] and props[k]["default"] == v)}
    return trimmed != args and bool(check_arguments(fn, name, trimmed, expected))


def score_calls(task: AgentTask, calls: list[CallRecord]) -> dict[str, bool | None]:
    """``first_call_right`` (the first call equals the first expected call; None for ``no_tool``) and, for
    ``two_tool``, ``two_tool_right`` (the lookup with the right reference first, then the item's call right)."""
    if task.kind == "no_tool":
        return {"first_call_right": None, "two_tool_right": None}
    first = bool(calls) and call_right(task, calls[0].name, calls[0].args, task.expected[0])
    out: dict[str, bool | None] = {"first_call_right": first, "two_tool_right": None}
    if task.kind == "two_tool":
        rest = [c for c in calls[1:] if c.name != LOOKUP]
        out["two_tool_right"] = first and bool(rest) and call_right(task, rest[0].name, rest[0].args, task.expected[1])
    return out


def answer_has(text: Any, value: str) -> bool:
    """Whether ``text`` carries ``value`` (letters and digits only, case-insensitive: ``amber 4821`` counts)."""
    if not isinstance(text, str) or not value:
        return False
    norm = lambda s: "".join(ch for ch in s.lower() if ch.isalnum())
    return norm(value) in norm(text)


def score_run(task: AgentTask, env: TaskEnv, output: Any, error: str | None, run_ms: float, *, iterations: int,
              iter_ms: list[float] | None = None) -> dict[str, Any]:
    """The row of one run (any framework): what it did, and its scores."""
    finished = error is None and output is not None
    has = finished and answer_has(output if isinstance(output, str) else str(output), task.answer_value)
    calls = env.calls
    scores = score_calls(task, calls)
    if task.kind == "no_tool":
        success = finished and not calls and has
    elif task.kind == "two_tool":
        success = finished and bool(scores["two_tool_right"]) and has
    else:
        success = finished and env.got_result() and has
    return {
        "id": task.id, "kind": task.kind, "source": task.source, "finished": finished, "success": success,
        "iterations": iterations, "tool_calls": len(calls), **scores, "got_result": env.got_result(),
        "answer_has_value": has, "calls": [{"name": c.name, "args": c.args, "outcome": c.outcome} for c in calls],
        "output": (output if isinstance(output, str) else repr(output))[:300] if output is not None else None,
        "error": error[:300] if error else None, "run_ms": round(run_ms, 1), "iter_ms": iter_ms or [],
    }


# -- the tools, per framework ----------------------------------------------------------------------------------


def parameters(fn: dict[str, Any]) -> dict[str, Any]:
    """A BFCL function's parameters as JSON Schema (the BFCL dialect normalised, as the BFCL suite does)."""
    from ..constrain.bfcl_dialect import normalize_function_schema

    return normalize_function_schema(fn.get("parameters") or {"type": "dict", "properties": {}})


def agentkit_tools(task: AgentTask, env: TaskEnv) -> list[Any]:
    """The task's functions as agentkit ``Tool`` objects (each parameter typed by its JSON Schema); a call goes
    to ``env`` with the optional arguments the model left out (filled with None) dropped."""
    from pydantic import WithJsonSchema

    from ..sdk import Tool

    tools = []
    for fn in task.functions:
        schema = parameters(fn)
        required = set(schema.get("required") or [])
        params, hints = [], {}
        for pname, pschema in (schema.get("properties") or {}).items():
            hint = Annotated[Any, WithJsonSchema(pschema)]
            default = inspect.Parameter.empty if pname in required else pschema.get("default")
            params.append(inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
            hints[pname] = hint

        bound = _bound_call(env, fn["name"])
        bound.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        bound.__annotations__ = hints
        tools.append(Tool(bound, name=fn["name"], description=fn.get("description", "")))
    return tools


def _bound_call(env: TaskEnv, name: str) -> Any:
    def call(**kw: Any) -> dict[str, Any]:
        return env.call(name, {k: v for k, v in kw.items() if v is not None})

    return call


def openai_tools(task: AgentTask) -> list[dict[str, Any]]:
    """The task's functions as OpenAI ``tools`` (``{"type": "function", "function": {...}}``)."""
    return [{"type": "function", "function": {"name": fn["name"], "description": fn.get("description", ""),
                                              "parameters": parameters(fn)}} for fn in task.functions]


def pydantic_ai_tools(task: AgentTask, env: TaskEnv) -> list[Any]:
    """The task's functions as pydantic-ai tools (``Tool.from_schema``); a failing call raises its ``ModelRetry``."""
    from pydantic_ai import ModelRetry, Tool

    def make(name: str) -> Any:
        def call(**kw: Any) -> dict[str, Any]:
            try:
                return env.call(name, kw)
            except ServiceUnavailable as e:
                raise ModelRetry(str(e)) from None

        return call

    return [Tool.from_schema(make(fn["name"]), name=fn["name"], description=fn.get("description", ""),
                             json_schema=parameters(fn)) for fn in task.functions]
