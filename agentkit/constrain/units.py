"""Units of measurement a text names: the values a unit argument (``from_unit``, ``to_unit``, ``unit``) may take.

A unit argument is grounded as a currency code is (:mod:`agentkit.constrain.ground`): its value is a unit the
conversation writes, as written (``miles``, ``kg``, ``Fahrenheit``, ``°C``), so ``convert_units(from_unit="black
hole")`` cannot be written for "what is a black hole?", and a question that names no unit offers no conversion.

:func:`unit_mentions` finds them. Names (``kilometres``, ``pounds``, ``celsius``) count anywhere as words; a
symbol that is also a letter or a word (``m``, ``g``, ``l``, ``C``, ``F``, ``K``, ``in``) counts only right after
a number (``5 m``, ``100F``, ``20 °C``; ``in`` not before a word: ``at 5 in the afternoon``), after a degree sign,
after ``to``/``in``/``into``/``as`` (``to m``), as a capital ``C``, ``F`` or ``K`` written alone (``100 F to
C``), or as the last word of a JSON key before a number (``"temperature_c": 33`` writes 33 in ``c``): a tool's
result says its unit that way.
"""

from __future__ import annotations

import re
from typing import Any

from .names import name_words

__all__ = ["DIMENSIONS", "UNIT_NAMES", "UNIT_SYMBOLS", "canonical_unit", "dimension", "is_unit", "number_units", "text_units", "unit_key",
           "unit_mentions"]

# names and unambiguous short forms: counted wherever they are written as a word (case aside)
UNIT_NAMES = frozenset({
    "meter", "meters", "metre", "metres", "kilometer", "kilometers", "kilometre", "kilometres", "km",
    "centimeter", "centimeters", "centimetre", "centimetres", "cm", "millimeter", "millimeters", "millimetre",
    "millimetres", "mm", "mile", "miles", "yard", "yards", "yd", "yds", "foot", "feet", "ft", "inch", "inches",
    "nautical mile", "nautical miles",
    "kilogram", "kilograms", "kilo", "kilos", "kg", "kgs", "gram", "grams", "pound", "pounds", "lb", "lbs",
    "ounce", "ounces", "oz", "stone", "stones", "ton", "tons", "tonne", "tonnes", "milligram", "milligrams", "mg",
    "liter", "liters", "litre", "litres", "milliliter", "milliliters", "millilitre", "millilitres", "ml",
    "gallon", "gallons", "gal", "cup", "cups", "pint", "pints", "quart", "quarts", "fluid ounce", "fluid ounces",
    "tablespoon", "tablespoons", "tbsp", "teaspoon", "teaspoons", "tsp",
    "celsius", "centigrade", "fahrenheit", "kelvin", "°c", "°f",
    "mph", "kph", "km/h", "knot", "knots", "acre", "acres", "hectare", "hectares",
    "square meters", "square metres", "square feet", "square miles", "square kilometers", "square kilometres",
})
# symbols that are also letters or words: counted after a number, a degree sign or as a key's last word
UNIT_SYMBOLS = frozenset({"m", "g", "l", "c", "f", "k", "in", "mi", "t"})
# what each unit measures (a conversion is between two units of one dimension)
_DIMENSION_WORDS = {
    "length": "m meter meters metre metres kilometer kilometers kilometre kilometres km centimeter centimeters "
              "centimetre centimetres cm millimeter millimeters millimetre millimetres mm mile miles mi yard yards "
              "yd yds foot feet ft inch inches in nautical_mile nautical_miles",
    "mass": "g kilogram kilograms kilo kilos kg kgs gram grams pound pounds lb lbs ounce ounces oz stone stones ton "
            "tons tonne tonnes t milligram milligrams mg",
    "volume": "l liter liters litre litres milliliter milliliters millilitre millilitres ml gallon gallons gal cup "
              "cups pint pints quart quarts fluid_ounce fluid_ounces tablespoon tablespoons tbsp teaspoon teaspoons "
              "tsp",
    "temperature": "c f k celsius centigrade fahrenheit kelvin °c °f",
    "speed": "mph kph km/h knot knots",
    "area": "acre acres hectare hectares square_meters square_metres square_feet square_miles square_kilometers "
            "square_kilometres",
}
DIMENSIONS = {w.replace("_", " "): dim for dim, words in _DIMENSION_WORDS.items() for w in words.split()}

_NAME = re.compile(r"(?<![\w°])(" + "|".join(re.escape(n) for n in sorted(UNIT_NAMES, key=len, reverse=True))
                   + r")(?![\w/])", re.IGNORECASE)
_ATTACHED = sorted(UNIT_SYMBOLS | {n for n in UNIT_NAMES if n.isalpha() and len(n) <= 3}, key=len, reverse=True)
_AFTER_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)*\s?(°?\s?(?:" + "|".join(_ATTACHED) + r"))(?![\w/])"
                           r"(?<!in(?=\s[a-z]))", re.IGNORECASE)  # "5 m", "100F", "16kg", "2lbs"
