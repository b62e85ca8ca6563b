"""Which call, if any: the model's own scores over a call's name options, shared by the SDK's tool step and the
server's ``tool_choice`` (the shared step's decision, ``agentkit/steps/decision.py``).

A small model's greedy choice under a call template is decided by the first token where the names differ, and it
rarely chooses "no call" on its own. Here both choices come from the model's log-probability of each option's
*whole* name after the call's head (``{"name": "``), with the base weights at temperature 1:

- :func:`name_scores`: log P(each option's whole name | the messages and the call's head);
- :func:`calibrated`: call or not, by the margin log P(no call) - log P(any tool) on the request compared with the
  same margin when the conversation is replaced by a content-free question (:func:`null_messages`,
  :data:`NULL_QUESTION`; contextual calibration, Zhao et al. 2021): the model calls when the question moves it
  towards the tools. Both numbers are the model's scores on this request; no default, no tuned threshold.

The rules that ask for these scores (which tool among several, call or answer, the rules after a failure or a
result) are the shared step's decision, :mod:`agentkit.steps.decision`.

``engine``: anything with ``backbone`` (``new_cache``/``encode``/``crop``), ``tokenizer``, ``encode_prompt`` and
``lock`` (:class:`agentkit.engine.Engine`); :func:`can_score` says whether an object has them.
"""

from __future__ import annotations

import math
from typing import Any

NULL_QUESTION = "N/A"  # the content-free question the scores are calibrated against


def name_scores(engine: Any, messages: list[dict[str, str]], names: list[str], head: str,
                slot: Any = None) -> dict[str, float]:
    """log P(name, then its closing quote | the prompt and the call's ``head``) for each name, with the base
    weights at temperature 1 (the model's own distribution): one pass over prompt + head, then one pass over every
    name's tokens side by side on that cache (:func:`~agentkit.engine.backbone.continuation_logits`). The prompt
    pass goes through the engine's prefix cache (:func:`~agentkit.engine.prefix.cached_prompt_pass`): an agent's
    decision reads the blocks its last step stored, and the step after it those the decision stored."""
    import torch

    from .engine.backbone import continuation_logits
    from .engine.prefix import cached_prompt_pass

    bb = engine.backbone if slot is None else slot.wrap(engine.backbone)
    with engine.lock:  # the tokenizer is shared with concurrent requests
        base = list(engine.encode_prompt(messages)) + engine.tokenizer.encode(head, add_special_tokens=False)
        conts = {n: engine.tokenizer.encode(n + '"', add_special_tokens=False) for n in names}
    cache = bb.new_cache()  # the prompt's blocks come from (and go to) the engine's prefix cache when it has one
    last, _ = cached_prompt_pass(bb, cache, base, getattr(engine, "prefixes", None),
                                 getattr(engine, "chunking", 0))
    first = torch.log_softmax(last.float(), dim=-1)
    longer = [n for n, cont in conts.items() if len(cont) > 1]
    rest = dict(zip(longer, continuation_logits(bb, cache, [conts[n][:-1] for n in longer]), strict=True))
    out = {}
    for n, cont in conts.items():
        lp = float(first[cont[0]])
        if n in rest:
            logp = torch.log_softmax(rest[n].float(), dim=-1)
            lp += float(logp.gather(-1, torch.tensor(cont[1:], dtype=torch.long)[:, None]).sum())
        out[n] = lp
    return out


def no_call_margin(scores: dict[str, float], no_call: str) -> float:
    """log P(no call) - log P(any tool) from :func:`name_scores`."""
    tools = [v for k, v in scores.items() if k != no_call]
    return scores[no_call] - logsumexp(tools)


def logsumexp(xs: list[float]) -> float:
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def null_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The calibration baseline's messages: the system message (the tools), then :data:`NULL_QUESTION`."""
    return [m for m in messages[:1] if m["role"] == "system"] + [{"role": "user", "content": NULL_QUESTION}]


def calibrated(scores: dict[str, float], null_scores: dict[str, float] | None, names: list[str],
               no_call: str, margin: bool = True) -> tuple[bool, dict[str, Any]]:
    """The decision from the request's scores and the baseline's (the scores on :func:`null_messages`): call when
    the request's margin of ``no_call`` over the tools is at most the baseline's (``margin``; else at most 0, the
    raw margin). Returns it and ``{"no_call_margin", "no_call_margin_null", "tool"}``. ``tool``: the tool whose score
    rises most over the baseline's (the choice between tools calibrated either way: the content-free question's
    scores carry a prior for the first tools listed; on the user-tool benchmark's first decisions the first tool was
    right on 0.82 of the 90 tasks of its dev, held-out and fresh splits that need one, against 0.46 by the request's
    scores alone, ``evals/user_tools_decide.py``); without a baseline, the tool it scores highest."""
    asked = no_call_margin(scores, no_call)
    base = 0.0 if null_scores is None or not margin else no_call_margin(null_scores, no_call)
    best = calibrated_pick(scores, null_scores, names)
    return asked - base <= 0, {"no_call_margin": round(asked, 4), "no_call_margin_null": round(base, 4), "tool": best}


def calibrated_pick(scores: dict[str, float], null_scores: dict[str, float] | None, names: list[str]) -> str:
    """The one of ``names`` whose score rises most over the baseline's (without a baseline, the highest)."""
    return max(names, key=lambda n: scores[n] - (null_scores[n] if null_scores is not None else 0.0))


def calibrates(engine: Any) -> bool:
    """Whether the call margin on ``engine``'s weights is read against the content-free question's: yes, unless a
    LoRA merged into them declares otherwise (``AdapterConfig.calibrate``). The loop adapter declares raw margins
    (the tool is picked calibrated either way, and a request whose typed values fill a tool's arguments makes a
    call, :mod:`agentkit.steps.decision`): on the user-tool benchmark's 138 seen tasks (``evals/user_tools_decide.py``)
    the first decision called on 0.800 of those that need a call and held back on 0.875 of those that need none,
    calibrated on 0.967 and 0.625; on the agent loop's 160 tasks task success was 0.544 against 0.488, paired
    (``evals/agent_loop_grounding.py --calibrate``, docs/agent_loop.md)."""
    lm = getattr(engine, "lm", None)
    return bool((getattr(lm, "meta", None) or {}).get("lora_config", {}).get("calibrate", True))


def can_score(engine: Any) -> bool:
    """Whether ``engine`` has what :func:`name_scores` needs: the :class:`~agentkit.engine.faces.Scoring` face (an
    engine without a backbone, a test double, does not)."""
    from .engine.faces import Scoring

    return isinstance(engine, Scoring)
