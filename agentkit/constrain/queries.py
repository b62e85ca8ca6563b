"""A search query from the request that asks for it: the clause after a search verb, else a question for a recorded
fact, else the proper names the request writes.

A small model holding a ``query`` argument to the request's spans picks a span the request stresses, not its
subject: ``web_search(query="right now")`` for "search who holds the marathon world record right now",
``"opening hours"`` for "look up the Louvre's opening hours", ``"I'm 1.8 m"`` and ``"length"`` beside the Eiffel
Tower and the Amazon. :func:`query_spans` gives the clauses a query is made of, each a span of the request, in tiers:

1. what follows a search verb in its clause (``search``, ``look up``, ``find ... online``, ``google``), cut where the
   next step starts (``and then``, ``then``, ``and convert``): "who holds the marathon world record right now";
2. a clause that asks for a recorded fact (:func:`asks_fact`): "is the louvre open on tuesdays", "when was bitcoin
   created";
3. the proper names the request writes, capitalised inside a sentence: "Everest" in "My nephew swears Everest is
   over 30,000 feet tall. Can you search how high it actually is"; where the search names its subject by a pronoun,
   the first of them ("the 2028 Summer Olympics are in Los Angeles ... search where they're being held").

A clause that names its subject only by a pronoun ("how high it actually is", "search it and settle this") or by
words every such request has ("the length first") is no query. The first tier with a clause is the query's choices; none: the request's spans.
"""

from __future__ import annotations

import re

from .dates import MONTH, WEEKDAY
from .units import UNIT_NAMES

__all__ = ["asks_fact", "query_spans"]

# a question for a fact that is recorded somewhere, not known to a small model: a named thing's measure, when an
# event was, opening hours, a record, the newest release ("how tall is the Eiffel Tower", "when was bitcoin created")
_PRONOUNS = r"it|that|this|they|he|she|i|you|we|my|your|our"
_PRONOUN = "(?:" + _PRONOUNS + ")"
_FACT = re.compile(
    r"\bhow (?:tall|long|high|deep|old|big|wide) (?:is|was|are) (?!" + _PRONOUN + r"\b)(?:the )?\w{3,}"
    r"|\bhow (?:tall|long|high|deep|old|big|wide) (?!(?:is|was|are|will|would|does|do|did|should|can|could|"
    + _PRONOUNS + r"|the whole|a|an)\b)\w+(?: \w+){0,4} (?:is|was|are)\b"
    r"|\bwhen (?:was|were|did) (?!" + _PRONOUN + r"\b)\w+"
    r"|\bwhat year\b|\bwhich year\b"
    r"|\bopening (?:hours|times)\b|\bis (?:the )?\w+ open\b|\bwhat time does\b.*\b(?:opens?|closes?)\b"
    r"|\bworld record\b|\b(?:newest|latest) (?:\w+ )?(?:release|version)\b|\bwhich (?:\w+ ){0,2}(?:version|release)\b"
    r"|\bwhere (?:is|are|was|were|will) (?!" + _PRONOUN + r"\b)(?:\w+ ){1,5}(?:be )?(?:being )?(?:held|hosted|located"
    r"|take place|taking place)\b|\bthe (?:length|height|depth|population|area) of (?:the )?[A-Z]\w+", re.IGNORECASE)
_SEARCH_VERB = re.compile(r"\b(?:(?:do a |run a )?(?:quick |web )?search(?: the web)?(?: for)?:?|look (?:it |that )?up"
                          r"|google|find (?:it |that )?online|check(?:ing)? online)\s+", re.IGNORECASE)
# where a clause ends: a sentence's end, a colon or dash, and a next step ("and then convert", ", then tell me")
_CLAUSE_END = re.compile(
    r"[.?!]+(?=\s|$)|[?!;:\n]+|\s[—–-]\s|,?\s+(?:and )?then\b|,?\s+and\s+(?=(?:how|what|when|who)\b)"
    r"|\s+and (?=(?:also )?(?:convert|give|tell|work|calculate|figure|add|divide|multiply|check|say|let)\b)"
    r"|,\s+(?=(?:i|my|we|our|so|because|since|trying|going|want|need)\b)", re.IGNORECASE)
_LEAD = re.compile(r"^(?:(?:can|could|would|will) (?:you|u)(?: please| pls| quickly| just)?\s+|please\s+|pls\s+"
                   r"|the web for\s+|for\s+|me\s+)+",
                   re.IGNORECASE)
_TAIL = re.compile(r"(?:\s+(?:for me|for us|pls|please|online|first|again|actually|quickly|on the web|\?+))+$",
                   re.IGNORECASE)
