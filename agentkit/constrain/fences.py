"""A grounded string field's fence: where in its text the field's span may start, end and reach, by what the field
is (its name's words, a name of a person or a place, a phone number).

:func:`field_fence` gives a field's :class:`Fence` over the JSON-escaped text (byte offsets, as
:class:`~agentkit.constrain.spans.SpanDFA` reads it):

- another field's word is a wall: a span does not hold it (a guest's name is not ``Hotel De Gouden Leeuw`` where
  a field is named ``hotel``; a vendor does not run on into ``sent invoice``);
- a span does not end right before the field's own word (``double`` of ``double room`` for ``room_type``);
- a proper name (a field named for a person, a company, a place: :func:`is_proper`) is capitalised words: a
  lowercase word is a wall (``Met Bartholomew Quist from Quist Optics`` is two names), but for the joiners of a
  name (``of``, ``and``, ``de``, ``van``...) between capitalised words; nor does it hold a word with a digit;
- a phone number is taken whole: a span does not start or end inside a run of digit groups (``+54 11 5555 0190``,
  not ``5555 0190``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

# lowercase words a proper name may hold between its capitalised words (``Bank of Ireland``, ``Ruud van Dijk``; not
# ``and``: ``Kofi and Lorcan`` are two)
NAME_JOINERS = frozenset({"of", "the", "de", "del", "della", "der", "den", "van", "von", "da", "di", "do",
                          "dos", "das", "du", "la", "le", "y", "e", "bin", "ibn", "al", "el", "ter", "ten", "zu"})
# a field whose name holds one of these words is a proper name (a person, a company, a place)
PROPER_WORDS = frozenset({"vendor", "company", "customer", "client", "hotel", "city", "town", "country", "supplier",
                          "organizer", "organiser", "employer", "sender", "recipient", "attendee", "participant",
                          "person", "merchant", "seller", "buyer", "guest"})
# a field whose name holds one of these words is a thing (an event's title, a product), never what ``at``, ``in``
# or ``with`` introduce (a place, a companion)
THING_WORDS = frozenset({"title", "subject", "topic", "product", "item", "event", "occasion", "activity"})
# the words that introduce a place, a companion or a party (``at the Marlow Arts Centre``, ``with Ines, Kofi and
# Lorcan``, ``to Marigold Academy``, ``Order for Kilbride Primary School``, ``from Haruto Kimura``)
_INTRO = re.compile(r"\b(?:at|in|with|to|for|from)[ \t]+(?:(?:the|a|an|my|our|your|his|her|their)[ \t]+)?",
                    re.IGNORECASE)
# a name and the next one in a list (``Ines, Kofi and Lorcan``)
_LISTED = re.compile(r"[^\W_]+(?:[-'’.][^\W_]+)*(?:,[ \t]+|[ \t]+and[ \t]+)(?=[^\W\d_])")
# the words beside ``name`` that keep a field a person's name (``first_name``; not ``product_name``)
_PERSON_NAME = frozenset({"name", "first", "last", "full", "given", "family", "middle", "sur", "nick", "user"})
_WORD = re.compile(r"[^\W_]+(?:[-'’.&/][^\W_]+)*")
_PRONOUN = re.compile(r"I(?:['’](?:m|d|ll|ve))?")  # capitalised, and no name


@dataclass(frozen=True)
class Fence:
    """Byte offsets of a JSON-escaped text a span may not start at (``no_start``) or end at (``no_end``), and those
    it does not cross (``walls``: a span reaches a wall and stops, as at a clause break)."""

    no_start: frozenset[int] = frozenset()
    no_end: frozenset[int] = frozenset()
    walls: frozenset[int] = frozenset()
    held: bool = False  # the span holds the field's own word (:func:`field_fence`)

    def __bool__(self) -> bool:
        return bool(self.no_start or self.no_end or self.walls)


def is_proper(words: list[str]) -> bool:
    """Whether a field with these name words (lowercase) holds a proper name: one of :data:`PROPER_WORDS`
    (``vendor``, ``hotel``, ``guest_name``), or ``name`` with only a person's name's words (``name``,
    ``full_name``)."""
    low = set(words)
    return bool(low & PROPER_WORDS) or ("name" in low and low <= _PERSON_NAME)


def is_thing(words: list[str]) -> bool:
    """Whether a field with these name words (lowercase) holds a thing (:data:`THING_WORDS`: ``title``,
    ``product``...)."""
    return bool(set(words) & THING_WORDS)


def introduced(text: str) -> list[int]:
    """Where ``text`` writes what ``at``, ``in`` or ``with`` introduce (a place, a companion), with an article
    between (``at the Marlow Arts Centre``), and the names listed on after it (``with Ines, Kofi and Lorcan``):
    the character offsets of those words."""
    out = []
    for m in _INTRO.finditer(text):
        k = m.end()
        while k < len(text) and text[k].isalnum():
            out.append(k)
            nxt = _LISTED.match(text, k)
            if not nxt or not text[nxt.end()].isupper():
                break
            k = nxt.end()
    return out


def field_fence(text: str, own: set[str], others: set[str], *, proper: bool = False, phone: bool = False,
                amounts: Iterable[int] = (), numbers: Iterable[int] = (),
                function_words: frozenset[str] = frozenset(), thing: bool = False) -> Fence:
    """The fence of a string field over ``text`` (offsets in its JSON-escaped form). ``own``/``others``: the
    field's name's word stems and the other fields' (lowercase, one plural ``s`` off); ``proper``: the field is a
    proper name; ``phone``: a phone number; ``amounts``: character offsets where ``text`` writes an amount (a wall);
    ``numbers``: where it writes a number (no span starts there); ``function_words``: the words that end a phrase
    holding the field's own word; ``thing``: the field is a thing (:func:`is_thing`: a title, a product): no span
    starts at what ``at``, ``in`` or ``with`` introduce (:func:`introduced`)."""
    at = _byte_offsets(text)
    no_start = set(numbers) | (set(introduced(text)) if thing else set())
    no_end: set[int] = set()
    walls = set(amounts)
    _word_fences(text, own, others, proper, no_start, no_end, walls)
    no_start.update(_weak_starts(text, function_words))
    _whole_names(text, own, others, proper, no_start, no_end, walls)
    held = not phone and _hold_own_word(text, own - others, proper, function_words, no_start, no_end)
    if phone:
        for k in range(2, len(text)):
            if text[k].isdigit() and text[k - 1] in " .-/" and text[k - 2].isdigit():
                no_start.add(k)
                no_end.add(k - 1)
    return Fence(frozenset(at[k] for k in no_start), frozenset(at[k] for k in no_end), frozenset(at[k] for k in walls),
                 held)


def _word_fences(text: str, own: set[str], others: set[str], proper: bool, no_start: set[int], no_end: set[int],
                 walls: set[int]) -> None:
    """Another field's word is a wall; no end right before the field's own word; for a proper name, a lowercase
    word (but a name's joiner, where no span starts) or a word with a digit is a wall."""
    for m in _WORD.finditer(text):
        w = m.group()
        stem = w.lower().removesuffix("s")
        if stem in others and stem not in own:
            walls.add(m.start())
        if stem in own and m.start() > 0 and text[m.start() - 1] in " \t":
            no_end.add(m.start() - 1)
        if proper:
            lower = not _capital(w)
            if any(c.isdigit() for c in w) or (lower and w not in NAME_JOINERS):
                walls.add(m.start())
            elif lower:
                no_start.add(m.start())


ARTICLES = frozenset({"a", "an", "the"})
NAME_LIKE = frozenset({"will"})  # a function word that is also a first name: it may start a span written capitalised


def _weak_starts(text: str, function_words: frozenset[str]) -> list[int]:
    """Where no value starts: an article before a space (``The spring fundraiser``, ``a twin room``: the value is
    the words after it) and a function word written capitalised (``Can we move``, ``Please``, ``I'd``)."""
    out = []
    for m in re.finditer(r"(?<![^\W\d_])[^\W\d_]+", text):
        w = m.group()
        if re.match(r"[-./&][^\W_]", text[m.end():m.end() + 2]):  # a piece of a code or a name: A-77812
            continue
        if ((w.lower() in ARTICLES and text[m.end():m.end() + 1] == " ")
                or (w[:1].isupper() and (w[1:].islower() or len(w) == 1) and w.lower() in function_words - NAME_LIKE)):
            out.append(m.start())
    return out


_LABEL = re.compile(r"[ \t]*[:=#]")  # ``Room type: double``: a field's word as a label, the value after it


def _hold_own_word(text: str, own: set[str], proper: bool, function_words: frozenset[str], no_start: set[int],
                   no_end: set[int]) -> bool:
    """Where the text writes the field's own word in a phrase (``twin room`` for ``room_type``; for a proper name,
    a capitalised one: ``Palm Court Hotel`` for ``hotel``), the field's span is a piece of such a phrase holding
    the word. A phrase is the words around it joined by spaces, up to a function word, a number or a break
    (``reserve a twin room at`` gives ``twin room``); a word written as a label (``Room:``) or alone in its phrase
    holds nothing. Returns whether the field is held so."""
    words = list(_WORD.finditer(text))
    regions = []  # (phrase start, word start, word end, phrase end)
    for i, m in enumerate(words):
        if (m.group().lower().removesuffix("s") not in own or (proper and not _capital(m.group()))
                or _LABEL.match(text, m.end())):
            continue
        lo = hi = i
        while lo > 0 and _joins(text, words[lo - 1], words[lo], function_words):
            lo -= 1
        while hi + 1 < len(words) and _joins(text, words[hi], words[hi + 1], function_words):
            hi += 1
        if (lo < i or hi > i) and not _LABEL.match(text, words[hi].end()):  # "Room type:" is a label too
            regions.append((words[lo].start(), m.start(), m.end(), words[hi].end()))
    if not regions:
        return False
    for k in range(len(text) + 1):
        if not any(ps <= k <= a for ps, a, _, _ in regions):
            no_start.add(k)
        if not any(b <= k <= pe for _, _, b, pe in regions):
            no_end.add(k)
    return True


def _joins(text: str, left: re.Match[str], right: re.Match[str], function_words: frozenset[str]) -> bool:
    """Whether two neighbouring words are one phrase: a space between them, neither a function word nor a number."""
    return (text[left.end():right.start()] == " " and not any(
        w.group().lower() in function_words or any(c.isdigit() for c in w.group()) for w in (left, right)))


def name_runs(text: str) -> list[list[tuple[int, int]]]:
    """The names ``text`` writes: runs of capitalised words (a word with a capital letter) joined by a space, a
    `` & `` or a name's joiner (``Bank of Ireland``, ``Hotel De Gouden Leeuw``), each a list of its capitalised
    words' (start, end)."""
    runs: list[list[tuple[int, int]]] = []
    gap_ok = False  # the text since the last capitalised word may join a name
    last = -1
    for m in _WORD.finditer(text):
        w = m.group()
        capital = _capital(w) and not any(c.isdigit() for c in w)
        between = text[last:m.start()] if last >= 0 else ""
        joined = gap_ok and re.fullmatch(r" (?:& |(?:[a-z]+ )+)?", between) is not None and all(
            x in NAME_JOINERS for x in between.split() if x != "&")
        if capital:
            if joined and runs:
                runs[-1].append(m.span())
            else:
                runs.append([m.span()])
            last, gap_ok = m.end(), True
        elif not (gap_ok and w in NAME_JOINERS):
            gap_ok = False
    return runs


def _capital(word: str) -> bool:
    """A word of a name: it has a capital letter, and it is not the pronoun ``I`` (``I'm``, ``I'd``)."""
    return any(c.isupper() for c in word) and not _PRONOUN.fullmatch(word)


def _whole_names(text: str, own: set[str], others: set[str], proper: bool, no_start: set[int], no_end: set[int],
                 walls: set[int]) -> None:
    """For a proper name, a name that holds another field's word is that field's (``Grand Hotel Kronenhof`` is no
    guest's name where a field is named ``hotel``): walls at each of its words. A name that holds the field's own
    word is taken whole (``Hotel De Gouden Leeuw``, not ``Gouden Leeuw``), and for any other field every name is
    (``Marigold Academy``: not ``Academy`` for a product)."""
    for run in name_runs(text):
        stems = {text[a:b].lower().removesuffix("s") for a, b in run}
        if proper and stems & others and not stems & own:
            walls.update(a for a, _ in run)
        elif stems & own or not proper:
            no_start.update(a for a, _ in run[1:])
            no_end.update(b for _, b in run[:-1])


def _byte_offsets(text: str) -> list[int]:
    """For each character offset of ``text`` (and its end), the byte offset in its JSON-escaped UTF-8 form."""
    at = [0]
    for ch in text:
        at.append(at[-1] + len(json.dumps(ch, ensure_ascii=False)[1:-1].encode("utf-8")))
    return at
