"""Regexes for JSON numbers under bounds and ``multipleOf``, and for the string ``format`` values we enforce.

Numbers are written as ``json.dumps`` writes them (what :func:`agentkit.constrain.canonical.canonical_json`
writes): integers as plain digits, floats as Python's ``repr`` (``0.25``, ``3.0``, ``1.5e-05``, ``1e+16``), never
``-0``, never a trailing zero in a fraction (except the ``.0`` of an integral float). The regexes below accept the canonical
forms of the values in range, and the same digits with up to :data:`TRAILING_ZEROS` zeros after a fraction (the
same values), except that tiny numbers in exponent form are left out when a bound cuts through ``(-1e-4, 1e-4)``
(tighter, never looser).

Formats (JSON Schema's format-assertion vocabulary) are ECMA patterns matched against the whole decoded string.
Each one is the RFC grammar or a strict subset of it (e.g. ``email`` is the dot-atom form, no quoted local parts;
``hostname`` bounds label counts so the 253-character limit holds), so a value a template accepts always passes.
Formats outside the vocabulary (``int32``, ``float``, ``byte``, ``url``, ...) are annotations in JSON Schema and are
ignored; ``idn-*``, ``iri*``, ``uri-template`` and ``regex`` raise (we cannot enforce them exactly).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from math import ceil, floor

from .automata import DFA, combine, from_ast, intersect, minimize, to_ast, trim
from .ecma_regex import PatternError
from .json_regex import emit, full_ast

FRAC = "[0-9]*[1-9]"  # a canonical fraction: no trailing zero
# after a fraction a number slot may also write up to this many zeros (1.8883340 as the prompt spells it: the value
# is the canonical one's, so bounds hold); without them a model that wanted to stop after a zero had to write
# another digit (BFCL multiple_5 wrote 1.88833402). The canonical form itself keeps none.
TRAILING_ZEROS = 7
ZEROS = f"0{{0,{TRAILING_ZEROS}}}"
POINT_ZERO = f"\\.0{{1,{TRAILING_ZEROS + 1}}}"  # the .0 of an integral float (number slots), or .00...
# exponents stop at 307: a double parses any of these without overflow to inf or underflow to 0 / subnormals
# |x| < 1e-4, repr's exponent form, and the same exponent without its leading zero (1e-9 as a prompt spells it:
# with only e-09 allowed, a model that wrote "1e-9" had to go on to 1e-90)
TINY = "[1-9](?:\\.[0-9]*[1-9])?e\\-(?:0?[5-9]|[1-9][0-9]|[12][0-9]{2}|30[0-7])"
# an unbounded number slot also takes the exponent forms of 1e-4 <= |x| < 1e16 (1e-3, 2.5e+6, 1e6), which repr
# never writes but a model may: once "1e" is allowed (for tiny values) it must be able to finish what it meant
MID_EXP = "[1-9](?:\\.[0-9]*[1-9])?e(?:\\-0?[1-4]|\\+?0?[0-9]|\\+?1[0-5])"
BIG = "[1-9](?:\\.[0-9]*[1-9])?e\\+(?:1[6-9]|[2-9][0-9]|[12][0-9]{2}|30[0-7])"  # floats >= 1e16 (all integral)
ENUM_LIMIT = 256  # multipleOf over a bounded range: enumerate up to this many values


# -- integers -------------------------------------------------------------------------------------------------------
def _cls(a: str, b: str) -> str:
    return a if a == b else f"[{a}-{b}]"


def _same_len(x: str, y: str) -> list[str]:
    """Regexes for the digit strings of one length between ``x`` and ``y`` (x <= y)."""
    if x == y:
        return [x]
    i = 0
    while x[i] == y[i]:
        i += 1
    p, x, y = x[:i], x[i:], y[i:]
    n = len(x) - 1
    if n == 0:
        return [p + _cls(x, y)]
    out, tail = [], []
    d1, d2 = int(x[0]), int(y[0])
    if x[1:] != "0" * n:
        out += [p + x[0] + r for r in _same_len(x[1:], "9" * n)]
        d1 += 1
    if y[1:] != "9" * n:
        tail = [p + y[0] + r for r in _same_len("0" * n, y[1:])]
        d2 -= 1
    if d1 <= d2:
        out.append(p + _cls(str(d1), str(d2)) + ("[0-9]" if n == 1 else f"[0-9]{{{n}}}"))
    return out + tail


def _pos(a: int, b: int | None) -> list[str]:
    """Non-negative integers in [a, b] (b None: unbounded)."""
    out = []
    while b is None or a <= b:
        d = len(str(a))
        top = 10 ** d - 1
        if b is None:
            out += _same_len(str(a), str(top))
            out.append(f"[1-9][0-9]{{{d},}}")
            break
        if a == 10 ** (d - 1) and b >= top:  # every number of d digits, and maybe of a few more: one alternative
            d2 = d
            while b >= 10 ** (d2 + 1) - 1:
                d2 += 1
            out.append(_cls("0" if d == 1 and a == 0 else "1", "9") + ("" if d2 == 1 else
                       f"[0-9]{{{d - 1}}}" if d2 == d else f"[0-9]{{{d - 1},{d2 - 1}}}"))
            a = 10 ** d2
            continue
        hi = min(b, top)
        out += _same_len(str(a), str(hi))
        a = hi + 1
    return out


def int_alts(lo: int | None, hi: int | None) -> list[str]:
    """Alternatives (canonical integers in [lo, hi]); empty list when the range is empty."""
    if lo is not None and hi is not None and lo > hi:
        return []
    out = []
    if lo is None or lo < 0:  # negatives -m with m in [max(1, -hi), -lo]
        mlo = 1 if hi is None or hi >= 0 else -hi
        out += ["\\-" + r for r in _pos(mlo, None if lo is None else -lo)]
    if hi is None or hi >= 0:
        out += _pos(max(0, lo or 0), hi)
    return out


def int_regex(lo: int | None, hi: int | None) -> str | None:
    alts = int_alts(lo, hi)
    return None if not alts else alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


# -- decimals -------------------------------------------------------------------------------------------------------
def _frac_ge(f: str, incl: bool) -> str:
    """Canonical fraction digits F (no trailing zero) with 0.F >= 0.f (> when not ``incl``); f has no trailing 0."""
    alts = []
    for i, d in enumerate(f):
        if d != "9":
            alts.append(f[:i] + _cls(str(int(d) + 1), "9") + f"(?:{FRAC})?")
    alts.append(f + (f"(?:{FRAC})?" if incl else FRAC))
    return "(?:" + "|".join(alts) + ")"


def _frac_le(f: str, incl: bool) -> str:
    alts = []
    for i, d in enumerate(f):
        if i and f[i - 1] != "0":
            alts.append(f[:i])  # a proper prefix ending in a non-zero digit
        if d != "0":
            alts.append(f[:i] + "0" + FRAC)
            if d != "1":
                alts.append(f[:i] + _cls("1", str(int(d) - 1)) + f"(?:{FRAC})?")
    if incl:
        alts.append(f)
    return "(?:" + "|".join(alts) + ")"


def _split(x: Decimal) -> tuple[int, str]:
    i = floor(x)
    frac = format(x - i, "f").partition(".")[2].rstrip("0")
    return i, frac


def _mag(a: Decimal, a_ex: bool, b: Decimal | None, b_ex: bool, integer: bool, tiny: bool,
         nonint: bool = False, floats: bool = True, exact: bool = False) -> list[str]:
    """Canonical magnitudes m (no sign) with a <(=) m <(=) b, a >= 0 (``floats``: integral values may also be
    written as floats, ``3.0`` or ``1e+16``; with ``exact`` only up to EXACT_INT, see :func:`number_regex`)."""
    ilo = ceil(a) if not (a_ex and a == ceil(a)) else int(a) + 1
    ihi = None if b is None else (floor(b) if not (b_ex and b == floor(b)) else int(b) - 1)
    ints = [] if nonint else int_alts(ilo, ihi)
    if ints and floats and exact and (ihi is None or ihi > EXACT_INT):
        small = int_alts(ilo, EXACT_INT)
        out = ints + ([f"(?:{'|'.join(small)}){POINT_ZERO}"] if small else [])
    else:
        out = [f"(?:{'|'.join(ints)})(?:{POINT_ZERO})?"] if ints and floats else ints
        if ints and floats and b is None:
            big = _big_from(a)
            if big:
                out.append(big)
    if integer:
        return out
    fa, ffa = _split(a)
    if fa >= NO_FRACTION:  # no double this large has a fraction (repr writes them as 1.5e+16): nothing to add
        return out
    # whole units strictly inside: any fraction
    mid_lo = fa + 1
    mid_hi = None if b is None else (int(b) - 1 if b == floor(b) else floor(b) - 1)
    mid_hi = NO_FRACTION - 1 if mid_hi is None else min(mid_hi, NO_FRACTION - 1)
    if fa == (None if b is None else floor(b)) and b is not None:
        fb, ffb = _split(b)
        if ffb:  # both ends in the same unit [fa, fa+1)
            lo_r = _frac_ge(ffa, not a_ex) if ffa else FRAC
            hi_r = _frac_le(ffb, not b_ex)
            dfa = combine([full_ast(lo_r), full_ast(hi_r)])
            if dfa is not None:
                out.append(f"{fa}\\.(?:{emit(to_ast(dfa))}){ZEROS}")
        return out
    out += [f"{r}\\.{FRAC}{ZEROS}" for r in int_alts(mid_lo, mid_hi)]
    if ffa:  # a is not whole: I = fa needs 0.F >= frac(a)
        out.append(f"{fa}\\.{_frac_ge(ffa, not a_ex)}{ZEROS}")
    else:  # I = fa, any non-zero fraction (m > a)
        out.append(f"{fa}\\.{FRAC}{ZEROS}")
    if b is not None:
        fb, ffb = _split(b)
        if ffb and fb < NO_FRACTION:
            out.append(f"{fb}\\.{_frac_le(ffb, not b_ex)}{ZEROS}")
    if tiny and a == 0 and (b is None or b >= Decimal("0.0001")):
        out.append(TINY)
    if tiny and a == 0 and b is None:
        out.append(MID_EXP)
    return out


EXACT_INT = 2 ** 53  # integers up to here are exact doubles (float forms of larger ones: see number_regex's exact)
NO_FRACTION = 10 ** 16  # from here up repr writes floats in exponent form: plain digits with a fraction never occur


def _big_from(a: Decimal) -> str | None:
    """Exponent forms (``1.5e+20``) of magnitudes above ``a``: all of BIG when ``a`` < 1e16; otherwise those with
    an exponent above ``a``'s (the ones with ``a``'s own exponent are left out: tighter, never looser)."""
    if a < NO_FRACTION:
        return BIG
    e = a.adjusted() + 1
    return None if e > 307 else BIG.split("e\\+")[0] + "e\\+" + int_regex(e, 307)


def number_regex(lo: Decimal | None, lo_ex: bool, hi: Decimal | None, hi_ex: bool, *, integer: bool = False,
                 tiny: bool = True, nonint: bool = False, floats: bool = True, exact: bool = False) -> str | None:
    """Canonical numbers in the range (integers only when ``integer``; without ``floats`` integral values only in
    integer form, as draft 4 wants for ``integer``; with ``exact`` integral values in float form only where a
    double holds them exactly, |m| <= 2**53: ``3.0`` but never ``77777777777777777777.0`` or ``7.7e+19``, which
    a reader parses to a double that is not the integer written); None when no value is in range."""
    alts: list[str] = []
    if lo is None or lo < 0:  # negative values -m, m in (max(0,-hi), -lo)
        if hi is None or hi >= 0:
            a, a_ex = Decimal(0), True
        else:
            a, a_ex = -hi, hi_ex
        b, b_ex = (None, False) if lo is None else (-lo, lo_ex)
        if b is None or a < b or (a == b and not a_ex and not b_ex):
            alts += ["\\-" + r for r in _mag(a, a_ex, b, b_ex, integer, tiny, nonint, floats, exact) if r != "0"]
    if hi is None or hi > 0 or (hi == 0 and not hi_ex):
        a, a_ex = (Decimal(0), False) if lo is None or lo < 0 else (lo, lo_ex)
        if hi is None or a < hi or (a == hi and not a_ex and not hi_ex):
            alts += _mag(a, a_ex, hi, hi_ex, integer, tiny, nonint, floats, exact)
    return None if not alts else alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


def mod_dfa(k: int) -> DFA:
    """Canonical integers divisible by ``k``: 0 start, 1 after '-', 2 the number zero, 3 + r remainder r."""
    digits = [((ord(str(d)), ord(str(d))),) for d in range(10)]
    trans: list[list] = [[(((45, 45),), 1), (digits[0], 2)] + [(digits[d], 3 + d % k) for d in range(1, 10)],
                         [(digits[d], 3 + d % k) for d in range(1, 10)], []]
    for r in range(k):
        trans.append([(digits[d], 3 + (10 * r + d) % k) for d in range(10)])
    return DFA(trans, [False, False, True] + [r == 0 for r in range(k)])


def multiple_regex(step: Decimal, lo, lo_ex, hi, hi_ex, integer: bool, floats: bool = True,
                   exact: bool = False) -> str | None:
    """Canonical numbers in range that are multiples of ``step`` (``exact`` as in :func:`number_regex`; a range
    of integer multiples that reaches past 2**53 then gets no float forms at all: tighter, never looser); raises
    PatternError when not expressible."""
    if step <= 0:
        raise PatternError("multipleOf must be positive")
    if step == step.to_integral_value():
        k = int(step)
        if k == 1:
            return number_regex(lo, lo_ex, hi, hi_ex, integer=True, floats=floats, exact=exact)
        rng = number_regex(lo, lo_ex, hi, hi_ex, integer=True, floats=False)
        if rng is None:
            return None
        ilo = None if lo is None else (ceil(lo) if not (lo_ex and lo == ceil(lo)) else int(lo) + 1)
        ihi = None if hi is None else (floor(hi) if not (hi_ex and hi == floor(hi)) else int(hi) - 1)
        inexact = exact and (ilo is None or ihi is None or max(abs(ilo), abs(ihi)) > EXACT_INT)
        tail = "(?:\\.0)?" if floats and not inexact else ""
        if ilo is not None and ihi is not None and (ihi - ilo) // k <= ENUM_LIMIT:
            vals = [str(v) for v in range(ilo + (-ilo) % k, ihi + 1, k)]
            return None if not vals else "(?:" + "|".join(vals) + ")" + tail
        t = trim(intersect(from_ast(full_ast(rng)), mod_dfa(k)))
        return None if t is None else "(?:" + emit(to_ast(minimize(t))) + ")" + tail
    step = step.normalize()
    d = -step.as_tuple().exponent  # step = a / 10**d
    a = int(step.scaleb(d))
    if (10 ** d) % a == 0 and 10 ** d // a <= ENUM_LIMIT:  # 0.1, 0.25, 0.5, 0.01...: a set of fractions
        if integer:
            return number_regex(lo, lo_ex, hi, hi_ex, integer=True, floats=floats, exact=exact)
        base = number_regex(lo, lo_ex, hi, hi_ex, tiny=False)
        if base is None:
            return None
        fracs = sorted({format(k * a, f"0{d}d").rstrip("0") for k in range(1, 10 ** d // a)})
        frac = "|".join(["0", *fracs])
        limit = f"\\-?(?:0|[1-9][0-9]*)(?:\\.(?:{frac}))?"
        dfa = combine([full_ast(base), full_ast(limit)])
        return None if dfa is None else emit(to_ast(dfa))
    raise PatternError(f"multipleOf {step}")


# -- string formats -------------------------------------------------------------------------------------------------
_DATE = ("(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
         "|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]"
         "|[13579][26])00)-02-29)")
_TIME = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\\.[0-9]+)?(?:[Zz]|[+\\-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = f"{_DEC_OCTET}(?:\\.{_DEC_OCTET}){{3}}"
_H16 = "[0-9A-Fa-f]{1,4}"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = "(?:" + "|".join([
    f"(?:{_H16}:){{6}}{_LS32}", f"::(?:{_H16}:){{5}}{_LS32}", f"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    f"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}", f"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    f"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}", f"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    f"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}", f"(?:(?:{_H16}:){{0,6}}{_H16})?::"]) + ")"
# A label is 1-62 characters: alphanumeric runs of at most 20 joined by single hyphens; at most 4 labels (<= 251
# characters in all). Tighter than RFC 1123 (no "--", no 63-character labels, no fifth label) because outlines-core
# 0.2.14 takes exponential time on the exact form ``[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?`` (a bounded
# repetition right after a character of the same class); this form builds in milliseconds.
_LABEL = "[A-Za-z0-9]{1,20}(?:\\-[A-Za-z0-9]{1,20}){0,2}"
_HOST = f"{_LABEL}(?:\\.{_LABEL}){{0,3}}"
_ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-]+"
_UNRES = "A-Za-z0-9\\-._~"
_SUB = "!$&'()*+,;="
_PCT = "%[0-9A-Fa-f]{2}"
_PCHAR = f"(?:[{_UNRES}{_SUB}:@]|{_PCT})"
_AUTH = (f"(?:(?:[{_UNRES}{_SUB}:]|{_PCT})*@)?(?:\\[{_IPV6}\\]|{_IPV4}|(?:[{_UNRES}{_SUB}]|{_PCT})*)"
         f"(?::[0-9]*)?")
_QF = f"(?:\\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_HIER = f"(?://{_AUTH}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?|{_PCHAR}+(?:/{_PCHAR}*)*|)"
_SCHEME = "[A-Za-z][A-Za-z0-9+\\-.]*"
_URI = f"{_SCHEME}:{_HIER}{_QF}"
_NC = f"(?:[{_UNRES}{_SUB}@]|{_PCT})"  # pchar without ':'
_REL = f"(?://{_AUTH}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?|{_NC}+(?:/{_PCHAR}*)*|){_QF}"
_DUR_T = "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DURATION = (f"P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)(?:{_DUR_T})?|{_DUR_T}"
             "|[0-9]+W)")
_JPTR = "(?:/(?:[^~/]|~[01])*)*"

FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": f"{_DATE}[Tt]{_TIME}",
    "duration": _DURATION,
    "email": f"{_ATEXT}(?:\\.{_ATEXT})*@{_HOST}",
    "hostname": _HOST,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uuid": "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
    "uri": _URI,
    "uri-reference": f"(?:{_URI}|{_REL})",
    "json-pointer": _JPTR,
    "relative-json-pointer": f"(?:0|[1-9][0-9]*)(?:#|{_JPTR})",
}
UNENFORCEABLE = {"idn-email", "idn-hostname", "iri", "iri-reference", "uri-template", "regex"}


def format_ast(name: str):
    """AST of the whole-string language of format ``name``; None when the format is an annotation only.
    Raises KeyError for assertion formats we cannot enforce."""
    if name in FORMATS:
        return full_ast(FORMATS[name])
    if name in UNENFORCEABLE:
        raise KeyError(name)
    return None


# -- digit caps -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NumberDigits:
    """How many digits a number slot may write where the schema leaves them free (``compile_schema(digits=...)``).

    ``integer``: digits before the point of a number with no upper bound on its magnitude (20: every 64-bit
    integer, so ids and counts copied from a prompt stay reachable); ``fraction``: digits after the point (8).
    A bound the schema sets wins (``minimum: 1e20`` keeps its 21 digits). Under an ``integer`` cap an integer slot
    writes an integral value in float form (``3.0``) only where a double holds it exactly (|m| <= 2**53), never
    ``77777777777777777777.0`` or ``7.7e+19``: a JSON reader turns those into a double that is not the integer
    written, and typed readers (pydantic's ``int``, int64 fields) refuse them; plain digits reach the same values.
    Without caps a small model can run into a digit loop (``1234899999999999999999995``, ``1.5000000000000002``)
    that the slot's token budget cuts only late.
    ``None`` for either: no cap there."""

    integer: int | None = 20
    fraction: int | None = 8

    def __post_init__(self) -> None:
        for name in ("integer", "fraction"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise ValueError(f"NumberDigits.{name} must be an integer >= 1 or None, got {v!r}")


_OPEN_FRAC = re.compile(re.escape(FRAC))
_OPEN_INT = re.compile(r"\[0-9\]\{(\d+),\}")


def cap_digits(regex: str, caps: NumberDigits | None) -> str:
    """``regex`` (from :func:`number_regex`/:func:`multiple_regex`) with its open digit runs bounded by ``caps``:
    fractions (``[0-9]*[1-9]``, mantissas of exponent forms too) to ``caps.fraction`` digits, the open upper end of
    an integer part (``[1-9][0-9]{d,}``) to ``max(caps.integer, d + 1)`` digits. Bounded parts are left as they are,
    so a value within the schema's own bounds stays in the language whenever its digits fit the caps."""
    if caps is None:
        return regex
    if caps.fraction is not None:
        regex = _OPEN_FRAC.sub(f"[0-9]{{0,{caps.fraction - 1}}}[1-9]".replace("{0,0}", "{0}"), regex)
    if caps.integer is not None:
        regex = _OPEN_INT.sub(lambda m: f"[0-9]{{{m.group(1)},{max(int(m.group(1)), caps.integer - 1)}}}", regex)
    return regex
