"""A ``response_format`` output settled against the user's text, as ``extract`` settles its own.

A request whose ``response_format`` is grounded in the last user message's text (the schema prompt, on by default)
decodes under the grounded template, as ``extract`` does. ``extract`` then settles the output
(:func:`agentkit.steps.grounded.settle`): each place in the text gives one field its value, the model's scores
choose among the text's values, and an optional field the model scores null above comes back null. The server does
the same here, on the worker that decoded, with the same engine, so the server and ``extract`` give the same
output for the same schema and text.

Settling rewrites values after they were decoded, so it applies where the response is sent whole: not to a stream
(its tokens left as they were written), nor to a request for ``logprobs`` (they describe the decoded tokens).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from agentkit.constrain.canonical import canonical_json
from agentkit.constrain.ground import Grounding
from agentkit.engine.stats import GenerationResult
from agentkit.steps import grounded as grounded_
from agentkit.steps.grounded import GroundedOutput
from agentkit.steps.kinds import OutputError

from .plan import RequestPlan

log = logging.getLogger(__name__)


def settled(engine: Any, plan: RequestPlan, result: GenerationResult, grounding: Grounding | None,
            slot: Any = None) -> tuple[GenerationResult, list[str]]:
    """``result`` with its output settled against the plan's source text, and the fields settling changed ([]:
    none; the result is returned as it is). ``grounding``: what grounding did to the plan's schema (the
    preparer's, with the template); ``slot``: the request's seat at the batcher, whose forwards the scoring joins."""
    sj = plan.schema
    value = result.value
    if sj is None or sj.source is None or grounding is None or not isinstance(value, dict):
        return result, []
    spec = GroundedOutput(sj.schema, sj.source, sj.grounded)
    spec.grounding = grounding
    new, _ = grounded_.settle(engine, plan.messages, value, spec, slot=slot)
    changed = [k for k in {**value, **new} if k not in value or k not in new or value[k] != new[k]]
    if not changed:
        return result, []
    try:
        spec.validate(new)  # settling chooses among the grounded template's values: valid by construction
    except OutputError as e:
        log.warning("a settled response_format output does not validate (%s); the decoded one is sent", e)
        return result, []
    text = canonical_json(new, sj.schema, sj.style)
    return dataclasses.replace(result, text=text, value=new, token_ids=_tokens(engine, text)), changed


def _tokens(engine: Any, text: str) -> list[int]:
    """The settled text's tokens (what ``agentkit_stats.token_ids`` reports for the returned content)."""
    with engine.lock:  # the tokenizer is shared with concurrent requests
        return list(engine.tokenizer.encode(text, add_special_tokens=False))
