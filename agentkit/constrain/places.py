"""The places a request names: a place argument's choices (``city``, ``location``, ``destination``).

A small model holding a ``city`` argument to the request's spans picks a span near the question's end, not the
place: ``get_weather(city="the skytrain")`` for "in bangkok, about to head out. is it storming right now or nah?
deciding between a tuk tuk and the skytrain", ``"pls"`` and ``"the temp in denver"`` for "whats the temp in denver
right now? in fahrenheit pls". :func:`place_spans` gives the spans a place is written as, each a span of the request:

- a name written with capitals inside a sentence ("Zurich", "Rio de Janeiro", "LA"), not a weekday, a month or a
  unit;
- the word after a place's preposition (``in``, ``at``, ``from``, ``near``, ``visiting``, ``how cold is``) that is
  no function word, number, time word, unit, currency or language (two words for "new york", "san francisco"):
  "bangkok" in "in bangkok, about to head out", "seattle" in "a run in seattle in like 20 min";
- in a text that starts in lowercase, a sentence's first word of that kind ("helsinki weather please");
- a capitalised first word followed by the present or the weather ("Cairo today - shorts and t-shirt kind of day?"),
  and a first word in lowercase followed by the weather ("bangkok wether today??", "tokyo and bangkok weather?").

None: the request names no place that way, and the argument keeps the request's spans.
"""

from __future__ import annotations

import re

from .dates import MONTH, WEEKDAY
from .names import name_words
from .units import UNIT_NAMES

__all__ = ["is_place", "place_spans", "weather_headed"]

_PREPOSITION = re.compile(r"\b(?:in|at|from|near|around|visiting|outside|between|(?:trip|fly\w*|go\w*|head\w*|mov\w*"
                          r"|travel\w*|driv\w*|way|back|off)\s+to|(?:pack\w*|leav\w*|bound|head\w*)\s+for"
                          r"|how (?:cold|hot|warm|chilly|windy|humid|rainy|sunny|wet|nice) (?:is|was)"
                          r"|(?:colder|warmer|hotter|wetter|sunnier|windier)(?: right now| today| rn)?,)\s+",
                          re.IGNORECASE)
_OR = re.compile(r"\s+(?:or|and|vs\.?|versus)\s+", re.IGNORECASE)  # "oslo or helsinki": the second place too
_WORD = re.compile(r"[^\W\d_][\w'-]*")
# the first words of two-word places written in lowercase ("new york", "san francisco", "hong kong")
_TWO_WORD = frozenset({"new", "san", "santa", "los", "las", "hong", "buenos", "rio", "saint", "st", "kuala", "tel",
                       "cape", "abu", "ho", "sao", "são", "mexico", "salt", "el", "la", "le", "port"})
# words that follow a place's preposition, or start a sentence, without naming a place ("in like 20 min", "at idle",
# "in plain english", "whats the temp")
_NOT_PLACE_WORDS = """
a an the my your our his her their this that these those it its me you us them him like about some any all each
every one two few case time min mins minute minutes hour hours hrs day days week weeks month months year years
morning afternoon evening night tonight today tomorrow yesterday now rn atm pls please lol tho though work home bed
school office total person people advance general order fact mind terms dollars euros pounds yen francs rupees pesos
kronor usd eur gbp jpy chf cad aud inr mxn brl sek cash be do go get see check make take find look know plan pay buy
convert figure spend bring wear head and or but so if when where what whats what's which who how why is are was i
i'm im we they there here weather temp temperature rain snow sun degrees celsius fahrenheit search google calendar
bill tip half share whole end start can could would will should shall did does has have had hey hi hello ok okay
quick q just also still plain simple english french spanish portuguese german italian japanese chinese american
americans british chaos idle theory practice general particular real life public private in at for from to on of
with by near vs can't don't won't isn't keeps we're you're they're it's i've i'll i'd let's
sea level noon midnight least most once first last best worst random altitude room night's another other same different
nice good bad great lovely terrible awful horrible perfect weird crazy rainy sunny snowy cloudy windy cold hot warm
current local today's tomorrow's tonight's weekend's
"""
_NOT_PLACES = frozenset(_NOT_PLACE_WORDS.split())


