"""An extraction's output grounded in its text: the template (:mod:`agentkit.constrain.ground`) and abstention.

:class:`GroundedOutput` is an :class:`~agentkit.steps.kinds.OutputSpec` whose extract template is grounded in one
source text: string values are spans of it, numbers the numbers it writes, dates its dates in ISO form, currency
codes the ones it names; an optional field it has no value for is left out; a required one is named in
:attr:`GroundedOutput.ungrounded`. Validation is the output type's own (the grounded template is a subset of it).

:func:`settle`: each place in the text gives one field its value; a number, date, currency or identifier field
takes the value the model scores highest among the text's (or null); an optional field keeps a value only where the model
scores it above null (the whole value's log-probability after the output so far, :func:`value_scores`, with the
weights that decoded it). A field without a value is None (left out, for a schema without null).
"""

from __future__ import annotations

import json
import math
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
        # what a server needs to ground and settle it again (the SDK's HTTP backend sends them: agentkit.grounded_in)
        template.meta.update(grounded_in=self.text, grounded_option=self.grounded)
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
    ``engine``'s weights at temperature 1. Each :meth:`scores` call encodes its head after the prompt as decoding's
    passes do (on a row-exact engine, each position's logits are the AR step's at it, on the weights that decoded
    the output), from the longest token prefix it shares with what the cache holds, then its continuations side by
    side after it (:func:`~agentkit.engine.backbone.continuation_logits`).

    What the cache starts from: the keys and values the decode of this prompt left in the engine
    (``DecodeConfig.keep_cache``, :mod:`agentkit.engine.kept`), where there are any. A head is then spelled in the
    decode's own tokens as far as they write it (:func:`spelled_prefix`; the tokenizer's tokens after that), and
    the positions it shares with the decoded output are copied, not encoded (the prompt and the template's pinned
    opening as the decode's prompt pass wrote them). Else, or where the last head shares more, the cache it has,
    which holds the prompt (one pass, through the engine's prefix cache) and the last head."""

    def __init__(self, engine: Any, messages: list[dict[str, str]], slot: Any = None) -> None:
        """``slot``: the request's seat at the engine's batcher (the server's), whose forwards its passes join."""
        self.engine, self.bb = engine, engine.backbone if slot is None else slot.wrap(engine.backbone)
        with engine.lock:
            self.prompt = list(engine.encode_prompt(messages))
        kept = getattr(engine, "kept", None)
        self.source = kept.take(self.prompt) if kept is not None else None  # the decode's cache (read only)
        self.cache: Any = None  # holds the prompt and ``head``; ``last``: the logits after ``head``'s last token
        self.head: list[int] = []
        self.last: Any = None

    def scores(self, head: str, conts: list[str]) -> list[list[float]]:
        """Each continuation's token log-probabilities after the prompt and ``head``."""
        import torch

        from ..engine.backbone import continuation_logits

        with self.engine.lock:
            head_ids = self._head_ids(head)
            ids = [self.engine.tokenizer.encode(c, add_special_tokens=False) for c in conts]
        first = torch.log_softmax(self._extend(head_ids).float().reshape(-1), dim=-1)
        longer = [i for i, cont in enumerate(ids) if len(cont) > 1]
        rest = dict(zip(longer, continuation_logits(self.bb, self.cache, [ids[i][:-1] for i in longer]), strict=True))
        out = []
        for i, cont in enumerate(ids):
            lps = [float(first[cont[0]])]
            if i in rest:
                logp = torch.log_softmax(rest[i].float(), dim=-1)
                lps += logp.gather(-1, torch.tensor(cont[1:], dtype=torch.long)[:, None]).flatten().tolist()
            out.append(lps)
        return out

    def _head_ids(self, head: str) -> list[int]:
        """``head``'s tokens: the decode's own for the longest start of ``head`` they spell (the model's spelling of
        what it wrote, whose keys and values the decode's cache holds), the tokenizer's for the rest."""
        tokenize = self.engine.tokenizer.encode
        vocab = getattr(self.engine, "vocab", None)
        if self.source is None or vocab is None:
            return tokenize(head, add_special_tokens=False)
        data = head.encode()
        spelt, at = spelled_prefix(self.source.tokens[len(self.prompt):], vocab.token_bytes, data)
        rest = data[at:].decode()
        return spelt + (tokenize(rest, add_special_tokens=False) if rest else [])

    def _extend(self, head: list[int]) -> Any:
        """Make the cache hold the prompt and ``head``, from the longest prefix of ``head`` the decode's cache or
        this one holds (at least its last token is encoded: its logits are the ones wanted); the logits after
        ``head``'s last token (the prompt's, for no head)."""
        if self.cache is not None and head == self.head:
            return self.last
        if not head:
            return self._prompt_pass()
        keep = min(_common(head, self.head), len(head) - 1) if self.cache is not None else -1
        n = len(self.prompt)
        if self.source is not None and (mine := min(_common(head, self.source.tokens[n:]), len(head) - 1)) > keep:
            self.cache, keep = self.source.prefix(n + mine), mine
        elif self.cache is None:
            self._prompt_pass()
            keep = 0
        self.bb.crop(self.cache, n + keep)
        self.head = list(head)
        self.last = self.bb.encode(head[keep:], self.cache, rows=[-1])[-1]
        return self.last

    def _prompt_pass(self) -> Any:
        """A new cache holding the prompt (its pass through the engine's prefix cache); the logits after it."""
        from ..engine.prefix import cached_prompt_pass

        self.cache = self.bb.new_cache()
        self.last, _ = cached_prompt_pass(self.bb, self.cache, self.prompt, getattr(self.engine, "prefixes", None),
                                          getattr(self.engine, "chunking", 0))
        self.head = []
        return self.last


def spelled_prefix(tokens: Any, token_bytes: list[bytes | None], data: bytes) -> tuple[list[int], int]:
    """The longest run of ``tokens`` from their start whose bytes begin ``data`` and end at a character's end, and
    how many bytes of ``data`` it spells."""
    at, n, ends = 0, 0, [(0, 0)]
    for t in tokens:
        b = token_bytes[t] if 0 <= t < len(token_bytes) else None
        if not b or data[at:at + len(b)] != b:
            break
        at, n = at + len(b), n + 1
        if at == len(data) or data[at] & 0xC0 != 0x80:  # not inside a character's UTF-8 bytes
            ends.append((n, at))
    n, at = ends[-1]
    return list(tokens[:n]), at


def _common(a: Any, b: Any) -> int:
    """How many tokens ``a`` and ``b`` share from their start."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def value_scores(engine: Any, messages: list[dict[str, str]], head: str, conts: list[str]) -> list[list[float]]:
    """The log-probability of each token of each continuation in ``conts`` after the prompt of ``messages`` and
    ``head`` (:class:`ValueScorer`; ``engine`` may also be a scorer already holding the prompt)."""
    scorer = engine if isinstance(engine, ValueScorer) else ValueScorer(engine, messages)
    return scorer.scores(head, conts)


def settle(engine: Any, messages: list[dict[str, str]], value: dict[str, Any], spec: GroundedOutput,
           margin: float | None = None, slot: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``value`` (a JSON object as the template wrote it, keys in order) with its top-level fields settled against
    the text. Each place in the text gives one field its value (:func:`~agentkit.constrain.ground.occurrences`),
    and the model's scores decide (the whole value's log-probability after the output so far, with the weights
    that decoded it):

    1. required fields, in order: a number, date, currency or code field takes the best-scoring of the text's values
       still free; each takes its place in the text; then a required list of spans keeps the items with a place
       left;
    2. optional fields, most confident first (the margin of their best free value over null): each keeps its best
       value whose place is still free, or none when its places are taken (a due date copied from the issue date)
       or, for a string, when null scores above it (``margin`` nats in the value's favour; None:
       :data:`NULL_MARGIN`). A field of :data:`WHOLE_KINDS` takes the best of the text's values left;
    3. an optional list of spans keeps the items with a place left (``Arts`` of ``Marlow Arts Centre`` is no
       attendee where the location took it).

    A field with no value becomes None where the schema allows null, and is left out otherwise. ``slot``: the
    request's seat at the engine's batcher (:class:`ValueScorer`). Returns the new value and, per field, the scores
    that decided it."""
    g = spec.grounding
    if g is None:
        return value, {}
    margin = NULL_MARGIN if margin is None else margin
    scorer, props = _LazyScorer(engine, messages, slot), g.schema.get("properties") or {}
    optional = set(spec.optional_fields())
    out, used, facts = dict(value), [], {}
    for name in [k for k in out if k not in optional]:
        kind = g.kinds.get("/" + name, "")
        options = _choices(g, props, name, kind, out[name], used, out)
        if options and (len(options) > 1 or options[0] != out[name]):
            facts[name] = _scores(scorer, out, name, options)
            out[name] = _best(options, facts[name], out[name])
        _take(out[name], g.text, kind, used)
    lists = [k for k, v in out.items() if isinstance(v, list) and g.kinds.get(f"/{k}/*") in SPAN_KINDS]
    for name in [k for k in lists if k not in optional]:  # a list of spans: each place left gives one item
        out[name] = _distinct(out[name], g.text, used)
    ranked = []
    for name in [k for k in out if k in optional and g.kinds.get("/" + k) and out[k] not in (None, [])]:
        kind = g.kinds["/" + name]
        options = [c for c in _enum(props.get(name)) if _free(c, g.text, kind, used)] if kind in ENUM_KINDS \
            else [out[name]] if isinstance(out[name], list) or _free(out[name], g.text, kind, used) else []
        facts[name] = _scores(scorer, out, name, [*options, None])
        best = max((facts[name][_key(o)] for o in options), default=-math.inf)
        # the text's number, date or currency is not weighed against null (a multi-token value loses to the
        # one-token null even when right): such a field is None only when the text has no value left for it
        gain = best - facts[name]["null"] if kind not in WHOLE_KINDS else math.inf if options else -math.inf
        ranked.append((gain, name, kind, options))
    for gain, name, kind, options in sorted(ranked, key=lambda r: -r[0]):
        v = None
        if gain + margin >= 0:
            v = next((o for o in sorted(options, key=lambda o: -facts[name][_key(o)])
                      if isinstance(o, list) or _free(o, g.text, kind, used)), None)
        _take(v, g.text, kind, used)
        _put(out, name, v, allows_null(props.get(name) or {}))
    for name in [k for k in lists if k in optional and isinstance(out.get(k), list)]:  # the places left after
        out[name] = _distinct(out[name], g.text, used)                                 # the optional fields
    return {k: out[k] for k in value if k in out}, facts


def _choices(g: Grounding, props: dict[str, Any], name: str, kind: str, decoded: Any,
             used: list[tuple[int, int]], value: dict[str, Any]) -> list[Any]:
    """What a required field chooses among by the model's scores, in the places still free: a number, date,
    currency or code field, the text's values; a proper name that another field of ``value`` (the output so far:
    the fields before settled, the rest as decoded) also wrote, the decoded span and the whole names its fence
    allows
    (:attr:`~agentkit.constrain.ground.Grounding.whole_names`: a guest's name ``Fatima Zahra Benali`` against the
    hotel's ``Riad Yasmine`` written for both); any other field, nothing."""
    if kind in ENUM_KINDS:
        return [c for c in _enum(props.get(name)) if _free(c, g.text, kind, used)]
    names = g.whole_names.get("/" + name)
    if names and isinstance(decoded, str) and _shared(decoded, name, value):
        return [c for c in dict.fromkeys([decoded, *names]) if _free(c, g.text, "string", used)]
    return []


def _shared(decoded: str, name: str, value: dict[str, Any]) -> bool:
    """Whether another field of ``value`` wrote ``decoded`` too (or a span holding it, or held by it)."""
    low = decoded.casefold()
    others = [v for k, v in value.items() if k != name]
    items = [x for v in others for x in (v if isinstance(v, list) else [v]) if isinstance(x, str) and x]
    return any(low in x.casefold() or x.casefold() in low for x in items)


SPAN_KINDS = ("string", "phone", "email", "held")  # kinds grounded as spans of the text
# kinds whose value, where the text has one free, is not weighed against null: the text's numbers, dates, currencies
# and codes, its phone numbers and emails (a span of that shape), and a span holding the field's own word (``held``:
# ``superior room`` for ``room_type``); a multi-token value loses to the one-token null
WHOLE_KINDS = ("number", "date", "currency", "code", "phone", "email", "held")


def _distinct(items: list[Any], text: str, used: list[tuple[int, int]]) -> list[Any]:
    """The items of a list of spans that each have a place of their own in ``text`` (a place taken by an earlier
    item or field gives none), in order; each takes its place."""
    out = []
    for x in items:
        place = _free(x, text, "string", used) if isinstance(x, str) else None
        if place is not None:
            used.append(place)
            out.append(x)
    return out


def _take(v: Any, text: str, kind: str, used: list[tuple[int, int]]) -> None:
    """Mark the place in ``text`` that gives ``v`` (its first free one) as taken."""
    place = _free(v, text, kind, used) if _scalar(v) and kind else None
    if place is not None:
        used.append(place)


ENUM_KINDS = ("number", "date", "currency", "code")  # kinds grounded to a list of the text's values: the best is picked


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

    def __init__(self, engine: Any, messages: list[dict[str, str]], slot: Any = None) -> None:
        self.engine, self.messages, self.slot, self.scorer = engine, messages, slot, None

    def __call__(self, head: str, conts: list[str]) -> list[list[float]]:
        if self.scorer is None and not isinstance(self.engine, ValueScorer) and hasattr(self.engine, "backbone"):
            self.scorer = ValueScorer(self.engine, self.messages, self.slot)
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
