"""An extraction's output grounded in its text: the template (:mod:`agentkit.constrain.ground`) and abstention.

:class:`GroundedOutput` is an :class:`~agentkit.steps.kinds.OutputSpec` whose extract template is grounded in one
source text: string values are spans of it, numbers the numbers it writes, dates its dates in ISO form, currency
codes the ones it names; an optional field it has no value for is left out; a required one is named in
:attr:`GroundedOutput.ungrounded`. Validation is the output type's own (the grounded template is a subset of it).

:func:`settle`: each place in the text gives one field its value; a number, date or currency field takes the
value the model scores highest among the text's (or null); an optional field keeps a value only where the model
scores it above null (the whole value's log-probability after the output so far, :func:`value_scores`, with the
weights that decoded it). A field without a value is None (left out, for a schema without null).
"""

from __future__ import annotations

import json
from typing import Any

from ..constrain.ground import Grounding, allows_null, check_option, grounded_template, occurrences
from ..constrain.nodes import Template
from .kinds import OutputSpec, compile_template

SETTLE = True  # extract settles a grounded output against the text (:func:`settle`); the benchmark's nosettle row
NULL_MARGIN = 0.0  # nats: an optional string's value is kept when log P(value) + NULL_MARGIN >= log P(null)


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


class ValueScorer:
    """Log-probabilities of continuations after a prompt and a head (the assistant's text so far), with
    ``engine``'s weights at temperature 1. The prompt is encoded once (through the engine's prefix cache); each
    :meth:`scores` call encodes its head and continuations on that cache and crops back to the prompt."""

    def __init__(self, engine: Any, messages: list[dict[str, str]]) -> None:
        from ..engine.prefix import cached_prompt_pass

        self.engine, self.bb = engine, engine.backbone
        with engine.lock:
            self.prompt = list(engine.encode_prompt(messages))
        self.cache = self.bb.new_cache()
        self.last, _ = cached_prompt_pass(self.bb, self.cache, self.prompt, getattr(engine, "prefixes", None),
                                          getattr(engine, "chunking", 0))

    def scores(self, head: str, conts: list[str]) -> list[list[float]]:
        """Each continuation's token log-probabilities after the prompt and ``head``."""
        import torch

        with self.engine.lock:
            head_ids = self.engine.tokenizer.encode(head, add_special_tokens=False)
            ids = [self.engine.tokenizer.encode(c, add_special_tokens=False) for c in conts]
        bb, n = self.bb, len(self.prompt)
        last = bb.encode(head_ids, self.cache, rows=[len(head_ids) - 1])[-1] if head_ids else self.last
        first = torch.log_softmax(last.float().reshape(-1), dim=-1)
        out = []
        for cont in ids:
            lps = [float(first[cont[0]])]
            if len(cont) > 1:
                logp = torch.log_softmax(bb.encode(cont[:-1], self.cache, rows=list(range(len(cont) - 1))).float(),
                                         dim=-1)
                lps += logp.gather(-1, torch.tensor(cont[1:], dtype=torch.long)[:, None]).flatten().tolist()
                bb.crop(self.cache, n + len(head_ids))
            out.append(lps)
        bb.crop(self.cache, n)
        return out


def value_scores(engine: Any, messages: list[dict[str, str]], head: str, conts: list[str]) -> list[list[float]]:
    """The log-probability of each token of each continuation in ``conts`` after the prompt of ``messages`` and
    ``head`` (:class:`ValueScorer`; ``engine`` may also be a scorer already holding the prompt)."""
    scorer = engine if isinstance(engine, ValueScorer) else ValueScorer(engine, messages)
    return scorer.scores(head, conts)


