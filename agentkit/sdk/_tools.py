"""Tools: plain typed functions (sync or async, or bound methods) offered to the model with a JSON Schema.

The schema comes from the signature: type hints (pydantic models, ``Literal``, ``Optional``, containers) give the
types, defaults make a parameter optional, and the docstring (Google, numpy or sphinx style) gives the tool's
description and each parameter's description. Every problem in a definition is collected and raised once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import json
import re
import threading
import typing
from collections.abc import Callable, Iterable
from typing import Any, overload

import pydantic_core
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticSchemaGenerationError,
    PydanticUserError,
    TypeAdapter,
    create_model,
)
from pydantic.errors import PydanticInvalidForJsonSchema

from ..constrain.nodes import Template
from ..errors import UnexpectedModelBehavior, UserError
from ._context import RunContext
from ._docstring import parse_docstring

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_SCHEMA_ERRORS = (PydanticSchemaGenerationError, PydanticInvalidForJsonSchema, PydanticUserError, TypeError, ValueError)
RESERVED_NAMES = frozenset({"final_answer"})  # the agent's "stop calling tools" choice


class Tool:
    """A function the model may call. ``parameters_schema`` is the JSON Schema of its arguments.

    ``retries``: how many failures in a row (invalid arguments, an exception, ``ModelRetry``) are sent back to the
    model as observations; one more fails the run with ``UnexpectedModelBehavior``.

    ``template_factory`` makes a *templated tool*: its input is not a JSON argument but text generated under its
    own template, built when the tool is called (``template_factory() -> Template``, e.g. a SEARCH/REPLACE edit
    template over the files as they are now). The tool-call step then only chooses it
    (``{"tool":NAME,"arguments":{}}``); a ``tool_input`` step decodes the text under the factory's template and
    the tool gets it as its first parameter, which must be a ``str`` (every other parameter needs a default).
    ``input_prompt`` is the instruction sent with that step (default: the tool's description).

    A first parameter annotated ``RunContext[...]`` (``takes_ctx``) receives the run's context (deps, usage, retry
    count, run id, messages); it is not part of the schema the model sees.

    ``prepare`` (pydantic-ai's name): called before each tool step with the run's context and the tool,
    ``prepare(ctx, tool) -> Tool | None`` (or a coroutine): None leaves the tool out of that step's choice, a tool
    (this one, or one with the same name and another description) offers it. A workflow a small model can follow
    is written this way: an edit tool offered once a file was read, the tests once an edit was applied.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        retries: int = 1,
        template_factory: Callable[[], Template] | None = None,
        input_prompt: str | None = None,
        timeout_s: float | None = None,
        prepare: Callable[..., Any] | None = None,
    ) -> None:
        problems: list[str] = []
        if not callable(function):
            raise UserError(f"a tool must be callable, got {function!r}")
        self.function = function
        self.name = name or _callable_name(function)
        if not _NAME.match(self.name):
            problems.append(f"name {self.name!r} must match {_NAME.pattern}")
        if not isinstance(retries, int) or retries < 0:
            problems.append(f"retries must be an integer >= 0, got {retries!r}")
        self.retries = retries
        if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float)
                                      or not timeout_s > 0):
            problems.append(f"timeout_s must be a number > 0 or None, got {timeout_s!r}")
        self.timeout_s = timeout_s
        if prepare is not None and not callable(prepare):
            problems.append(f"prepare must be callable or None, got {prepare!r}")
        self.prepare = prepare
        summary, param_docs = parse_docstring(inspect.getdoc(function))
        self.description = description if description is not None else summary
        self._positional: list[str] = []
        self._fields: list[tuple[str, str]] = []  # (model field, parameter name), signature order
        self.takes_ctx = False
        self._args_model = self._build_model(function, param_docs, problems)
        self.is_async = _is_async(function)
        self.template_factory = template_factory
        self.input_prompt = input_prompt
        if template_factory is not None:
            if not callable(template_factory):
                problems.append(f"template_factory must be callable, got {template_factory!r}")
            elif self._args_model is not None:
                self._check_input_parameter(problems)
        if problems:
            err = UserError(f"invalid tool {self.name!r}:\n  - " + "\n  - ".join(problems))
            err.problems = [f"tool {self.name!r}: {p}" for p in problems]  # type: ignore[attr-defined]
            raise err
        assert self._args_model is not None
        self.parameters_schema = _tidy_schema(self._args_model.model_json_schema())

    def _build_model(self, fn: Callable[..., Any], docs: dict[str, str], problems: list[str]) -> type[BaseModel] | None:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError) as e:
            problems.append(f"cannot read the signature: {e}")
            return None
        try:
            hints = typing.get_type_hints(_hint_target(fn), include_extras=True)
        except (NameError, TypeError, AttributeError) as e:  # unresolvable forward reference, ...
            problems.append(f"cannot resolve type hints: {e}")
            hints = {}
        fields: dict[str, Any] = {}
        for i, p in enumerate(sig.parameters.values()):
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                star = "*" if p.kind is p.VAR_POSITIONAL else "**"
                problems.append(f"parameter {star}{p.name}: *args/**kwargs are not supported, name each parameter")
                continue
            ann = hints.get(p.name, p.annotation)
            if _is_context(ann):
                if i != 0:
                    problems.append(f"parameter {p.name!r}: a RunContext parameter must come first")
                self.takes_ctx = True
                continue
            if ann is inspect.Parameter.empty:
                problems.append(f"parameter {p.name!r} has no type annotation")
                continue
            try:
                TypeAdapter(ann).json_schema()
            except _SCHEMA_ERRORS as e:
                problems.append(f"parameter {p.name!r}: type {_type_name(ann)} has no JSON Schema ({type(e).__name__})")
                continue
            kw: dict[str, Any] = {"alias": p.name}
            if docs.get(p.name):
                kw["description"] = docs[p.name]
            default = ... if p.default is inspect.Parameter.empty else p.default
            fields[f"p{i}"] = (ann, Field(default, **kw))
            self._fields.append((f"p{i}", p.name))
            if p.kind is p.POSITIONAL_ONLY:
                self._positional.append(p.name)
        if problems:
            return None
        try:
            model = create_model(f"{self.name}_args", __config__=ConfigDict(extra="forbid"), **fields)
            model.model_json_schema()
        except _SCHEMA_ERRORS as e:  # e.g. a default that is not JSON-serialisable
            problems.append(f"cannot build the arguments schema: {e}")
            return None
        return model

    def _check_input_parameter(self, problems: list[str]) -> None:
        schema = self._args_model.model_json_schema()  # type: ignore[union-attr]
        if not self._fields:
            problems.append("a templated tool needs a first parameter (str) for its generated input")
            return
        first = self._fields[0][1]
        if schema.get("properties", {}).get(first, {}).get("type") != "string":
            problems.append(f"a templated tool's first parameter ({first!r}) must be a str")
        required = [p for p in schema.get("required", []) if p != first]
        if required:
            problems.append(f"a templated tool's other parameters need defaults: {required}")

    @property
    def templated(self) -> bool:
        """Whether the tool's input is generated under its own template (see ``template_factory``)."""
        return self.template_factory is not None

    @property
    def input_parameter(self) -> str | None:
        """The parameter a templated tool's generated text is passed as."""
        return self._fields[0][1] if self.templated else None

    @property
    def call_schema(self) -> dict[str, Any]:
        """The ``arguments`` of a tool-call step: the parameters, or ``{}`` for a templated tool."""
        if self.templated:
            return {"type": "object", "properties": {}, "additionalProperties": False}
        return self.parameters_schema

    @property
    def spec(self) -> dict[str, Any]:
        """What the model is shown: name, description and parameters (none for a templated tool)."""
        description = self.description
        if self.templated:
            description = f"{description} (call it with no arguments; you write its input in the next message)"
        return {"name": self.name, "description": description, "parameters": self.call_schema}

    def bind(self, args: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Validate ``args`` (a JSON object) into call arguments. Raises ``pydantic.ValidationError``."""
        validated = self._args_model.model_validate(args)  # type: ignore[union-attr]
        pos: list[Any] = []
        kw: dict[str, Any] = {}
        for field, pname in self._fields:
            value = getattr(validated, field)
            if pname in self._positional:
                pos.append(value)
            else:
                kw[pname] = value
        return pos, kw

    async def call(self, args: dict[str, Any], ctx: RunContext[Any] | None = None) -> Any:
        """Validate ``args`` and run the function (sync functions in a worker thread)."""
        pos, kw = self.bind(args)
        return await self.invoke(pos, kw, ctx)

    async def invoke(self, pos: list[Any], kw: dict[str, Any], ctx: RunContext[Any] | None = None) -> Any:
        """Run the function on already-validated arguments (from ``bind``); ``ctx`` goes first if it takes one.
        A synchronous function runs in its own daemon thread, so a run that times out or is cancelled returns
        even if the function never does (it is abandoned there). Past ``timeout_s`` raises ``ToolTimeout``."""
        if self.takes_ctx:
            if ctx is None:
                raise UserError(f"tool {self.name!r} takes a RunContext; call it from an agent run (or pass ctx)")
            pos = [ctx, *pos]
        try:
            async with asyncio.timeout(self.timeout_s):
                if self.is_async:
                    return await self.function(*pos, **kw)
                result = await in_thread(self.function, pos, kw, f"agentkit-tool-{self.name}")
                if inspect.isawaitable(result):
                    result = await result
                return result
        except TimeoutError:
            if self.timeout_s is None:
                raise
            raise ToolTimeout(f"tool {self.name!r} timed out after {self.timeout_s:g} s (its timeout_s); it was "
                              "abandoned") from None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        extra = ", templated" if self.templated else ""
        return f"Tool(name={self.name!r}, retries={self.retries}{extra})"


class ToolTimeout(Exception):
    """A tool ran past its ``timeout_s`` (the message names it); the agent sends it back to the model as a failure."""


def in_thread(fn: Callable[..., Any], pos: list[Any], kw: dict[str, Any], name: str) -> asyncio.Future[Any]:
    """``fn(*pos, **kw)`` in a new daemon thread (with the caller's context variables), as a future of this loop.
    Unlike ``asyncio.to_thread`` (the loop's default executor, which ``asyncio.run`` joins at exit) a function that
    never returns does not keep the loop's owner waiting after the future is cancelled."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if not fut.done():
            fut.set_result(value) if ok else fut.set_exception(value)

    def target() -> None:
        try:
            ok, value = True, context.run(fn, *pos, **kw)
        except BaseException as e:  # noqa: BLE001 (handed to the awaiting coroutine)
            ok, value = False, e
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits for it
            loop.call_soon_threadsafe(settle, ok, value)

    threading.Thread(target=target, name=name, daemon=True).start()
    return fut


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, retries: int = 1,
    template_factory: Callable[[], Template] | None = None, input_prompt: str | None = None,
    timeout_s: float | None = None, prepare: Callable[..., Any] | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    retries: int = 1,
    template_factory: Callable[[], Template] | None = None,
    input_prompt: str | None = None,
    timeout_s: float | None = None,
    prepare: Callable[..., Any] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` from a function: ``@tool`` or ``@tool(name=..., description=..., retries=...)``.

    The result is still callable like the function. ``template_factory``/``input_prompt``: see ``Tool``.
    ``timeout_s``: a call running longer fails with an error naming the tool (sent back to the model).
    ``prepare``: whether (and how) the tool is offered at each tool step, see ``Tool``.
    """
    kw: dict[str, Any] = {"name": name, "description": description, "retries": retries,
                          "template_factory": template_factory, "input_prompt": input_prompt,
                          "timeout_s": timeout_s, "prepare": prepare}
    if function is not None:
        return Tool(function, **kw)
    return lambda fn: Tool(fn, **kw)


def as_tools(items: Iterable[Tool | Callable[..., Any]]) -> list[Tool]:
    """Tools from ``Tool`` objects and plain callables; one ``UserError`` lists every problem in all of them."""
    tools: list[Tool] = []
    problems: list[str] = []
    for item in items:
        if isinstance(item, Tool):
            tools.append(item)
            continue
        try:
            tools.append(Tool(item))
        except UserError as e:
            problems.extend(getattr(e, "problems", [str(e)]))
    seen: dict[str, int] = {}
    for t in tools:
        seen[t.name] = seen.get(t.name, 0) + 1
        if t.name in RESERVED_NAMES:
            problems.append(f"tool {t.name!r}: the name is reserved by the agent")
    problems.extend(f"tool {n!r}: the name is used by {c} tools" for n, c in seen.items() if c > 1)
    if problems:
        err = UserError(f"{len(problems)} problem(s) in the tool definitions:\n  - " + "\n  - ".join(problems))
        err.problems = problems  # type: ignore[attr-defined]
        raise err
    return tools


def to_observation_text(value: Any) -> str:
    """A tool's return value as the text the model reads: strings as is, everything else as compact JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(pydantic_core.to_jsonable_python(value), ensure_ascii=False, separators=(",", ":"))
    except (pydantic_core.PydanticSerializationError, TypeError, ValueError):
        return repr(value)


def clip_result(text: str, limit: int | None) -> str:
    """``text`` as the conversation keeps it: whole when it fits ``limit`` characters (None: no limit), else its
    first two thirds and last third of ``limit`` with a marker between saying how many characters were cut (a
    tool's key line is often first, a test run's summary last)."""
    if limit is None or len(text) <= limit:
        return text
    head, tail = (2 * limit) // 3, limit // 3
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut (Limits.max_tool_result_chars={limit}) ...]\n{text[-tail:]}"


def _tidy_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop generated titles at the top level; order keys type, properties, required, additionalProperties."""
    props = {k: {kk: vv for kk, vv in v.items() if kk != "title"} for k, v in schema.get("properties", {}).items()}
    out: dict[str, Any] = {"type": "object", "properties": props}
    if schema.get("required"):
        out["required"] = schema["required"]
    out["additionalProperties"] = False
    if "$defs" in schema:
        out["$defs"] = schema["$defs"]
    return out


def _is_context(ann: Any) -> bool:
    return ann is RunContext or typing.get_origin(ann) is RunContext


def _callable_name(fn: Callable[..., Any]) -> str:
    if isinstance(fn, functools.partial):
        return _callable_name(fn.func)
    return getattr(fn, "__name__", None) or type(fn).__name__


def _hint_target(fn: Callable[..., Any]) -> Any:
    if isinstance(fn, functools.partial):
        return _hint_target(fn.func)
    if inspect.isfunction(fn) or inspect.ismethod(fn):
        return fn
    return fn.__call__  # a callable object: its __call__


def _is_async(fn: Callable[..., Any]) -> bool:
    if isinstance(fn, functools.partial):
        return _is_async(fn.func)
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(fn.__call__)


def _type_name(ann: Any) -> str:
    return getattr(ann, "__qualname__", None) or repr(ann)


async def offered_tools(tools: list[Tool], context: Callable[[str], RunContext]) -> list[Tool]:
    """The tools a tool step offers: each tool's ``prepare(ctx, tool)`` (awaited when a coroutine; ``context(name)``
    is its ``RunContext``) keeps it, replaces it with a tool of the same name, or (None) leaves it out; a tool
    without one is offered."""
    offered = []
    for t in tools:
        if t.prepare is None:
            offered.append(t)
            continue
        got = t.prepare(context(t.name), t)
        if inspect.isawaitable(got):
            got = await got
        if got is None:
            continue
        if not isinstance(got, Tool) or got.name != t.name:
            raise UserError(f"tool {t.name!r}: prepare must return the tool (a Tool named {t.name!r}) or None, "
                            f"got {got!r}")
        offered.append(got)
    return offered


def check_retries(failures: dict[str, int], error: str | None, tools: list[Tool], trace: Any) -> None:
    """A tool that failed more times in a row (``failures``) than its ``retries`` ends the run, with its ``trace``."""
    for tool in tools:
        if error is not None and failures.get(tool.name, 0) > tool.retries:
            raise UnexpectedModelBehavior(
                f"tool {tool.name!r} failed {failures[tool.name]} time(s) in a row "
                f"(retries={tool.retries}); last error: {error}", trace)
