"""``tool_choice: "auto"``: the model's decision between a tool call and a text reply, and the repeat rule.

A small model almost never starts a free-text reply with a call (SmolLM2-135M: probability ~0.003 of opening a
JSON call on questions that need a tool), so ``"auto"`` is not decided in free text. It is decided at one
constrained point: the name of a call whose options are the tools plus one pseudo-tool, :data:`NO_CALL`
(``"respond"``, with ``{}`` arguments), meaning "no call: answer in text". The system message lists the tools and
says how to pick ``respond``.

1. **The decision** (:func:`agentkit.steps.decision.decide`, engines with a backbone to score with): the model's log-probability of
   each option's name after the call's head (``{"name": "``), summed over the name's tokens; the margin
   log P(respond) - log sum P(tools) on the request is compared with the same margin when the conversation is
   replaced by a content-free question (:data:`NULL_QUESTION`; contextual calibration, Zhao et al. 2021): the model
   calls when the question moves it towards the tools, on weights that declare calibrated decisions (the weights as
   loaded); on the loop adapter, which declares raw ones, when the margin is below 0; before any call, also when the
   request's typed values fill a tool's arguments (:func:`agentkit.steps.unserved.covering`). No tuned threshold. (The raw margin alone, i.e. the greedy choice under the template, called a tool on
   13 of 20 no-tool questions on SmolLM2; calibrated, 8 of 20, with every tool question still calling; see
   docs/serving_tools.md.) An engine without a backbone (a test double) decodes the choice under the template and
   takes what it decodes.
2. **A call**: decoded under the tools' call template (the same as ``"required"``: the name by the model's scores
   among the tools, the arguments under the tool's schema) and returned as ``tool_calls``. **No call**, a call
   that repeats one already answered (below), or a call that takes none of its argument values from the
   conversation's user and tool messages (``agentkit.toolcall.call_grounded``: the model's calls on questions that
   need no tool invent their arguments; on the 40-question check the decision went from 0.80 to 0.95 right,
   docs/serving_tools.md): the reply is decoded as free text from the conversation *without* the tool instructions
   in view and returned as content.

Budget: the choice decode may use up to ``max(max_tokens, 256)`` tokens (a small ``max_tokens`` must not forbid a
call: the no-call option alone takes ~10 tokens on SmolLM2); ``max_tokens`` bounds the text reply. ``usage``
sums both decodes' prompt and completion tokens (both were computed); ``agentkit_stats`` are the last decode's.

The repeat rule: a decoded call identical (same name; same arguments as canonical JSON: key order and spacing do
not matter) to a call of an earlier assistant message that already has a ``tool`` result (not a failure,
:func:`tool_failed`) is not returned again;
the reply is decoded as text (the SDK's ``on_repeat="answer"``, ``agentkit/sdk/_repeat.py``). It applies to
``"auto"`` only: a client that forces a call (``"required"`` or a named tool) gets the call it asked for.

The retry rule: when the conversation ends with a ``tool`` message that reports a failure, ``"auto"`` makes a call
(the decision is not asked; :func:`retrying`), as the SDK's ``after_failure="retry"``: on the agent-loop
benchmark's fail-once tasks the SDK recovered more often than when the model could answer instead.
"""

from __future__ import annotations

from agentkit.decide import NULL_QUESTION, logsumexp, name_scores, no_call_margin
from agentkit.toolcall import NO_CALL, NO_CALL_NOTE, call_key, no_call_name

from .conversation import RETRY_SUFFIX, answered_calls, call_arguments, retrying, tool_failed

__all__ = ["NO_CALL", "NO_CALL_NOTE", "NULL_QUESTION", "RETRY_SUFFIX", "answered_calls", "call_arguments", "call_key",
           "logsumexp", "name_scores", "no_call_margin", "no_call_name", "retrying", "tool_failed"]
