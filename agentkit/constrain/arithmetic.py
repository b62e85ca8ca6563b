"""Arithmetic a text asks for, and the expressions that may answer it: a tool argument that holds an expression
(``calculator(expression=...)``) is held to the numbers the text writes, joined by operators
(:func:`expression_pattern`); :func:`asks_arithmetic` and :func:`word_problem` say whether a request asks for it at
all (:func:`agentkit.steps.unserved.covering`)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from .numbers import number_mentions, text_numbers

__all__ = ["asks_arithmetic", "expression_pattern", "word_problem"]


def expression_pattern(text: str, must: Sequence[float] = ()) -> str | None:
    """The pattern of an arithmetic expression over the numbers ``text`` writes (:func:`text_numbers`, written
    plainly: ``1,500`` as ``1500``, ``a dozen`` as ``12``), each one optionally negative or a percent, joined by
    ``+ - * / **`` (one operator at least; ``%`` is a percent, not a remainder) with parentheses and spaces, and the
    numbers its words imply (:data:`_IMPLIED`: ``half`` 2, ``%`` 100); None when that gives fewer than two numbers.
    As many operators as there are numbers, less one, at most (on each side of a ``must`` number): a small model
    held to the pattern alone wrote ``1455 - 1455 - 1455 - ...`` to its token limit.
    ``must``: numbers one of which the expression uses (None when ``text`` writes none of them)."""
    written = {_plain_number(v) for v in text_numbers(text)}
    if not written:
        return None
    low = text.lower()
    implied = {str(v) for word, v in _IMPLIED
               if (word in low if not word.isalpha() else re.search(r"(?<!\w)" + word + r"(?!\w)", low))}
    nums = sorted(written | implied, key=len, reverse=True)
    if len(nums) < 2:  # one number is no arithmetic
        return None
    operand = lambda xs: r"\(*-?(?:" + "|".join(re.escape(x) for x in xs) + r")%?\)*"
    n, op, most = operand(nums), r" *(?:\*\*|[-+*/]) *", str(len(nums) - 1)
    if not must:
        return r"^ *" + n + r"(?:" + op + n + r"){1," + most + r"} *$"
    needed = [x for x in nums if any(float(x) == float(v) for v in must)]
    if not needed:
        return None
    m, ops = operand(needed), r"(?:" + op + n + r")"
    return (r"^ *(?:(?:" + n + op + r"){1," + most + r"}" + m + ops + r"{0," + most + r"}|" + m + ops + r"{1," + most
            + r"}) *$")


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
    return [(a, b) for a, b, _ in number_mentions(text) if any(c.isdigit() for c in text[a:b])]


_ARITHMETIC_VERB = re.compile(r"\b(?:divide|multiply|subtract|split|share|average|add up|sum up)\b", re.IGNORECASE)
_PERCENT = re.compile(r"\d\s*(?:%|percent\b|per cent\b)", re.IGNORECASE)
_RATE = re.compile(r"\s*(?:[^\W\d_]+\s+)?(?:each|apiece|a|an|per)\s+[^\W\d_]", re.IGNORECASE)
_TOTAL = re.compile(r"\b(?:in total|total|altogether|in all|combined)\b", re.IGNORECASE)


def word_problem(text: str) -> bool:
    """Whether ``text`` writes two numbers or more in digits and asks arithmetic of them in words: an arithmetic
    verb (``divide 98765 by 43``, ``split 287.40 between 6 people``), a percent (``a 7.25% fee on the 18,400``), a
    rate after a number (``12.50 each``, ``1,475 a month``, ``18.40 an hour``) or a total (``in total``,
    ``altogether``). Two amounts to convert ("12 lbs and 60 cm") are none. Weaker than :func:`asks_arithmetic`: a
    fee on an amount to convert first is a word problem too."""
    ends = [b for _, b in _digit_numbers(text)]
    return len(ends) >= 2 and bool(_ARITHMETIC_VERB.search(text) or _PERCENT.search(text) or _TOTAL.search(text)
                                   or any(_RATE.match(text, b) for b in ends))


# the numbers a word implies in arithmetic (``half of 7`` is ``7 / 2``, ``15% of 240`` is ``15 * 240 / 100``)
_IMPLIED = (("half", 2), ("halve", 2), ("double", 2), ("twice", 2), ("triple", 3), ("thrice", 3), ("quarter", 4),
            ("%", 100), ("percent", 100), ("per cent", 100))


def _plain_number(v: float) -> str:
    return str(v) if isinstance(v, int) else repr(v)
