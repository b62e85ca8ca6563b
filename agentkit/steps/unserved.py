"""What a request asks that no call has served: its values no call made since it has taken.

"Convert 100 dollars to euros and also to pounds." asks two conversions. After the first call
(``convert_currency(100, "USD", "EUR")``) a small model answers with its result: the second ask is forgotten. The
request's values tell what is left: ``pounds`` is a currency no call has taken. :func:`unserved` finds such values
(:class:`Mention`); :func:`owed` names the tools that can take one (a required argument of that kind whose grounded
values include it) and the values each such argument is held to, so that the next call is that one
(:mod:`agentkit.steps.decision`) with those values (:func:`narrowed`).

A request's values, by kind (each as :mod:`agentkit.constrain.ground` reads it):

- ``number``: a number it writes in digits, not inside a day (``March 5``; a number in words is more often a count
  than a value: "two numbers, say 36 and 48", "in one sentence"); taken by a call that writes it (an expression
  ``3200 * 12`` takes 3200 and 12);
- ``currency``: a currency it names (``pounds`` is GBP); taken by a call that writes or names it;
- ``unit``: a unit it names (:mod:`agentkit.constrain.units`); taken by a call that writes it (``mile`` takes
  ``miles``);
- ``day``: a day it names, ``today`` aside (a question about today's weather is not a question about the
  calendar), nor a bare ``week`` or ``month`` (``3200 CAD a month``); taken by a call that writes it or the date it
  names (``friday`` is ``2026-03-06`` on Monday March 2: "anything on friday, or on the 14th?" after the call for
  the 14th leaves friday), and one that names no one day (``next week``) by a call that writes any day;
- ``name``: a capitalised word or run of them not at a sentence's start (``Rome``, ``Great Wall``), not a
  currency, unit, month or day, and a place written in lowercase (``rome`` in "warmer in lisbon or rome",
  :func:`agentkit.constrain.places.place_spans`); taken by a call whose strings hold one of its words. Names count only when no
  value of another kind is left: a name is the weakest sign of an ask (it may only describe one);
- ``field``: a tool result's string value whose key the request names (:func:`asked_fields`: "the weather in the
  city I'm going to" and a calendar's ``"city": "Madrid"``); taken by a call that writes it, and only an
  argument of that name takes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..constrain.arithmetic import asks_arithmetic, expression_pattern, word_problem
from ..constrain.dates import MONTH, WEEKDAY, date_mentions, day_phrases, resolve_day, resolved_days
from ..constrain.ground import currency_mentions, ground_arguments, is_currency, measured_numbers, text_currencies
from ..constrain.numbers import number_mentions, text_numbers
from ..constrain.places import is_place, place_spans, weather_headed
from ..constrain.units import is_unit, text_units, unit_key, unit_mentions
from .lookup import asks_advice, asks_fact, asks_lookup, asks_search, asks_writing

__all__ = ["Mention", "asked_fields", "covering", "mentions", "names_a_date", "narrowed", "operands", "owed", "unserved",
           "untaken"]

Kind = Literal["number", "currency", "unit", "day", "name", "field"]
# a kind of mention -> the grounded kinds of the arguments that take it (agentkit.constrain.ground's kinds)
TAKES: dict[str, tuple[str, ...]] = {"number": ("number", "expression"), "currency": ("currency",),
                                     "unit": ("unit",), "day": ("date",), "name": ("string",), "field": ()}
_NAME = re.compile(r"(?<![\w'])[A-Z][\w'-]*(?:\s+(?:of\s+|the\s+)?[A-Z][\w'-]*)*")
_SENTENCE_START = re.compile(r"(?:^|[.!?:\n]\s*|\"\s*)$")
_NOT_NAMES = frozenset({"i", "i'm", "i'd", "i've", "i'll", "ok", "okay", "please", "thanks", "hi", "hello"})
_DEFAULT_DAYS = frozenset({"today", "tonight", "now"})
_SPANS = frozenset({"week", "weekend", "month"})  # "3200 CAD a month" names no day


@dataclass(frozen=True)
class Mention:
    """One of a request's values: its ``kind``, the ``text`` as written and its ``value`` (a number, a currency
    code, a unit or a day as written, case folded; a name as written; a field's key)."""

    kind: Kind
    text: str
    value: Any


