"""Scalar values of the layout: number and integer slots (ranges, exclusions, ``multipleOf``, digit caps) and string
slots (patterns, formats, lengths and their negations, combined as automata where needed)."""

from __future__ import annotations

import math
from decimal import Decimal

from ..errors import UnsupportedSchemaError
from . import automata
from .dnf import Flat, dec
from .ecma_regex import ANY, PatternError, alt, cat, cset, max_len, min_len, rep
from .formats import TRAILING_ZEROS, NumberDigits, cap_digits, format_ast, multiple_regex, number_regex
from .json_regex import emit, search_ast
from .nodes import DEFAULT_SLOT_TOKENS, Lit, Node, Slot, seq

MAX_SLOT_TOKENS = 256
NUMBER_TOKENS = 24
MAX_REPEAT = 256  # larger counted repetitions in a slot regex raise (outlines-core DFAs grow with the count)


def check_repeats(n, keyword: str, ptr: str) -> None:
    """Raise when the regex AST ``n`` holds a counted repetition over :data:`MAX_REPEAT`."""
    if n[0] == "rep":
        if n[2] > MAX_REPEAT or (n[3] is not None and n[3] > MAX_REPEAT):
            raise UnsupportedSchemaError(keyword, ptr, f"counted repetition over {MAX_REPEAT} in a slot")
        check_repeats(n[1], keyword, ptr)
    elif n[0] in ("cat", "alt"):
        for x in n[1]:
            check_repeats(x, keyword, ptr)


def number_node(f: Flat, integer: bool, iptr: str, digits: NumberDigits | None) -> Node | None:
    """A number or integer slot for the ranges of ``f`` (minus its excluded values), under ``multipleOf``; None
    when no number is left."""
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
            alts.append(cap_digits(r, digits))
    if not alts:
        return None
    regex = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
    tokens = NUMBER_TOKENS
    if digits is not None and digits.integer is not None:  # sign, digits (and point, fraction, exponent)
        tokens = 1 + digits.integer + (0 if integer else 6 + (digits.fraction or NUMBER_TOKENS) + TRAILING_ZEROS)
    if integer and f.lo is not None and f.hi is not None:
        tokens = max(len(str(int(f.lo))), len(str(int(f.hi)))) + 1
    return Slot(regex, tokens, iptr or "/")


def string_ast(f: Flat):
    """AST of the allowed decoded strings (``("none",)`` when empty)."""
    p = (f.patterns or f.formats or (("", "#"),))[0][1]
    try:
        asts = [search_ast(x) for x, _ in f.patterns]
        for name, fp in f.formats:
            a = _format(name, fp)
            if a is not None:
                asts.append(a)
        nots = [search_ast(x) for x, _ in f.not_patterns]
        nots += [a for a in (_format(n, fp) for n, fp in f.not_formats) if a is not None]
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


def _format(name: str, p: str):
    try:
        return format_ast(name)
    except KeyError:
        raise UnsupportedSchemaError("format", p, f"format {name!r} cannot be enforced") from None


def string_node(f: Flat, iptr: str) -> Node | None:
    """A string: its quotes pinned, its body a slot (a literal when only the empty string is left)."""
    a = string_ast(f)
    if a[0] == "none":
        return None
    p = (f.patterns or f.formats or (("", "#"),))[0][1]
    kw = "pattern" if f.patterns else "format" if f.formats else "maxLength"
    check_repeats(a, kw, p)
    try:
        body = emit(a)
    except PatternError as e:
        raise UnsupportedSchemaError(kw, p, str(e)) from None
    if body == "":
        return Lit('""')
    m = max_len(a)
    tokens = DEFAULT_SLOT_TOKENS if m is None else max(1, min(m, MAX_SLOT_TOKENS))
    return seq(Lit('"'), Slot(body, tokens, iptr or "/"), Lit('"'))


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


