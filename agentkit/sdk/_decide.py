"""The SDK's options of the tool step's decision by the model's scores: call a tool (which one) or answer
(``Agent(decide="scores")``). The decision itself is the shared step's (:mod:`agentkit.steps.decision`), as the
server's ``tool_choice: "auto"`` makes it.

A 135M model asked to write ``{"name": ..., "arguments": ...}`` with ``final_answer`` among the names almost always
writes a call (it imitates the calls it sees), and greedy decoding picks a name by the first token where the names
differ. With a generator that can score names (:class:`~agentkit.sdk._generator.NameScorer`: the in-process
engine), the step is split:

1. the model's log-probability of each option's whole name (the tools and the no-call option) after the call's
   head, on the conversation and on a content-free question with the same system message (:mod:`agentkit.decide`;
   contextual calibration; not on weights trained on the loop's decisions, the loop adapter, whose generator says
   ``calibrate = False``: the conversation's own scores decide). The model calls when the conversation moves it
   towards the tools, and the tool is the one it scores highest; after tool results the agent's
   ``after_result`` rule applies (:data:`AFTER_RESULT`);
2. a call: only its arguments are decoded, under that tool's template (the name pinned). An answer: no decode
   here; the run goes to its answer step, whose iteration carries the decision and its time.

The baseline's scores depend on the system message and the options only, so an agent computes them once for
each (:class:`~agentkit.steps.decision.NullScores`).
"""

from __future__ import annotations

from typing import Any, Literal

from ..errors import UserError
from ..steps.arguments import ArgumentSources
from ..steps.decision import AFTER_RESULT_RULES, AfterResult, Decision, DecisionAsk, NullScores, decide
from ..steps.drive import drive_async
from ..steps.kinds import DEFAULT_INSTRUCTIONS, FINAL_ANSWER, call_head, system_prompt
from ..toolcall import choice_prompt, no_call_name
from ._generator import NameScorer
from ._messages import ModelMessage, RetryPromptPart, to_chat

__all__ = ["AFTER_FAILURE_RULES", "AFTER_RESULT", "AFTER_RESULT_RULES", "CALL_PROMPT", "CALL_PROMPTS", "DECIDE",
           "DECISION_PROMPT", "DECISION_PROMPTS", "Decide", "Decision", "NullScores", "call_chat", "check",
           "decide_step", "decides_calibrated", "decision_ask", "decision_chat", "prompt_pair", "retrying",
           "scorer_of", "without_plan"]

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


# The rule after a tool result (agentkit.steps.decision.AFTER_RESULT_RULES) when the agent names none.
# exclude_moved: on the same 30 tasks (evals/results/agent_loop/decide_*.json) 2.47 iterations a run against 2.97
# (exclude_done), 3.63 (exclude_last: it ping-pongs between two tools) and 3.10 (decode), finished 0.97, two-tool
# tasks right 0.29, answers with the result 0.25
AFTER_RESULT = "exclude_moved"
# The decision's view of the system prompt: "full" (the tool step's, with the worked example), "no_example" (the
# same without it), "choice" (the server's tool_choice prompt, agentkit.toolcall.choice_prompt, whose no-call
# option is "respond" instead of final_answer), "shared": the choice prompt with the worked example, the call's
# "choice_example" prompt (CALL_PROMPT), or "listed_first": the choice prompt's format and no-call option after the
# tool step's own opening (its instructions and tools, agentkit.toolcall.tools_list), so a call on the tool step's
# prompt reuses the decision's whole blocks up to where the two texts part.
# "choice" on the same 30 tasks (evals/results/agent_loop/decide_exclude_moved*.json): no-tool tasks answered without a
# tool 8 of 8 against 3 of 8 ("full") and 4 of 8 ("no_example"), the same right first calls (0.27), 1.97 iterations
# a run against 2.47, task success 4 of 30 against 1.
DECISION_PROMPTS = ("full", "no_example", "choice", "shared", "listed_first")
DECISION_PROMPT = "choice"
# The prompt a call the decision by scores chose is decoded on: "tool_step" (the tool step's own,
# agentkit.toolcall.tools_prompt), "choice_example" (call_chat: the "choice" text and the worked example, whose
# prompt pass reuses the decision's pieces up to where they part, or all of them with the decision on "shared") or
# "choice" (the "choice" text alone: after a "choice" decision, the decision's own messages).
# On the 160 tasks (python evals/decision_prompts.py, docs/agent_loop.md) "choice_example" after a "choice" decision:
# task success 0.519 against 0.544, tool-call iterations 0.909x; after a "shared" decision, 0.531 and
# 0.751x (0.700 against 0.686 held out), but with the example in its view the decision called a tool on everyday
# requests that need none (python evals/everyday_requests.py)
CALL_PROMPTS = ("tool_step", "choice_example", "choice")
CALL_PROMPT = "tool_step"
# After a tool call failed (``ModelRetry``, an exception, invalid arguments): "retry", the step calls a tool (the one
# the model scores highest, the failed one among them) while that tool has retries left (``Tool.retries``), as the
# retry prompt asks; "decide", the first step's rule (the model may answer instead)
AFTER_FAILURE_RULES = ("retry", "decide")


