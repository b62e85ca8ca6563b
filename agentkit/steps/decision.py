"""A tool step's decision, sans-IO: call or answer, and which tool, by the model's scores of the call's name options.

:func:`decide` is a generator: it yields :class:`Score` requests ("score these names after this head on these
messages") and receives each one's ``{name: log-probability}``; it returns the :class:`Decision`. The caller answers
the requests with its model: the server's step runner synchronously on the engine (:func:`agentkit.decide.name_scores`),
the SDK's agent by awaiting its generator's ``name_scores`` (:mod:`agentkit.steps.drive`).

The rules (:class:`DecisionAsk` holds the options; the arithmetic is :mod:`agentkit.decide`'s):

- ``forced`` among several tools: the tool whose whole name the model scores highest (``tool_choice: "required"``).
  Greedy decoding under the call template chooses by the first token where the names differ, which is not the
  same: on 10 BFCL questions with 2-4 functions it took ``math.triangle_area_base_height`` for Heron's formula, the
  whole name's score ``math.triangle_area_heron``;
- ``auto`` with no tool to choose (none has its required values in the conversation, :mod:`agentkit.steps.arguments`):
  an answer;
- ``auto`` after a failed call (``retry``): a call, of the tool the model scores highest (without scores, the call
  decode's choice);
- ``auto`` after tool results, when the request left values no call took (``owed``, :mod:`agentkit.steps.unserved`:
  ``pounds`` in "Convert 100 dollars to euros and also to pounds." after the call to euros): a call, of the owed
  tool the model scores highest; when calls took every value the request wrote (``owed`` empty), an answer;
- ``auto`` otherwise: call when the conversation moves the model towards the tools, its margin of the no-call
  option over the tools against the same margin on a content-free question (:func:`agentkit.decide.calibrated`; the
  raw margin when ``calibrate`` is False), and of the tool whose score rises most over that question's either way. The baseline's scores may be kept across steps (:class:`NullScores`, the SDK's).
  After tool results an :class:`AfterResult` rule (the SDK's) drops tools from the options and may compare the
  margin with the previous decision's. Before any call, when the request fills every required argument of a
  tool with typed values (``covered``, :func:`agentkit.steps.unserved.covering`: "80 swiss francs in euros", "how
  many cm is 5 feet", "Am I free on March 6?") and the margin says answer, a call even so, of the covered tool
  whose score rises most: an answer there is the model's guess at the tool's result (where the margin calls, the
  call is of a covered tool too). Else, on a raw margin, when
  the request asks for the present or a look-up in words (:mod:`agentkit.steps.lookup`: "right now", "search",
  "look it up") and the calibrated margin says call, a call, of the tool the calibrated margin picks. Where the
  request asks to search ("search", "look up", "online") or for a recorded fact ("how long is the amazon river?",
  "when was bitcoin created", :func:`agentkit.steps.lookup.asks_fact`, when no tool is covered) and a search tool
  is offered (a name with ``search``, ``lookup``, ``google`` or ``browse``), the first call is of that tool, whatever
  the margin. Where the margin calls, no tool is covered and the request asks for advice or an explanation, or
  closes the conversation ("any tips for", "explain", "why does", "thanks": :func:`agentkit.steps.lookup.asks_advice`)
  and asks for nothing present, a look-up or a fact, an answer. An engine that cannot score leaves the choice to the
  call decode.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import decide as scores_
from .lookup import (
    asks_advice,
    asks_fact,
    asks_lookup,
    asks_present,
    asks_search,
    asks_to_search,
    request_of,
    searches,
    searches_it,
)

Chat = list[dict[str, str]]
ToolMode = Literal["none", "forced", "auto"]
# After a tool result, which rule decides (measured on ``agentkit eval agent-loop``, docs/agent_loop.md):
# "exclude_last": the tool whose result just came back is not an option (another tool, or the answer, calibrated
#   against the baseline as the first step is); "exclude_done": no tool that returned a result in this run is an
#   option; "exclude_moved": as exclude_last, and a call only if the result moved the model towards the remaining
#   tools (the margin over the same options on the conversation before that call, the previous decision's chat);
#   "moved": call again only if the margin is at most the previous decision's; "null": the first step's rule.
AFTER_RESULT_RULES = ("exclude_last", "exclude_done", "exclude_moved", "moved", "null")
RETRY = "retry after a failed tool message"
UNSERVED = "the request left values no call took"
SERVED = "every value of the request was taken"
COVERED = "the request fills a tool's arguments with typed values"
LOOKUP = "the request asks for the present or a look-up"
SEARCHED = "the request asks to search, or for a recorded fact, and a search tool is offered"
ADVICE = "the request asks for advice or an explanation, or closes the conversation"


@dataclass(frozen=True)
class Score:
    """A request: log P(each of ``names``, then its closing quote | ``messages`` and ``head``)."""

    messages: Chat
    names: list[str]
    head: str


@dataclass
class Decision:
    """A decision: ``call`` (True: call, False: answer, None: left to the call decode), ``tool`` (the tool whose
    template the call is decoded under; None: the step's own), ``info`` (how it was decided and the scores' facts),
    when it started, how long it took (ms) and the messages it scored."""

    call: bool | None
    tool: str | None
    info: dict[str, Any]
    t0: float = 0.0
    ms: float = 0.0
    chat: Chat = field(default_factory=list, repr=False)

    def record(self) -> dict[str, Any]:
        """What a trace or a response keeps: ``info`` and, when one was made, the call / no-call decision."""
        return self.info if self.call is None else {"call": self.call, **self.info}


@dataclass
class NullScores:
    """The baseline's scores per (system message, options), kept across decisions (an agent's system message and
    tools rarely change between runs); the least recently added go first beyond ``size`` entries."""

    by_key: dict[tuple[str, tuple[str, ...]], dict[str, float]] = field(default_factory=dict)
    size: int = 64

    def get(self, key: tuple[str, tuple[str, ...]]) -> dict[str, float] | None:
        return self.by_key.get(key)

    def put(self, key: tuple[str, tuple[str, ...]], scores: dict[str, float]) -> None:
        self.by_key[key] = scores
        while len(self.by_key) > self.size:
            del self.by_key[next(iter(self.by_key))]


@dataclass(frozen=True)
class AfterResult:
    """The rule after tool results: ``done``, the tools that returned a result in this run (the last one last;
    empty before any), ``previous``, the run's last decision, and ``rule``, one of :data:`AFTER_RESULT_RULES`."""

    done: tuple[str, ...]
    previous: Decision | None
    rule: str


