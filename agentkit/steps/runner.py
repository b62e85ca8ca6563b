"""The step runner on an engine: the server's chat service runs every request through it (``serving/service.py``
maps an OpenAI request to a :class:`ToolStep` and the outcome back). :func:`run_step` drives the shared tool step
(:func:`agentkit.steps.tool_step.tool_step`) synchronously: the decision's name scores on the engine's model
(:func:`agentkit.decide.name_scores`), the call decode under the prepared template (:class:`StepIO`), the text reply.

The server's options of the step: the decision is the first step's rule, its baseline scored each time and
calibrated as the weights declare (:func:`agentkit.decide.calibrates`); a reply's calls are read leniently
(:func:`agentkit.toolcall.reply_of`: calls to the step's tools, each once, at most ``max_calls``, under auto none
that a tool message already answered); under auto a call must take a value from the conversation (``sources``), and
an answer is generated here as free text from the step's text messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config import DecodeConfig
from ..constrain.canonical import DEFAULT_STYLE
from ..constrain.nodes import Template
from ..decide import calibrates, can_score, name_scores
from ..engine.faces import EngineLike
from ..engine.stats import GenerationResult
from ..toolcall import reply_of
from .decision import DecisionAsk, Score, ToolMode
from .drive import drive
from .kinds import call_head
from .tool_step import GenerateCall, StepOutcome, StepRules, tool_step

__all__ = ["StepIO", "StepOutcome", "ToolMode", "ToolStep", "reply_of", "run_step"]


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
    owed: tuple[str, ...] | None = None  # the tools the request still owes a call (agentkit.steps.unserved)
    covered: tuple[str, ...] = ()  # before any call, the tools the request fills with typed values (the same)
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
    before_text: Callable[[ToolStep], None] = lambda step: None  # before the text reply (may set step.text_config)


def step_rules(engine: EngineLike, step: ToolStep) -> StepRules:
    """The shared step's options for ``step`` on ``engine`` (see the module's docstring)."""
    ask = None
    if step.tool_mode != "none" and not isinstance(step.prompt, str):  # a raw prompt (completions) has no tools
        ask = DecisionAsk(step.tool_mode, step.prompt, sorted(step.tool_names), step.no_call,
                          call_head(step.style or DEFAULT_STYLE), can_score(engine), calibrates(engine), step.retry,
                          owed=step.owed, covered=step.covered)
    return StepRules(step.tool_mode, ask, lambda res: reply_of(step, res.text, res.value),
                     sources=step.sources if step.tool_mode == "auto" else None, text_reply=True)


def run_step(engine: EngineLike, step: ToolStep, io: StepIO) -> StepOutcome:
    """Run ``step`` on ``engine`` (see the module's docstring); ``io.check`` runs after each scoring and decode."""
    rules = step_rules(engine, step)
    seat = {"on_draft": io.on_draft, "batch": io.batch, "should_stop": io.should_stop}

    def answer(request: Any) -> dict[str, float] | GenerationResult:
        if isinstance(request, Score):
            scores = name_scores(engine, request.messages, request.names, request.head, io.batch)
            io.check()
            return scores
        if isinstance(request, GenerateCall):
            template = io.template_for(request.tool) if request.tool is not None else io.template
            res = engine.generate(step.prompt, step.config, template=template, raw=step.raw,
                                  on_tokens=io.on_tokens if request.streamed else io.quiet_tokens, **seat)
        else:  # the text reply
            io.before_text(step)
            assert step.text_messages is not None and step.text_config is not None
            res = engine.generate(step.text_messages, step.text_config, template=None, raw=False,
                                  on_tokens=io.on_tokens, **seat)
        io.check()  # stopped early because the request was cancelled: its answer is already decided
        return res

    return drive(tool_step(rules), answer)