def mentions(request: str) -> list[Mention]:
    """The values ``request`` writes, by kind (the module's docstring), in order of kind then place."""
    dates = date_mentions(request)
    days = [(a, b) for a, b, _ in dates]
    out = [Mention("day", request[a:b], iso) for a, b, iso in dates]
    low = request.casefold()
    for phrase in day_phrases(request):
        at = low.find(phrase.casefold())
        default = phrase.casefold() in _DEFAULT_DAYS and not (phrase.casefold() in _THIS_DAY and _SCHEDULE.search(request))
        if at >= 0 and not default and not any(a <= at < b for a, b in days) \
                and phrase.casefold() not in _SPANS:
            days.append((at, at + len(phrase)))
            out.append(Mention("day", phrase, phrase.casefold()))
    typed = list(days)
    counted = word_problem(request)  # "four of us are splitting it": a number in words is an operand there
    measured = set() if counted else set(measured_numbers(request, {"currency", "unit"}))  # "eighty quid": typed
    for a, b, v in number_mentions(request):
        if (counted or v in measured or any(c.isdigit() for c in request[a:b])) \
                and not any(x <= a < y for x, y in days):
            out.append(Mention("number", request[a:b], v))
    for a, b, code in currency_mentions(request):
        typed.append((a, b))
        out.append(Mention("currency", request[a:b], code))
    for a, b, unit in unit_mentions(request):
        typed.append((a, b))
        out.append(Mention("unit", unit, unit_key(unit)))
    out += _names(request, typed)
    return out


def _names(request: str, typed: Sequence[tuple[int, int]]) -> list[Mention]:
    """The request's ``name`` mentions: its capitalised runs outside the ``typed`` spans, then the places it writes in
    lowercase (:func:`agentkit.constrain.places.place_spans`: "warmer in lisbon or rome")."""
    out: list[Mention] = []
    for m in _NAME.finditer(request):
        words = [w for w in re.findall(r"[\w'-]+", m.group()) if w.lower() not in ("of", "the")]
        if _SENTENCE_START.search(request[:m.start()]):
            words = words[1:]  # a sentence's first word is capitalised whatever it is
        if words and not any(a <= m.start() + m.group().find(words[0]) < b for a, b in typed) \
                and words[0].lower() not in _NOT_NAMES:
            text = m.group()[m.group().find(words[0]):]
            out.append(Mention("name", text, text))
    named = {m.text.casefold() for m in out}
    out += [Mention("name", place, place) for place in place_spans(request, first_words=False)
            if place[:1].islower() and place.casefold() not in named]
    return out


def unserved(request: str, made: str, results: Sequence[str] = ()) -> list[Mention]:
    """The values of ``request`` (:func:`mentions`) and of the tool ``results`` since it that the request asks for
    (:func:`asked_fields`) that no call in ``made`` (the text of the calls made since it: their JSON) has taken;
    empty before any call. Names only when nothing of another kind is left."""
    return untaken([*mentions(request), *asked_fields(request, results)], made)


def untaken(said: Sequence[Mention], made: str) -> list[Mention]:
    """The values ``said`` (a request's, :func:`unserved`) that no call in ``made`` has taken."""
    if not made.strip():
        return []
    numbers = {float(v) for v in text_numbers(made)}
    codes = set(text_currencies(made))
    units = {unit_key(u) for u in [*text_units(made), *re.findall(r'"([^"]{1,24})"', made)]}  # "m" as a value
    low = made.casefold()
    days = set(resolved_days(made)) | set(re.findall(r"\d{4}-\d{2}-\d{2}", made))  # and a timestamp's date

    def taken(m: Mention) -> bool:
        if m.kind == "number":
            return float(m.value) in numbers
        if m.kind == "currency":
            return m.value in codes
        if m.kind == "unit":
            return m.value in units
        if m.kind == "day":
            day = _day_of(m)  # a day that names no one day ("next week") is taken by any day
            return m.text.casefold() in low or (day in days if day else bool(days))
        if m.kind == "field":
            return m.text.casefold() in low
        return any(w.casefold() in low for w in re.findall(r"[\w'-]{3,}", m.text))

    left = [m for m in said if not taken(m)]
    typed = [m for m in left if m.kind != "name"]
    return typed or left


def _day_of(day: Mention) -> str | None:
    """The ISO date a ``day`` mention names (its value where a written date gave one), or None where it names no one
    day ("next week")."""
    key = _key("day", str(day.value))
    return key if re.fullmatch(r"\d{4}-\d{2}-\d{2}", key) else None


