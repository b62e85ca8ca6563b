"""The tool step's decision by the model's scores: call a tool (which one) or answer (``Agent(decide="scores")``).

A 135M model asked to write ``{"name": ..., "arguments": ...}`` with ``final_answer`` among the names almost always
writes a call (it imitates the calls it sees), and greedy decoding picks a name by the first token where the names
differ. With a generator that can score names (:class:`~agentkit.sdk._generator.NameScorer`: the in-process
engine), the step is split as the server's ``tool_choice: "auto"`` is (``serving/toolchoice.py``):

1. the model's log-probability of each option's whole name (the tools and ``final_answer``) after the call's head,
   on the conversation and on a content-free question with the same system message (:mod:`agentkit.decide`;
   contextual calibration; not on weights trained on the loop's decisions, the loop adapter, whose generator says
   ``calibrate = False``: the conversation's own scores decide). The model calls when the conversation moves it
   towards the tools, and the tool is the one it scores highest;
2. a call: only its arguments are decoded, under that tool's template (the name pinned). An answer: no decode
   here; the run goes to its answer step, whose iteration carries the decision and its time.

The baseline's scores depend on the system message and the options only, so an agent computes them once for
each (:class:`NullScores`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import decide
from ..errors import UserError
from ..steps.kinds import FINAL_ANSWER, call_head, system_prompt
from ..toolcall import choice_prompt, no_call_name
from ._generator import NameScorer

Decide = Literal["scores", "decode"]
DECIDE: tuple[str, ...] = ("scores", "decode")


def check(value: str, after_result: str | None = None, after_failure: str = "retry",
          calibrate: bool | None = None) -> None:
    if calibrate is not None and not isinstance(calibrate, bool):
        raise UserError(f"calibrate must be True, False or None, got {calibrate!r}")
    if value not in DECIDE:
        raise UserError(f"decide must be one of {DECIDE}, got {value!r}")
    if after_failure not in AFTER_FAILURE_RULES:
        raise UserError(f"after_failure must be one of {AFTER_FAILURE_RULES}, got {after_failure!r}")
    if after_result is not None and after_result not in AFTER_RESULT_RULES:
        raise UserError(f"after_result must be one of {AFTER_RESULT_RULES} or None, got {after_result!r}")


def scorer_of(generator: Any, value: Decide) -> NameScorer | None:
    """The generator as a :class:`NameScorer` when ``decide="scores"`` and it can score; else None (the choice is
    decoded under the call template)."""
    if value == "scores" and isinstance(generator, NameScorer) and getattr(generator, "can_score", False):
        return generator
    return None


@dataclass
class Decision:
    """A tool step's decision: ``tool`` to call (None: answer), the scores' facts, when it started, its ms."""

    tool: str | None
    info: dict[str, Any]
    t0: float
    ms: float
    chat: list[dict[str, str]] = field(default_factory=list, repr=False)  # the messages it was made on

    def record(self) -> dict[str, Any]:
        """What the trace keeps (``IterationRecord.decision``)."""
        return {"call": self.tool is not None, **self.info}


@dataclass
class NullScores:
    """The baseline's scores per (system message, options), kept by an agent for all its runs (its system message
    and tools rarely change between runs); the least recently added go first beyond ``size`` entries."""

    by_key: dict[tuple[str, tuple[str, ...]], dict[str, float]] = field(default_factory=dict)
    size: int = 64

    def get(self, key: tuple[str, tuple[str, ...]]) -> dict[str, float] | None:
        return self.by_key.get(key)

    def put(self, key: tuple[str, tuple[str, ...]], scores: dict[str, float]) -> None:
        self.by_key[key] = scores
        while len(self.by_key) > self.size:
            del self.by_key[next(iter(self.by_key))]


# After a tool result, which rule decides (measured on ``agentkit eval agent-loop``, docs/agent_loop.md):
# "exclude_last": the tool whose result just came back is not an option (another tool, or the answer, calibrated
#   against the baseline as the first step is); "exclude_done": no tool that returned a result in this run is an
#   option; "exclude_moved": as exclude_last, and a call only if the result moved the model towards the remaining
#   tools (the margin over the same options on the conversation before that call, the previous decision's chat);
#   "moved": call again only if the margin is at most the previous decision's; "null": the first step's rule.
AFTER_RESULT_RULES = ("exclude_last", "exclude_done", "exclude_moved", "moved", "null")
# exclude_moved: on the same 30 tasks (evals/results/agent_loop/decide_*.json) 2.47 iterations a run against 2.97
# (exclude_done), 3.63 (exclude_last: it ping-pongs between two tools) and 3.10 (decode), finished 0.97, two-tool
# tasks right 0.29, answers with the result 0.25
AFTER_RESULT = "exclude_moved"
# The decision's view of the system prompt: "full" (the tool step's, with the worked example), "no_example" (the
# same without it), or "choice" (the server's tool_choice prompt, agentkit.toolcall.choice_prompt, whose no-call
# option is "respond" instead of final_answer)
# "choice" on the same 30 tasks (evals/results/agent_loop/decide_exclude_moved*.json): no-tool tasks answered without a
# tool 8 of 8 against 3 of 8 ("full") and 4 of 8 ("no_example"), the same right first calls (0.27), 1.97 iterations
# a run against 2.47, task success 4 of 30 against 1
DECISION_PROMPTS = ("full", "no_example", "choice")
DECISION_PROMPT = "choice"
# After a tool call failed (``ModelRetry``, an exception, invalid arguments): "retry", the step calls a tool (the one
# the model scores highest, the failed one among them) while that tool has retries left (``Tool.retries``), as the
# retry prompt asks; "decide", the first step's rule (the model may answer instead)
AFTER_FAILURE_RULES = ("retry", "decide")


def decision_chat(chat: list[dict[str, str]], instructions: str | None,
                  tools: list[Any]) -> tuple[list[dict[str, str]], str]:
    """The messages the decision scores (the tool step's, with the system message :data:`DECISION_PROMPT` says)
    and the name of its no-call option."""
    if DECISION_PROMPT == "full" or not chat or chat[0]["role"] != "system":
        return chat, FINAL_ANSWER
    if DECISION_PROMPT == "no_example":
        return [{"role": "system", "content": system_prompt(instructions, tools, False)}, *chat[1:]], FINAL_ANSWER
    no_call = no_call_name([t.name for t in tools])
    text = choice_prompt([t.spec for t in tools], no_call)
    system = f"{instructions}\n\n{text}" if instructions else text
    return [{"role": "system", "content": system}, *chat[1:]], no_call


async def _baseline(scorer: NameScorer, chat: list[dict[str, str]], options: list[str], head: str,
                    null: NullScores) -> dict[str, float]:
    """The content-free question's scores of ``options`` (with ``chat``'s system message), cached in ``null``."""
    base = decide.null_messages(chat)
    key = (base[0]["content"] if base[0]["role"] == "system" else "", tuple(options))
    baseline = null.get(key)
    if baseline is None:
        baseline = await scorer.name_scores(base, options, head)
        null.put(key, baseline)
    return baseline


def decides_calibrated(scorer: NameScorer, calibrate: bool | None = None) -> bool:
    """Whether a decision on ``scorer`` reads its scores against the content-free question's: ``calibrate`` when
    given (``Agent(calibrate=...)``), else the scorer's own declaration (its ``calibrate`` attribute: False on weights
    trained on the loop's decisions, the loop adapter), else True."""
    return calibrate if calibrate is not None else bool(getattr(scorer, "calibrate", True))


