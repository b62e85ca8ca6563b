"""One tool step from start to finish, sans-IO: decide, generate under the template, check, and the text reply.

:func:`tool_step` is a generator. It yields requests and receives their results; it returns a :class:`StepOutcome`.
The requests: :class:`~agentkit.steps.decision.Score` (the decision's name scores), :class:`GenerateCall` (generate
the call under the template of the picked tool's calls, or the step's own) and :class:`GenerateText` (generate the
text reply, no tool instructions in view). The server's step runner answers them synchronously on an engine
(:func:`agentkit.steps.runner.run_step`); the SDK's ``Agent`` awaits its generator (``sdk/_agent.py``); both drive
it with :mod:`agentkit.steps.drive`.

1. **Decide** (:func:`agentkit.steps.decision.decide`): call or answer, and which tool.
2. **Generate** the call under the picked tool's template (its name pinned), else the step's own.
3. **Check** the reply (:func:`check`): its calls as the caller reads them (``read``: the server's lenient
   :func:`agentkit.toolcall.reply_of`, which also drops calls a tool message answered; the SDK's strict reader,
   whose :class:`~agentkit.steps.kinds.OutputError` makes the step ``invalid``); the decoded no-call option
   (``answer_name``: the SDK's ``final_answer``) ends it with an answer; calls that repeat an earlier one
   (``earlier``: the SDK's repeat rule) are not made, and a reply of repeats only is an answer; under ``auto`` a
   reply with no call left, or none that takes a value from the conversation (``sources``,
   :func:`agentkit.toolcall.call_grounded`: the server's), is an answer.
4. **Text reply** (``text_reply``: the server's ``tool_choice`` auto): an answer is generated as free text here;
   without it the step returns the answer for the caller's own answer step (the SDK's loop).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Literal

from ..engine.stats import GenerationResult
from ..toolcall import call_grounded
from .decision import Decision, DecisionAsk, Score, ToolMode, decide
from .kinds import OutputError

Call = tuple[str, Any]  # (tool name, arguments)
Ending = Literal["calls", "decided", "no_call", "repeats", "ungrounded", "invalid"]

__all__ = ["Call", "GenerateCall", "GenerateText", "StepOutcome", "StepRules", "check", "tool_step"]


@dataclass(frozen=True)
class GenerateCall:
    """A request: generate the call under the template of ``tool``'s calls (None: the step's own template), after
    ``decision``. ``streamed``: whether its tokens are the reply's (False when it may turn into a text reply)."""

    tool: str | None
    decision: Decision | None
    streamed: bool


@dataclass(frozen=True)
class GenerateText:
    """A request: generate the step's text reply (free text, no tool instructions in view)."""


@dataclass(frozen=True)
class StepRules:
    """How a step runs (see the module's docstring): its mode, its decision (None: none asked), how a reply's calls
    are read, and the checks and the text reply that apply."""

    mode: ToolMode
    decision: DecisionAsk | None
    read: Callable[[GenerationResult], list[Call]]  # the reply's calls; raises OutputError when unusable
    answer_name: str | None = None  # a decoded call of this name ends the step with an answer
    earlier: Callable[[str, Any], Any] | None = None  # what a call repeats (None: not a repeat)
    sources: str | None = None  # under auto: the text a call must take a value from (None: no grounding check)
    text_reply: bool = False  # under auto: an answer is generated here as text


@dataclass
class StepOutcome:
    """How the step ended (``ending``), its decision, its last generation (the text reply's when one followed;
    None: none was made), the call decode's when a text reply followed it, the calls the reply wrote (``read``),
    those to make (``calls``), the repeats left out (each with what it repeats) and an unusable reply's reason."""

    ending: Ending
    decision: Decision | None = None
    result: GenerationResult | None = None
    choice: GenerationResult | None = None
    read: list[Call] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    repeated: list[tuple[Call, Any]] = field(default_factory=list)
    invalid: str | None = None
    text_reply: bool = False


Request = Score | GenerateCall | GenerateText
Stepping = Generator[Request, Any, StepOutcome]


def tool_step(rules: StepRules) -> Stepping:
    """Run one tool step (see the module's docstring)."""
    decision = (yield from decide(rules.decision)) if rules.decision is not None else None
    if decision is not None and decision.call is False:
        out = StepOutcome("decided", decision)
    else:
        auto = rules.mode == "auto"
        tool = decision.tool if decision is not None else None
        result = yield GenerateCall(tool, decision, streamed=not (auto and rules.text_reply))
        out = check(rules, result)
        out.decision = decision
    if out.ending in ("calls", "invalid") or not (rules.text_reply and rules.mode == "auto"):
        return out
    out.choice, out.calls, out.text_reply = out.result, [], True
    out.result = yield GenerateText()
    return out


def check(rules: StepRules, result: GenerationResult) -> StepOutcome:
    """The step's ending after its call decode ``result`` (see the module's docstring, step 3)."""
    try:
        read = rules.read(result)
    except OutputError as e:
        return StepOutcome("invalid", result=result, invalid=str(e))
    if read and rules.answer_name is not None and read[0][0] == rules.answer_name:
        return StepOutcome("no_call", result=result, read=read)
    found = [(call, rules.earlier(*call) if rules.earlier is not None else None) for call in read]
    repeated = [(call, e) for call, e in found if e is not None]
    calls = [call for call, e in found if e is None]
    out = StepOutcome("calls", result=result, read=read, calls=calls, repeated=repeated)
    if read and not calls:
        out.ending = "repeats"
    elif rules.mode == "auto" and not calls:
        out.ending = "no_call"
    elif rules.mode == "auto" and rules.sources is not None and not any(
            call_grounded(args, rules.sources) for _, args in calls):
        out.ending = "ungrounded"
    return out
