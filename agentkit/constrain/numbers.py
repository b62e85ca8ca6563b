"""The numbers a text writes: digits with or without thousands separators and a decimal part (``1,234.56``; a
decimal comma too, ``186,90`` and ``1.250,50``), a
fraction (``2 1/2``, ``1½``, ``3/4 cup``), numbers under a hundred in words (``three``, ``forty-two``, ``a dozen``)
and hundreds or thousands of them (``twelve hundred``); not the day or year of a date it writes
(:mod:`agentkit.constrain.dates`)."""

from __future__ import annotations

import re

from .dates import date_mentions

__all__ = ["digit_mentions", "number_mentions", "text_numbers"]

_MEASURE_WORDS = (r"(?:day|night|week|month|year|hour|hr|minute|min|second|mile|km|kilometre|kilometer|metre|meter"
                  r"|person|people|seat|room|course|page|step|piece|litre|liter|gallon|pound|kg|lb|inch|foot|ft)s?\b")
# a number, not a piece of a code or a date joined by - or / (INV-3302, 415-555-0138, 2025-04-01, 2024/0931); a
# rate's number is one ($64/hr); so is a measure's before a hyphen ("a 9-day trip", "a 5-hour drive")
_NUM = re.compile(r"(?<![\w.])(?<!\w[-/])-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?![\d])(?!-(?!" + _MEASURE_WORDS
                  + r")\w|/\d)")
# a fraction: a whole number and a fraction (``2 1/2``, ``1-3/4``, ``1½``), or a fraction alone before a measure or
# "of" (``3/4 cup``, ``½ tsp``, ``1/2 of``); "3/4 at noon" is a date's, and stays no number
_VULGAR = {"½": 1 / 2, "⅓": 1 / 3, "⅔": 2 / 3, "¼": 1 / 4, "¾": 3 / 4, "⅛": 1 / 8, "⅜": 3 / 8, "⅝": 5 / 8, "⅞": 7 / 8}
_MEASURE_AFTER = (r"(?=\s*(?:of\b|cups?\b|tsps?\b|tbsps?\b|teaspoons?\b|tablespoons?\b|inch(?:es)?\b|miles?\b"
                  r"|lbs?\b|pounds?\b|kgs?\b|oz\b|ounces?\b|lit(?:re|er)s?\b|gallons?\b|pints?\b|hours?\b|hrs?\b))")
_FRACTION = re.compile(r"(?<![\w.,/])(?:(\d+)(?:\s+|-)(\d)/(\d{1,2})(?![\d/])|(\d+)?\s?([" + "".join(_VULGAR)
                       + r"])|(\d)/(\d{1,2})(?![\d/])" + _MEASURE_AFTER + ")")
# a decimal comma, as much of Europe and Latin America writes it: "186,90 €", "21,1 km", "1.250,50" (a point between
# thousands then); not "1,250" (three digits: thousands) nor a list ("2,3,4")
_DECIMAL_COMMA = re.compile(r"(?<![\w.,])-?(?:\d{1,3}(?:\.\d{3})+|\d+),\d{1,2}(?!\d|[.,]\d)")
_SCALE = re.compile(r"[ -](hundred|thousand)\b", re.IGNORECASE)  # after a number in words: "twelve hundred"
_THOUSANDS = re.compile(r"k(?![\w'])")  # a lowercase k right after a number: thousands (a capital K is kelvin)
_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_WORD = re.compile(r"\b(?:(" + "|".join(_TENS) + r")(?:[- ](" + "|".join(_UNITS[1:10]) + r"))?|("
                   + "|".join(sorted([*_UNITS, "dozen"], key=len, reverse=True)) + r"))\b", re.IGNORECASE)


def text_numbers(text: str) -> list[int | float]:
    """The numbers ``text`` writes, in order, each once: digits with or without thousands separators and a decimal
    part (``1,234.56``; ``1.2k`` is 1200), and numbers under a hundred in words (``three``, ``forty-two``, ``a dozen``); not the
    day or year of a date it writes (:func:`text_dates`)."""
    return list(dict.fromkeys(v for _, _, v in number_mentions(text)))


def number_mentions(text: str) -> list[tuple[int, int, int | float]]:
    """(start, end, value) of every number ``text`` writes (:func:`text_numbers`), in order, repeats included."""
    dates = [(a, b) for a, b, _ in date_mentions(text)]
    out = _fractions(text, dates)
    for m in _DECIMAL_COMMA.finditer(text):
        if not any(a <= m.start() < b for a, b in dates):
            v = float(m.group().replace(".", "").replace(",", "."))
            out.append((m.start(), m.end(), int(v) if v == int(v) else v))
    taken = [(a, b) for a, b, _ in out]
    for m in _NUM.finditer(text):
        if any(a <= m.start() < b for a, b in dates + taken):
            continue
        v, end = float(m.group().replace(",", "")), m.end()
        if _THOUSANDS.match(text, end):  # "1.2k kronor", "a 50k salary"
            v, end = round(v * 1000, 6), end + 1
        out.append((m.start(), end, int(v) if v == int(v) and abs(v) < 2 ** 53 else v))
    for m in _WORD.finditer(text):
        tens, unit, word = (g.lower() if g else g for g in m.groups())
        if word:
            value = 12 if word == "dozen" else _UNITS.index(word)
        else:
            value = 20 + 10 * _TENS.index(tens) + (_UNITS.index(unit) if unit else 0)
        scale = _SCALE.match(text, m.end())  # "twelve hundred", "five thousand"
        if scale:
            value *= 100 if scale.group(1).lower() == "hundred" else 1000
        out.append((m.start(), scale.end() if scale else m.end(), value))
    return sorted(out)


def _fractions(text: str, dates: list[tuple[int, int]]) -> list[tuple[int, int, int | float]]:
    """(start, end, value) of each fraction ``text`` writes (:data:`_FRACTION`), outside its dates; a fraction of
    one or more (``5/4``) or over zero is none."""
    out: list[tuple[int, int, int | float]] = []
    for m in _FRACTION.finditer(text):
        whole, n, d, whole_v, vulgar, alone_n, alone_d = m.groups()
        if vulgar:
            value = int(whole_v or 0) + _VULGAR[vulgar]
        else:
            num, den = int(n or alone_n), int(d or alone_d)
            if den == 0 or num >= den:
                continue
            value = int(whole or 0) + num / den
        if not any(a <= m.start() < b for a, b in dates):
            out.append((m.start(), m.end(), round(value, 6)))
    return out


def digit_mentions(text: str) -> list[tuple[int, int, int | float]]:
    """The :func:`number_mentions` written in digits (``1,500``, ``2.5``; not ``three``)."""
    return [(a, b, v) for a, b, v in number_mentions(text) if any(c.isdigit() for c in text[a:b])]