def prompt_pair(text: str) -> tuple[str, str]:
    """``"DECISION[/CALL]"`` as a (:data:`DECISION_PROMPT`, :data:`CALL_PROMPT`) pair, the call's default when
    omitted (the evals that compare them: ``evals/decision_prompts.py``, ``evals/everyday_requests.py``)."""
    decision, _, call = text.partition("/")
    call = call or CALL_PROMPT
    if decision not in DECISION_PROMPTS or call not in CALL_PROMPTS:
        raise UserError(f"unknown prompt pair {text!r}: DECISION[/CALL], DECISION of {', '.join(DECISION_PROMPTS)}, "
                        f"CALL of {', '.join(CALL_PROMPTS)}")
    return decision, call


def decision_chat(chat: list[dict[str, str]], instructions: str | None,
                  tools: list[Any]) -> tuple[list[dict[str, str]], str]:
    """The messages the decision scores (the tool step's, with the system message :data:`DECISION_PROMPT` says)
    and the name of its no-call option."""
    if DECISION_PROMPT == "full" or not chat or chat[0]["role"] != "system":
        return chat, FINAL_ANSWER
    if DECISION_PROMPT == "no_example":
        return [{"role": "system", "content": system_prompt(instructions, tools, False)}, *chat[1:]], FINAL_ANSWER
    return _choice_chat(chat, instructions, tools, example=DECISION_PROMPT == "shared",
                        listed_first=DECISION_PROMPT == "listed_first")


def _choice_chat(chat: list[dict[str, str]], instructions: str | None, tools: list[Any],
                 example: bool, listed_first: bool = False) -> tuple[list[dict[str, str]], str]:
    no_call = no_call_name([t.name for t in tools])
    text = choice_prompt([t.spec for t in tools], no_call, example=example, listed_first=listed_first)
    if listed_first:  # the tool step's own opening (system_prompt): its instructions, then the tools
        instructions = instructions or DEFAULT_INSTRUCTIONS
    system = f"{instructions}\n\n{text}" if instructions else text
    return [{"role": "system", "content": system}, *chat[1:]], no_call


def call_chat(messages: list[ModelMessage], instructions: str | None,
              tools: list[Any]) -> list[dict[str, str]] | None:
    """The chat a call the decision by scores chose is decoded on (the run's ``messages``, the plan, if any, in
    view): with :data:`CALL_PROMPT` ``"choice_example"`` the ``tool_choice`` prompt with the worked example, whose
    system text starts with the ``"choice"`` decision's, so the prefix cache holds the prompt's whole pieces up to
    where they part; with ``"choice"`` the same prompt without the example, the ``"choice"`` decision's own; else
    None (the tool step's own chat)."""
    if CALL_PROMPT == "tool_step":
        return None
    chat = to_chat(messages)
    if not chat or chat[0]["role"] != "system":
        return None
    return _choice_chat(chat, instructions, tools, example=CALL_PROMPT == "choice_example")[0]


