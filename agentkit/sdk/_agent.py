"""The agent loop: [plan] -> (tool_call [tool_input])* -> extract | reply, each step routed to a mode and traced.

A run keeps ``ModelMessage`` models (``_messages.py``): a request with the user's task (its ``instructions`` are
the system prompt: instructions and the tools' JSON specs), then per tool call a response with the call and a
request with the tool's result. The model is sent them as plain chat messages (``to_chat``). A call of a templated
tool (``Tool(template_factory=...)``) adds, between the two, a request asking for its input and a response with
that input, decoded in a ``tool_input`` step under the template the factory builds then.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from ..config import DecodeConfig, Mode
from ..constrain.nodes import Template
from ..engine.faces import plain_weights
from ..engine.stats import GenerationResult
from ..errors import AgentRunError, ModelRetry, UnexpectedModelBehavior, UsageLimitExceeded, UserError
from ..settings import BY_NAME as SETTING
from ..steps import kinds as steps
from ..steps.arguments import ArgumentSources, choosable_tools
from ..steps.decision import Score
from ..steps.drive import drive_async
from ..steps.tool_step import StepRules, tool_step
from ..toolcall import MAX_PARALLEL_CALLS
from . import _decide as decide_
from . import _prefetch as prefetch_
from . import _repeat as repeat_
from . import _settings as settings_
from ._context import RunContext
from ._decide import Decide
from ._events import AgentEvent, Reply, StepStarted, ToolCall, ToolResult
from ._generator import as_generator
from ._inputs import Instructions, check_history, instruction_list, no_result_type, output_spec
from ._messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    answer_chat,
    to_chat,
    to_chat_with_prompt,
    without_default_system,
)
from ._model_call import ModelCaller, emit
from ._otel import Instrumentation, as_instrumentation, end_iteration, end_run, start_iteration
from ._policy import Limits, RoutingPolicy
from ._repeat import OnRepeat, RepeatKey
from ._result import RunResult, RunState
from ._settings import ModelSettings
from ._step_config import step_config
from ._templates import StepTemplates
from ._tools import Tool, ToolTimeout, as_tools, check_retries, clip_result, offered_tools, to_observation_text
from ._trace import IterationRecord, Trace, clip

OutputT = TypeVar("OutputT")
DepsT = TypeVar("DepsT")
PARALLEL_DEFAULT: bool = SETTING["parallel_tool_calls"].default
log = logging.getLogger("agentkit.sdk")


class Agent(Generic[DepsT, OutputT]):
    """An agent over a model (an ``Engine``, a ``Generator`` or an http(s) base URL).

    ``output_type`` (any type pydantic validates: a model, ``int``, ``list[str]``, a union, ``Literal``, a
    ``TypedDict``, a dataclass; or a JSON Schema dict) makes the run end with an ``extract`` step and
    ``RunResult.output`` the validated value (``run(output_type=...)`` for one run); without it the run ends with a free-text ``reply`` step.
    ``plan=True`` starts each run with a ``plan`` step. ``output_retries``: unusable structured outputs in a row
    sent back to the model before the run fails; each retry samples (``temperature`` >= 0.7, a seed per retry), so
    it can differ from the output it retries. ``deps_type``: the type of ``run(..., deps=...)``, which tools taking
    a ``RunContext`` first and instruction functions read as ``ctx.deps``. ``instructions``: a string, a function
    of the ``RunContext`` (dynamic), or a list of them; ``@agent.instructions`` adds more. ``model_settings``:
    defaults for every call (``ModelSettings``); a run's own override them. ``instrument``: OpenTelemetry spans
    (``True`` or an ``Instrumentation``; default: ``Agent.instrument_all``'s setting). ``on_repeat`` and
    ``repeat``: what a call of a tool that already returned a result does (``_repeat.py``): by default an identical
    call, or one that feeds the tool's own result back to it, is not executed and the run goes to its answer step.
    ``decide``: how a tool step chooses between a call (of which tool) and the answer. ``"scores"`` (default): by the
    model's scores of the options' names when the generator can score them (the in-process engine;
    ``_decide.py``), then only the chosen tool's arguments are decoded; otherwise, and with ``"decode"``, the
    choice is decoded under the call template. ``after_result``: the scores' rule after a tool result, one of
    ``_decide.AFTER_RESULT_RULES`` (None: ``"exclude_moved"``, the tool that just returned is no option and another
    call is made only if the result moved the model towards the tools; on weights trained on the loop's decisions,
    the loop adapter, ``"null"``: the first step's rule, as in its training; ``"exclude_last"``: calibrated against the
    content-free question as the first step is, which a workflow agent whose tools' ``prepare`` narrows the choice
    wants: the coding assistant). ``after_failure``: after a failed call (``ModelRetry``, an exception, invalid
    arguments) ``"retry"`` (default) makes the next step a call, of the tool the model scores highest, while the
    failed tool has retries left, as the retry prompt asks; ``"decide"`` lets the model answer instead.
    ``calibrate``: whether the call margin is read against a content-free question's (None: as the weights declare,
    :func:`agentkit.decide.calibrates`: True on weights as loaded, False on the loop adapter, which the default model
    merges by default; the tool is picked calibrated either way, and typed values that fill a tool's arguments make
    a call, ``agentkit.steps.decision``; the loop adapter's model card says where each suits). ``prefetch``: the
    first call's prompt pass beside the decision's (``_prefetch.py``; None: where a core is spare)."""

    _instrument_default: bool | Instrumentation = False

    def __init__(
        self,
        model: Any,
        *,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        instructions: Instructions | Sequence[Instructions] | None = None,
        output_type: Any = None,
        deps_type: type[DepsT] | None = None,
        routing: RoutingPolicy | None = None,
        limits: Limits | None = None,
        name: str | None = None,
        plan: bool = False,
        decode: DecodeConfig | None = None,
        model_settings: ModelSettings | None = None,
        output_retries: int = 1,
        instrument: bool | Instrumentation | None = None,
        on_repeat: OnRepeat = "answer",
        repeat: RepeatKey = "feedback",
        decide: Decide = "scores",
        after_result: str | None = None,
        after_failure: str = "retry",
        calibrate: bool | None = None,
        prefetch: bool | None = None,
        result_type: Any = None,
    ) -> None:
        no_result_type(result_type)
        repeat_.check(on_repeat, repeat)
        decide_.check(decide, after_result, after_failure, calibrate)
        self.generator = as_generator(model)
        self._tools = as_tools(tools)
        self._instructions: list[Instructions] = instruction_list(instructions)
        self.output_type = output_type
        self._output = output_spec(output_type)
        self.deps_type = deps_type if deps_type is not None else type(None)
        self.routing = settings_.agent_routing(routing, decode, RoutingPolicy)  # decode.mode honoured
        self.limits = limits or Limits()
        self.name = name or "agent"
        self.plan = plan
        self.decode = decode or DecodeConfig()
        self.model_settings = settings_.merge(model_settings)
        self.output_retries = output_retries
        self.instrument = instrument
        self.on_repeat: OnRepeat = on_repeat
        self.repeat: RepeatKey = repeat
        self.decide: Decide = decide
        # the decision's rule after a tool result (None: _decide.AFTER_RESULT; on weights trained on the loop's
        # decisions, whose scorer says calibrate=False, "null": every tool an option, as in their training traces)
        self.after_result = after_result
        self.after_failure = after_failure  # the decision's rule after a failed call (_decide.AFTER_FAILURE_RULES)
        self._scorer = decide_.scorer_of(self.generator, decide)
        self.prefetch = prefetch_.resolve(prefetch, self.generator)  # the call's prompt pass beside the decision's
        self.calibrate = calibrate
        if after_result is None and self._scorer is not None and not decide_.decides_calibrated(self._scorer, calibrate):
            self.after_result = "null"
        self._null_scores = decide_.NullScores()  # the decision's baseline, shared by this agent's runs
        self._templates = StepTemplates(self._tools)
        self._caller = ModelCaller(self.generator)
        # a plain reply (no tool offered, no result to carry) on the weights as loaded, where the engine merged a LoRA
        # (DecodeConfig.weights="loaded": the loop adapter was trained on the loop's steps; docs/agent_loop.md)
        self._plain_weights = plain_weights(getattr(self.generator, "engine", None))

    @classmethod
    def instrument_all(cls, instrument: bool | Instrumentation = True) -> None:
        """OpenTelemetry spans for every agent that does not say otherwise (``Agent(instrument=...)``)."""
        cls._instrument_default = instrument

    @property
    def tools(self) -> list[Tool]:
        return list(self._tools)

    def tool(self, function: Callable[..., Any] | None = None, /, *, name: str | None = None,
             description: str | None = None, retries: int = 1, timeout_s: float | None = None,
             prepare: Callable[..., Any] | None = None) -> Any:
        """Register a tool: ``@agent.tool`` or ``@agent.tool(name=..., retries=..., timeout_s=..., prepare=...)``.
        Returns the ``Tool``. A first parameter ``ctx: RunContext[Deps]`` receives the run's context."""

        def register(fn: Callable[..., Any]) -> Tool:
            t = Tool(fn, name=name, description=description, retries=retries, timeout_s=timeout_s, prepare=prepare)
            self._tools = as_tools([*self._tools, t])
            self._templates.set_tools(self._tools)
            return t

        return register(function) if function is not None else register

    tool_plain = tool  # pydantic-ai's name for a tool without a context (here the signature tells them apart)

    def instructions(self, function: Callable[[RunContext[DepsT]], Any]) -> Callable[[RunContext[DepsT]], Any]:
        """``@agent.instructions``: a function of the ``RunContext`` (sync or async) whose text joins the
        instructions of every run, evaluated when the run starts."""
        self._instructions.append(function)
        return function

    # public entry points ----------------------------------------------------------------------------------------

    async def run(self, task: str, *, message_history: Sequence[ModelMessage] | None = None, deps: Any = None,
                  model_settings: ModelSettings | None = None, mode: Mode | None = None,
                  routing: RoutingPolicy | None = None, limits: Limits | None = None,
                  trace_path: str | None = None, output_type: Any = None, result_type: Any = None) -> RunResult[Any]:
        """Run the agent on ``task``, continuing ``message_history`` (``result.all_messages()`` of earlier runs).

        ``mode`` forces every step into one mode; ``routing`` replaces the agent's; ``output_type`` the agent's for
        this run (as pydantic-ai's ``run(output_type=...)``). ``trace_path``: append each
        iteration to this JSONL file as soon as it ends. Raises ``UsageLimitExceeded`` / ``UnexpectedModelBehavior``
        with ``.trace`` (the iterations so far) and ``.messages`` (the conversation so far).
        """
        no_result_type(result_type)
        return await self.run_events(task, message_history=message_history, deps=deps, model_settings=model_settings,
                               mode=mode, routing=routing, limits=limits, trace_path=trace_path,
                               output_type=output_type)

    def run_sync(self, task: str, **kwargs: Any) -> RunResult[OutputT]:
        """``run`` for synchronous code (not from inside a running event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(task, **kwargs))
        raise UserError("run_sync() cannot be called from a running event loop; use `await agent.run(...)`")

    def run_stream(self, task: str, **kwargs: Any) -> Any:
        """A ``StreamedRunResult``: ``async with agent.run_stream(...) as s`` then ``s.stream_text(delta=True)``,
        ``s.stream_output()`` (partial structured outputs) or ``s.stream_events()``; ``async for event in
        agent.run_stream(...)`` yields every event, the last one ``Final`` with the ``RunResult``."""
        from ._stream import StreamedRunResult

        return StreamedRunResult(self, task, kwargs)

    # the loop ----------------------------------------------------------------------------------------------------

    async def run_events(self, task: str, *, message_history: Sequence[ModelMessage] | None = None,
                         deps: Any = None, model_settings: ModelSettings | None = None, mode: Mode | None = None,
                         routing: RoutingPolicy | None = None, limits: Limits | None = None,
                         trace_path: str | None = None, emit: Callable[[AgentEvent], None] | None = None,
                         output_type: Any = None) -> RunResult[Any]:
        """:meth:`run`, with each event of the run sent to ``emit`` as it happens (``run_stream`` reads them)."""
        if not isinstance(task, str) or not task.strip():
            raise UserError("task must be a non-empty string")
        settings = settings_.merge(self.model_settings, model_settings)
        mode = mode or settings.get("mode")
        routing = RoutingPolicy.force(mode) if mode is not None else (routing or self.routing)
        limits = limits or self.limits
        history = check_history(message_history)
        run = RunState(history, Trace(path=trace_path), routing, limits, uuid.uuid4().hex[:12], settings, deps,
                       task, emit, new_message_index=len(history),
                       output=output_spec(output_type) if output_type is not None else self._output)
        otel = as_instrumentation(self.instrument if self.instrument is not None else self._instrument_default)
        if otel is not None:
            run.spans["otel"] = otel
            run.spans["run"] = otel.start(f"invoke_agent {self.name}", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.name, "gen_ai.provider.name": "agentkit",
                "agentkit.run_id": run.run_id})
        error: BaseException | None = None
        try:
            output = await self._timed(run)
        except BaseException as e:
            error = e
            if isinstance(e, AgentRunError):
                e.trace = e.trace if e.trace is not None else run.trace
                e.messages = list(run.messages)
            raise
        finally:
            end_run(run, error)
        return RunResult(output, run.trace, run.messages, run.plan, run.run_id, run.new_message_index, run.usage)

    async def _timed(self, run: RunState) -> Any:
        run.instructions = await self._instruction_text(run)
        system = steps.system_prompt(run.instructions, self._tools)
        run.messages.append(ModelRequest(parts=[UserPromptPart(content=run.prompt)], instructions=system,
                                         run_id=run.run_id))
        timeout = asyncio.timeout(run.limits.timeout_s)
        try:
            async with timeout:
                return await self._loop(run)
        except TimeoutError:
            if timeout.expired():
                stopped = run.trace[-1] if len(run.trace) and run.trace[-1].finish_reason == "cancelled" else None
                done = len(run.trace) - (stopped is not None)
                where = f"; the {stopped.step} step in progress was stopped at its next forward" if stopped else ""
                if run.running_tool is not None:
                    where = f"; tool {run.running_tool!r} was running (abandoned in its thread)"
                raise UsageLimitExceeded(f"timeout_s={run.limits.timeout_s} exceeded after {done} iteration(s)"
                                         f"{where}", run.trace) from None
            raise

    async def _instruction_text(self, run: RunState) -> str | None:
        parts = []
        for item in self._instructions:
            if callable(item):
                item = item(run.context())
                if inspect.isawaitable(item):
                    item = await item
            if item:
                parts.append(str(item))
        return "\n\n".join(parts) if parts else None

    async def _loop(self, run: RunState) -> Any:
        if self.plan:
            run.plan = await self._structured(run, "plan", steps.OutputSpec(steps.Plan), steps.plan_prompt())
            run.messages.append(ModelRequest(parts=[UserPromptPart(content="Carry out the plan.")]))
        if self._tools:
            while await self._tool_step(run):
                pass
        results = steps.results_text(list(run.results.calls.values()))
        if run.output is not None:
            return await self._structured(run, "extract", run.output, results + steps.extract_prompt(run.output))
        chat = answer_chat(run.instructions, run.messages[:run.new_message_index], run.prompt,
                           results) if self._tools else None
        if not results and run.instructions is None:  # a plain reply: the model's own default system text
            chat = without_default_system(chat if chat is not None else to_chat_with_prompt(run.messages, None))
        result, rec, t0 = await self._generate(run, "reply", None, chat=chat)
        text = result.text
        emit(run, lambda: Reply(rec.iteration, text))
        run.messages.append(self._response(run, TextPart(content=text), "reply", result))
        self._finish(run, rec, t0)
        return text

    async def _tool_step(self, run: RunState) -> bool:
        """One tool-call iteration, the shared tool step (:mod:`agentkit.steps.tool_step`) on the agent's options;
        False when the run goes to its answer (the model chose to answer: by its scores, then the answer step's
        iteration carries the decision, or in the decoded call)."""
        run.offered = offered = await offered_tools(self._tools, run.context)
        if not offered:  # every tool's ``prepare`` left it out: the run answers
            return False
        ahead = prefetch_.call_ahead(self.generator, run, self.decode) if self.prefetch and self._scorer else None
        sources, choosable = (None, offered) if self._scorer is None else choosable_tools(
            offered, to_chat(run.messages), run.settings)
        made: list[Any] = []  # the call decode's (result, record, start)

        async def answer(request: Any) -> Any:
            if isinstance(request, Score):
                assert self._scorer is not None  # a decision is asked only of a scorer
                return await self._scorer.name_scores(request.messages, request.names, request.head)
            run.decision = request.decision  # the call decode's iteration carries it
            template, compile_ms = None, 0.0
            if request.tool is not None:
                template, compile_ms = self._templates.call_template(
                    request.tool, run.settings.get("json_style", steps.STYLE),
                    bool(run.settings.get("open_objects", False)), self._max_calls(run, request.tool), sources)
            chat = None if request.tool is None or self._scorer is None else decide_.call_chat(
                run.messages, run.instructions, offered)  # None: the tool step's own (CALL_PROMPT)
            await prefetch_.ready(ahead)  # the call's prompt pass, run beside the decision
            made[:] = await self._generate(run, "tool_call", None, template, compile_ms, chat=chat)
            return made[0]

        out = await drive_async(tool_step(self._step_rules(run, offered, choosable, sources)), answer)
        if self._scorer is not None:
            run.last_decision = out.decision
        if out.ending == "decided":
            run.decision = out.decision  # the answer step's iteration carries it
            if ahead is not None:
                ahead.cancel()  # the call's pass ahead ends at its next piece
            return False
        result, rec, t0 = made
        if out.invalid is not None:
            self._output_failure(run, rec, t0, result, out.invalid)
            return True
        run.output_failures = 0
        rec.tool = out.read[0][0]
        if out.ending == "no_call":  # the decoded final_answer
            run.messages.append(self._response(run, [ToolCallPart(tool_name=rec.tool, args=out.read[0][1])],
                                               "tool_call", result))
            run.failures = 0
            self._finish(run, rec, t0)
            return False
        if out.ending == "repeats":  # calls that repeat one that returned are not run (``_repeat.py``)
            (name, args), earlier = out.repeated[0]
            return self._repeated(run, rec, t0, ToolCallPart(tool_name=name, args=args), result, earlier)
        parts = [ToolCallPart(tool_name=name, args=args) for name, args in out.calls]
        return await self._make_calls(run, offered, parts, result, rec, t0)

    def _step_rules(self, run: RunState, offered: list[Tool], choosable: list[Tool],
                    sources: ArgumentSources | None) -> StepRules:
        """The agent's options of the shared tool step: its decision by scores among ``choosable`` (the tools whose
        values ``sources`` give, ``agentkit.steps.arguments``), the strict call reader, the repeat rule."""
        ask = None
        if self._scorer is not None:
            chat, no_call = decide_.decision_chat(to_chat(decide_.without_plan(run.messages)), run.instructions, offered)
            retry = self.after_failure == "retry" and decide_.retrying(run.messages, run.tool_failures, offered)
            ask = decide_.decision_ask(
                self._scorer, chat, [t.name for t in choosable], run.settings.get("json_style", steps.STYLE),
                self._null_scores, done=run.results.tools_done(), previous=run.last_decision, no_call=no_call,
                rule=self.after_result, retry=retry, calibrate=self.calibrate, sources=sources)
        earlier = None if self.on_repeat == "allow" else lambda n, a: run.results.earlier(n, a, self.repeat)
        return StepRules("auto", ask, lambda res: self._templates.parse_calls(steps.parse_json(res), offered),
                         answer_name=steps.FINAL_ANSWER, earlier=earlier)

    async def _make_calls(self, run: RunState, offered: list[Tool], parts: list[ToolCallPart],
                          result: GenerationResult, rec: IterationRecord, t0: float) -> bool:
        """Run the step's calls (a templated tool's input first) and add their results to the conversation."""
        run.messages.append(self._response(run, parts, "tool_call", result))
        tools = [next(t for t in offered if t.name == p.tool_name) for p in parts]
        args, error = parts[0].args, None
        if tools[0].templated:  # a templated tool takes no arguments in the call: its input is the next step
            args, error, rec, t0 = await self._tool_input(run, tools[0], rec, t0)
            parts[0] = ToolCallPart(tool_name=parts[0].tool_name, args=args, tool_call_id=parts[0].tool_call_id)
        rec.tool_args = clip(steps.compact(parts[0].args if len(parts) == 1 else [p.args for p in parts]))
        t_tool = time.perf_counter()
        outs = await asyncio.gather(*(self._call_tool(run, t, p.tool_call_id, p.args, rec, error if i == 0 else None)
                                      for i, (t, p) in enumerate(zip(tools, parts))))  # parallel calls concurrently
        rec.tool_ms = (time.perf_counter() - t_tool) * 1000
        returned = [self._returned(run, rec, t, p, *out) for t, p, out in zip(tools, parts, outs)]
        run.messages.append(ModelRequest(parts=returned))
        for part in returned:
            content = to_chat([ModelRequest(parts=[part])])[-1]["content"]
            emit(run, lambda part=part, content=content: ToolResult(
                rec.iteration, part.tool_name, content, isinstance(part, RetryPromptPart)))
        self._finish(run, rec, t0)
        check_retries(run.tool_failures, rec.error, tools, run.trace)
        return True

    def _max_calls(self, run: RunState, tool: str) -> int:
        """Calls a tool step may make: up to ``MAX_PARALLEL_CALLS`` of the picked tool with ``parallel_tool_calls``
        (off by default: agentkit/settings.py says why), one for a templated tool (its input is a step of its own)."""
        templated = any(t.templated for t in self._tools if t.name == tool)
        return MAX_PARALLEL_CALLS if run.settings.get("parallel_tool_calls", PARALLEL_DEFAULT) and not templated else 1

    def _returned(self, run: RunState, rec: IterationRecord, tool: Tool, call: ToolCallPart, text: str,
                  error: str | None) -> ToolReturnPart | RetryPromptPart:
        """A call's result as the part the model reads next (clipped), counted in the run's results or failures."""
        text = clip_result(text, run.limits.max_tool_result_chars)
        if error is None:
            run.failures = run.tool_failures[tool.name] = 0
            run.results.add(tool.name, call.args, text)
            rec.tool_result = clip(text) if rec.tool_result is None else clip(rec.tool_result + "\n" + text)
            return ToolReturnPart(tool_name=tool.name, content=text, tool_call_id=call.tool_call_id)
        error = clip_result(error, run.limits.max_tool_result_chars)
        run.failures += 1
        run.tool_failures[tool.name] = run.tool_failures.get(tool.name, 0) + 1
        rec.error = error
        log.info("tool %r failed (%d in a row): %s", tool.name, run.tool_failures[tool.name], error)
        return RetryPromptPart(content=error, tool_name=tool.name, tool_call_id=call.tool_call_id)

    def _repeated(self, run: RunState, rec: IterationRecord, t0: float, call: ToolCallPart,
                  result: GenerationResult, earlier: tuple[str, Any, str]) -> bool:
        """A call that repeats one that already returned a result (``_repeat.py``): not executed. ``"answer"``
        (or a second repeat in a row): on to the answer step; ``"retry"``: the model is told and asked again."""
        rec.tool_args = clip(steps.compact(call.args))
        rec.error = f"repeated call of {call.tool_name} not executed (on_repeat={self.on_repeat!r})"
        run.results.in_a_row += 1
        answer = self.on_repeat == "answer" or run.results.in_a_row > 1
        log.info("run %s: %s; %s", run.run_id, rec.error, "answering" if answer else "asking again")
        if not answer:
            run.messages.append(self._response(run, call, "tool_call", result))
            run.messages.append(ModelRequest(parts=[RetryPromptPart(
                content=repeat_.retry_text(call.tool_name, earlier[2]), tool_call_id=call.tool_call_id)]))
        self._finish(run, rec, t0)
        return not answer

    async def _tool_input(self, run: RunState, tool: Tool, rec: IterationRecord, t0: float,
                          ) -> tuple[dict[str, Any], str | None, IterationRecord, float]:
        """A templated tool's input: a ``tool_input`` step under the template its factory builds now."""
        t_build = time.perf_counter()
        try:
            template = steps.tool_input_template(tool)
        except Exception as e:  # noqa: BLE001 (a factory failure goes back to the model like a tool failure)
            return {}, f"cannot build the input template: {type(e).__name__}: {e}", rec, t0
        self._finish(run, rec, t0)
        run.messages.append(ModelRequest(parts=[UserPromptPart(content=steps.tool_input_prompt(tool))]))
        compile_ms = (time.perf_counter() - t_build) * 1000
        try:
            result, rec, t0 = await self._generate(run, "tool_input", None, template, compile_ms)
        finally:
            release = getattr(self.generator, "release", None)
            if release is not None:  # a one-off template: let the generator drop what it cached for it
                release(template)
        rec.tool = tool.name
        run.messages.append(self._response(run, TextPart(content=result.text), "tool_input", result))
        return {tool.input_parameter: result.text}, None, rec, t0

    async def _call_tool(self, run: RunState, tool: Tool, call_id: str, args: dict[str, Any],
                         rec: IterationRecord, error: str | None) -> tuple[str, str | None]:
        """Validate and run the tool (in an ``execute_tool`` span); returns (observation text, error or None)."""
        if error is not None:
            return "", error
        emit(run, lambda: ToolCall(rec.iteration, tool.name, args))
        otel = run.spans.get("otel")
        span = otel.start(f"execute_tool {tool.name}", run.spans.get("iteration"), {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool.name, "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": otel.content(args)}) if otel else None
        text = ""
        try:
            pos, kw = tool.bind(args)
        except ValidationError as e:
            error = f"invalid arguments: {steps.pydantic_errors(e)}. Fix the arguments and call the tool again."
        else:
            run.usage.tool_calls += 1
            run.running_tool = tool.name
            try:
                text = to_observation_text(await tool.invoke(pos, kw, run.context(tool.name, self.generator)))
            except ModelRetry as e:
                error = e.message
            except ToolTimeout as e:
                error = str(e)
            except Exception as e:  # noqa: BLE001 (any tool failure goes back to the model)
                error = f"{type(e).__name__}: {e}"
            run.running_tool = None  # (left set when the run is cancelled meanwhile: its timeout names the tool)
        if otel:
            otel.end(span, {"gen_ai.tool.call.result": otel.content(error if error is not None else text),
                            "agentkit.tool.error": error is not None})
        return text, error

    async def _structured(self, run: RunState, step: str, spec: steps.OutputSpec, prompt: str) -> Any:
        """A plan or extract step, asked again (within ``output_retries``) until its output validates."""
        while True:
            result, rec, t0 = await self._generate(run, step, prompt)
            try:
                value = spec.parse(result)
            except steps.OutputError as e:
                self._output_failure(run, rec, t0, result, str(e))
                continue
            run.failures = run.output_failures = 0
            dumped = spec.dump(value)
            run.messages.append(self._response(run, TextPart(content=result.text or steps.compact(dumped)), step,
                                               result))
            self._finish(run, rec, t0)
            return value

    # helpers -----------------------------------------------------------------------------------------------------

    async def _generate(self, run: RunState, step: str, prompt: str | None, template: Template | None = None,
                        compile_ms: float = 0.0, chat: list[dict[str, str]] | None = None,
                        ) -> tuple[GenerationResult, IterationRecord, float]:
        """Check the limits, then one generation for ``step``; returns its result, its record and start time.

        ``template``: the step's template when it is built per call (``tool_input``), with its ``compile_ms``; its
        ``meta["max_new_tokens"]``, when set, replaces the agent's (a one-off template may know its longest output).
        ``chat``: the messages to send instead of the conversation with ``prompt`` (the answer step's own view).
        """
        decision, run.decision = run.decision, None
        t0 = decision.t0 if decision is not None else time.perf_counter()
        limits = run.limits
        if len(run.trace) >= limits.max_iterations:
            raise UsageLimitExceeded(f"max_iterations={limits.max_iterations} reached", run.trace)
        max_new = run.settings.get("max_tokens", self.decode.max_new_tokens)
        if template is not None and template.meta.get("max_new_tokens"):
            max_new = int(template.meta["max_new_tokens"])
        if limits.max_tokens is not None:
            if run.tokens >= limits.max_tokens:
                raise UsageLimitExceeded(f"max_tokens={limits.max_tokens} reached ({run.tokens} used)", run.trace)
            max_new = min(max_new, limits.max_tokens - run.tokens)
        if template is None:
            template, compile_ms = self._templates.template(step, run.settings.get("json_style", steps.STYLE), run.output,
                                                  bool(run.settings.get("open_objects", False)),
                                                  run.offered if step == "tool_call" else None)
        plain = None if self._tools and run.offered else self._plain_weights  # tools offered: a loop step's answer
        config = step_config(self.decode, run, step, max_new, plain)
        iteration = len(run.trace) + 1
        emit(run, lambda: StepStarted(iteration, step, config.mode))
        start_iteration(run, iteration, step, config.mode)
        t_gen = time.perf_counter()
        chat = chat if chat is not None else to_chat_with_prompt(run.messages, prompt)
        result = await self._caller.call(run, step, iteration, config, template, chat, t0, self.name)
        wall_ms = (time.perf_counter() - t_gen) * 1000
        rec = IterationRecord(iteration, step, config.mode, run_id=run.run_id, agent=self.name, retries=run.failures)
        rec.add_stats(result.stats)
        rec.queue_ms = max(wall_ms - result.stats.latency_ms, 0.0)
        rec.compile_ms = compile_ms
        if decision is not None:
            rec.decide_ms, rec.decision = decision.ms, decision.record()
        run.tokens += result.stats.output_tokens
        return result, rec, t0

    def _output_failure(self, run: RunState, rec: IterationRecord, t0: float, result: GenerationResult,
                        reason: str) -> None:
        run.failures += 1
        run.output_failures += 1
        rec.error = reason
        run.messages.append(self._response(run, TextPart(content=result.text), rec.step, result))
        run.messages.append(ModelRequest(parts=[RetryPromptPart(content=reason)]))
        log.info("%s output unusable (%d in a row), asking again: %s", rec.step, run.output_failures, reason)
        self._finish(run, rec, t0)
        if run.output_failures > self.output_retries:
            raise UnexpectedModelBehavior(
                f"{rec.step} output unusable {run.output_failures} time(s) in a row "
                f"(output_retries={self.output_retries}); last error: {reason}", run.trace)

    def _response(self, run: RunState, part: Any, step: str, result: GenerationResult) -> ModelResponse:
        """The model's message for a step: ``part`` (or a list of parts: parallel calls)."""
        s = result.stats
        return ModelResponse(parts=list(part) if isinstance(part, list) else [part], model_name=self._caller.model_name(), step=step, input_tokens=s.prompt_tokens,
                             output_tokens=s.output_tokens, finish_reason=s.finish_reason, run_id=run.run_id)

    def _finish(self, run: RunState, rec: IterationRecord, t0: float) -> None:
        rec.total_ms = (time.perf_counter() - t0) * 1000
        if rec.error is not None and len(rec.error) > 500:  # keep trace lines short (one page or less)
            rec.error = rec.error[:499] + "…"
        run.trace.add(rec)
        end_iteration(run, rec)
        if run.limits.max_tokens is not None and run.tokens > run.limits.max_tokens:
            raise UsageLimitExceeded(f"max_tokens={run.limits.max_tokens} exceeded ({run.tokens} used)", run.trace)

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, tools={[t.name for t in self._tools]}, generator={self.generator!r})"

