"""The layout builder: normalised alternatives → template nodes.

:class:`Layout` asks its :class:`~agentkit.constrain.normalize.Normalizer` for the flat alternatives of each value
(:meth:`Layout.value`) and lays out each one by type: literals for enums, ``null`` and booleans, slots for numbers and
strings (:mod:`~agentkit.constrain.scalars`), arrays (:mod:`~agentkit.constrain.arrays`) and objects
(:mod:`~agentkit.constrain.objects`), which call back into :meth:`Layout.value` for their members. Literal values
are checked against the schema by a :class:`~agentkit.constrain.literals.LiteralCheck`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .arrays import array_node
from .canonical import JsonStyle, canon, json_style
from .dnf import TOP, Flat, effective_types, vkey
from .ecma_regex import ANY, cset, rep
from .formats import NumberDigits, number_regex
from .json_regex import emit
from .literals import LiteralCheck
from .nodes import DEFAULT_SLOT_TOKENS, Choice, Lit, Node, Repeat, Slot, choice, seq
from .normalize import Normalizer
from .objects import object_node
from .scalars import NUMBER_TOKENS, number_node, string_node

NUMBER = number_regex(None, False, None, False)
_TYPE_ORDER = ("object", "array", "string", "integer", "number", "boolean", "null")


class Layout:
    """Template nodes for the values of one root schema (the :class:`~agentkit.constrain.builder.ValueBuilder` that
    arrays, objects and extra properties call back into).

    ``strict``: objects that list properties and never mention extra keys get none. ``style``: the pinned
    punctuation and member order. ``digits``: caps on open number slots. Free-form values (``{}``, ``true``) nest at
    most ``2 * max_depth + 2`` levels."""

    def __init__(self, norm: Normalizer, strict: bool = False, style: JsonStyle | None = None,
                 digits: NumberDigits | None = None) -> None:
        self.norm = norm
        self.res = norm.res
        self.literals = LiteralCheck(norm.root, norm.res)
        self.strict = strict
        self.style = style or json_style(None)
        self.digits = digits
        self.any_depth = 2 * norm.max_depth + 2  # nesting of free-form values ({}, true, open extras)
        self._any: dict[int, Node] = {}
        self._memo: dict[tuple, Node | None] = {}
        self.keep: list = []  # the schema lists behind memo keys (their ids key the memo)

    def value(self, conj: list, order: list, iptr: str, ctx: int) -> Node | None:
        """Node for a value that must satisfy every schema in ``conj``; None when nothing can.

        Nodes are memoised per place (alternatives of one object share their members' values) and, inside a
        recursion (``ctx`` > 0), across places with the same schemas and depth, so recursive schemas give a DAG,
        not an exponential tree; such shared slots are named after the first place that compiled them."""
        key = (tuple(id(s) for s, _ in conj), tuple(id(o) for o in order), ctx, None if ctx else iptr)
        if key in self._memo:
            return self._memo[key]
        flats = self.norm.dnf(conj, ctx)
        if len(flats) == 1 and replace(flats[0], refs=frozenset()) == TOP:  # free: any value, any key order
            node = self.any_value(self.any_depth)
        else:
            node = choice([self.flat(f, conj, order, iptr, ctx) for f in flats])
        self._memo[key] = node
        self.keep.append((conj, order))
        return node

    def flat(self, f: Flat, conj: list, order: list, iptr: str, ctx: int) -> Node | None:
        """Node for one flat alternative: its enum, or one option per type it allows."""
        if f.enum is not None:
            excluded = {vkey(v) for v in f.not_values}
            p = conj[0][1] if conj else "#"
            vals = self.literals.valid_values([v for v in f.enum if vkey(v) not in excluded], conj, p)
            return choice([Lit(t) for v in vals for t in self.literal_texts(v, order)])
        types = effective_types(f)
        if f.types is None:
            types = tuple(sorted(types, key=_TYPE_ORDER.index))
        cctx = ctx + 1 if f.refs else ctx
        opts: list[Node | None] = []
        for t in types:
            opts += self.typed(f, t, order, iptr, cctx)
        return choice(opts)

    def typed(self, f: Flat, t: str, order: list, iptr: str, ctx: int) -> list[Node | None]:
        """The options of flat ``f`` for JSON type ``t`` (``ctx``: the depth of its members)."""
        if t == "null":
            return [None if vkey(None) in {vkey(v) for v in f.not_values} else Lit("null")]
        if t == "boolean":
            ex = {vkey(v) for v in f.not_values}
            return [Lit(x) for x, v in (("true", True), ("false", False)) if vkey(v) not in ex]
        if t in ("number", "integer"):
            return [number_node(f, t == "integer", iptr, self.digits)]
        if t == "string":
            return [string_node(f, iptr)]
        if t == "array":
            return [array_node(self, f, order, iptr, ctx)]
        if t == "object":
            return [object_node(self, f, order, iptr, ctx)]
        return []

    def literal_texts(self, v: Any, order: list) -> list[str]:
        """Texts of an enum/const member: its canonical JSON, and for a whole number both ``3`` and ``3.0``."""
        text = canon(v, order, self.res, self.style)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not float(v).is_integer() or abs(v) >= 2 ** 53:
            return [text]
        return [str(int(v)), repr(float(v))]

    def any_value(self, d: int) -> Node:
        """Any JSON value nested at most ``d`` levels (shared per depth)."""
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
