"""An extraction's output grounded in its text: the template (:mod:`agentkit.constrain.ground`) and abstention.

:class:`GroundedOutput` is an :class:`~agentkit.steps.kinds.OutputSpec` whose extract template is grounded in one
source text: string values are spans of it, numbers the numbers it writes, dates its dates in ISO form, currency
codes the ones it names; an optional field it has no value for is left out; a required one is named in
:attr:`GroundedOutput.ungrounded`. Validation is the output type's own (the grounded template is a subset of it).

:func:`abstain`: an optional field that came back with a value is set to None (left out, for a schema without
null) when the model scores ``null`` there above the value: log P(`` null``) against the value's mean token
log-probability plus :data:`NULL_MARGIN`, both after the output's text up to the field's key, with the weights
that decoded it (:func:`value_scores`).
"""

from __future__ import annotations

import json
from typing import Any

from ..constrain.ground import Grounding, check_option, grounded_template
from ..constrain.nodes import Template
from .kinds import OutputSpec, compile_template

NULL_MARGIN = 0.0  # nats: null wins when log P(null) > mean log P(value token) + NULL_MARGIN


class GroundedOutput(OutputSpec):
    """``output_type`` with its extract template grounded in ``text`` (``grounded``: the call's option, see
    :func:`agentkit.constrain.ground.ground_schema`)."""

    def __init__(self, output_type: Any, text: str, grounded: bool | None = None) -> None:
        super().__init__(output_type)
        self.text = text
        self.grounded = check_option(grounded, "grounded")
        self.grounding: Grounding | None = None

    def template(self, style: str | None, strict: bool) -> Template:
        template, self.grounding = grounded_template(self.schema, self.text,
                                                     lambda s: compile_template(s, style, strict),
                                                     grounded=self.grounded)
        return template

    def template_key(self) -> str:
        return json.dumps([self.schema, self.text, self.grounded], sort_keys=True, default=str)

    @property
    def ungrounded(self) -> list[str]:
        """The required fields the text has no value for (after the template was built)."""
        return list(self.grounding.ungrounded) if self.grounding else []

    def optional_fields(self) -> list[str]:
        """The top-level properties an output may leave out or set to null."""
        props = self.schema.get("properties") or {}
        required = set(self.schema.get("required") or ())
        return [k for k in props if k not in required]


def value_scores(engine: Any, messages: list[dict[str, str]], head: str, conts: list[str]) -> list[list[float]]:
    """The log-probability of each token of each continuation in ``conts`` after the prompt of ``messages`` and
    ``head`` (the assistant's text so far), with ``engine``'s weights at temperature 1: one pass over the prompt
    (through the engine's prefix cache) and ``head``, then one short pass per continuation, cropped back after."""
    import torch

    from ..engine.prefix import cached_prompt_pass

    bb = engine.backbone
    with engine.lock:
        prompt = list(engine.encode_prompt(messages))
        head_ids = engine.tokenizer.encode(head, add_special_tokens=False)
        ids = [engine.tokenizer.encode(c, add_special_tokens=False) for c in conts]
    cache = bb.new_cache()
    last, _ = cached_prompt_pass(bb, cache, prompt, getattr(engine, "prefixes", None), getattr(engine, "chunking", 0))
    if head_ids:
        last = bb.encode(head_ids, cache, rows=[len(head_ids) - 1])[-1]
    base = len(prompt) + len(head_ids)
    first = torch.log_softmax(last.float().reshape(-1), dim=-1)
    out = []
    for cont in ids:
        lps = [float(first[cont[0]])]
        if len(cont) > 1:
            logp = torch.log_softmax(bb.encode(cont[:-1], cache, rows=list(range(len(cont) - 1))).float(), dim=-1)
            lps += logp.gather(-1, torch.tensor(cont[1:], dtype=torch.long)[:, None]).flatten().tolist()
            bb.crop(cache, base)
        out.append(lps)
    return out


def abstain(engine: Any, messages: list[dict[str, str]], value: dict[str, Any], fields: list[str],
            nullable: set[str], margin: float = NULL_MARGIN) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    """``value`` (a JSON object as the template wrote it, keys in order) with each of ``fields`` that holds a
    value set to None (``nullable``) or left out, where the model scores null above it. Returns the new value and
    the scores per field (``null``, ``value``: log P(null), mean log P per value token)."""
    out, facts = dict(value), {}
    for name in fields:
        if out.get(name) is None:
            continue
        before = {k: out[k] for k in list(out)[:list(out).index(name)]}
        text = json.dumps(before, ensure_ascii=False)
        head = text[:-1] + (", " if before else "") + json.dumps(name) + ":"
        null, val = value_scores(engine, messages, head, [" null", " " + json.dumps(out[name], ensure_ascii=False)])
        facts[name] = {"null": round(sum(null), 4), "value": round(sum(val) / len(val), 4)}
        if sum(null) > sum(val) / len(val) + margin:
            if name in nullable:
                out[name] = None
            else:
                del out[name]
    return out, facts