def settle(engine: Any, messages: list[dict[str, str]], value: dict[str, Any], spec: GroundedOutput,
           margin: float | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``value`` (a JSON object as the template wrote it, keys in order) with its top-level fields settled against
    the text, required fields first, then the optional ones, each in order:

    1. each place in the text gives one field its value (:func:`~agentkit.constrain.ground.occurrences`): an
       optional field whose value the text only gives where an earlier field took it (a due date copied from the
       issue date) has no value;
    2. a number, date or currency field takes the value the model scores highest (the whole value's
       log-probability after the output so far) among the text's values still free, and null for an optional
       field that allows it;
    3. an optional string field keeps its value only when the model scores it above null (``margin`` nats; None:
       :data:`NULL_MARGIN`).

    A field with no value becomes None where the schema allows null, and is left out otherwise. Returns the new
    value and, per field, what decided it."""
    g = spec.grounding
    if g is None:
        return value, {}
    margin = NULL_MARGIN if margin is None else margin
    scorer = _LazyScorer(engine, messages)
    props = g.schema.get("properties") or {}
    optional = set(spec.optional_fields())
    out, used, facts = dict(value), [], {}
    for name in sorted(out, key=lambda k: k in optional):  # required fields first, each group in order
        kind, v = g.kinds.get("/" + name, ""), out[name]
        optional_ = name in optional
        if kind in ENUM_KINDS and "/" + name not in g.spans:
            options = [c for c in _enum(props.get(name)) if _free(c, g.text, kind, used)]
            options += [None] if optional_ and allows_null(props.get(name) or {}) else []
            if options and (len(options) > 1 or options[0] != v):
                facts[name] = _scores(scorer, out, name, options)
                v = _best(options, facts[name], v)
            elif not options and optional_:
                v = None
        if optional_ and kind and kind not in ENUM_KINDS and _scalar(v):
            if _free(v, g.text, kind, used) is None:
                facts[name], v = "taken", None
            else:
                facts[name] = _scores(scorer, out, name, [v, None])
                if facts[name]["null"] > facts[name][_key(v)] + margin:
                    v = None
        place = _free(v, g.text, kind, used) if _scalar(v) else None
        if place is not None:
            used.append(place)
        _put(out, name, v, allows_null(props.get(name) or {}) or not optional_)
    return {k: out[k] for k in value if k in out}, facts


ENUM_KINDS = ("number", "date", "currency")  # kinds whose grounded values are a list: the best one is picked


def _best(options: list[Any], scores: dict[str, float], decoded: Any) -> Any:
    """The best-scoring option (the decoded value on a tie)."""
    return max(options, key=lambda c: (scores[_key(c)], c == decoded))


def _key(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


def _scalar(v: Any) -> bool:
    return v is not None and not isinstance(v, list | dict | bool)


def _enum(sub: Any) -> list[Any]:
    if not isinstance(sub, dict):
        return []
    for b in [sub, *(sub.get("anyOf") or sub.get("oneOf") or [])]:
        if isinstance(b, dict) and isinstance(b.get("enum"), list):
            return list(b["enum"])
    return []


def _free(v: Any, text: str, kind: str, used: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The first place ``text`` gives ``v`` that no earlier field took (None: none)."""
    for a, b in occurrences(v, text, kind if kind in ENUM_KINDS else "string"):
        if all(b <= x or a >= y for x, y in used):
            return a, b
    return None


def _put(out: dict[str, Any], name: str, v: Any, keep_null: bool) -> None:
    if v is None and not keep_null:
        out.pop(name, None)
    else:
        out[name] = v


class _LazyScorer:
    """A :class:`ValueScorer` built on first use (a settle that scores nothing encodes no prompt)."""

    def __init__(self, engine: Any, messages: list[dict[str, str]]) -> None:
        self.engine, self.messages, self.scorer = engine, messages, None

    def __call__(self, head: str, conts: list[str]) -> list[list[float]]:
        if self.scorer is None and not isinstance(self.engine, ValueScorer) and hasattr(self.engine, "backbone"):
            self.scorer = ValueScorer(self.engine, self.messages)
        return value_scores(self.scorer or self.engine, self.messages, head, conts)


def _scores(scorer: _LazyScorer, out: dict[str, Any], name: str, options: list[Any]) -> dict[str, float]:
    """log P(option) for each option of field ``name`` after the output so far (the fields before it, as
    written), keyed by the option's JSON text."""
    keys = list(out)
    before = {k: out[k] for k in keys[:keys.index(name)]} if name in keys else dict(out)
    text = json.dumps(before, ensure_ascii=False)
    head = text[:-1] + (", " if before else "") + json.dumps(name) + ":"
    lps = scorer(head, [" " + _key(o) for o in options])
    return {_key(o): round(sum(lp), 4) for o, lp in zip(options, lps)}