# a look-up's object named by a pronoun ("search it and settle this", "what time it closes")
_PRONOUN_SUBJECT = re.compile(r"\b(?:it|it's|its|they|them|this|that)\b", re.IGNORECASE)
_INTO_UNIT = re.compile(r"\s+(?:in|into|to)\s+([^\W\d_]+)$")
# words any look-up has: a clause of these alone does not say what to look up ("the length first", "it for me")
_GENERIC = frozenset({"a", "an", "the", "it", "its", "it's", "that", "this", "them", "they", "me", "us", "for", "of",
                      "is", "was", "are", "what", "how", "when", "who", "which", "length", "height", "long", "tall",
                      "high", "answer", "number", "time", "hours", "first", "again", "pls", "please", "up", "out",
                      "actually", "exactly", "really", "now", "right", "search", "online", "web", "and", "to", "in",
                      "he", "she", "their", "his", "her", "year", "ago", "released", "published", "created",
                      "written", "wrote", "built", "founded", "invented", "appeared", "came", "come", "set",
                      "happened", "open", "opening", "closes", "check", "find", "look", "latest", "newest", "release",
                      "version", "what's", "there", "day", "days", "shut", "closed", "s", "times", "week"})


# a named thing's measure asked by a pronoun: "obsessed with the Eiffel Tower and wants to know how tall it is"
_MEASURE_OF_IT = re.compile(r"\bhow (?:tall|long|high|deep|old|big|wide|far) (?:it|they) (?:is|are|was|were)\b",
                            re.IGNORECASE)


def asks_fact(request: str) -> bool:
    """Whether ``request`` asks for a recorded fact (the module says which): "how long is the amazon river?",
    "when was bitcoin created", "louvre opening hours??", a measure asked by a pronoun of a thing named with
    capitals ("the Eiffel Tower ... how tall it is"); not "how long would it take", "who wrote Pride and
    Prejudice" (a small model answers it)."""
    return bool(_FACT.search(request) or (_MEASURE_OF_IT.search(request) and _proper_names(request)))


def query_spans(text: str) -> list[str]:
    """The clauses of ``text`` a search query is made of, each a span of it (the module says which; empty: none)."""
    clauses = _clauses(text)
    after = [q for a, b in clauses for q in [_after_verb(text[a:b])] if q]
    searched = [q for q in after if _names_subject(q) and not _PRONOUN_SUBJECT.search(q)]
    if searched:
        return list(dict.fromkeys(searched))
    facts = [q for a, b in clauses if _FACT.search(text[a:b]) for q in [_trim(text[a:b])] if _names_subject(q)]
    names = _proper_names(text)
    if any(_PRONOUN_SUBJECT.search(q) for q in after):  # "the 2028 Summer Olympics are in Los Angeles ... search
        names = names[:1]  # where they're being held": the pronoun is the first name's, the later ones what is told
    return list(dict.fromkeys(facts or names))


def _clauses(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each clause of ``text``."""
    out, start = [], 0
    for m in _CLAUSE_END.finditer(text):
        out.append((start, m.start()))
        start = m.end()
    out.append((start, len(text)))
    return [(a, b) for a, b in out if text[a:b].strip()]


def _after_verb(clause: str) -> str:
    """What follows the last search verb of ``clause``, trimmed (empty: it has none)."""
    found = list(_SEARCH_VERB.finditer(clause))
    return _trim(clause[found[-1].end():]) if found else ""


def _trim(clause: str) -> str:
    """``clause`` without its asking words ("can you", "please"), its closing ones ("for me", "pls") and a unit it
    asks the answer in ("in feet": a conversion's, not the search's)."""
    out, previous = clause.strip(" ,"), None
    while out != previous:
        previous = out
        out = _TAIL.sub("", _LEAD.sub("", out)).strip(" ,")
        unit = _INTO_UNIT.search(out)  # "how tall is the Eiffel Tower in feet": the feet are the next call's
        out = out[:unit.start()] if unit and unit.group(1).lower() in UNIT_NAMES else out
    return out


def _names_subject(query: str) -> bool:
    """Whether ``query`` names what to look up: a word beyond :data:`_GENERIC` ("how high it actually is" and
    "when it was released" do not)."""
    return any(w not in _GENERIC for w in re.findall(r"[\w']+", query.lower()))


def _proper_names(text: str) -> list[str]:
    """The runs of capitalised words ``text`` writes inside its sentences ("Everest", "Great Wall of China"), not
    at a sentence's start nor ``I``."""
    names = []
    for sentence in re.split(r"(?<=[.?!])\s+|\n+", text):
        for m in re.finditer(r"\b[A-Z][\w']*(?:\s+(?:of\s+|the\s+|de\s+)*[A-Z][\w']*)*", sentence):
            name = m.group() if m.start() > 0 else m.group().partition(" ")[2].strip()
            if name and not re.fullmatch(r"I(?:'\w+)?|" + WEEKDAY + "|" + MONTH, name, re.IGNORECASE):
                names.append(name)
    return names
