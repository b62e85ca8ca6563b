"""JSON Schema → canvas template (:class:`~agentkit.constrain.nodes.Template`).

The output language is canonical JSON in one style (:mod:`agentkit.constrain.canonical`: ``spaced`` by default, as
``json.dumps`` writes it, or ``compact``): braces, keys, quotes, commas and colons are :class:`Lit` (pinned); only
values are :class:`Slot` (numbers, string bodies, keys of additional properties). Enums and consts are choices of literals. Optional properties are real choices, built so
that every combination of present/absent properties is valid JSON with a tree that stays linear in the number of
properties (shared subtrees). Recursion through ``$ref`` is cut after ``max_depth`` turns of a reference cycle.

Modules: :mod:`~agentkit.constrain.normalize` (+ :mod:`~agentkit.constrain.negation`, :mod:`~agentkit.constrain.dnf`)
turn a schema into flat alternatives; this module compiles scalars, :mod:`~agentkit.constrain.containers` arrays and
objects; :mod:`~agentkit.constrain.ecma_regex`, :mod:`~agentkit.constrain.json_regex` and
:mod:`~agentkit.constrain.automata` translate and combine patterns; :mod:`~agentkit.constrain.formats` holds number
ranges and string formats; :mod:`~agentkit.constrain.canonical` the canonical text; :mod:`~agentkit.constrain.matcher`
decides membership on the tree.

Anything that cannot be enforced exactly raises :class:`~agentkit.errors.UnsupportedSchemaError` naming the
keyword and the JSON pointer: the template is never looser than the schema. It may be tighter in a few documented
places: recursion depth, the nesting depth of free-form values (``{}``/``true``), canonical number and string
forms, string formats that are strict subsets of their RFC grammars, control characters other than ``\\b\\f\\n\\r\\t``
in strings.

Formats in JSON Schema's format vocabulary are enforced (see :mod:`agentkit.constrain.formats`); other format
values (``int32``, ``double``, ``byte``, ``url``...) are annotations and are ignored, as JSON Schema says.
``nullable`` (OpenAPI) is an annotation in JSON Schema and is ignored too.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from decimal import Decimal
from functools import lru_cache
from typing import Any

from ..errors import UnsupportedSchemaError
from . import automata
from .canonical import STYLES, JsonStyle, canonical_json, json_style
from .containers import Containers, _check_repeats, _choice
from .dnf import TOP, Flat, effective_types, vkey
from .ecma_regex import ANY, PatternError, alt, cat, cset, max_len, min_len, rep
from .formats import TRAILING_ZEROS, NumberDigits, cap_digits, format_ast, multiple_regex, number_regex
from .json_regex import emit, search_ast
from .limits import DEFAULT_LIMITS, Cancel, CompileLimits, FailureCache, budget, preflight
from .matcher import tree_matches
from .nodes import DEFAULT_SLOT_TOKENS, Choice, Lit, Node, Repeat, Slot, Template, seq
from .normalize import Normalizer

__all__ = ["STYLES", "JsonStyle", "JsonTemplate", "NumberDigits", "canonical_json", "compile_schema",
           "compile_schema_cached"]

MAX_SLOT_TOKENS = 256
NUMBER_TOKENS = 24
NUMBER = number_regex(None, False, None, False)
DIGITS = NumberDigits()  # default digit caps of number slots
_TYPE_ORDER = ("object", "array", "string", "integer", "number", "boolean", "null")




class _Compiler(Containers, Normalizer):
    def __init__(self, root: Any, max_depth: int, strict: bool = False, style: JsonStyle | None = None,
                 digits: NumberDigits | None = None) -> None:
        super().__init__(root, max_depth)
        self.strict = strict
        self.style = style or json_style(None)
        self.digits = digits
        self.any_depth = 2 * max_depth + 2  # nesting of free-form values ({}, true, open extras)
        self._any: dict[int, Node] = {}
        self._memo: dict[tuple, Node | None] = {}

    # -- values -------------------------------------------------------------------------------------------------
    def value(self, conj: list, order: list, iptr: str, ctx: int) -> Node | None:
        """Node for a value that must satisfy every schema in ``conj``; None when nothing can.

        Nodes are memoised per place (alternatives of one object share their members' values) and, inside a
        recursion (``ctx`` > 0), across places with the same schemas and depth, so recursive schemas give a DAG,
        not an exponential tree; such shared slots are named after the first place that compiled them."""
        key = (tuple(id(s) for s, _ in conj), tuple(id(o) for o in order), ctx, None if ctx else iptr)
        if key in self._memo:
            return self._memo[key]
        flats = self.dnf(conj, ctx)
        if len(flats) == 1 and replace(flats[0], refs=frozenset()) == TOP:  # free: any value, any key order
            node = self.any_value(self.any_depth)
        else:
            node = _choice([self.flat(f, conj, order, iptr, ctx) for f in flats])
        self._memo[key] = node
        self.keep.append((conj, order))
        return node

    def child_ctx(self, f: Flat, ctx: int) -> int:
        return ctx + 1 if f.refs else ctx

    def flat(self, f: Flat, conj, order, iptr: str, ctx: int) -> Node | None:
        if f.enum is not None:
            excluded = {vkey(v) for v in f.not_values}
            p = conj[0][1] if conj else "#"
            vals = self.valid_values([v for v in f.enum if vkey(v) not in excluded], conj, p)
            return _choice([Lit(t) for v in vals for t in self.literal_texts(v, order)])
        types = effective_types(f)
        if f.types is None:
            types = tuple(sorted(types, key=_TYPE_ORDER.index))
        cctx = self.child_ctx(f, ctx)
        opts = []
        for t in types:
            if t == "null":
                opts.append(None if vkey(None) in {vkey(v) for v in f.not_values} else Lit("null"))
            elif t == "boolean":
                ex = {vkey(v) for v in f.not_values}
                opts += [Lit(x) for x, v in (("true", True), ("false", False)) if vkey(v) not in ex]
            elif t in ("number", "integer"):
                opts.append(self.number(f, t == "integer", iptr))
            elif t == "string":
                opts.append(self.string(f, iptr))
            elif t == "array":
                opts.append(self.array(f, order, iptr, cctx))
            elif t == "object":
                opts.append(self.object(f, order, iptr, cctx))
        return _choice(opts)

    def literal_texts(self, v: Any, order: list) -> list[str]:
        """Texts of an enum/const member: its canonical JSON, and for a whole number both ``3`` and ``3.0``."""
        text = self.canon(v, order)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not float(v).is_integer() or abs(v) >= 2 ** 53:
            return [text]
        return [str(int(v)), repr(float(v))]

    def canon(self, v: Any, order: list) -> str:
        from .canonical import _canon

        return _canon(v, order, self.res, self.style)

    # -- scalars ------------------------------------------------------------------------------------------------
    def number(self, f: Flat, integer: bool, iptr: str) -> Node | None:
        mults = {m for m, _ in f.mults}
        p = f.mults[0][1] if f.mults else "#"
        if len(mults) > 1:
            if not all(m == m.to_integral_value() for m in mults):
                raise UnsupportedSchemaError("multipleOf", p, "several non-integer multipleOf values")
            mults = {Decimal(math.lcm(*(int(m) for m in mults)))}
        ranges = [(f.lo, f.lo_ex, f.hi, f.hi_ex)]
        for v in f.not_values:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            from .dnf import dec

            c = dec(v, "not", p)
            nxt = []
            for lo, lx, hi, hx in ranges:
                if (lo is None or c > lo or (c == lo and not lx)) and (hi is None or c < hi or (c == hi and not hx)):
                    nxt += [(lo, lx, c, True), (c, True, hi, hx)]
                else:
                    nxt.append((lo, lx, hi, hx))
            ranges = nxt
        alts = []
        # an integer slot writes integers as digits only, never a float form (3.0): as the peers' grammars do, and
        # so a model that starts "1." (meaning 1.2) is never trapped into "1.0" (canonical.number_text agrees)
        floats = not integer
        exact = False
        for lo, lx, hi, hx in ranges:
            try:
                if mults:
                    if f.nonint:
                        raise UnsupportedSchemaError("multipleOf", p, "multipleOf on non-integers")
                    r = multiple_regex(next(iter(mults)), lo, lx, hi, hx, integer, floats, exact)
                else:
                    r = number_regex(lo, lx, hi, hx, integer=integer, nonint=f.nonint, floats=floats, exact=exact)
            except PatternError as e:
                raise UnsupportedSchemaError("multipleOf", p, str(e)) from None
            if r is not None:
                alts.append(cap_digits(r, self.digits))
        if not alts:
            return None
        regex = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        tokens = NUMBER_TOKENS
        if self.digits is not None and self.digits.integer is not None:  # sign, digits (and point, fraction, exponent)
            tokens = 1 + self.digits.integer + (0 if integer else 6 + (self.digits.fraction or NUMBER_TOKENS)
                                                + TRAILING_ZEROS)
        if integer and f.lo is not None and f.hi is not None:
            tokens = max(len(str(int(f.lo))), len(str(int(f.hi)))) + 1
        return Slot(regex, tokens, iptr or "/")

    def string_ast(self, f: Flat):
        """AST of the allowed decoded strings (``("none",)`` when empty)."""
        p = (f.patterns or f.formats or (("", "#"),))[0][1]
        try:
            asts = [search_ast(x) for x, _ in f.patterns]
            for name, fp in f.formats:
                a = self._format(name, fp)
                if a is not None:
                    asts.append(a)
            nots = [search_ast(x) for x, _ in f.not_patterns]
            nots += [a for a in (self._format(n, fp) for n, fp in f.not_formats) if a is not None]
            words = sorted({v for v in f.not_values if isinstance(v, str)})
            lengths = (f.min_len, f.max_len)
            if not nots and not words:
                if not asts:
                    return rep(cset(ANY), f.min_len, f.max_len)
                if len(asts) == 1:
                    a = asts[0]
                    fitted = _fit_length(a, f.min_len, f.max_len)
                    if fitted is not None:
                        return fitted
            return automata.lang_and(asts or [rep(cset(ANY), 0, None)], lengths=lengths, not_asts=nots,
                                     not_words=words)
        except PatternError as e:
            kw = "pattern" if f.patterns or f.not_patterns else "format" if f.formats else "maxLength"
            raise UnsupportedSchemaError(kw, p, str(e)) from None

    def _format(self, name: str, p: str):
        try:
            return format_ast(name)
        except KeyError:
            raise UnsupportedSchemaError("format", p, f"format {name!r} cannot be enforced") from None

    def string(self, f: Flat, iptr: str) -> Node | None:
        a = self.string_ast(f)
        if a[0] == "none":
            return None
        p = (f.patterns or f.formats or (("", "#"),))[0][1]
        kw = "pattern" if f.patterns else "format" if f.formats else "maxLength"
        _check_repeats(a, kw, p)
        try:
            body = emit(a)
        except PatternError as e:
            raise UnsupportedSchemaError(kw, p, str(e)) from None
        if body == "":
            return Lit('""')
        m = max_len(a)
        tokens = DEFAULT_SLOT_TOKENS if m is None else max(1, min(m, MAX_SLOT_TOKENS))
        return seq(Lit('"'), Slot(body, tokens, iptr or "/"), Lit('"'))

    def any_value(self, d: int) -> Node:
        if d in self._any:
            return self._any[d]
        string = seq(Lit('"'), Slot(emit(rep(cset(ANY), 0, None)), DEFAULT_SLOT_TOKENS, "*"), Lit('"'))
        if d <= 0:
            arr, obj = Lit("[]"), Lit("{}")
        else:
            inner = self.any_value(d - 1)
            sep = self.style.item_sep
            arr = seq(Lit("["), Repeat(inner, sep, 0, None), Lit("]"))
            obj = seq(Lit("{"), Repeat(seq(string, Lit(self.style.key_sep), inner), sep, 0, None), Lit("}"))
        node = Choice((obj, arr, string, Slot(NUMBER, NUMBER_TOKENS, "*"), Lit("true"), Lit("false"), Lit("null")))
        self._any[d] = node
        return node



def _lens(a) -> tuple[int, int | None]:
    return min_len(a), max_len(a)


def _fit_length(a, lo: int, hi: int | None):
    """``a`` restricted to lengths ``lo``..``hi`` by rewriting its bounds (alternatives, one variable part among
    fixed-width ones, repetitions of a fixed-width item); None when that shape does not apply."""
    mn, mx = _lens(a)
    if mn >= lo and (hi is None or (mx is not None and mx <= hi)):
        return a
    if (hi is not None and mn > hi) or (mx is not None and mx < lo):
        return ("none",)
    k = a[0]
    if k == "alt":
        parts = [_fit_length(x, lo, hi) for x in a[1]]
        return None if any(x is None for x in parts) else alt(*parts)
    if k == "cat":
        items = list(a[1])
        var = [i for i, x in enumerate(items) if _lens(x)[0] != _lens(x)[1]]
        if len(var) != 1:
            return None
        fixed = sum(_lens(y)[0] for j, y in enumerate(items) if j != var[0])
        sub = _fit_length(items[var[0]], max(0, lo - fixed), None if hi is None else hi - fixed)
        if sub is None or sub[0] == "none":
            return sub
        items[var[0]] = sub
        return cat(*items)
    if k == "rep":
        x, rlo, rhi = a[1], a[2], a[3]
        w, wmax = _lens(x)
        if w != wmax or w == 0:
            return None
        nlo = max(rlo, -(-lo // w))
        nhi = rhi if hi is None else (hi // w if rhi is None else min(rhi, hi // w))
        return ("none",) if nhi is not None and nhi < nlo else rep(x, nlo, nhi)
    return None


class JsonTemplate(Template):
    """A compiled JSON template. :meth:`matches` decides the same language as :class:`Template` by walking the
    tree (:func:`~agentkit.constrain.matcher.tree_matches`): the tree shares subtrees (optional-property tails,
    free-form values) that a single regex would have to copy, sometimes into megabytes."""

    def matches(self, text: str) -> bool:
        return tree_matches(self, text)


def _schema_of(schema: Any) -> Any:
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    return schema


def compile_schema(schema: dict | type, *, max_depth: int = 3, strict: bool = False,
                   style: str | JsonStyle | None = None, digits: NumberDigits | None = DIGITS,
                   limits: CompileLimits | None = None, cancel: Cancel | None = None) -> Template:
    """Compile a JSON Schema (or a pydantic model class) into a canvas template of canonical JSON in ``style``.

    ``style``: how the pinned punctuation is written, a name in :data:`~agentkit.constrain.canonical.STYLES`
    (``"compact"``: ``{"a":1,"b":2}``; ``"spaced"``: ``{"a": 1, "b": 2}``, as ``json.dumps`` writes by default) or a
    :class:`~agentkit.constrain.canonical.JsonStyle`; None: :data:`~agentkit.constrain.canonical.DEFAULT_STYLE`.
    ``digits``: caps on the digits of number slots where the schema leaves them open (:class:`NumberDigits`:
    20 integer digits, 8 fraction digits by default; None: no caps).

    ``max_depth``: how deep recursive ``$ref`` s unfold (turns of the longest reference cycle); free-form values
    nest at most ``2 * max_depth + 2`` levels. ``strict``: an object that lists properties but never mentions
    ``additionalProperties``/``patternProperties`` gets no other keys (what OpenAI-style strict tool schemas mean;
    tighter than JSON Schema, never looser). Raises UnsupportedSchemaError for anything not enforceable exactly.

    ``limits``: bounds on the build (:class:`~agentkit.constrain.limits.CompileLimits`; defaults when None): past
    one it raises SchemaLimitError naming the limit and the pointer. ``cancel``: an Event (or a callable) that stops
    the build with CompileCancelled when set."""
    t0 = time.perf_counter()
    schema = _schema_of(schema)
    if not isinstance(schema, (dict, bool)):
        raise UnsupportedSchemaError("schema", "#", f"a schema must be an object or a boolean, not {schema!r}")
    st = json_style(style)
    preflight(schema, limits)
    c = _Compiler(schema, max_depth, strict, st, digits)
    try:
        with budget(limits, cancel):
            root = c.value([(schema, "#")], [schema], "", 0)
    except RecursionError:
        raise UnsupportedSchemaError("$ref", "#", "schema nesting too deep") from None
    if root is None:
        raise UnsupportedSchemaError("false", "#", "the schema accepts no JSON value")
    ms = 1000 * (time.perf_counter() - t0)
    return JsonTemplate(root=root, schema=schema, compile_ms=ms, kind="json",
                        meta={"max_depth": max_depth, "strict": strict, "style": st.name})


@lru_cache(maxsize=256)
def _cached(key: str, max_depth: int, strict: bool, style: JsonStyle, digits: NumberDigits | None,
            limits: CompileLimits) -> Template:
    return compile_schema(json.loads(key), max_depth=max_depth, strict=strict, style=style, digits=digits,
                          limits=limits)


_FAILED = FailureCache()  # schemas that failed to compile fail again at once


def compile_schema_cached(schema: dict | type, *, max_depth: int = 3, strict: bool = False,
                          style: str | JsonStyle | None = None, digits: NumberDigits | None = DIGITS,
                          limits: CompileLimits | None = None, cancel: Cancel | None = None) -> Template:
    """:func:`compile_schema` with an LRU cache keyed on the schema's JSON text (property order kept) and the
    options; a schema that failed fails again at once (a time-out for a minute, see FailureCache)."""
    schema = _schema_of(schema)
    lim = limits or DEFAULT_LIMITS
    preflight(schema, lim)  # before json.dumps: depth, NaN/inf and lone surrogates are refused here
    args = (json.dumps(schema, separators=(",", ":"), ensure_ascii=False), max_depth, strict, json_style(style),
            digits, lim)
    with budget(lim, cancel):
        return _FAILED.call(_cached, args)

