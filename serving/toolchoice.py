"""``tool_choice: "auto"``: the model's decision between a tool call and a text reply, and the repeat rule.

A small model almost never starts a free-text reply with a call (SmolLM2-135M: probability ~0.003 of opening a
JSON call on questions that need a tool), so ``"auto"`` is not decided in free text. It is decided at one
constrained point: the name of a call whose options are the tools plus one pseudo-tool, :data:`NO_CALL`
(``"respond"``, with ``{}`` arguments), meaning "no call: answer in text". The system message lists the tools and
says how to pick ``respond``.

1. **The decision** (:func:`wants_call`, engines with a backbone to score with): the model's log-probability of
   each option's name after the call's head (``{"name": "``), summed over the name's tokens; the margin
   log P(respond) - log sum P(tools) on the request is compared with the same margin when the conversation is
   replaced by a content-free question (:data:`NULL_QUESTION`; contextual calibration, Zhao et al. 2021): the model
   calls when the question moves it towards the tools. Both numbers are the model's own scores on this request; no
   default, no tuned threshold. (The raw margin alone, i.e. the greedy choice under the template, called a tool on
   13 of 20 no-tool questions on SmolLM2; calibrated, 8 of 20, with every tool question still calling; see
   docs/serving_tools.md.) An engine without a backbone (a test double) decodes the choice under the template and
   takes what it decodes.
2. **A call**: decoded under the tools' call template (the same as ``"required"``: the name by the model's scores
   among the tools, the arguments under the tool's schema) and returned as ``tool_calls``. **No call**, or a call
   that repeats one already answered (below): the reply is decoded as free text from the conversation *without* the
   tool instructions in view and returned as content.

Budget: the choice decode may use up to ``max(max_tokens, 256)`` tokens (a small ``max_tokens`` must not forbid a
call: the no-call option alone takes ~10 tokens on SmolLM2); ``max_tokens`` bounds the text reply. ``usage``
sums both decodes' prompt and completion tokens (both were computed); ``agentkit_stats`` are the last decode's.

The repeat rule: a decoded call identical (same name; same arguments as canonical JSON: key order and spacing do
not matter) to a call of an earlier assistant message that already has a ``tool`` result is not returned again;
the reply is decoded as text (the SDK's ``on_repeat="answer"``, ``agentkit/sdk/_repeat.py``). It applies to
``"auto"`` only: a client that forces a call (``"required"`` or a named tool) gets the call it asked for.
"""

from __future__ import annotations

import json
import math
from typing import Any

NO_CALL = "respond"
NO_CALL_NOTE = ('If no tool is needed, reply with only {{"name": "{name}", "arguments": {{}}}} '
                "and then answer in plain text.")


def no_call_name(tool_names: list[str] | frozenset[str]) -> str:
    """:data:`NO_CALL`, or (when a tool already has that name) the first of ``respond_``, ``respond__``, ... that
    is not a tool's name."""
    name = NO_CALL
    while name in tool_names:
        name += "_"
    return name


def call_key(name: str, args: Any) -> str:
    """A canonical form of a call (the SDK's ``_repeat.call_key``): key order and spacing do not matter."""
    return name + " " + json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def answered_calls(messages: list[Any]) -> frozenset[str]:
    """The :func:`call_key` of every call in an assistant message that a later ``tool`` message answered (by its
    ``tool_call_id``; a tool message without a known id answers the calls of the last assistant message)."""
    pending: dict[str | None, str] = {}
    last: list[str] = []
    done: set[str] = set()
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            last = []
            for c in m.tool_calls:
                key = call_key(c.function.name, _args(c.function.arguments))
                pending[c.id] = key
                last.append(key)
        elif m.role in ("tool", "function"):
            if m.tool_call_id is not None and m.tool_call_id in pending:
                done.add(pending[m.tool_call_id])
            else:  # no id, or one the calls do not carry: it answers the last assistant message's calls
                done.update(last)
    return frozenset(done)