@dataclass(frozen=True)
class DecisionAsk:
    """What a decision reads: the step's mode, the messages scored, the tools in order, the no-call option's name,
    the call's head, whether the model can score, whether the call margin is calibrated, whether the last call failed
    (``retry``), the baseline's cache (None: scored each time), the rule after tool results (None: none) and the
    tools the request still owes a call (``owed``, :mod:`agentkit.steps.unserved`, best first; empty: every value of
    the request was taken, the request is served; None: neither is known, as before any call) and the tools the
    request fills with typed values before any call (``covered``)."""

    mode: ToolMode
    chat: Chat
    names: list[str]
    no_call: str | None
    head: str
    can_score: bool = True
    calibrate: bool = True
    retry: bool = False
    null: NullScores | None = None
    after: AfterResult | None = None
    owed: tuple[str, ...] | None = None
    covered: tuple[str, ...] = ()


Deciding = Generator[Score, dict[str, float], Decision | None]


def decide(ask: DecisionAsk) -> Deciding:
    """The step's decision (see the module's docstring); None when no decision is asked (no tools, a forced call of
    one tool, or a forced call on a model that cannot score)."""
    t0 = time.perf_counter()
    if ask.mode == "forced":
        if len(ask.names) < 2 or not ask.can_score:
            return None
        scores = yield Score(ask.chat, ask.names, ask.head)
        tool = max(ask.names, key=lambda n: scores[n])
        decision = Decision(None, tool, {"by": "name_scores", "tool": tool})
    elif ask.mode != "auto":
        return None
    elif not ask.names:  # no tool has its required values in the conversation (agentkit.steps.arguments)
        decision = Decision(False, None, {"by": "no tool has its values", "tool": None})
    elif ask.retry:
        decision = yield from _retry(ask)
    elif ask.owed == ():  # every value of the request was taken by a call: the request is served
        decision = Decision(False, None, {"by": SERVED, "tool": None})
    elif ask.owed and [t for t in ask.owed if t in ask.names]:
        decision = yield from _owed(ask)
    elif not ask.can_score:
        decision = Decision(None, None, {"by": "choice_decode"})
    else:
        decision = yield from _calibrated(ask)
    decision.t0, decision.ms, decision.chat = t0, (time.perf_counter() - t0) * 1000, ask.chat
    return decision


