"""The runner of one tool-choice step, from the decision to the reply: the server's chat service runs every request
through it (``serving/service.py`` maps an OpenAI request to a :class:`ToolStep` and the outcome back).

1. **Decide** (``tool_choice`` auto, an engine that can score): call or answer in text by the model's calibrated
   scores (:func:`agentkit.decide.wants_call`); after a failed tool message, a call again (the retry rule); a
   forced call among several tools: the tool the model scores highest (:func:`agentkit.decide.pick_tool`).
2. **Template**: the picked tool's template (its name pinned), else the step's own (all tools, or the schema).
3. **Generate** under it.
4. **Check**: under auto, a call that repeats one a tool message already answered, or that takes none of its
   argument values from the conversation (:func:`agentkit.toolcall.call_grounded`), is no call
   (:func:`reply_calls`); then, or when the decision was to answer, the reply is generated as free text from the
   step's text messages (no tool instructions in view).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..config import DecodeConfig
from ..constrain.canonical import DEFAULT_STYLE
from ..constrain.nodes import Template
from ..decide import can_score, pick_tool, wants_call
from ..engine.faces import EngineLike
from ..engine.stats import GenerationResult
from ..toolcall import call_grounded, call_key, parse_calls
from .kinds import call_head

ToolMode = Literal["none", "forced", "auto"]


@dataclass
class ToolStep:
    """One step as the runner takes it: what to send, how to decode, which calls count."""

    prompt: list[dict[str, str]] | str  # chat messages, or a raw prompt (``raw``)
    config: DecodeConfig
    tool_mode: ToolMode = "none"
    tool_names: frozenset[str] = frozenset()
    max_calls: int = 1
    raw: bool = False
    style: str | None = None  # the JSON style of the call's template (None: the compiler's default)
    # tool_choice auto: the pseudo-tool meaning "no call", the calls already answered (call_key), whether the
    # last tool message reports a failure (a call again), the text a call's values must come from, and the text
    # reply's messages and config
    no_call: str | None = None
    answered: frozenset[str] = frozenset()
    retry: bool = False
    sources: str = ""
    text_messages: list[dict[str, str]] | None = None
    text_config: DecodeConfig | None = None


@dataclass
class StepIO:
    """How a step talks to its caller while it runs: the template to decode under, the picked tool's template, the
    streaming callbacks, the batch seat, the stop check, and the text prompt's check before the text reply."""

    template: Template | None
    template_for: Callable[[str], Template]  # the template of one tool's call (its name pinned)
    check: Callable[[], None] = lambda: None  # raises when the request was cancelled or timed out
    on_tokens: Callable[[list[int]], None] | None = None  # a streamed decode's committed tokens
    quiet_tokens: Callable[[list[int]], None] | None = None  # the same for a decode that is not streamed
    on_draft: Callable[[list[int], list[bool]], None] | None = None
    should_stop: Callable[[], bool] | None = None
    batch: Any = None  # a BatchSeat, or None
    # called before the text reply, which it may reconfigure (step.text_config); its value is kept (prompt ids)
    before_text: Callable[[ToolStep], Any] = lambda step: None


@dataclass
class StepOutcome:
    """The step's last generation, the call decode's when a text reply followed it, and how the call / no-call
    decision was made (None: no decision was asked)."""

    result: GenerationResult
    choice: GenerationResult | None = None
    decision: dict[str, Any] | None = None
    text_reply: bool = False  # a text reply was decoded (under auto)
    text_prompt: Any = None  # before_text's value then
    calls: list[tuple[str, Any]] = field(default_factory=list)  # the reply's calls (reply_of); none: a text reply