def without_plan(messages: list[ModelMessage]) -> list[ModelMessage]:
    """The messages a tool step's decision scores: the run's, less its plan (the ``plan`` step's responses, each with
    the request after it: "Carry out the plan.", or a retry prompt). With the plan in view the scores turned to
    answering: on the agent loop's 50 one-tool tasks 13 runs called no tool, against 4 without a plan
    (evals/results/drafter/plans_tasks_160.json). The plan stays in the calls' and the reply's view."""
    out: list[ModelMessage] = []
    for m in messages:
        if out and getattr(out[-1], "step", None) == "plan":
            out.pop()  # the plan's response, and this request after it
        else:
            out.append(m)
    return out


def retrying(messages: list[ModelMessage], failures: dict[str, int], offered: list[Any]) -> bool:
    """The retry rule's condition (``after_failure="retry"``): the last request reports a failed call of an offered
    tool that has retries left (``Tool.retries``; ``failures``: each tool's failures in a row)."""
    last = messages[-1] if messages else None
    failed = {p.tool_name for p in getattr(last, "parts", ()) if isinstance(p, RetryPromptPart) and p.tool_name}
    return any(t.name in failed and failures.get(t.name, 0) <= t.retries for t in offered)


def decides_calibrated(scorer: NameScorer, calibrate: bool | None = None) -> bool:
    """Whether a decision on ``scorer`` reads its scores against the content-free question's: ``calibrate`` when
    given (``Agent(calibrate=...)``), else the scorer's own declaration (its ``calibrate`` attribute: False on weights
    trained on the loop's decisions, the loop adapter), else True."""
    return calibrate if calibrate is not None else bool(getattr(scorer, "calibrate", True))


def decision_ask(scorer: NameScorer, chat: list[dict[str, str]], tools: list[str], style: str | None,
                 null: NullScores, *, done: tuple[str, ...] = (), previous: Decision | None = None,
                 rule: str | None = None, no_call: str = FINAL_ANSWER, retry: bool = False,
                 calibrate: bool | None = None, sources: ArgumentSources | None = None) -> DecisionAsk:
    """An agent's tool-step decision on ``chat`` (the messages it scores) among ``tools``: ``done``, the tools that
    returned a result in this run, the last one last (empty before any); ``previous``, this run's last decision;
    ``rule``, :data:`AFTER_RESULT` when None; ``retry``, the last call failed and is to be retried
    (``after_failure="retry"``): a call of the tool the model scores highest. ``calibrate``: scores against the
    content-free question's (None: as the scorer's weights declare, :func:`decides_calibrated`). ``sources``: what
    the step's call is grounded in (:class:`agentkit.steps.arguments.ArgumentSources`): the tools the request still
    owes a call and those it fills with typed values (None: grounded arguments off, neither known)."""
    return DecisionAsk("auto", chat, list(tools), no_call, call_head(style), True,
                       decides_calibrated(scorer, calibrate), retry, null,
                       AfterResult(done, previous, rule or AFTER_RESULT), sources.owed if sources else None,
                       sources.covered if sources else ())


async def decide_step(scorer: NameScorer, chat: list[dict[str, str]], tools: list[str], style: str | None,
                      null: NullScores, **options: Any) -> Decision:
    """The decision :func:`decision_ask` describes, scored by ``scorer``."""
    decision = await drive_async(decide(decision_ask(scorer, chat, tools, style, null, **options)),
                                 lambda score: scorer.name_scores(score.messages, score.names, score.head))
    assert decision is not None  # an auto step is always decided
    return decision