def asked_fields(request: str, results: Sequence[str]) -> list[Mention]:
    """The string values of the tool ``results`` (JSON objects, nested ones and lists of them too) whose key the
    ``request`` names: "what's the weather in the city I'm going to" names ``city``, so a calendar's ``"city":
    "Madrid"`` is asked for; a place word ("there", "wherever it is", "where I'm headed", "the destination") names a place's keys
    (``city``, ``location``...). Each is a ``field`` mention, taken only by an argument of the same name."""
    words = {w.casefold() for w in re.findall(r"[^\W\d_]+", request)}
    if words & _PLACE_WORDS:  # "what's the weather like there", "wherever it is": a result's place
        words |= _PLACE_KEYS
    out: list[Mention] = []
    for text in results:
        try:
            stack: list[Any] = [json.loads(text)]
        except ValueError:
            continue
        while stack:
            node = stack.pop(0)
            if isinstance(node, list):
                stack.extend(node)
            elif isinstance(node, dict):
                for k, v in node.items():
                    if isinstance(v, dict | list):
                        stack.append(v)
                    elif isinstance(v, str) and 0 < len(v) <= 60 and str(k).casefold() in words:
                        out.append(Mention("field", v, str(k)))
    return out


_PLACE_WORDS = frozenset({"there", "where", "wherever", "somewhere", "anywhere", "headed", "heading", "destination",
                          "venue"})
_PLACE_KEYS = frozenset({"city", "town", "place", "location", "destination"})


