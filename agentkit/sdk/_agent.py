"""The agent loop: [plan] -> (tool_call [tool_input])* -> extract | reply, each step routed to a mode and traced.

A run keeps plain chat messages: the system prompt (instructions and the tools' JSON specs), the user's task, then
per tool call an assistant message with the call's JSON and a user message with the tool's observation. A call of
a templated tool (``Tool(template_factory=...)``) adds, between the two, a user message asking for its input and
an assistant message with that input, decoded in a ``tool_input`` step under the template the factory builds then.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ..config import MODES, DecodeConfig, Mode
from ..constrain.nodes import Template
from ..engine.stats import GenerationResult
from ..errors import AgentRunError, ModelRetry, UnexpectedModelBehavior, UsageLimitExceeded, UserError
from . import _steps as steps
from ._events import AgentEvent, CanvasDraft, Final, Reply, StepStarted, ToolCall, ToolResult
from ._generator import as_generator
from ._tools import Tool, as_tools, to_observation_text
from ._trace import IterationRecord, Trace

OutputT = TypeVar("OutputT")


@dataclass(frozen=True)
class RoutingPolicy:
    """The decoding mode of each step kind: structured steps to diffusion, free-text replies to AR by default."""

    plan: Mode = "diffusion"
    tool_call: Mode = "diffusion"
    tool_input: Mode = "diffusion"
    extract: Mode = "diffusion"
    reply: Mode = "ar"

    def __post_init__(self) -> None:
        bad = [f"{k}={getattr(self, k)!r}" for k in steps.STEP_KINDS if getattr(self, k) not in MODES]
        if bad:
            raise UserError(f"RoutingPolicy modes must be one of {MODES}: {', '.join(bad)}")

    @classmethod
    def force(cls, mode: Mode) -> RoutingPolicy:
        """Every step in ``mode`` (e.g. ``"ar"`` as a baseline, or ``"verify"``)."""
        return cls(plan=mode, tool_call=mode, tool_input=mode, extract=mode, reply=mode)

    def mode_for(self, step: str) -> Mode:
        return getattr(self, step)


@dataclass(frozen=True)
class Limits:
    """Bounds on a run. ``max_tokens`` counts output tokens over all steps; ``timeout_s`` the whole run."""

    max_iterations: int = 16
    max_tokens: int | None = None
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.max_iterations, int) or self.max_iterations < 1:
            raise UserError(f"max_iterations must be an integer >= 1, got {self.max_iterations!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UserError(f"max_tokens must be >= 1 or None, got {self.max_tokens!r}")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise UserError(f"timeout_s must be > 0 or None, got {self.timeout_s!r}")


@dataclass
class RunResult(Generic[OutputT]):
    """What a run produced: ``output`` (reply text, or the validated ``output_type``), its trace and messages."""

    output: OutputT
    trace: Trace
    messages: list[dict[str, str]]
    plan: steps.Plan | None = None
    run_id: str = ""


@dataclass
class _Run:
    messages: list[dict[str, str]]
    trace: Trace
    routing: RoutingPolicy
    limits: Limits
    run_id: str
    emit: Callable[[AgentEvent], None] | None = None
    tokens: int = 0
    failures: int = 0  # failed attempts in a row (any step)
    output_failures: int = 0  # unusable structured outputs in a row
    tool_failures: dict[str, int] = field(default_factory=dict)  # per tool, in a row
    plan: steps.Plan | None = None


class Agent(Generic[OutputT]):
    """An agent over a model (an ``Engine``, a ``Generator`` or an http(s) base URL).

    ``output_type`` (a pydantic model class or a JSON Schema dict) makes the run end with an ``extract`` step and
    ``RunResult.output`` the validated value; without it the run ends with a free-text ``reply`` step.
    ``plan=True`` starts each run with a ``plan`` step. ``output_retries``: unusable structured outputs in a row
    sent back to the model before the run fails.
    """

    def __init__(
        self,
        model: Any,
        *,
        tools: list[Tool | Callable[..., Any]] | tuple[Tool | Callable[..., Any], ...] = (),
        instructions: str | None = None,
        output_type: type[BaseModel] | dict[str, Any] | None = None,
        routing: RoutingPolicy | None = None,
        limits: Limits | None = None,
        name: str | None = None,
        plan: bool = False,
        decode: DecodeConfig | None = None,
        output_retries: int = 1,
    ) -> None:
        self.generator = as_generator(model)
        self._tools = as_tools(tools)
        self.instructions = instructions
        self.output_type = output_type
        self._output = steps.OutputSpec(output_type) if output_type is not None else None
        self.routing = routing or RoutingPolicy()
        self.limits = limits or Limits()
        self.name = name or "agent"
        self.plan = plan
        self.decode = decode or DecodeConfig()
        self.output_retries = output_retries
        self._templates: dict[str, Template] = {}

    @property
    def tools(self) -> list[Tool]:
        return list(self._tools)

    def tool(self, function: Callable[..., Any] | None = None, /, *, name: str | None = None,
             description: str | None = None, retries: int = 1) -> Any:
        """Register a tool: ``@agent.tool`` or ``@agent.tool(name=..., retries=...)``. Returns the ``Tool``."""

        def register(fn: Callable[..., Any]) -> Tool:
            t = Tool(fn, name=name, description=description, retries=retries)
            self._tools = as_tools([*self._tools, t])
            self._templates.pop("tool_call", None)
            return t

        return register(function) if function is not None else register

    # public entry points ----------------------------------------------------------------------------------------

    async def run(self, task: str, *, mode: Mode | None = None, routing: RoutingPolicy | None = None,
                  limits: Limits | None = None, trace_path: str | None = None) -> RunResult[OutputT]:
        """Run the agent on ``task``. ``mode`` forces every step into one mode; ``routing`` replaces the agent's.

        ``trace_path``: append each iteration to this JSONL file as soon as it ends.
        Raises ``UsageLimitExceeded`` / ``UnexpectedModelBehavior`` with ``.trace`` holding the iterations so far.
        """
        return await self._run(task, mode=mode, routing=routing, limits=limits, trace_path=trace_path)

    def run_sync(self, task: str, **kwargs: Any) -> RunResult[OutputT]:
        """``run`` for synchronous code (not from inside a running event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(task, **kwargs))
        raise UserError("run_sync() cannot be called from a running event loop; use `await agent.run(...)`")

    async def run_stream(self, task: str, **kwargs: Any) -> AsyncIterator[AgentEvent]:
        """Run and yield events as they happen; the last one is ``Final`` with the ``RunResult``."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        done = object()
        job = asyncio.create_task(self._run(task, emit=queue.put_nowait, **kwargs))
        job.add_done_callback(lambda _: queue.put_nowait(done))
        try:
            while (event := await queue.get()) is not done:
                yield event
            yield Final(job.result())
        finally:
            if not job.done():
                job.cancel()
                await asyncio.gather(job, return_exceptions=True)

    # the loop ----------------------------------------------------------------------------------------------------

    async def _run(self, task: str, *, mode: Mode | None = None, routing: RoutingPolicy | None = None,
                   limits: Limits | None = None, trace_path: str | None = None,
                   emit: Callable[[AgentEvent], None] | None = None) -> RunResult[OutputT]:
        if not isinstance(task, str) or not task.strip():
            raise UserError("task must be a non-empty string")
        routing = RoutingPolicy.force(mode) if mode is not None else (routing or self.routing)
        limits = limits or self.limits
        messages = [{"role": "system", "content": steps.system_prompt(self.instructions, self._tools)},
                    {"role": "user", "content": task}]
        run = _Run(messages, Trace(path=trace_path), routing, limits, uuid.uuid4().hex[:12], emit)
        timeout = asyncio.timeout(limits.timeout_s)
        try:
            async with timeout:
                output = await self._loop(run)
        except TimeoutError:
            if timeout.expired():
                raise UsageLimitExceeded(
                    f"timeout_s={limits.timeout_s} exceeded after {len(run.trace)} iteration(s)", run.trace
                ) from None
            raise
        except AgentRunError as e:
            if e.trace is None:
                e.trace = run.trace
            raise
        return RunResult(output, run.trace, run.messages, run.plan, run.run_id)

    async def _loop(self, run: _Run) -> Any:
        if self.plan:
            run.plan = await self._structured(run, "plan", steps.OutputSpec(steps.Plan), steps.plan_prompt())
            run.messages.append({"role": "user", "content": "Carry out the plan."})
        if self._tools:
            while await self._tool_step(run):
                pass
        if self._output is not None:
            return await self._structured(run, "extract", self._output, steps.extract_prompt(self._output))
        prompt = steps.reply_prompt() if self._tools else None
        result, rec, t0 = await self._generate(run, "reply", prompt)
        text = result.text
        self._emit(run, lambda: Reply(rec.iteration, text))
        run.messages.append({"role": "assistant", "content": text})
        self._finish(run, rec, t0)
        return text

    async def _tool_step(self, run: _Run) -> bool:
        """One tool-call iteration; False when the model chose ``final_answer``."""
        result, rec, t0 = await self._generate(run, "tool_call", None)
        try:
            name, args = self._parse_call(steps.parse_json(result))
        except steps.OutputError as e:
            self._output_failure(run, rec, t0, result.text, str(e))
            return True
        run.output_failures = 0
        rec.tool = name
        run.messages.append({"role": "assistant", "content": result.text or steps.compact(
            {"tool": name, "arguments": args})})
        if name == steps.FINAL_ANSWER:
            run.failures = 0
            self._finish(run, rec, t0)
            return False
        tool = next(t for t in self._tools if t.name == name)
        error = None
        if tool.templated:
            t_build = time.perf_counter()
            try:
                template = steps.tool_input_template(tool)
            except Exception as e:  # noqa: BLE001 (a factory failure goes back to the model like a tool failure)
                error = f"cannot build the input template: {type(e).__name__}: {e}"
            else:
                self._finish(run, rec, t0)
                run.messages.append({"role": "user", "content": steps.tool_input_prompt(tool)})
                compile_ms = (time.perf_counter() - t_build) * 1000
                try:
                    result, rec, t0 = await self._generate(run, "tool_input", None, template, compile_ms)
                finally:
                    release = getattr(self.generator, "release", None)
                    if release is not None:  # a one-off template: let the generator drop what it cached for it
                        release(template)
                rec.tool = name
                run.messages.append({"role": "assistant", "content": result.text})
                args = {tool.input_parameter: result.text}
        t_tool = time.perf_counter()
        if error is None:
            self._emit(run, lambda: ToolCall(rec.iteration, name, args))
            try:
                pos, kw = tool.bind(args)
            except ValidationError as e:
                error = f"invalid arguments: {steps._pydantic_errors(e)}. Fix the arguments and call the tool again."
            else:
                try:
                    text = to_observation_text(await tool.invoke(pos, kw))
                except ModelRetry as e:
                    error = e.message
                except Exception as e:  # noqa: BLE001 (any tool failure goes back to the model)
                    error = f"{type(e).__name__}: {e}"
        rec.tool_ms = (time.perf_counter() - t_tool) * 1000
        if error is None:
            run.failures = run.tool_failures[name] = 0
            content = steps.observation(name, text)
        else:
            run.failures += 1
            run.tool_failures[name] = run.tool_failures.get(name, 0) + 1
            rec.error = error
            content = steps.observation(name, error, error=True)
        run.messages.append({"role": "user", "content": content})
        self._emit(run, lambda: ToolResult(rec.iteration, name, content, error is not None))
        self._finish(run, rec, t0)
        if error is not None and run.tool_failures[name] > tool.retries:
            raise UnexpectedModelBehavior(
                f"tool {name!r} failed {run.tool_failures[name]} time(s) in a row (retries={tool.retries}); "
                f"last error: {error}", run.trace)
        return True

    async def _structured(self, run: _Run, step: str, spec: steps.OutputSpec, prompt: str) -> Any:
        """A plan or extract step, asked again (within ``output_retries``) until its output validates."""
        while True:
            result, rec, t0 = await self._generate(run, step, prompt)
            try:
                value = spec.parse(result)
            except steps.OutputError as e:
                self._output_failure(run, rec, t0, result.text, str(e))
                continue
            run.failures = run.output_failures = 0
            dumped = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
            run.messages.append({"role": "assistant", "content": result.text or steps.compact(dumped)})
            self._finish(run, rec, t0)
            return value

    # helpers -----------------------------------------------------------------------------------------------------

    async def _generate(self, run: _Run, step: str, prompt: str | None, template: Template | None = None,
                        compile_ms: float = 0.0) -> tuple[GenerationResult, IterationRecord, float]:
        """Check the limits, then one generation for ``step``; returns its result, its record and start time.

        ``template``: the step's template when it is built per call (``tool_input``), with its ``compile_ms``; its
        ``meta["max_new_tokens"]``, when set, replaces the agent's (a one-off template may know its longest output).
        """
        t0 = time.perf_counter()
        limits = run.limits
        if len(run.trace) >= limits.max_iterations:
            raise UsageLimitExceeded(f"max_iterations={limits.max_iterations} reached", run.trace)
        max_new = self.decode.max_new_tokens
        if template is not None and template.meta.get("max_new_tokens"):
            max_new = int(template.meta["max_new_tokens"])
        if limits.max_tokens is not None:
            if run.tokens >= limits.max_tokens:
                raise UsageLimitExceeded(f"max_tokens={limits.max_tokens} reached ({run.tokens} used)", run.trace)
            max_new = min(max_new, limits.max_tokens - run.tokens)
        if template is None:
            template, compile_ms = self._template(step)
        mode = run.routing.mode_for(step)
        iteration = len(run.trace) + 1
        self._emit(run, lambda: StepStarted(iteration, step, mode))
        config = replace(self.decode, mode=mode, max_new_tokens=max_new)
        t_gen = time.perf_counter()
        result = await self.generator.generate(_with_prompt(run.messages, prompt), config, template,
                                               self._draft_callback(run, iteration))
        wall_ms = (time.perf_counter() - t_gen) * 1000
        rec = IterationRecord(iteration, step, mode, run_id=run.run_id, agent=self.name, retries=run.failures)
        rec.add_stats(result.stats)
        rec.queue_ms = max(wall_ms - result.stats.latency_ms, 0.0)
        rec.compile_ms = compile_ms
        run.tokens += result.stats.output_tokens
        return result, rec, t0

    def _template(self, step: str) -> tuple[Template | None, float]:
        """The step's template (None for reply) and the ms spent compiling it now (0 once the agent has it)."""
        if step == "reply":
            return None, 0.0
        if step in self._templates:
            return self._templates[step], 0.0
        t0 = time.perf_counter()
        if step == "tool_call":
            template = steps.tool_call_template(self._tools)
        else:
            schema = steps.Plan.model_json_schema() if step == "plan" else self._output.schema  # type: ignore[union-attr]
            template = steps.for_step(steps.compile_template(schema), step)
        self._templates[step] = template
        return template, (time.perf_counter() - t0) * 1000

    def _parse_call(self, value: Any) -> tuple[str, dict[str, Any]]:
        names = [t.name for t in self._tools] + [steps.FINAL_ANSWER]
        if not isinstance(value, dict) or set(value) != {"tool", "arguments"}:
            raise steps.OutputError(f'expected {{"tool":NAME,"arguments":{{...}}}}, got {steps.compact(value)[:200]}')
        name, args = value["tool"], value["arguments"]
        if name not in names:
            raise steps.OutputError(f"unknown tool {name!r}; the tools are {names}")
        if not isinstance(args, dict):
            raise steps.OutputError(f"arguments must be a JSON object, got {steps.compact(args)[:200]}")
        if args and any(t.templated and t.name == name for t in self._tools):
            raise steps.OutputError(f"{name} takes no arguments in the call ({{}}); its input is written next")
        return name, args

    def _output_failure(self, run: _Run, rec: IterationRecord, t0: float, text: str, reason: str) -> None:
        run.failures += 1
        run.output_failures += 1
        rec.error = reason
        run.messages.append({"role": "assistant", "content": text})
        run.messages.append({"role": "user", "content": f"That answer was not usable: {reason}. Answer again."})
        self._finish(run, rec, t0)
        if run.output_failures > self.output_retries:
            raise UnexpectedModelBehavior(
                f"{rec.step} output unusable {run.output_failures} time(s) in a row "
                f"(output_retries={self.output_retries}); last error: {reason}", run.trace)

    def _finish(self, run: _Run, rec: IterationRecord, t0: float) -> None:
        rec.total_ms = (time.perf_counter() - t0) * 1000
        if rec.error is not None and len(rec.error) > 500:  # keep trace lines short (one page or less)
            rec.error = rec.error[:499] + "…"
        run.trace.add(rec)
        if run.limits.max_tokens is not None and run.tokens > run.limits.max_tokens:
            raise UsageLimitExceeded(f"max_tokens={run.limits.max_tokens} exceeded ({run.tokens} used)", run.trace)

    @staticmethod
    def _emit(run: _Run, make: Callable[[], AgentEvent]) -> None:
        if run.emit is not None:
            run.emit(make())

    def _draft_callback(self, run: _Run, iteration: int) -> Callable[[list[int], list[bool]], None] | None:
        emit = run.emit
        if emit is None:
            return None
        loop, loop_thread = asyncio.get_running_loop(), threading.get_ident()
        decode = getattr(self.generator, "decode", None)

        def on_draft(token_ids: list[int], fixed: list[bool]) -> None:
            try:
                text = decode(list(token_ids)) if decode is not None else None
            except Exception:  # noqa: BLE001 (a draft's text is best effort; mask ids may not decode)
                text = None
            event = CanvasDraft(iteration, list(token_ids), list(fixed), text)
            if threading.get_ident() == loop_thread:  # keep order with the events emitted around generate()
                emit(event)
            else:
                loop.call_soon_threadsafe(emit, event)

        return on_draft

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, tools={[t.name for t in self._tools]}, generator={self.generator!r})"


def _with_prompt(messages: list[dict[str, str]], prompt: str | None) -> list[dict[str, str]]:
    """The messages sent for one step: the step's prompt joins the last user message (or becomes one)."""
    msgs = list(messages)
    if prompt:
        if msgs and msgs[-1]["role"] == "user":
            msgs[-1] = {"role": "user", "content": msgs[-1]["content"] + "\n\n" + prompt}
        else:
            msgs.append({"role": "user", "content": prompt})
    return msgs