def _args(a: str | dict[str, Any]) -> Any:
    if isinstance(a, dict):
        return a
    try:
        return json.loads(a)
    except json.JSONDecodeError:
        return a


# -- the decision by the model's calibrated scores (engines with a backbone to score with) ------------------------
NULL_QUESTION = "N/A"  # the content-free question the scores are calibrated against


def name_scores(engine: Any, messages: list[dict[str, str]], names: list[str], head: str,
                slot: Any = None) -> dict[str, float]:
    """log P(name, then its closing quote | the prompt and the call's ``head``) for each name, with the base
    weights at temperature 1 (the model's own distribution): one pass over prompt + head, then one short pass per
    name over its tokens on that cache (cropped back after each)."""
    import torch

    bb = engine.backbone if slot is None else slot.wrap(engine.backbone)
    with engine.lock:  # the tokenizer is shared with concurrent requests
        base = list(engine.encode_prompt(messages)) + engine.tokenizer.encode(head, add_special_tokens=False)
        conts = {n: engine.tokenizer.encode(n + '"', add_special_tokens=False) for n in names}
    cache = bb.new_cache()
    first = torch.log_softmax(bb.encode(base, cache, rows=[len(base) - 1]).float(), dim=-1)[0]
    out = {}
    for n, cont in conts.items():
        lp = float(first[cont[0]])
        if len(cont) > 1:
            logp = torch.log_softmax(bb.encode(cont[:-1], cache, rows=list(range(len(cont) - 1))).float(), dim=-1)
            lp += float(logp.gather(-1, torch.tensor(cont[1:], dtype=torch.long)[:, None]).sum())
            bb.crop(cache, len(base))
        out[n] = lp
    return out


def pick_tool(engine: Any, messages: list[dict[str, str]], names: list[str], head: str, slot: Any = None) -> str:
    """The tool whose whole name the model scores highest (:func:`name_scores`), for ``"required"`` and an
    ``"auto"`` call. Greedy decoding under the call template chose by the first token where names differ (the names'
    shared start pinned), which is not the same: on 10 BFCL questions with 2-4 functions the greedy choice took
    ``math.triangle_area_base_height`` for Heron's formula, the whole name's score ``math.triangle_area_heron``."""
    scores = name_scores(engine, messages, names, head, slot)
    return max(names, key=lambda n: scores[n])


def no_call_margin(scores: dict[str, float], no_call: str) -> float:
    """log P(no call) - log P(any tool) from :func:`name_scores`."""
    tools = [v for k, v in scores.items() if k != no_call]
    return scores[no_call] - logsumexp(tools)


def logsumexp(xs: list[float]) -> float:
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def wants_call(engine: Any, messages: list[dict[str, str]], names: list[str], no_call: str, head: str,
               slot: Any = None) -> tuple[bool, dict[str, float]]:
    """Whether the model calls a tool: its margin of "no call" over the tools on the request, against the same
    margin with the conversation replaced by a content-free question (:data:`NULL_QUESTION`; contextual
    calibration: what the question adds to the model's preference, not the preference the tool list alone gives
    it). Returns the decision and ``{"no_call_margin", "no_call_margin_null", "tool"}`` (for ``agentkit_stats``;
    ``tool``: the tool the model scores highest, :func:`pick_tool`'s choice)."""
    options = list(names) + [no_call]
    null = [m for m in messages[:1] if m["role"] == "system"] + [{"role": "user", "content": NULL_QUESTION}]
    scores = name_scores(engine, messages, options, head, slot)
    asked = no_call_margin(scores, no_call)
    base = no_call_margin(name_scores(engine, null, options, head, slot), no_call)
    best = max(names, key=lambda n: scores[n])
    return asked - base <= 0, {"no_call_margin": round(asked, 4), "no_call_margin_null": round(base, 4), "tool": best}