def _retry(ask: DecisionAsk) -> Generator[Score, dict[str, float], Decision]:
    """After a failed call: a call, of the tool the model scores highest (its scores kept)."""
    if not ask.can_score:
        return Decision(True, None, {"by": RETRY, "tool": None})
    scores = yield Score(ask.chat, ask.names, ask.head)
    best = max(ask.names, key=lambda n: scores[n])
    rule = {"rule": "retry"} if ask.after is not None else {}
    return Decision(True, best, {"by": RETRY, **rule, "tool": best,
                                 "scores": {k: round(v, 4) for k, v in scores.items()}})


def _owed(ask: DecisionAsk) -> Generator[Score, dict[str, float], Decision]:
    """A call the request still owes: of the one tool that can take what it left, else of the one among them the
    model scores highest (without scores, the first)."""
    names = [t for t in ask.owed if t in ask.names]
    scores: dict[str, float] = {}
    if len(names) > 1 and ask.can_score:
        scores = yield Score(ask.chat, names, ask.head)
    best = max(names, key=lambda n: scores.get(n, 0.0)) if scores else names[0]
    return Decision(True, best, {"by": UNSERVED, "tool": best, "owed": names,
                                 **({"scores": {k: round(v, 4) for k, v in scores.items()}} if scores else {})})


def _calibrated(ask: DecisionAsk) -> Generator[Score, dict[str, float], Decision]:
    """Call or answer by the calibrated margin, among the tools the rule after results leaves as options."""
    after, no_call = ask.after, ask.no_call
    assert no_call is not None
    done = after.done if after is not None else ()
    rule = after.rule if after is not None else "null"
    gone = set(done) if rule == "exclude_done" else {done[-1]} if done and rule.startswith("exclude") else set()
    names = [t for t in ask.names if t not in gone]
    if not names:
        return Decision(False, None, {"by": "no tool left", "tool": None})
    options = [*names, no_call]
    scores = yield Score(ask.chat, options, ask.head)
    # the choice between tools is calibrated whether the margin is or not
    baseline = (yield from _baseline(ask, options)) if ask.calibrate or len(names) > 1 else None
    call, info = scores_.calibrated(scores, baseline, names, no_call, margin=ask.calibrate)
    previous = after.previous if after is not None else None
    if done and previous is not None and rule in ("moved", "exclude_moved"):
        before = previous.info.get("no_call_margin") if rule == "moved" else scores_.no_call_margin(
            (yield Score(previous.chat, options, ask.head)), no_call)
        if before is not None:
            call = info["no_call_margin"] <= before
            info["previous_margin"] = round(before, 4)
    labels = {"rule": rule if done else "null"} if after is not None else {}
    if done:
        return Decision(call, info["tool"] if call else None, {"by": "calibrated_scores", **labels, **info})
    call, tool, facts = yield from _first(ask, call, info, scores, baseline, names)
    return Decision(call, tool if call else None, {**facts, **labels, **info, "tool": tool} if call else
                    {**labels, **info, "by": facts["by"]})