def owed(tools: Sequence[tuple[str, dict[str, Any]]], left: Sequence[Mention], sources: str,
         operands: str = "") -> dict[str, dict[str, dict[str, Any]]]:
    """The ``tools`` (name, parameters schema) that can take one of the ``left`` values: {tool: {argument: what it
    is held to}} for each required argument grounded (in ``sources``) to values that include one: ``{"enum":
    [...]}``, those values; an expression ``{"pattern": ...}``, the numbers of ``operands`` (:func:`operands`), one
    of those left among them. So each owed call takes a value left, and the calls end. A tool some required argument
    of which has no value is not owed."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    if not left:
        return out
    for name, parameters in tools:
        g = ground_arguments(parameters or {}, sources, one_dimension=False)  # a pair's units, whichever is left
        if g.ungrounded:
            continue
        held: dict[str, dict[str, Any]] = {}
        for arg in (parameters or {}).get("required") or ():
            kind = _argument_kind(arg, parameters, g.kinds)
            takers = [m for m in left if (m.value == arg if m.kind == "field" else kind in TAKES[m.kind])]
            if not takers:
                continue
            if kind == "expression":  # it must use a number left, so each owed call takes one (no loop)
                pattern = expression_pattern(operands, [float(m.value) for m in takers if m.kind == "number"])
                if pattern:
                    held[arg] = {"pattern": pattern, "grounded": False}
            elif kind == "string" or takers[0].kind == "field":
                held[arg] = {"enum": [m.text for m in takers]}
            else:
                values = [v for v in g.schema["properties"].get(arg, {}).get("enum", ())
                          if any(_key(m.kind, v) == _key(m.kind, m.value) for m in takers)]
                if values:
                    held[arg] = {"enum": values}
        if held:
            out[name] = held
    return out


def covering(tools: Sequence[tuple[str, dict[str, Any] | None]], request: str, sources: str,
             said: Sequence[Mention] | None = None) -> tuple[str, ...]:
    """The ``tools`` (name, parameters schema) every required argument of which ``request`` fills with a typed
    value: a ``number`` it writes in digits, a ``day`` that names its date (:func:`names_a_date`), a ``currency`` or
    a ``unit`` (a (from, to) pair two different ones), an ``expression`` it asks
    (:func:`agentkit.constrain.arithmetic.asks_arithmetic`; a :func:`agentkit.constrain.arithmetic.word_problem` where no
    tool is covered otherwise: "a 3% fee on 2,500 SEK in dollars" converts first). A request for advice that asks
    for no amount covers none ("2 cups of flour and 1 tsp baking soda. Can I use baking powder instead?"). "80 swiss francs in euros" fills
    ``convert_currency``; a tool with a free string argument (a city, a query) is filled by no request, but a tool
    of places where the request asks for the present at a place it names (:func:`_placed`). What such a
    request asks is that tool's work (:mod:`agentkit.steps.decision`). ``said``: the request's :func:`mentions` when
    already read."""
    typed: dict[str, set[Any]] = {}
    for m in mentions(request) if said is None else said:
        if m.kind != "day" or names_a_date(m, request):
            typed.setdefault(m.kind, set()).add(_key(m.kind, m.value))
    filled = {"number": "number", "date": "day", "currency": "currency", "unit": "unit"}
    full: list[tuple[str, bool]] = []  # (a tool whose typed arguments are filled, whether it takes an expression)
    for name, parameters in tools:
        required = (parameters or {}).get("required") or ()
        kinds = ground_arguments(parameters or {}, sources).kinds
        wanted: dict[str, int] = {}
        for arg in required:
            kind = _argument_kind(arg, parameters, kinds) or "string"
            wanted[kind] = wanted.get(kind, 0) + 1
        if required and all(len(typed.get(filled.get(k, ""), ())) >= n for k, n in wanted.items()
                            if k != "expression"):
            full.append((name, "expression" in wanted))
    out = tuple(name for name, expression in full if not expression or asks_arithmetic(request))
    if asks_advice(request) and not _AMOUNT_ASKED.search(request):  # "smarter to pay 22% APR or save $1,000?",
        return ()  # "2 cups of flour and 1 tsp baking soda. Can I use baking powder instead?": an opinion, no amount
    out = out or tuple(name for name, expression in full if expression and word_problem(request))
    return out or _placed(tools, request)


# a question for an amount: a word problem asked, not an opinion about amounts ("Do you think it's smarter to pay
# down a credit card at 22% APR or build up a $1,000 emergency fund first?")
_AMOUNT_ASKED = re.compile(r"\b(?:how much|how many|how long|what(?:'s| is| does| will| do| would)(?! you think)|total|work(?:s|ed)? out"
                           r"|calculate|figure out|add up|set (?:it|that|the \w+) to)\b", re.IGNORECASE)


def _placed(tools: Sequence[tuple[str, dict[str, Any] | None]], request: str) -> tuple[str, ...]:
    """The tools whose required arguments are all places (``city``), where ``request`` asks for the present, not a
    search or a recorded fact, and names a place by a capitalised name or after a preposition ("is it gonna be
    freezing in helsinki rn", "she landed in nairobi, what's it like there today?"), or starts with a place and the
    weather ("oslo temp")."""
    if not (asks_lookup(request) or weather_headed(request)) or asks_search(request) or asks_fact(request) \
            or not place_spans(request, first_words=False):  # "the current world record ... Kipchoge" searches
        return ()
    return tuple(name for name, parameters in tools if (required := (parameters or {}).get("required") or ())
                 and all(is_place(arg) for arg in required))


_THIS_DAY = frozenset({"today", "tonight"})  # today's date where the request asks about the user's days
_RELATIVE_DAYS = frozenset({"tomorrow", "tmrw", "tmr", "tomoz", "yesterday", "the day after tomorrow"})
# a request about the user's own days ("anything on my plate thursday?", "am i free friday evening?")
_SCHEDULE = re.compile(r"\b(?:calendar|schedule|scheduled|diary|agenda|booked|plans|free|busy|on my plate|what(?:'s| is) on"
                       r"|what i(?:'ve| have) got|what (?:\w+ ){1,2}(?:have i got|do i have)"
                       r"|what do i have|what have i got|what'?ve i got|anything on|do i have anything|have i got anything"
                       r"|what did i have|did i have|what was on|where(?:'s| is) (?:it|that)\b|what time is (?:it|that)"
                       r"|my (?:next |this )?(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend))\b",
                       re.IGNORECASE)
# the user's own event on a day, told: "I have a lunch on Thursday but I forgot which city it's in" asks about it
# unless the request asks for advice ("I have an interview on Friday, any tips?")
_OWN_EVENT = re.compile(r"\bi(?:'ve| have)(?: got)? (?:(?:a|an|my) (?:\w+ ){0,2}|something |stuff )(?:on|this|next)\b",
                        re.IGNORECASE)
# a day told as the past, not asked about: "our cat was born on a friday the 13th", "got absolutely soaked yesterday"
_TOLD_PAST = re.compile(r"\b(?:born|married|died|happened|graduated)(?:\s+\w+){0,3}\s*$", re.IGNORECASE)
_PAST_VERB = re.compile(r"\b(?:got|was|were|went|had|did|\w{3,}ed)\b", re.IGNORECASE)
_QUESTION = re.compile(r"^\s*(?:what|when|where|which|was|were|did|do|does|is|are|am|any|anything|have|has|can|could"
                       r"|check|tell|show|read|look)\b", re.IGNORECASE)
_ASKED = re.compile(r"\b(?:remind me|tell me|what|which|when|where|whether|(?:can|could) you)\b", re.IGNORECASE)


def _told_past(day: Mention, request: str) -> bool:
    """Whether ``request`` tells ``day`` as the past rather than asking about it (:data:`_TOLD_PAST`; ``yesterday``
    in a sentence with a past verb that asks nothing)."""
    at = request.casefold().find(day.text.casefold())
    if at < 0:
        return False
    if _TOLD_PAST.search(request[:at]):
        return True
    start = max(request.rfind(c, 0, at) for c in ".?!;\n") + 1
    end = min((i for i in (request.find(c, at) for c in ".?!;\n") if i >= 0), default=len(request))
    sentence = request[start:end + 1]
    return day.text.casefold() == "yesterday" and bool(_PAST_VERB.search(sentence)) \
        and not sentence.rstrip().endswith("?") and not _QUESTION.match(sentence) and not _ASKED.search(sentence)


def names_a_date(day: Mention, request: str = "") -> bool:
    """Whether a ``day`` mention names one date: a date (``March 6``, ``the 20th of March``, ``2026-03-05``, ``the 14th``)
    or ``tomorrow``, by itself; a weekday (``thursday``, ``this Friday``) where the ``request`` asks about the
    user's own days ("anything on my plate thursday?", "am i free friday evening?"), as ``today`` does ("am i free
    this afternoon or is there stuff on today?"), or tells of its own event on it and asks ("I have a lunch on
    Thursday but I forgot which city"). Elsewhere a weekday or a span names none ("a job interview on Thursday", "a
    rhyme about Monday mornings", "a novel to read this weekend"), as does a day the request tells as the past ("our
    cat was born on a friday the 13th", "got absolutely soaked yesterday") or names in a request for advice ("her
    birthday is on the 14th ... any gift ideas?") without asking about its days."""
    schedule = bool(_SCHEDULE.search(request))
    if day.text.casefold() in _THIS_DAY:  # "am i free this afternoon or is there stuff on today?"
        return schedule
    if schedule and not asks_writing(request):  # "My Tuesday meeting got moved ... draft a note"
        asked = True
    else:  # "my grandma's birthday is on the 14th ... any gift ideas?" asks advice, not the calendar
        asked = False if asks_advice(request) else None
    if any(c.isdigit() for c in day.text) or day.text.casefold() in _RELATIVE_DAYS \
            or re.search(r"\b" + MONTH + r"(?!\w)", day.text, re.IGNORECASE):  # "the twentieth of March"
        return asked if asked is not None else not _told_past(day, request)
    return bool(re.fullmatch(r"(?:(?:this|next|coming)\s+)?" + WEEKDAY, day.text, re.IGNORECASE)) \
        and (asked if asked is not None else bool(_OWN_EVENT.search(request) and _ASKED.search(request)))


def operands(request: str, left: Sequence[Mention], results: Sequence[str], made: str) -> str:
    """What an owed expression takes its numbers from, in the order it uses them: the results' numbers that no call
    took ("what's that times 12" after a conversion: its result and 12, not the amount converted), then the numbers
    the request left (a percent with its sign), and the request's words that imply a number (``half``, ``%``;
    :func:`agentkit.constrain.arithmetic.expression_pattern`). The result comes first: "how much is left after
    spending 20,000" is ``62250 - 20000``."""
    taken = {float(v) for v in text_numbers(made)}
    found = [str(v) for r in results for v in text_numbers(r) if float(v) not in taken]
    found += [m.text + ("%" if re.search(r"(?<![\d.])" + re.escape(m.text) + r"\s*%", request) else "")
              for m in left if m.kind == "number"]  # a percent keeps its sign: "15% of the pounds figure"
    return " ".join(found) + "\n" + re.sub(r"\d", " ", request)


def narrowed(parameters: dict[str, Any], held: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``parameters`` with each argument of ``held`` held to what it says (its ``enum`` or ``pattern``)."""
    props = parameters.get("properties")
    if not isinstance(props, dict) or not any(held.values()):
        return parameters
    return {**parameters, "properties": {k: ({**v, **held[k]} if held.get(k) and isinstance(v, dict) else v)
                                         for k, v in props.items()}}


def _argument_kind(arg: str, parameters: dict[str, Any] | None, kinds: dict[str, str]) -> str | None:
    """The grounded kind of a tool's argument ``arg``: ``unit`` or ``currency`` by its name and description, else
    :func:`agentkit.constrain.ground.ground_arguments`' kind for it (``kinds``, by JSON pointer)."""
    own = ((parameters or {}).get("properties") or {}).get(arg) or {}
    return "unit" if is_unit(arg, own) else "currency" if is_currency(arg, own) else kinds.get("/" + arg)


def _key(kind: str, value: Any) -> Any:
    if kind == "number":
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
    if kind == "unit" and isinstance(value, str):
        return unit_key(value)
    if kind == "day" and isinstance(value, str):  # "friday" is the grounded enum's "2026-03-06"
        return value if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) else resolve_day(value) or value.casefold()
    return value
