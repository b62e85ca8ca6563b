"""Arithmetic a text asks for, and the expressions that may answer it: a tool argument that holds an expression
(``calculator(expression=...)``) is held to the numbers the text writes, joined by operators
(:func:`expression_pattern`); :func:`asks_arithmetic` and :func:`word_problem` say whether a request asks for it at
all (:func:`agentkit.steps.unserved.covering`)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence

from .dates import date_mentions
from .numbers import digit_mentions, number_mentions
from .units import unit_key, unit_mentions

__all__ = ["ALL_OPERATORS", "asks_arithmetic", "expression_pattern", "implied_operators", "rate_asked", "word_problem",
           "written_expressions"]


def expression_pattern(text: str, must: Sequence[float] = ()) -> str | None:
    """The pattern of an arithmetic expression over the numbers ``text`` writes (:func:`text_numbers`, written
    plainly: ``1,500`` as ``1500``, ``a dozen`` as ``12``), each one optionally negative or a percent, joined by
    ``+ - * / **`` (one operator at least; ``%`` is a percent, not a remainder) with parentheses and spaces, and the
    numbers its words imply (:data:`_IMPLIED`: ``half`` 2, ``%`` 100); None when that gives fewer than two numbers.
    As many operators as there are numbers, less one, at most (on each side of a ``must`` number): a small model
    held to the pattern alone wrote ``1455 - 1455 - 1455 - ...`` to its token limit. The operators are those the
    text names (:func:`implied_operators`), all of them where it names none: held to the numbers alone, the model
    wrote ``18400 + 7.25%`` for "a 7.25% fee on the 18,400" and ``43*43`` for "divide 98765 by 43".
    Up to six numbers, each is used once at most, in order (:func:`_distinct`): every number the text writes in
    digits, in the text's order, then any it writes in words or implies; with ``must``, in the order ``text`` gives
    them (an owed call's operands: the results first).
    A share asked as a percentage ("what % of my pay") is ``part / whole * 100`` (:func:`_share`).
    ``must``: numbers one of which the expression uses (None when ``text`` writes none of them)."""
    found = number_mentions(text)
    written = {_operand(text, a, b, v) for a, b, v in found}
    if not written:
        return None
    low = text.lower()
    implied = {str(v) for word, v in _IMPLIED
               if (word in low if not word.isalpha() else re.search(r"(?<!\w)" + word + r"(?!\w)", low))}
    nums = sorted(written | implied, key=len, reverse=True)
    if len(nums) < 2:  # one number is no arithmetic
        return None
    ops = implied_operators(text) or ALL_OPERATORS
    op = r" *(?:" + "|".join(re.escape(o) for o in sorted(ops, key=len, reverse=True)) + r") *"
    if re.search(_SHARE_OF, low) and (share := _share(text, found, must)):
        return share
    if not must and (rate := rate_asked(text)):
        return rate
    if not must and set(ops) == {"/"} and (shared := _shared(text, found)):
        return shared
    if not must and (special := _average(text, found) or _on_top(text, found) or _compound(text, found)):
        return special
    if len(nums) <= _DISTINCT_UP_TO:
        digits = [_operand(text, a, b, v) for a, b, v in _in_digits(text, found)]
        said = list(dict.fromkeys([*digits, *(_operand(text, a, b, v) for a, b, v in found), *sorted(implied)]))
        percents = {_operand(text, a, b, v): text[b:b + 2].strip().startswith("%") for a, b, v in found
                    if _PERCENT_AFTER.match(text, b)}  # each percent: whether it is written with the sign
        any_order = bool(_ANY_ORDER.search(low)) and len(said) <= _ANY_ORDER_UP_TO  # "subtract 5 from 20"
        if must:
            return _distinct(said, op, percents, ordered=not any_order,
                             needed=[x for x in said if any(float(x) == float(v) for v in must)])
        if any_order:
            return _distinct(said, op, percents, ordered=False)
        in_words = {"100"} & set(implied) if _PERCENT_WORD.search(text) and "%" not in text else set()
        return _distinct(said, op, percents, required=set(digits) | in_words, joins=_joins(text, found, ops))
    operand = lambda xs: r"\(*-?(?:" + "|".join(re.escape(x) for x in xs) + r")%?\)*"
    n, most = operand(nums), str(len(nums) - 1)
    if not must:
        return r"^ *" + n + r"(?:" + op + n + r"){1," + most + r"} *$"
    needed = [x for x in nums if any(float(x) == float(v) for v in must)]
    if not needed:
        return None
    m, then = operand(needed), r"(?:" + op + n + r")"
    return (r"^ *(?:(?:" + n + op + r"){1," + most + r"}" + m + then + r"{0," + most + r"}|" + m + then + r"{1,"
            + most + r"}) *$")


_DISTINCT_UP_TO = 6  # numbers a pattern spells out in order (6: 57 subsequences of two or more)
_ANY_ORDER_UP_TO = 4  # numbers a pattern spells out in any order (4: 60 orders of two to four of them)
# a sum shared: "there's 6 of us, how much each?", "how much do we each pay"
_EACH_OF_US = r"\b(?:\d+|[^\W\d_]+) of us\b[^.?!]{0,30}\beach\b|\bhow much (?:\w+ ){0,3}each\b"
# what is left of an amount or over a limit, asked: "What's left over after that?", "how much do I have left after
# rent", "how much over I am" (not "€300 left over from Italy plus $150", told)
_LEFT_ASKED = re.compile(r"\bwhat(?:'s| is| do i have) left\b|\bhow much (?:is |do i have |will i have )?"
                         r"(?:left|remaining)\b|\bhow (?:much|many \w+|far) (?:over|under)\b"
                         r"|\bby how (?:much|many)\b[^.?!]{0,20}\b(?:over|under)\b", re.IGNORECASE)
# how many of a price a budget buys, or of a measure a height takes: "with a $1,000 budget how many nights can i
# afford?", "how many Eiffel Towers stacked ... it'd take to reach the height of Everest (8,849 m)"
_AFFORD = r"\bhow many\b[^.?!]{0,60}?\b(?:afford|buy|reach)\b"
# a share of a whole asked as a percentage: "what percentage of my income is rent", "what % of my pay it eats"
_SHARE_OF = r"\bwhat (?:percent(?:age)?|per cent|%)(?= of\b)"
# words that put a later number first ("how many years ago ... from 2026", "what % of my pay" is over the pay)
_ANY_ORDER = re.compile(r"\b(?:from|into|ago)\b|" + _SHARE_OF + "|" + _AFFORD)


_PER = re.compile(r"([^\W\d_]+) per (?:(\d[\d,]*(?:\.\d+)?) ?)?([^\W\d_]+)", re.IGNORECASE)


def rate_asked(text: str) -> str | None:
    """The pattern of a rate asked between two units ``text`` writes numbers in, ``a / b`` or ``a / b * n`` for
    "<unit a> per [n] <unit b>" ("41.3 litres after driving 612 km ... in litres per 100 km" is ``41.3 / 612 *
    100``); None where it asks none, or writes no number in one of the units. Held to the text's order, the
    numbers came out the wrong way up ("412 km on 31.6 litres ... litres per 100 km")."""
    units = unit_mentions(text)
    for m in _PER.finditer(text):
        top, bottom = unit_key(m.group(1)), unit_key(m.group(3))
        if top == bottom or not {top, bottom} <= {unit_key(u) for _, _, u in units}:
            continue
        tops, bottoms = (_written_in(text, key, units, m.span()) for key in (top, bottom))
        if tops and bottoms:
            alt = lambda xs: "(?:" + "|".join(re.escape(x) for x in xs) + ")"
            times = r" *\* *" + re.escape(m.group(2).replace(",", "")) if m.group(2) else ""
            return r"^ *\(? *" + alt(tops) + r" */ *" + alt(bottoms) + r" *\)?" + times + r" *$"
    return None


def _written_in(text: str, key: str, units: list[tuple[int, int, str]], outside: tuple[int, int]) -> list[str]:
    """The numbers ``text`` writes in digits right before a unit of ``key`` (``units``: its unit mentions), outside
    the span ``outside``."""
    return [_plain_number(v) for a, b, v in digit_mentions(text) if not outside[0] <= a < outside[1]
            and any(unit_key(u) == key and b <= s <= b + 2 and not text[b:s].strip() for s, _, u in units)]


_PEOPLE_AFTER = re.compile(r"\s*(?:ppl|people|persons?|of us|friends|guests|mates|ways|heads)\b", re.IGNORECASE)


def _shared(text: str, found: list[tuple[int, int, int | float]]) -> str | None:
    """The pattern of an amount shared among people, ``amount / count``, where ``text`` writes two numbers in
    digits, one of them a count of people (:data:`_PEOPLE_AFTER`: ``7 ppl``, ``4 ways``), whatever their order: "we're
    7 ppl splitting a 2,340.75 bill" came out ``7 / 2340.75`` held to the text's order."""
    digits = [(a, b, v) for a, b, v in _in_digits(text, found) if not _PERCENT_AFTER.match(text, b)]
    counts = [_operand(text, a, b, v) for a, b, v in digits if _PEOPLE_AFTER.match(text, b)]
    amounts = [_operand(text, a, b, v) for a, b, v in digits if not _PEOPLE_AFTER.match(text, b)]
    if len(digits) != 2 or len(counts) != 1 or len(amounts) != 1:
        return None
    return r"^ *" + re.escape(amounts[0]) + r" */ *" + re.escape(counts[0]) + r" *$"


_COMPOUND = re.compile(r"\bcompound(?:ed|ing)?\b", re.IGNORECASE)
_YEARS_AFTER = re.compile(r"\s*(?:years?|yrs?)\b", re.IGNORECASE)


def _compound(text: str, found: list[tuple[int, int, int | float]]) -> str | None:
    """The pattern of an amount compounded yearly, ``p * (1 + r%) ** n``, where ``text`` asks for compounding and
    writes one amount, one percent and one count of years in digits: "4500 ... at 3.2% a year, compounded annually,
    ... after 6 years" came out ``4500*3.2% * 6``."""
    digits = _in_digits(text, found)
    rates = [_operand(text, a, b, v) for a, b, v in digits if _PERCENT_AFTER.match(text, b)]
    years = [_operand(text, a, b, v) for a, b, v in digits if _YEARS_AFTER.match(text, b)]
    amounts = [_operand(text, a, b, v) for a, b, v in digits
               if not _PERCENT_AFTER.match(text, b) and not _YEARS_AFTER.match(text, b)]
    if not _COMPOUND.search(text) or len(rates) != 1 or len(years) != 1 or len(amounts) != 1:
        return None
    p, r, n = (re.escape(x) for x in (amounts[0], rates[0], years[0]))
    return r"^ *" + p + r" *\* *\( *1 *\+ *" + r + r" *% *\) *\*\* *" + n + r" *$"


_AVERAGE = re.compile(r"\b(?:average|mean)\b", re.IGNORECASE)


def _average(text: str, found: list[tuple[int, int, int | float]]) -> str | None:
    """The pattern of an average asked of the two to six numbers ``text`` writes in digits, ``(a + b + c) / 3``
    (the count theirs): "bills were 1250, 890.50 and 2300. What's the average bill?" came out ``1250/890.5/2300``
    held to the operator "average" names."""
    nums = [_operand(text, a, b, v) for a, b, v in _in_digits(text, found)]
    if not _AVERAGE.search(text) or not 2 <= len(nums) <= _DISTINCT_UP_TO or len(set(nums)) < len(nums):
        return None
    return r"^ *\( *" + r" *\+ *".join(re.escape(x) for x in nums) + r" *\) */ *" + str(len(nums)) + r" *$"


# a percent added to an amount: "an 18% tip on top", "plus 8% tax", "with 20% VAT"
_ON_TOP = re.compile(r"%\s*(?:tip|tax|vat|gst|service(?: charge)?|fee|markup|surcharge)\b[^.?!]{0,25}?"
                     r"(?:\bon top\b|\btotal\b)|\b(?:plus|with|including|add(?:ing)?)\s+(?:an?\s+)?\d[\d.]*\s*%\s*"
                     r"(?:tip|tax|vat|gst|service|fee)\b", re.IGNORECASE)


def _on_top(text: str, found: list[tuple[int, int, int | float]]) -> str | None:
    """The pattern of a percent added to an amount, ``a * (1 + p%)`` or ``a + a * p%``, then shared among people
    where the text counts them (``/ 4``): "Dinner came to $86.40 and I want to leave an 18% tip on top. What total"
    came out ``86.4 + 18%``, a fifth of a dollar. None where the text writes no one amount and one percent."""
    digits = _in_digits(text, found)
    percents = [_operand(text, a, b, v) for a, b, v in digits if _PERCENT_AFTER.match(text, b)]
    counts = [_operand(text, a, b, v) for a, b, v in found if _PEOPLE_AFTER.match(text, b)]
    amounts = [_operand(text, a, b, v) for a, b, v in digits if not _PERCENT_AFTER.match(text, b)
               and not _PEOPLE_AFTER.match(text, b)]
    if not _ON_TOP.search(text) or len(percents) != 1 or len(amounts) != 1 or len(counts) > 1:
        return None
    a, p = re.escape(amounts[0]), re.escape(percents[0])
    times = a + r" *\* *\( *1 *\+ *" + p + r" *% *\)"
    if counts:
        return r"^ *(?:\( *" + times + r" *\)|" + times + r") */ *" + re.escape(counts[0]) + r" *$"
    return r"^ *(?:" + times + r"|" + a + r" *\+ *" + a + r" *\* *" + p + r" *%) *$"


def _share(text: str, found: list[tuple[int, int, int | float]], must: Sequence[float]) -> str | None:
    """The pattern of a share of a whole as a percentage, ``part / whole * 100``, over two numbers ``text`` writes
    in digits and not as a percent (one of ``must`` when given); None where it writes fewer than two. Held to the
    operators alone, a small model wrote ``100*1150`` for "I take home 3k a month and my rent is 1,150. What
    percentage of my income is going on rent?"."""
    nums = list(dict.fromkeys(_plain_number(v) for a, b, v in _in_digits(text, found)
                              if not _PERCENT_AFTER.match(text, b)))
    pairs = [(x, y) for x, y in itertools.permutations(nums, 2)
             if not must or any(float(v) in (float(x), float(y)) for v in must)]
    if len(nums) > _ANY_ORDER_UP_TO or not pairs:
        return None
    shares = "|".join(re.escape(x) + r" */ *" + re.escape(y) for x, y in pairs)
    return r"^ *(?:\(? *(?:" + shares + r") *\)? *\* *100) *$"


def _distinct(nums: list[str], op: str, percents: Mapping[str, bool], *, ordered: bool = True, required: set[str] = frozenset(),
              needed: list[str] | None = None, joins: dict[tuple[str, str], str] | None = None) -> str | None:
    """The pattern of expressions over two or more of ``nums``, each one once, joined by ``op``: in the order of
    ``nums`` when ``ordered``; with every one of ``required``, and one of ``needed`` when given; a ``%`` after
    those written as percents (``percents``: True where written with the sign, which they then take, or ``/ 100``: a model
    wrote ``1161.76*15`` for "15% of the pounds figure" where the ``%`` was optional). Held to the numbers alone, a small model wrote ``43 / 43`` and
    then ``43 / 98765`` for "divide 98765 by 43", ``1475 + 1475`` for "1,475 a month for 38 months" and ``287.4% /
    6`` for "287.40 between 6 people". ``joins``: the operators that may join two numbers next to each other (the
    words between them name them: :func:`_joins`), else ``op``."""
    pct = lambda x: (r"(?:%| */ *100)" if percents[x] else r"%?") if x in percents else ""
    term = lambda x: r"\(*-?" + re.escape(x) + pct(x) + r"\)*"
    pick = itertools.combinations if ordered else itertools.permutations
    orders = [o for k in range(2, len(nums) + 1) for o in pick(nums, k)
              if required <= set(o) and (needed is None or set(o) & set(needed))]
    if not orders:
        return None
    joined = lambda o: term(o[0]) + "".join((joins or {}).get((x, y), op) + term(y) for x, y in itertools.pairwise(o))
    return r"^ *(?:" + "|".join(joined(o) for o in orders) + r") *$"


# the words between two numbers that name the operator joining them ("14 boxes at 23.50 each plus 12.99 shipping")
_BETWEEN = (("+", r"\bplus\b|\band add\b"), ("-", r"\bminus\b|\bless\b"), ("*", r"\btimes\b|\bmultiplied by\b"),
            ("/", r"\bdivided by\b"))


def _joins(text: str, found: list[tuple[int, int, int | float]], ops: Sequence[str]) -> dict[tuple[str, str], str]:
    """For two numbers ``text`` writes in digits one after the other, the pattern of the operators that may join
    them where the three words at most between them name some (:data:`_BETWEEN`, among ``ops``): "23.50 each plus
    12.99" adds,
    and a small model held to ``*`` and ``+`` over the three numbers wrote ``14*23.5*12.99``."""
    digits = [(a, b, _operand(text, a, b, v)) for a, b, v in _in_digits(text, found)]
    out = {}
    for (_, b, x), (a, _, y) in itertools.pairwise(digits):
        gap = text[b:a]
        if len(re.findall(r"[^\W\d_]+", gap)) > 3:  # "1,140 and utilities plus phone come to 385.75": not theirs
            continue
        named = [o for o, rx in _BETWEEN if o in ops and re.search(rx, gap, re.IGNORECASE)]
        if named:
            out[(x, y)] = r" *(?:" + "|".join(re.escape(o) for o in named) + r") *"
    return out


_PERCENT_WORD = re.compile(r"\d\s*(?:percent|per cent)\b", re.IGNORECASE)  # "tip 18 percent": 18 / 100 then
_PERCENT_AFTER = re.compile(r"\s*(?:%|percent\b|per cent\b)", re.IGNORECASE)


# what follows a rate's number: ``12.50 each``, ``1,475 a month``, ``18.40 an hour``, ``$64/hr``
_RATE_AFTER = (r"\s*(?:[^\W\d_]+\s+)?(?:(?:each|apiece|monthly|weekly|daily|hourly|yearly|annually)\b"
               r"|(?:a|an|per)\s+[^\W\d_])|/[^\W\d_]")
ALL_OPERATORS = ("+", "-", "*", "/", "**")
# a room's, a tank's or a bed's measures: "4.2m x 3.65m", "120cm by 45cm by 50cm", "3.4m long, 1.75m wide"
_MEASURES = r"\d\s*(?:[^\W\d_]{0,6}\s*[x×]|[^\W\d_]{1,6}\s*by)\s*\d(?![\d.:]*\s*(?:am|pm|o'clock)\b|[\d.]*:)|\blong\b[^.?!]{0,30}\bwide\b|\bcubic\b"
# the operators a request's words name: a word problem's operation is grounded in its words as its numbers are in
# its digits ("divide 98765 by 43" divides; "18.40 an hour for 37.5 hours" and "a 7.25% fee" multiply)
_OPERATOR_WORDS = (
    ("/", (r"\bdivid(?:e|ed|ing)\b|\bsplit(?:ting)?\b|\bshared?\b|\beach of\b|\bper (?:person|head)\b|\baverage\b"
          r"|\bhalf\b|\bhalve\b|\bquarter\b|[^\W\d_]\s+per\s+[^\W\d_]|\bper\s*cent\b|\bpercent\b"
          r"|\bhow many\b[^.?!]{0,40}?\b(?:take|fill|fit|cover|need|last)\b|\bhow many (?:of )?(?:me|us|them)\b"
          r"|\beach\b[^.?!]*\bcovers?\b"
          r"|\bpercentage\b|" + _SHARE_OF + r"|" + _EACH_OF_US + r"|" + _AFFORD)),
    ("*", (r"\btimes\b|\bmultipl\w*|\d\s*%|\bper\s*cent\b|\bpercent(?:age)?\b|" + _SHARE_OF
          + r"|\btwice\b|\bdouble\b|\btriple\b"
          r"|\d(?:" + _RATE_AFTER + ")|" + _MEASURES)),
    ("+", (r"\bplus\b|\badd(?:ed|ing)?\b|\bsum\b|\bin all\b|\ball together\b|\baltogether\b|\bcombined\b"
          r"|\bon top\b(?! of each other)")),
    ("-", (r"\bminus\b|\bsubtract\w*|\bless\b|\b(?:over|under) (?:the |my )?(?:limit|budget|allowance)\b"
          r"|(?<![\d%] )\bleft\b|\bremain\w*|\boff\b|\bdiscount\w*"
          r"|\bprofit\b|\bdifference\b|\bafter (?:spending|paying|taking)\b|\bago\b")),
    ("**", r"\bpower\b|\bsquared\b|\bcubed\b"),
)
_OPERATOR_RES = tuple((op, re.compile(rx, re.IGNORECASE)) for op, rx in _OPERATOR_WORDS)


def implied_operators(text: str) -> tuple[str, ...]:
    """The operators ``text`` names in words or signs (:data:`ALL_OPERATORS` order; empty when it names none, and
    then an expression may use any): ``divide``, ``split``, ``each of``, ``half``, ``km per litre`` divide;
    ``times``, ``twice``, a rate after a number (``12.50 each``, ``1,475 a month``, ``$64/hr``), a percent multiply (``15% *
    240``; a percent in words divides too, ``15 * 240 / 100``: "17.5% of 3480" came out ``17.5% / 3480``); ``plus``,
    ``add``, ``on top`` add; ``minus``, ``left``, ``off``, ``profit``, ``after spending`` subtract (and alone where
    the text asks what is left: "what's left over after that?"); ``to the power of``, ``squared`` raise. The signs
    of an expression it writes count as themselves (``(45 + 55) * 3.2``, :func:`written_expressions`)."""
    named = {op for op, rx in _OPERATOR_RES if rx.search(text)}
    for run in written_expressions(text):
        named |= set(re.findall(r"\*\*|[-+*/]", run))
    if _LEFT_ASKED.search(text) and not written_expressions(text):  # what is left of an amount: subtraction alone
        named = {"-"}
    return tuple(op for op in ALL_OPERATORS if op in named)


_OPERATOR = re.compile(r"\)?\s*(?:\*\*|[-+*/x×^]|plus|minus|times|multiplied by|divided by|over|to the power of"
                       r"|%\s*of|percent of|per cent of)\s*\(?", re.IGNORECASE)
_OF_ONE = re.compile(r"\b(?:half|double|twice|triple|a quarter|the square root|the cube) of\s*$|\bsquare root of\s*$",
                     re.IGNORECASE)


def asks_arithmetic(text: str) -> bool:
    """Whether ``text`` asks arithmetic of the numbers it writes in digits: two of them joined by an operator, a
    sign or a word (``17.5 times 23``, ``2 to the power of 16``, ``15% of 240``, ``(45 + 55) * 3.2``), or one
    after ``half of`` and the like. Numbers inside a date do not count (``2026-03-05`` is no subtraction)."""
    found = _digit_numbers(text)
    if any(_OF_ONE.search(text[:a]) for a, _ in found):
        return True
    return any(_OPERATOR.fullmatch(text[b1:a2]) for (_, b1), (a2, _) in itertools.pairwise(found))


def _digit_numbers(text: str) -> list[tuple[int, int]]:
    return [(a, b) for a, b, _ in digit_mentions(text)]


_ARITHMETIC_VERB = re.compile(r"\b(?:divide|multiply|subtract|split(?:ting)?|share|average"
                              r"|(?:add|sum|tot) (?:(?:these|those|them|it|this|that|all|everything|it all) )?up"
                              r"|each of (?:us|them|you)|per person|equally|" + _EACH_OF_US
                              + r"|(?:how much|how many)\b[^.?!]*\bper [^\W\d_]+)\b", re.IGNORECASE)
_PERCENT = re.compile(r"\d" + _PERCENT_AFTER.pattern, re.IGNORECASE)
_RATE = re.compile(_RATE_AFTER, re.IGNORECASE)
_MEASURED = re.compile(_MEASURES, re.IGNORECASE)
_TOTAL = re.compile(r"\b(?:in total|total|altogether|in all|combined)\b", re.IGNORECASE)


def word_problem(text: str) -> bool:
    """Whether ``text`` writes two numbers or more, one in digits at least ("$1,847.60 ... seven of us"), and asks
    arithmetic of them in words: an arithmetic verb (``divide 98765 by 43``, ``split 287.40 between 6 people``,
    ``each of us``, ``equally``, ``how much ... per week``), a percent (``a 7.25% fee on the 18,400``), a
    rate after a number (``12.50 each``, ``1,475 a month``, ``18.40 an hour``), a rate between two units
    (:func:`rate_asked`: "litres per 100 km"), a total (``in total``,
    ``altogether``) or measures to multiply (``4.2m x 3.65m``, ``120cm by 45cm``, ``3.4m long, 1.75m wide``). Two amounts to convert ("12 lbs and 60 cm") are none. Weaker than :func:`asks_arithmetic`: a
    fee on an amount to convert first is a word problem too."""
    ends = [b for _, b in _digit_numbers(text)]
    if not ends or len(number_mentions(text)) < 2:
        return False
    return bool(_ARITHMETIC_VERB.search(text) or _PERCENT.search(text) or _TOTAL.search(text)
                or _MEASURED.search(text) or any(_RATE.match(text, b) for b in ends) or rate_asked(text))


# the numbers a word implies in arithmetic (``half of 7`` is ``7 / 2``, ``15% of 240`` is ``15 * 240 / 100``)
_IMPLIED = (("half", 2), ("halve", 2), ("double", 2), ("twice", 2), ("triple", 3), ("thrice", 3), ("quarter", 4),
            ("%", 100), ("percent", 100), ("percentage", 100), ("per cent", 100))


def _in_digits(text: str, found: list[tuple[int, int, int | float]]) -> list[tuple[int, int, int | float]]:
    """The mentions of ``found`` (``text``'s :func:`number_mentions`) written in digits, as
    :func:`~agentkit.constrain.numbers.digit_mentions` gives them, without reading ``text`` again."""
    return [(a, b, v) for a, b, v in found if any(c.isdigit() for c in text[a:b])]


def _plain_number(v: float) -> str:
    return str(v) if isinstance(v, int) else repr(v)


_FRACTION_WRITTEN = re.compile(r"(?:(\d+)(?:\s+|-))?(\d)/(\d{1,2})")


def _operand(text: str, a: int, b: int, v: float) -> str:
    """How an expression writes the number ``text[a:b]`` (value ``v``): plainly (``1,500`` as ``1500``), and a
    fraction exactly (``1/3`` as ``1/3``, ``2 1/2`` as ``(2+1/2)``): "1/3 of my 4,275 ... after 14 months" is
    19950, not 0.333333's 19949.98."""
    m = _FRACTION_WRITTEN.fullmatch(text[a:b])
    if m is None:
        return _plain_number(v)
    whole, n, d = m.groups()
    return f"({whole}+{n}/{d})" if whole else f"{n}/{d}"


_TERM = r"\(*-?\d[\d,]*(?:\.\d+)?%?\)*"
_RUN = re.compile(r"(?<![\w.,:/-])" + _TERM + r"(?:(?: *(?:\*\*|[*/×÷^+]|x(?= )) *| *-(?= )| +- *)" + _TERM
                  + r")+(?![\w.:/-])")


def written_expressions(text: str) -> list[str]:
    """The arithmetic expressions ``text`` writes in signs (``(1820 - 365) / 7``, ``3456 x 78``, ``(17.5+23.25) x
    4 - 12.8/0.4``), each as a calculator reads it (``x``, ``×`` as ``*``, ``÷`` as ``/``, ``^`` as ``**``, no
    thousands separators), in order, each once. A ``-`` counts with a space after it (``9:00-18:00`` and
    ``415-555-0138`` are no subtraction), nor is a date one; an expression with unbalanced parentheses is none, nor
    a fraction where the text writes other numbers ("1/3 of my 4,275")."""
    out, several = [], None
    for m in _RUN.finditer(_without_dates(text)):
        run = m.group().strip()
        while run.count("(") > run.count(")") and run.startswith("("):
            run = run[1:]
        while run.count(")") > run.count("(") and run.endswith(")"):
            run = run[:-1]
        fraction = _FRACTION_WRITTEN.fullmatch(run) is not None
        if fraction and several is None:  # read once, and only for a fraction
            several = len(number_mentions(text)) > 1
        if not _balanced(run) or (fraction and several):
            continue  # "1/3 of my 4,275 ... after 14 months": a fraction, one number of a word problem
        run = re.sub(r"(?<=\d),(?=\d{3})", "", run).replace("×", "*").replace("÷", "/").replace("^", "**")
        out.append(re.sub(r"(?<=[\d)%]) *x *(?=[(\d-])", " * ", run))
    return list(dict.fromkeys(out))


def _balanced(run: str) -> bool:
    depth = 0
    for c in run:
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


def _without_dates(text: str) -> str:
    """``text`` with each date it writes blanked out (the same length: offsets stay)."""
    for a, b, _ in date_mentions(text):
        text = text[:a] + " " * (b - a) + text[b:]
    return text