def _first(ask: DecisionAsk, call: bool, info: dict[str, Any], scores: dict[str, float],
           baseline: dict[str, float] | None, names: list[str]) -> Generator[Score, dict[str, float],
                                                                            tuple[bool, str | None, dict[str, Any]]]:
    """The first decision of a run, after the margin's (``call``, ``info``): a covered tool's call where the margin
    answers, and where it calls, of a covered tool when there is one; else a call of a search tool (by its name,
    :func:`~agentkit.steps.lookup.searches`) where the request asks to search or for a recorded fact
    (:func:`~agentkit.steps.lookup.asks_fact`); an answer where the margin calls but the request asks for advice or
    an explanation, or closes the conversation (:func:`~agentkit.steps.lookup.asks_advice`) and asks for nothing
    present, nor a search of the assistant (:func:`~agentkit.steps.lookup.asks_to_search`: "I keep searching stuff
    online ... any tips" tells of one, and is answered); a search of "it" where another tool is covered is that
    tool's call ("a lunch on Thursday ... which city it's in. Could you look it up"); else, on a raw margin, a call
    where the request asks for the present or a look-up and the calibrated margin calls. A call where the request
    asks to search is of a search tool.
    Returns (call, tool, how)."""
    request = request_of(ask.chat)
    covered = [t for t in names if t in ask.covered]
    search_tools = [t for t in names if searches(t)]
    # advice that only tells of a search or the web ("I keep searching stuff online ... any tips"): no look-up
    told = asks_advice(request) and not (asks_fact(request) or asks_to_search(request) or asks_present(request))
    covered_other = bool(covered) and not all(searches(t) for t in covered)
    looks_up = bool(search_tools) and not told and ((asks_search(request) and not (covered_other and searches_it(
        request))) or (asks_fact(request) and not covered))
    tool, facts = info["tool"], {"by": "calibrated_scores"}
    if not call and covered:
        call, tool, facts = True, scores_.calibrated_pick(scores, baseline, covered), {"by": COVERED,
                                                                                      "covered": covered}
    elif call and covered and tool not in covered:  # a call: of a tool the request's typed values fill
        tool, facts = scores_.calibrated_pick(scores, baseline, covered), {"by": "calibrated_scores",
                                                                          "covered": covered}
    elif not call and looks_up:
        call, facts = True, {"by": SEARCHED}
    elif call and not covered and not looks_up and asks_advice(request) \
            and (not asks_lookup(request) or told):
        call, facts = False, {"by": ADVICE}
    elif not call and not ask.calibrate and asks_lookup(request) and not told:
        baseline = baseline if baseline is not None else (yield from _baseline(ask, [*names, ask.no_call]))
        call, live = scores_.calibrated(scores, baseline, names, ask.no_call)
        tool, facts = live["tool"], {"by": LOOKUP, "calibrated_null_margin": live["no_call_margin_null"]}
    if call and looks_up:
        tool, facts = scores_.calibrated_pick(scores, baseline, search_tools), {**facts, "searched": True}
    return call, tool, facts


def _baseline(ask: DecisionAsk, options: list[str]) -> Generator[Score, dict[str, float], dict[str, float]]:
    """The content-free question's scores of ``options`` (with the step's system message), from ``ask.null`` when
    it has them."""
    base = scores_.null_messages(ask.chat)
    key = (base[0]["content"] if base[0]["role"] == "system" else "", tuple(options))
    kept = ask.null.get(key) if ask.null is not None else None
    if kept is not None:
        return kept
    baseline = yield Score(base, options, ask.head)
    if ask.null is not None:
        ask.null.put(key, baseline)
    return baseline
