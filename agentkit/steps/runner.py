"""The runner of one tool-choice step, from the decision to the reply: the server's chat service runs every request
through it (``serving/service.py`` maps an OpenAI request to a :class:`ToolStep` and the outcome back).

1. **Decide** (``tool_choice`` auto, an engine that can score): call or answer in text by the model's calibrated
   scores (:func:`agentkit.decide.wants_call`); after a failed tool message, a call again (the retry rule); a
   forced call among several tools: the tool the model scores highest (:func:`agentkit.decide.pick_tool`).
2. **Template**: the picked tool's template (its name pinned), else the step's own (all tools, or the schema).
3. **Generate** under it.
4. **Check**: under auto, a call that repeats one a tool message already answered, or that takes none of its
   argument values from the conversation (:func:`agentkit.toolcall.call_grounded`), is no call
   (:func:`agentkit.toolcall.reply_calls`); then, or when the decision was to answer, the reply is generated as free text from the
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
from ..toolcall import call_grounded, reply_of
from .kinds import call_head

__all__ = ["StepIO", "StepOutcome", "ToolMode", "ToolStep", "reply_of", "run_step"]

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
    call, decision = _decision(engine, step, io)
    seat = {"on_draft": io.on_draft, "batch": io.batch, "should_stop": io.should_stop}
    res = choice = text_prompt = None
    calls: list[tuple[str, Any]] = []
    if call is not False:  # a call (the picked tool's template, else the step's), or forced / no tools
        template = io.template_for(decision["tool"]) if decision and decision.get("tool") else io.template
        res = engine.generate(step.prompt, step.config, template=template, raw=step.raw,
                              on_tokens=io.quiet_tokens if auto else io.on_tokens, **seat)
        io.check()  # stopped early because the request was cancelled: its answer is already decided
        calls = reply_of(step, res.text, res.value)
    text_reply = auto and not any(call_grounded(args, step.sources) for _, args in calls)
    if text_reply:  # no call, or none that takes a value from the conversation: the reply is free text
        choice, text_prompt, calls = res, io.before_text(step), []
        assert step.text_messages is not None and step.text_config is not None
        res = engine.generate(step.text_messages, step.text_config, template=None, raw=False, on_tokens=io.on_tokens,
                              **seat)
        io.check()
    assert res is not None
    return StepOutcome(res, choice, decision, text_reply, text_prompt, calls)


def _decision(engine: EngineLike, step: ToolStep, io: StepIO) -> tuple[bool | None, dict[str, Any] | None]:
    """(True: call, False: answer in text, None: left to the call decode; how it was decided, None: not asked).
    Under auto: a call again after a failed tool message, else the model's calibrated scores (an engine without a
    backbone to score leaves it to the choice decode); forced among several tools: the tool the model scores
    highest. ``io.check`` runs after each scoring."""
    scores = can_score(engine)
    head = call_head(step.style or DEFAULT_STYLE)
    names = sorted(step.tool_names)
    if step.tool_mode == "forced" and len(names) > 1 and scores:
        assert not isinstance(step.prompt, str)
        tool = pick_tool(engine, step.prompt, names, head, io.batch)
        io.check()
        return None, {"by": "name_scores", "tool": tool}
    if step.tool_mode != "auto":
        return None, None
    assert not isinstance(step.prompt, str)
    if not names:  # no tool has its required values in the conversation (agentkit.steps.arguments)
        return False, {"by": "grounded_arguments", "call": False}
    if step.retry:  # the last tool message reports a failure: a call again (without scores, the choice decode's)
        picked = None
        if scores:
            picked = pick_tool(engine, step.prompt, names, head, io.batch)
            io.check()
        return True, {"by": "retry after a failed tool message", "call": True, "tool": picked}
    if not scores:
        return None, {"by": "choice_decode"}
    assert step.no_call is not None
    call, info = wants_call(engine, step.prompt, names, step.no_call, head, io.batch)
    io.check()
    return call, {"by": "calibrated_scores", "call": call, **info}