def run_step(engine: EngineLike, step: ToolStep, io: StepIO) -> StepOutcome:
    """Run ``step`` on ``engine`` (see the module's docstring)."""
    auto = step.tool_mode == "auto"  # the call decode is not streamed: it may turn into a text reply
    call, decision = _decide(engine, step, io) if auto else (None, None)
    if step.tool_mode == "forced" and len(step.tool_names) > 1 and can_score(engine):
        decision = {"by": "name_scores", "tool": _pick(engine, step, io)}
    res = choice = text_prompt = None
    text_reply = False
    if call is not False:  # a call (the picked tool's template, else the step's), or forced / no tools
        template = io.template_for(decision["tool"]) if decision and decision.get("tool") else io.template
        res = _generate(engine, step.prompt, step.config, template, io, stream=not auto, raw=step.raw)
    if auto and (res is None or answer_in_text(step, res.value)):
        choice, text_prompt, text_reply = res, io.before_text(step), True
        assert step.text_messages is not None and step.text_config is not None
        res = _generate(engine, step.text_messages, step.text_config, None, io, stream=True)
    assert res is not None
    return StepOutcome(res, choice, decision, text_reply, text_prompt, reply_of(step, res.text, res.value))


def _generate(engine: EngineLike, prompt: list[dict[str, str]] | str, config: DecodeConfig,
              template: Template | None, io: StepIO, *, stream: bool, raw: bool = False) -> GenerationResult:
    res = engine.generate(prompt, config, template=template, raw=raw, on_draft=io.on_draft, batch=io.batch,
                          on_tokens=io.on_tokens if stream else io.quiet_tokens, should_stop=io.should_stop)
    io.check()  # stopped early because the request was cancelled: its answer is already decided
    return res


def _decide(engine: EngineLike, step: ToolStep, io: StepIO) -> tuple[bool | None, dict[str, Any]]:
    """tool_choice auto: (True: call, False: answer in text, None: left to the choice decode) by the model's
    calibrated scores; None for an engine without a backbone to score."""
    if step.retry:  # the last tool message reports a failure: a call again
        tool = _pick(engine, step, io) if can_score(engine) else None  # without scores, the choice decode's
        return True, {"by": "retry after a failed tool message", "call": True, "tool": tool}
    if not can_score(engine):
        return None, {"by": "choice_decode"}
    assert step.no_call is not None and not isinstance(step.prompt, str)
    call, info = wants_call(engine, step.prompt, sorted(step.tool_names), step.no_call, call_head(step.style or DEFAULT_STYLE),
                            io.batch)
    io.check()
    return call, {"by": "calibrated_scores", "call": call, **info}


def _pick(engine: EngineLike, step: ToolStep, io: StepIO) -> str:
    """The tool the model scores highest among the step's tools."""
    assert not isinstance(step.prompt, str)
    name = pick_tool(engine, step.prompt, sorted(step.tool_names), call_head(step.style or DEFAULT_STYLE), io.batch)
    io.check()
    return name


def answer_in_text(step: ToolStep, value: Any) -> bool:
    """After the call decode of tool_choice auto: True when the model chose no call, or only calls that repeat
    ones a tool message already answered or that take none of their argument values from the conversation
    (``{"base": 10, "height": 10}`` for "What is the capital of France?"), so the reply is decoded as text."""
    calls = parse_calls("", value) if value is not None else []
    return not [c for c in reply_calls(step, calls) if call_grounded(c[1], step.sources)]


def reply_of(step: ToolStep, text: str, value: Any) -> list[tuple[str, Any]]:
    """The calls a generation's reply returns (:func:`reply_calls` of what it wrote): a forced call's text or
    value; under ``tool_choice`` auto only the call decode's parsed value (a text reply, ``value`` None, is
    content even if it holds JSON); none without tools."""
    calls: list[tuple[str, Any]] = []
    if step.tool_mode == "forced":
        calls = parse_calls(text, value)
    elif step.tool_mode == "auto" and value is not None:
        calls = parse_calls("", value)
    return reply_calls(step, calls)


def reply_calls(step: ToolStep, calls: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The calls a reply returns: to the step's tools, with object arguments, each once (a call written twice in
    one reply is made once), at most ``step.max_calls``; under ``tool_choice`` auto without the calls a tool
    message already answered (the repeat rule)."""
    out, seen = [], set()
    for name, args in calls:
        key = call_key(name, args)
        if name not in step.tool_names or not isinstance(args, dict) or key in seen:
            continue
        if step.tool_mode == "auto" and key in step.answered:
            continue
        seen.add(key)
        out.append((name, args))
    return out[:step.max_calls]