_TO = re.compile(r"\b(?:to|in|into|as)\s+(" + "|".join(sorted(UNIT_SYMBOLS - {"in"}, key=len, reverse=True))
                 + r")(?![\w'/-])", re.IGNORECASE)
_CAPITAL = re.compile(r"(?<![\w'-])([CFK])(?![\w'-])")  # a capital C, F or K written alone (``100 F to C``)
_KEY = re.compile(r'"\w+_(' + "|".join(sorted(UNIT_SYMBOLS | {n for n in UNIT_NAMES if n.isalpha()}, key=len,
                  reverse=True)) + r')"\s*:\s*-?\d', re.IGNORECASE)
_UNIT_WORDS = frozenset({"unit", "units", "uom"})


def unit_mentions(text: str) -> list[tuple[int, int, str]]:
    """(start, end, unit as written) of every unit ``text`` names (the module's docstring says which), in order."""
    found = {(m.start(1), m.end(1)): m.group(1) for m in _NAME.finditer(text)}
    for rx in (_AFTER_NUMBER, _TO, _CAPITAL, _KEY):
        for m in rx.finditer(text):
            if _unit(m) and not any(a <= m.start(1) < b for a, b in found):
                found[(m.start(1), m.end(1))] = m.group(1)
    return sorted((a, b, v) for (a, b), v in found.items())


def _unit(m: re.Match[str]) -> bool:
    """Whether a symbol's match is a unit: a lowercase ``k`` after a number is a thousand or a race (``10k``), not
    kelvin."""
    return m.group(1) != "k"


def text_units(text: str) -> list[str]:
    """The units ``text`` names (:func:`unit_mentions`), as written, in order, each once (case aside)."""
    seen: dict[str, str] = {}
    for _, _, v in unit_mentions(text):
        seen.setdefault(v.casefold(), v)
    return list(seen.values())


def number_units(text: str) -> list[str]:
    """The units ``text`` writes a number in: right after the number (``5 km``, ``-40 degrees Fahrenheit``,
    ``350 degrees F``) or
    in the number's JSON key (``"temperature_c": 33``), as written, each once."""
    found = [(m.start(1), m.group(1)) for rx in (_KEY, _AFTER_NUMBER) for m in rx.finditer(text) if _unit(m)]
    for m in re.finditer(r"(?<![\w.])-?\d+(?:[.,]\d+)*\s?(?:degrees?\s+)?", text, re.IGNORECASE):
        name = _NAME.match(text, m.end()) or (_CAPITAL.match(text, m.end()) if "degree" in m.group().lower() else None)
        if name:
            found.append((name.start(1), name.group(1)))
    out: dict[str, str] = {}
    for _, v in sorted(found):
        out.setdefault(v.casefold(), v)
    return list(out.values())


def dimension(unit: str) -> str | None:
    """What ``unit`` (as written: ``Miles``, ``°F``, ``kg``) measures: ``length``, ``mass``, ``volume``,
    ``temperature``, ``speed`` or ``area``; None for a unit this module does not know."""
    return DIMENSIONS.get(re.sub(r"\s+", " ", unit.strip().lower()).replace("° ", "°"))


def unit_key(unit: str) -> str:
    """``unit`` as written, reduced to compare (``Miles`` and ``mile``, ``inches`` and ``inch``, ``°C`` and
    ``c``): case, a degree sign and a plural ``s`` aside."""
    u = unit.casefold().lstrip("°").strip()
    return {"feet": "foot", "foots": "foot", "inches": "inch"}.get(u, u[:-1] if len(u) > 3 and u.endswith("s") else u)


# the names of one unit (a conversion from ``m`` to ``metres`` converts nothing)
_SAME_UNIT = ("m meter meters metre metres", "km kilometer kilometers kilometre kilometres",
              "cm centimeter centimeters centimetre centimetres", "mm millimeter millimeters millimetre millimetres",
              "mile miles mi", "yard yards yd yds", "foot feet ft", "inch inches in",
              "kg kilogram kilograms kilo kilos kgs", "g gram grams", "lb pound pounds lbs", "oz ounce ounces",
              "stone stones", "l liter liters litre litres", "ml milliliter milliliters millilitre millilitres",
              "gallon gallons gal", "cup cups", "c celsius centigrade", "f fahrenheit", "k kelvin")
_CANONICAL = {w: names.split()[0] for names in _SAME_UNIT for w in names.split()}


def canonical_unit(unit: str) -> str:
    """One name for each unit, to tell whether two units as written are the same (``metres`` and ``m``, ``°F``
    and ``Fahrenheit``); a unit it does not know, :func:`unit_key`'s form."""
    u = unit.casefold().lstrip("°").strip()
    return _CANONICAL.get(u, unit_key(unit))


def is_unit(name: str, sub: dict[str, Any]) -> bool:
    """Whether a string field holds a unit of measurement: named ``unit``, ``from_unit``, ``target_units``, or
    described as "the unit ..."."""
    words = {w.lower() for w in name_words(name)}
    desc = str(sub.get("description", "")).lower()
    return bool(words & _UNIT_WORDS) or bool(re.match(r"(?:the |a )?unit\b", desc))