async def decide_step(scorer: NameScorer, chat: list[dict[str, str]], tools: list[str], style: str | None,
                      null: NullScores, *, done: tuple[str, ...] = (), previous: Decision | None = None,
                      rule: str | None = None, no_call: str = FINAL_ANSWER, retry: bool = False,
                      calibrate: bool | None = None) -> Decision:
    """Call or answer, and which tool, by the model's calibrated scores on ``chat`` (the tool step's messages).
    ``done``: the tools that returned a result in this run, the last one last (empty before any); ``previous``:
    this run's last decision; ``rule``: :data:`AFTER_RESULT` when None; ``retry``: the last call failed and is to
    be retried (``after_failure="retry"``): a call of the tool the model scores highest. ``calibrate``: scores
    against the content-free question's (None: as the scorer's weights declare, :func:`decides_calibrated`)."""
    t0 = time.perf_counter()
    if not tools:  # none has its required values in the conversation (agentkit.steps.arguments)
        return Decision(None, {"by": "no tool has its values", "tool": None}, t0, 0.0, chat)
    if retry:
        scores = await scorer.name_scores(chat, tools, call_head(style))
        best = max(tools, key=lambda n: scores[n])
        return Decision(best, {"rule": "retry", "by": "retry after a failure", "tool": best,
                               "scores": {k: round(v, 4) for k, v in scores.items()}}, t0,
                        (time.perf_counter() - t0) * 1000, chat)
    rule = rule or AFTER_RESULT
    after = bool(done)
    gone = set(done) if rule == "exclude_done" else {done[-1]} if after and rule.startswith("exclude") else set()
    names = [t for t in tools if t not in gone]
    if not names:
        return Decision(None, {"by": "no tool left", "tool": None}, t0, (time.perf_counter() - t0) * 1000, chat)
    options, head = [*names, no_call], call_head(style)
    scores = await scorer.name_scores(chat, options, head)
    baseline = await _baseline(scorer, chat, options, head, null) if decides_calibrated(scorer, calibrate) else None
    call, info = decide.calibrated(scores, baseline, names, no_call)
    if after and previous is not None and rule in ("moved", "exclude_moved"):
        before = (previous.info.get("no_call_margin") if rule == "moved" else
                  decide.no_call_margin(await scorer.name_scores(previous.chat, options, head), no_call))
        if before is not None:
            call = info["no_call_margin"] <= before
            info["previous_margin"] = round(before, 4)
    return Decision(info["tool"] if call else None, {"rule": rule if after else "null", **info}, t0,
                    (time.perf_counter() - t0) * 1000, chat)
