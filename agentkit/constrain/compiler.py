"""JSON Schema → canvas template (:class:`~agentkit.constrain.nodes.Template`).

The output language is canonical compact JSON (see :mod:`agentkit.constrain.canonical`): braces, keys, quotes,
commas and colons are :class:`Lit` (pinned); only values are :class:`Slot` (numbers, string bodies, keys of
additional properties). Enums and consts are choices of literals. Optional properties are real choices, built so
that every combination of present/absent properties is valid JSON with a tree that stays linear in the number of
properties (shared subtrees). Recursion through ``$ref`` is cut after ``max_depth`` entries.

Anything that cannot be enforced exactly raises :class:`~agentkit.errors.UnsupportedSchemaError` naming the
keyword and the JSON pointer: the template is never looser than the schema. It may be tighter in a few documented
places: recursion depth, the nesting depth of free-form values (``{}``/``true``), canonical number and string
forms, string formats that are strict subsets of their RFC grammars, control characters other than ``\b\f\n\r\t``
in strings.

Formats in JSON Schema's format vocabulary are enforced (see :mod:`agentkit.constrain.formats`); other format
values (``int32``, ``double``, ``byte``, ``url``...) are annotations and are ignored, as JSON Schema says.
``nullable`` (OpenAPI) is an annotation in JSON Schema and is ignored too.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import replace
from decimal import Decimal
from functools import lru_cache
from typing import Any

from ..errors import UnsupportedSchemaError
from . import automata
from .canonical import child_schemas, item_schemas, number_text, order_names, pattern_matches, walk
from .dnf import ALL_TYPES, TOP, Flat, effective_types, vkey
from .ecma_regex import ANY, PatternError, alt, cat, cset, emit, except_words, literal, max_len, rep, search_ast
from .formats import format_ast, multiple_regex, number_regex
from .matcher import tree_matches
from .nodes import DEFAULT_SLOT_TOKENS, Choice, Lit, Node, Repeat, Slot, Template, seq
from .normalize import Normalizer

MAX_REPEAT = 256  # larger counted repetitions in a slot regex raise (outlines-core DFAs grow with the count)
MAX_SLOT_TOKENS = 256
NUMBER_TOKENS = 24
NUMBER = number_regex(None, False, None, False)
UNIQUE_ENUM_LIMIT = 4  # uniqueItems over at most this many literal item values is enumerated
_TYPE_ORDER = ("object", "array", "string", "integer", "number", "boolean", "null")


def _esc(k: str) -> str:
    return k.replace("~", "~0").replace("/", "~1")


def _check_repeats(n, keyword: str, ptr: str) -> None:
    if n[0] == "rep":
        if n[2] > MAX_REPEAT or (n[3] is not None and n[3] > MAX_REPEAT):
            raise UnsupportedSchemaError(keyword, ptr, f"counted repetition over {MAX_REPEAT} in a slot")
        _check_repeats(n[1], keyword, ptr)
    elif n[0] in ("cat", "alt"):
        for x in n[1]:
            _check_repeats(x, keyword, ptr)


def _choice(opts: list) -> Node | None:
    out: list = []
    for o in opts:
        if o is not None and o not in out:
            out.append(o)
    return None if not out else out[0] if len(out) == 1 else Choice(tuple(out))


class _Compiler(Normalizer):
    def __init__(self, root: Any, max_depth: int) -> None:
        super().__init__(root, max_depth)
        self.any_depth = 2 * max_depth + 2  # nesting of free-form values ({}, true, open extras)
        self._any: dict[int, Node] = {}

    # -- values -------------------------------------------------------------------------------------------------
    def value(self, conj: list, order: list, iptr: str, ctx: tuple) -> Node | None:
        """Node for a value that must satisfy every schema in ``conj``; None when nothing can."""
        flats = self.dnf(conj, ctx)
        if len(flats) == 1 and replace(flats[0], refs=frozenset()) == TOP:  # free: any value, any key order
            return self.any_value(self.any_depth)
        return _choice([self.flat(f, conj, order, iptr, ctx) for f in flats])

    def child_ctx(self, f: Flat, ctx: tuple) -> tuple:
        if not f.refs:
            return ctx
        d = dict(ctx)
        for r in f.refs:
            d[r] = d.get(r, 0) + 1
        return tuple(sorted(d.items()))

    def flat(self, f: Flat, conj, order, iptr: str, ctx: tuple) -> Node | None:
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

        return _canon(v, order, self.res)

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
        floats = not (integer and self.draft4)  # draft 4: 3.0 is not an integer
        for lo, lx, hi, hx in ranges:
            try:
                if mults:
                    if f.nonint:
                        raise UnsupportedSchemaError("multipleOf", p, "multipleOf on non-integers")
                    r = multiple_regex(next(iter(mults)), lo, lx, hi, hx, integer, floats)
                else:
                    r = number_regex(lo, lx, hi, hx, integer=integer, nonint=f.nonint, floats=floats)
            except PatternError as e:
                raise UnsupportedSchemaError("multipleOf", p, str(e)) from None
            if r is not None:
                alts.append(r)
        if not alts:
            return None
        regex = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        tokens = NUMBER_TOKENS
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
            arr = seq(Lit("["), Repeat(inner, ",", 0, None), Lit("]"))
            obj = seq(Lit("{"), Repeat(seq(string, Lit(":"), inner), ",", 0, None), Lit("}"))
        node = Choice((obj, arr, string, Slot(NUMBER, NUMBER_TOKENS, "*"), Lit("true"), Lit("false"), Lit("null")))
        self._any[d] = node
        return node

    # -- arrays -------------------------------------------------------------------------------------------------
    def array(self, f: Flat, order: list, iptr: str, ctx: tuple) -> Node | None:
        npre = max((len(pre) for pre, _r, _p in f.aclauses), default=0)
        has_rest = all(rest is not None for _pre, rest, _p in f.aclauses) or not f.aclauses
        lo, hi = f.min_items, f.max_items
        nodes = [self.value(self.item_conj(f, i), item_schemas(order, self.res, i), f"{iptr}/{i}", ctx)
                 for i in range(npre if hi is None else min(npre, hi))]
        rest = self.value(self.item_conj(f, npre), item_schemas(order, self.res, npre), f"{iptr}/*", ctx)
        _ = has_rest
        if f.contains:
            return self._contains(f, nodes, rest, order, iptr, ctx)
        if f.unique and (hi is None or hi > 1):
            return self._unique(f, nodes, rest)

        def arr(i: int) -> Node | None:
            if i < len(nodes):
                nxt = arr(i + 1) if nodes[i] is not None else None
                take = seq(Lit("," if i else ""), nodes[i], nxt) if nxt is not None else None
                if i < lo:
                    return take
                return Lit("") if take is None else Choice((take, Lit("")))
            rlo, rhi = max(0, lo - i), (None if hi is None else hi - i)
            if rest is None or rhi == 0:
                return Lit("") if rlo == 0 else None
            r = Repeat(rest, ",", max(rlo, 1), rhi)
            body = seq(Lit(","), r) if i else r
            return body if rlo else Choice((body, Lit("")))

        body = arr(0)
        return None if body is None else seq(Lit("["), body, Lit("]"))

    def _contains(self, f: Flat, nodes, rest, order, iptr, ctx) -> Node | None:
        p = f.contains[0][1]
        if nodes or f.min_items > 1 or f.max_items is not None or f.unique:
            raise UnsupportedSchemaError("contains", p, "contains with prefixItems, minItems or maxItems")
        hit = self.value(self.item_conj(f, 0) + list(f.contains), item_schemas(order, self.res, 0),
                         f"{iptr}/*", ctx)
        if hit is None:
            return None
        if rest is None:
            return seq(Lit("["), hit, Lit("]"))
        before = Choice((seq(Repeat(rest, ",", 1, None), Lit(",")), Lit("")))
        after = Choice((seq(Lit(","), Repeat(rest, ",", 1, None)), Lit("")))
        return seq(Lit("["), before, hit, after, Lit("]"))

    def _unique(self, f: Flat, nodes, rest) -> Node | None:
        from itertools import permutations

        p = f.unique
        if nodes or rest is None or not isinstance(rest, (Lit, Choice)):
            raise UnsupportedSchemaError("uniqueItems", p, "uniqueItems over non-literal items")
        lits = [rest] if isinstance(rest, Lit) else list(rest.options)
        if not all(isinstance(x, Lit) for x in lits) or len(lits) > UNIQUE_ENUM_LIMIT:
            raise UnsupportedSchemaError("uniqueItems", p, "uniqueItems over more than a few literal values")
        vals = [json.loads(x.text) for x in lits]
        keys = [vkey(v) for v in vals]
        if len(set(keys)) != len(keys):
            raise UnsupportedSchemaError("uniqueItems", p, "equal literals")
        hi = len(lits) if f.max_items is None else min(f.max_items, len(lits))
        opts = []
        for n in range(f.min_items, hi + 1):
            for perm in permutations(lits, n):
                opts.append(Lit("[" + ",".join(x.text for x in perm) + "]"))
        return _choice(opts)

    # -- objects ------------------------------------------------------------------------------------------------
    def object(self, f: Flat, order: list, iptr: str, ctx: tuple) -> Node | None:
        names = order_names(order, self.res)
        names += [r for r in f.required if r not in names]
        required, rules = _closure(set(f.required), [(a, ds) for a, ds, _p in f.deps])
        members = []  # (key literal, value node, required, name)
        pn = [(s, p) for s, p in f.pnames]
        for name in names:
            req = name in required
            conj = self.key_conj(f, name)
            ok = not pn or self.valid(name, pn, pn[0][1])
            node = self.value(conj, child_schemas(order, self.res, name), f"{iptr}/{_esc(name)}", ctx) if ok else None
            if node is None:
                if req:
                    return None
                continue
            members.append((json.dumps(name, ensure_ascii=False) + ":", node, req, name))
        present = {m[3] for m in members}
        blocked_triggers = {a for a, ds in rules if not set(ds) <= present}  # a dependency can never be there
        if any(m[2] for m in members if m[3] in blocked_triggers):
            return None
        members = [m for m in members if m[3] not in blocked_triggers]
        rules = [(a, ds) for a, ds in rules if a not in blocked_triggers]
        extra = self._extras(f, names, order, iptr, ctx)
        lo, hi = f.min_props, f.max_props
        nreq = sum(1 for m in members if m[2])
        counted = lo > nreq or (hi is not None and (extra is not None or hi < len(members)))
        if len(f.need) > 1 or (f.need and counted):
            raise UnsupportedSchemaError("not", f.need[0][1][1], "several conditions on some property")
        need = f.need[0] if f.need else None
        special = [None] * len(members)  # member values that also meet the need condition
        need_extra = None
        if need:
            special = [self.value(self.key_conj(f, m[3]) + [need[1]], child_schemas(order, self.res, m[3]),
                                  f"{iptr}/{_esc(m[3])}", ctx) if self._need_member(need, m[3]) else None
                       for m in members]
            need_extra = self._extras(f, names, order, iptr, ctx, need)
        if counted and hi is not None and len(members) - nreq > 12 and hi - nreq > 3:
            raise UnsupportedSchemaError("maxProperties", f.oclauses[0][3] if f.oclauses else "#",
                                         "maxProperties over many optional properties")
        if not counted and not rules and not need:
            body = _linear_body(members, extra)
            return None if body is None else seq(Lit("{"), body, Lit("}"))
        pos = {m[3]: i for i, m in enumerate(members)}
        later = [frozenset(d for a, ds in rules if a == m[3] for d in ds if pos[d] > i) for i, m in enumerate(members)]
        earlier = [frozenset(d for a, ds in rules if a == m[3] for d in ds if pos[d] < i)
                   for i, m in enumerate(members)]
        watch = frozenset().union(*earlier) if earlier else frozenset()
        if len(rules) > 12:
            raise UnsupportedSchemaError("dependentRequired", f.deps[0][2], "too many dependencies")
        cap = max(lo, (hi or 0) + 1)
        memo: dict[tuple, Node | None] = {}

        def chain(i: int, started: bool, count: int, pending: frozenset, blocked: frozenset,
                  wit: bool = True) -> Node | None:
            key = (i, started, count, pending, blocked, wit)
            if key in memo:
                return memo[key]
            if i == len(members):
                rlo = max(0, lo - count) if counted else 0
                rhi = (hi - count if hi is not None else None) if counted else None
                if pending or (rhi is not None and rhi < rlo):
                    res = None
                elif not wit:  # an extra property must meet the need condition
                    if need_extra is None:
                        res = None
                    else:
                        pre = Lit("") if extra is None else Choice((seq(Repeat(extra, ",", 1), Lit(",")), Lit("")))
                        post = Lit("") if extra is None else Choice((seq(Lit(","), Repeat(extra, ",", 1)), Lit("")))
                        res = seq(Lit("," if started else ""), pre, need_extra, post)
                elif extra is None or rhi == 0:
                    res = Lit("") if rlo == 0 else None
                else:
                    r = Repeat(extra, ",", max(rlo, 1), rhi)
                    body = seq(Lit(","), r) if started else r
                    res = body if rlo else Choice((body, Lit("")))
            else:
                k, node, req, name = members[i]
                item = seq(Lit(("," if started else "") + k), node)
                nc = min(count + 1, cap) if counted else 0
                free = (not counted or (hi is None and count >= lo)) and not rules and wit
                if started and free and not req:  # factor the tail: linear size
                    tail = chain(i + 1, True, count, pending, blocked)
                    res = None if tail is None else seq(Choice((item, Lit(""))), tail)
                else:
                    take = None
                    if not ((hi is not None and counted and count >= hi) or earlier[i] & blocked):
                        npend = (pending - {name}) | later[i]
                        nxt = chain(i + 1, True, nc, npend, blocked, wit)
                        take = None if nxt is None else seq(item, nxt)
                        if not wit and special[i] is not None:
                            nxt2 = chain(i + 1, True, nc, npend, blocked, True)
                            if nxt2 is not None:
                                alt2 = seq(Lit(("," if started else "") + k), special[i], nxt2)
                                take = alt2 if take is None else Choice((take, alt2))
                    if req or name in pending:
                        res = take
                    else:
                        skip = chain(i + 1, started, count, pending, blocked | ({name} & watch), wit)
                        res = take if skip is None else skip if take is None else Choice((take, skip))
            memo[key] = res
            return res

        body = chain(0, False, 0, frozenset(), frozenset(), need is None)
        return None if body is None else seq(Lit("{"), body, Lit("}"))

    def _pname_ast(self, s, p: str, ctx: tuple):
        pf = self.dnf([(s, p)], ctx)
        return alt(*(self._key_lang(x) for x in pf)) if pf else ("none",)

    def _need_key(self, need, ctx: tuple) -> tuple[list, list]:
        """(ASTs the key must be in, ASTs it must not be in) for a ``Flat.need`` key spec."""
        spec = need[0]
        try:
            if spec[0] == "extra":
                return [], [search_ast(rx) for rx in spec[2]]
            if spec[0] == "pattern":
                return [search_ast(spec[1])], []
            return [], [self._pname_ast(spec[1][0], spec[1][1], ctx)]
        except PatternError as e:
            raise UnsupportedSchemaError("not", need[1][1], str(e)) from None

    def _need_member(self, need, name: str) -> bool:
        spec = need[0]
        if spec[0] == "extra":
            return name not in spec[1] and not any(pattern_matches(rx, name) for rx in spec[2])
        if spec[0] == "pattern":
            return pattern_matches(spec[1], name)
        return not self.valid(name, [spec[1]], spec[1][1])

    def _extras(self, f: Flat, names: list, order: list, iptr: str, ctx: tuple, need=None) -> Node | None:
        """One additional property (``"key":value``) or None when none is allowed; with ``need``, one that also
        meets that ``Flat.need`` condition."""
        clauses = [c for c in f.oclauses if c[1] or c[2] is not None]
        branches = []  # (key AST, value conj, order schemas for the value, pointer)
        anykey = rep(cset(ANY), 0, None)
        ws = walk(order, self.res)
        addl_order = [s["additionalProperties"] for s in ws if isinstance(s.get("additionalProperties"), dict)]
        if not clauses:
            branches.append((anykey, [], addl_order, "#"))
        elif len(clauses) == 1 or all(not c[1] for c in clauses):
            pats = clauses[0][1] if len(clauses) == 1 else ()
            cp = clauses[0][3]
            pasts, porders = [], []
            for rx, sch in pats:
                try:
                    pasts.append(search_ast(rx))
                except PatternError as e:
                    raise UnsupportedSchemaError("patternProperties", sch[1], str(e)) from None
                porders.append([s["patternProperties"][rx] for s in ws
                                if isinstance(s.get("patternProperties"), dict) and rx in s["patternProperties"]])
            overlap = any(pats[i][1][0] != pats[j][1][0] and not automata.ast_empty([pasts[i], pasts[j]])
                          for i in range(len(pasts)) for j in range(i + 1, len(pasts)))
            if not overlap:
                branches += [(a, [sch], o, sch[1]) for a, (_rx, sch), o in zip(pasts, pats, porders)]
            elif len(pats) > 4:
                raise UnsupportedSchemaError("patternProperties", cp, "more than 4 overlapping patterns")
            else:  # one branch per region of keys matching exactly the patterns in S
                for bits in range(1, 1 << len(pats)):
                    ins = [i for i in range(len(pats)) if bits >> i & 1]
                    outs = [pasts[i] for i in range(len(pats)) if not bits >> i & 1]
                    try:
                        region = automata.lang_and([pasts[i] for i in ins], not_asts=outs)
                    except PatternError as e:
                        raise UnsupportedSchemaError("patternProperties", cp, str(e)) from None
                    if region[0] != "none":
                        branches.append((region, [pats[i][1] for i in ins], [x for i in ins for x in porders[i]],
                                         pats[ins[0]][1][1]))
            addls = [c[2] for c in clauses if c[2] is not None]
            if not any(s is False for s, _ in addls):
                key = anykey if not pasts else ("not", pasts)
                branches.append((key, addls, addl_order, addls[0][1] if addls else cp))
        else:
            raise UnsupportedSchemaError("patternProperties", clauses[0][3], "several objects constrain extra keys")
        pn_asts = [self._pname_ast(s, p, ctx) for s, p in f.pnames]
        need_in, need_out = self._need_key(need, ctx) if need else ([], [])
        opts = []
        for key, conj, vorder, p in branches:
            nots = []
            if key[0] == "not":
                key, nots = anykey, key[1]
            words = [n for n in names if key is anykey or _in_lang(key, n)]
            if need:
                conj = [*conj, need[1]]
            try:
                if key is anykey and not nots and not pn_asts and not need:
                    ka = except_words(words)
                else:
                    ka = automata.lang_and([key] + pn_asts + need_in, not_asts=nots + need_out, not_words=words)
            except PatternError as e:
                raise UnsupportedSchemaError("additionalProperties", p, str(e)) from None
            if ka[0] == "none":
                continue
            _check_repeats(ka, "propertyNames", p)
            node = self.value(conj, vorder, f"{iptr}/*", ctx)
            if node is None:
                continue
            opts.append(seq(Lit('"'), Slot(emit(ka), DEFAULT_SLOT_TOKENS, f"{iptr}/*key"), Lit('":'), node))
        return _choice(opts)

    def _key_lang(self, f: Flat):
        if "string" not in effective_types(f):
            return ("none",)
        if f.enum is not None:
            return alt(*(literal(v) for v in f.enum if isinstance(v, str)))
        return self.string_ast(f)


def _closure(required: set, rules: list) -> tuple[set, list]:
    """Required names closed under the presence rules ``(name, needs)``, and the rules still left open."""
    changed = True
    while changed:
        changed = False
        for a, ds in rules:
            if a in required and not set(ds) <= required:
                required |= set(ds)
                changed = True
    return required, [(a, ds) for a, ds in rules if a not in required and not set(ds) <= required]


def _linear_body(members: list, extra: Node | None) -> Node | None:
    """Object members (``(key literal, value, required)`` in order) then extras, every subset of the optional
    ones joined by commas, in a tree linear in size: before the first required member, ``Y_k = Y_{k-1}(,m_k)? | m_k``
    (the non-empty lists over the first k members); after it, each optional member is ``(,m)?``."""
    def item(i: int, started: bool) -> Node:
        k, node = members[i][0], members[i][1]
        return seq(Lit(("," if started else "") + k), node)

    more = None if extra is None else Choice((seq(Lit(","), Repeat(extra, ",", 1, None)), Lit("")))
    q = next((i for i, m in enumerate(members) if m[2]), None)
    y = None
    for i in range(len(members) if q is None else q):
        y = item(i, False) if y is None else Choice((seq(y, Choice((item(i, True), Lit("")))), item(i, False)))
    if q is None:
        if extra is not None:
            y = extra if y is None else Choice((y, extra))
            y = seq(y, more)
        return Lit("") if y is None else Choice((y, Lit("")))
    head = item(q, False) if y is None else seq(Choice((seq(y, Lit(",")), Lit(""))), item(q, False))
    parts = [head] + [item(i, True) if members[i][2] else Choice((item(i, True), Lit("")))
                      for i in range(q + 1, len(members))]
    return seq(*parts, *([more] if more is not None else []))


def _in_lang(a, word: str) -> bool:
    """Whether ``word`` is in the language of AST ``a``."""
    return re.fullmatch(emit(a), json.dumps(word, ensure_ascii=False)[1:-1]) is not None


def _lens(a) -> tuple[int, int | None]:
    from .ecma_regex import min_len

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


def compile_schema(schema: dict | type, *, max_depth: int = 3) -> Template:
    """Compile a JSON Schema (or a pydantic model class) into a canvas template of canonical compact JSON."""
    t0 = time.perf_counter()
    schema = _schema_of(schema)
    if not isinstance(schema, (dict, bool)):
        raise UnsupportedSchemaError("schema", "#", f"a schema must be an object or a boolean, not {schema!r}")
    c = _Compiler(schema, max_depth)
    try:
        root = c.value([(schema, "#")], [schema], "", ())
    except RecursionError:
        raise UnsupportedSchemaError("$ref", "#", "schema nesting too deep") from None
    if root is None:
        raise UnsupportedSchemaError("false", "#", "the schema accepts no JSON value")
    ms = 1000 * (time.perf_counter() - t0)
    return JsonTemplate(root=root, schema=schema, compile_ms=ms, kind="json", meta={"max_depth": max_depth})


@lru_cache(maxsize=256)
def _cached(key: str, max_depth: int) -> Template:
    return compile_schema(json.loads(key), max_depth=max_depth)


def compile_schema_cached(schema: dict | type, *, max_depth: int = 3) -> Template:
    """:func:`compile_schema` with an LRU cache keyed on the schema's JSON text (property order kept)."""
    schema = _schema_of(schema)
    return _cached(json.dumps(schema, separators=(",", ":"), ensure_ascii=False), max_depth)


_unused = (ALL_TYPES, number_text)