# a sentence that starts with a place's name and the present or the weather: "Cairo today - shorts and t-shirt
# kind of day?", "Helsinki weather pls"; in lowercase, the weather only, and a pair of places before it ("tokyo and
# bangkok weather?")
_START = r"(?:^|(?<=[.?!\n])\s*)"
_WEATHER = r"weather|wether|forecast|temp"
_PAIR = r"(?:\s+(?:and|or|vs|&)\s+({word}))?"
_HEADED = re.compile(_START + r"([A-Z][a-z'-]+)(?=\s+(?:today|tonight|tomorrow|right now|rn|now|this "
                     r"(?:morning|afternoon|evening|weekend)|" + _WEATHER + r")\b)")
_HEADED_LOWER = re.compile(_START + r"([a-z][a-z'-]+)" + _PAIR.format(word=r"[a-z][a-z'-]+")
                           + r"(?=\s+(?:" + _WEATHER + r")\b)")
_WEATHER_HEADED = re.compile(_START + r"([A-Za-z][a-z'-]+)" + _PAIR.format(word=r"[A-Za-z][a-z'-]+")
                             + r"\s+(?:" + _WEATHER + r"|temperature)\b")
_PLACE_WORDS = frozenset({"city", "town", "location", "place", "destination", "country", "region", "where"})


def weather_headed(text: str) -> bool:
    """Whether a sentence of ``text`` starts with a place and the weather ("oslo temp", "Rome weather pls", "tokyo
    and bangkok weather?"): a look-up of the present, though it says no "now"."""
    return any(_names_place(m.group(1)) for m in _WEATHER_HEADED.finditer(text))


def is_place(name: str) -> bool:
    """Whether an argument named ``name`` holds a place: a word of it is ``city``, ``location``, ``destination``..."""
    return bool(_PLACE_WORDS & {w.lower() for w in name_words(name)})


def place_spans(text: str, first_words: bool = True) -> list[str]:
    """The spans of ``text`` a place is written as (the module says which), in order, each once; ``first_words``
    False: not a lowercase writer's first words (a name or a word after a preposition only)."""
    found = [(m.start(), m.group()) for m in _capitalised(text)]
    found += [(m.start(1), m.group(1)) for m in _HEADED.finditer(text) if _names_place(m.group(1))]
    found += [(m.start(g), m.group(g)) for m in _HEADED_LOWER.finditer(text) for g in (1, 2)
              if m.group(g) and _names_place(m.group(g))]
    starts = [m.end() for m in _PREPOSITION.finditer(text)]
    if first_words and text[:1].islower():  # a writer who does not capitalise may start with the place ("helsinki weather please")
        starts += [m.end() for m in re.finditer(r"(?:^|[.?!]\s+)(?=[^\W\d_])", text)]
    for start in starts:
        first = _WORD.match(text, start)
        if first is None or not _names_place(first.group()) or first.group().lower().endswith("ing"):
            continue
        found.append((first.start(), first.group()))
        other = _OR.match(text, first.end())
        word = _WORD.match(text, other.end()) if other is not None else None
        if word is not None and _names_place(word.group()) and word.group()[0].isupper() == first.group()[0].isupper():
            found.append((word.start(), word.group()))
        second = _WORD.match(text, first.end() + 1) if text[first.end():first.end() + 1] == " " else None
        if second is not None and first.group().lower() in _TWO_WORD and _names_place(second.group()):
            found.append((first.start(), text[first.start():second.end()]))
    return list(dict.fromkeys(v for _, v in sorted(found)))


def _names_place(word: str) -> bool:
    low = word.lower().strip(".'")
    return len(low) > 1 and low not in _NOT_PLACES and low not in UNIT_NAMES and not re.fullmatch(
        WEEKDAY + "|" + MONTH, low, re.IGNORECASE)


def _capitalised(text: str) -> list[re.Match[str]]:
    """The runs of capitalised words inside ``text``'s sentences, not a sentence's first word alone."""
    out = []
    for m in re.finditer(r"\b[A-Z][\w'-]*(?:\s+(?:de\s+|del\s+|of\s+|la\s+)?[A-Z][\w'-]*)*", text):
        before = text[:m.start()].rstrip()
        if (not before or before[-1] in ".?!\n") or not _names_place(m.group().split()[0]) or len(m.group()) < 2:
            continue
        if not re.fullmatch(r"I(?:'\w+)?", m.group()):
            out.append(m)
    return out
