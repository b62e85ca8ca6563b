"""Grounded values: an extraction's values constrained to what its source text says.

:func:`ground_schema` rewrites an output schema for one source text, field by field (each leaf of the properties,
nested objects and arrays' items included), by the field's kind:

- a string: a *span* of the text. The compiled slot keeps its own regex (pattern, format, length) and gets the text
  as its ``source`` (:func:`ground_template`); the token automaton is then :class:`SpanDFA`, the text's substring
  automaton intersected with the slot's own token DFA. A field named like a phone (``phone``, ``mobile``, ``tel``,
  ``fax``) or an email is held to that shape too (:data:`SHAPES`), so a text without one has no span for it; each
  string field's span also keeps to the field's fence (:mod:`agentkit.constrain.fences`: no other field's word,
  capitalised words for a proper name...);
- an identifier (a string field named ``invoice_number``, ``order_id``...: :func:`is_code`): one of the codes the
  text writes, the one after the field's own word where there is one (:func:`anchored_codes`);
- a number or integer: one of the numbers the text writes (:func:`~agentkit.constrain.numbers.text_numbers`: ``$1,234.56`` is ``1234.56``,
  ``3,480.00`` is ``3480``, ``twelve`` and ``a dozen`` are ``12``);
- a ``format: date`` string: one of the dates the text writes, in ISO form (:func:`~agentkit.constrain.dates.text_dates`: ``the 2nd of June
  2024``, ``March 31, 2025``, ``Thursday 8 May 2025``, ``2025-03-12``), the one after the field's own word where
  there is one (:func:`anchored_dates`: ``due 2 April 2025`` for ``due_date``);
- a currency code (a string field named ``currency``/``currency_code``/``from_currency``, or described as a
  currency code): one of the codes the text writes or its symbols and words name (``€`` and ``euros`` are ``EUR``,
  ``A$`` is ``AUD``, ``Canadian dollars`` is ``CAD``);
- with :data:`ARGUMENT_KINDS` (a tool call's arguments), an arithmetic expression (a string field named
  ``expression``/``formula``/``equation``, or described as an arithmetic expression): the text's numbers joined by
  operators it names (:func:`~agentkit.constrain.arithmetic.expression_pattern`), so ``17.5 times 23`` may be written
  ``17.5 * 23`` but no number the text does not write, or an expression the text writes in signs, whole
  (:func:`~agentkit.constrain.arithmetic.written_expressions`: ``(1820 - 365) / 7``); and a day (a string field named ``date``/``day``/``when`` without a format): one of the days the
  text names (:func:`~agentkit.constrain.dates.day_phrases`: ``tomorrow``, ``next Friday``, ``March 5``, full dates in ISO form); and a unit
  (a string field named ``unit``/``from_unit``/``to_unit``): one of the units the text names, as written
  (:mod:`agentkit.constrain.units`), a (from, to) pair of them two different ones;
- an ``enum``: the members the text mentions, when it mentions any (otherwise the enum as it is).

An optional field whose schema allows null is always written, as a value or as null, so that the model decides
between the two where the value goes (not by closing the object early). A field the text gives no value for: an
optional one is left out (or null, where the schema allows null), a required one keeps its ungrounded schema and is
named in :attr:`Grounding.ungrounded`. A string that is not
grounded (``{"grounded": false}`` on the field, or a required field with no span) still never takes the field's
own name or a stock placeholder (:func:`placeholders`: ``Title``, ``123-456-7890``, ``john.doe@example.com``)
unless the text holds it.

``{"grounded": false}`` on a property turns grounding off for it; :data:`KINDS` are the kinds grounded by default.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from .arithmetic import expression_pattern, written_expressions
from .dates import WEEKDAY, date_mentions, day_phrases, resolve_day, text_dates
from .fences import Fence, field_fence, is_proper, is_thing, name_runs
from .names import name_words
from .nodes import Choice, Node, Repeat, Seq, Slot, Template, slots
from .numbers import digit_mentions, number_mentions, text_numbers
from .places import is_place, place_spans
from .queries import query_spans
from .units import canonical_unit, dimension, is_unit, number_units, text_units, unit_key, unit_mentions

KINDS = frozenset({"string", "number", "date", "currency", "enum"})  # the field kinds grounded by default
# a tool call's arguments (agentkit.steps.arguments) are grounded in these kinds too
ARGUMENT_KINDS = KINDS | {"day", "expression", "unit", "query"}
JOINERS = frozenset("-'/._@&+")
OPENERS = frozenset("(+#$€£¥")  # besides a letter or digit, what a span may start with
CLOSERS = frozenset(")%")  # besides a letter or digit, what a span may end with  # characters that join the letters or digits on both sides into one word
SPAN_CHARS = 96  # the longest span the check of a patterned slot's language tries (:func:`spans_fit`)

_NEXT_WORD = re.compile(r"[ \t]*([^\W\d_]+)")
_PREV_WORD = re.compile(r"([^\W\d_]+)[ \t]*[:=#]?[ \t]*$")


def _stems(name: str) -> set[str]:
    """The words of a field name (:func:`name_words`) as stems: lowercase, one plural ``s`` off, words under three
    letters left out."""
    return {w.lower().removesuffix("s") for w in name_words(name) if len(w) >= 3}


def anchored_numbers(name: str, text: str, names: tuple[str, ...] = (), *,
                     integers: bool = False) -> list[int | float]:
    """The numbers of ``text`` a number field ``name`` may take. A number written next to the field's own word
    (``5 nights``, ``four nights``, ``nights: 5`` for ``nights``) anchors the field to it; otherwise the text's
    numbers less those written next to another field's word (``3 guests``, for a field among ``names``), or all of
    them when that leaves none. ``integers``: whole numbers only."""
    own = _stems(name)
    others = set().union(*(_stems(n) for n in names if n != name)) - own if names else set()
    mine: list[int | float] = []
    theirs: set[int | float] = set()
    for a, b, v in number_mentions(text):
        after, before = _NEXT_WORD.match(text, b), _PREV_WORD.search(text, 0, a)
        near = {m.group(1).lower().removesuffix("s") for m in (after, before) if m}
        if integers and not isinstance(v, int):
            continue
        if near & own:
            mine.append(v)
        elif near & others:
            theirs.add(v)
    every = [v for v in text_numbers(text) if not integers or isinstance(v, int)]
    return list(dict.fromkeys(mine)) if mine else ([v for v in every if v not in theirs] or every)


# the word a value is written after: ``issued 30 January``, ``due by 2 April``, ``Invoice no. 8841``, ``PO: BB-77``
_CUE = re.compile(r"([^\W\d_]+)\.?(?:[ \t]+(?:no|nr|num|number|id|ref|code)\.?)?[ \t]*[:#=]?[ \t]*"
                  r"(?:(?:on|by|at|in|of|the|from|is|was|for)[ \t]+)?$", re.IGNORECASE)


def cue_word(text: str, at: int) -> str:
    """The word ``text`` writes right before offset ``at`` (lowercase; a generic ``no.``/``number``, a ``:`` or
    ``#`` and one function word skipped between them): ``due`` for ``due by 2 April``; ``""`` where none."""
    m = _CUE.search(text, 0, at)
    return m.group(1).lower() if m else ""


def cued(word: str, stems: set[str]) -> bool:
    """Whether ``word`` is one of the field words ``stems`` or a form of one (``issued`` of ``issue``,
    ``deliver`` of ``delivery``, ``inv`` of ``invoice``)."""
    return bool(word) and any(word == s or (len(s) >= 3 and word.startswith(s)) or (len(word) >= 3 and
                                                                                      s.startswith(word))
                              for s in stems)


def anchored_dates(name: str, text: str, names: tuple[str, ...] = ()) -> list[str]:
    """The dates of ``text`` (:func:`text_dates`) a date field ``name`` may take: a date written after a word of the
    field's own that no other field shares (``due 26 November 2024`` for ``due_date``; ``issued March 3, 2025`` for
    ``issue_date``) anchors the field to it; otherwise the text's dates less those another field's word anchors, or
    all of them when that leaves none."""
    mine_words, theirs_words = _distinct_stems(name, names)
    mine: list[str] = []
    theirs: set[str] = set()
    for a, _, iso in date_mentions(text):
        word = cue_word(text, a)
        if cued(word, mine_words):
            mine.append(iso)
        elif cued(word, theirs_words):
            theirs.add(iso)
    every = text_dates(text)
    return list(dict.fromkeys(mine)) if mine else ([v for v in every if v not in theirs] or every)


def _distinct_stems(name: str, names: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """The stems of ``name``'s words no other field among ``names`` has, and the other fields' stems it has not."""
    own = _stems(name)
    others = set().union(*(_stems(n) for n in names if n != name)) if names else set()
    return own - others, others - own


# -- currencies -------------------------------------------------------------------------------------------------

CURRENCY_CODES = frozenset(
    ["USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "NZD", "SEK", "NOK", "DKK", "ISK", "PLN", "CZK", "HUF", "RON", "BGN", "TRY", "RUB", "UAH", "INR", "PKR", "BDT", "LKR", "CNY", "HKD", "TWD", "KRW", "SGD", "MYR", "THB", "IDR", "PHP", "VND", "ZAR", "NGN", "KES", "GHS", "EGP", "MAD", "AED", "SAR", "QAR", "ILS", "BRL", "MXN", "ARS", "CLP", "COP", "PEN"])
_SYMBOLS = [("US$", "USD"), ("A$", "AUD"), ("AU$", "AUD"), ("C$", "CAD"), ("CA$", "CAD"), ("NZ$", "NZD"),
            ("HK$", "HKD"), ("S$", "SGD"), ("R$", "BRL"), ("€", "EUR"), ("£", "GBP"), ("¥", "JPY"), ("₹", "INR"),
            ("₩", "KRW"), ("₺", "TRY"), ("₽", "RUB"), ("₪", "ILS"), ("₦", "NGN"), ("$", "USD")]
_WORDS = {"euro": "EUR", "euros": "EUR", "pound": "GBP", "pounds": "GBP", "sterling": "GBP", "dollar": "USD",
          "dollars": "USD", "yen": "JPY", "franc": "CHF", "francs": "CHF", "rupee": "INR", "rupees": "INR",
          "kronor": "SEK", "kroner": "NOK", "zloty": "PLN", "złoty": "PLN", "rand": "ZAR", "yuan": "CNY",
          "reais": "BRL", "peso": "MXN", "pesos": "MXN", "renminbi": "CNY", "baht": "THB", "ringgit": "MYR", "rupiah": "IDR", "shekel": "ILS",
          "shekels": "ILS", "dirham": "AED", "dirhams": "AED", "riyal": "SAR", "riyals": "SAR", "hryvnia": "UAH",
          "forint": "HUF", "lira": "TRY", "naira": "NGN", "quid": "GBP", "bucks": "USD", "loonie": "CAD",
          "loonies": "CAD"}
# a currency word after the country's adjective names that country's currency (``Canadian dollars`` is CAD, not USD)
_QUALIFIED = {("canadian", "dollar"): "CAD", ("australian", "dollar"): "AUD", ("new zealand", "dollar"): "NZD",
              ("hong kong", "dollar"): "HKD", ("singapore", "dollar"): "SGD", ("taiwan", "dollar"): "TWD",
              ("aussie", "dollar"): "AUD", ("kiwi", "dollar"): "NZD", ("canuck", "dollar"): "CAD",
              ("us", "dollar"): "USD", ("american", "dollar"): "USD", ("swiss", "franc"): "CHF",
              ("swedish", "krona"): "SEK", ("swedish", "kronor"): "SEK", ("norwegian", "krone"): "NOK",
              ("norwegian", "kroner"): "NOK", ("danish", "krone"): "DKK", ("danish", "kroner"): "DKK",
              ("icelandic", "krona"): "ISK", ("icelandic", "kronur"): "ISK", ("czech", "koruna"): "CZK",
              ("mexican", "peso"): "MXN", ("argentine", "peso"): "ARS", ("chilean", "peso"): "CLP",
              ("colombian", "peso"): "COP", ("philippine", "peso"): "PHP", ("indian", "rupee"): "INR",
              ("pakistani", "rupee"): "PKR", ("sri lankan", "rupee"): "LKR", ("brazilian", "real"): "BRL",
              ("south african", "rand"): "ZAR", ("japanese", "yen"): "JPY", ("chinese", "yuan"): "CNY",
              ("british", "pound"): "GBP", ("egyptian", "pound"): "EGP", ("turkish", "lira"): "TRY",
              ("korean", "won"): "KRW", ("south korean", "won"): "KRW", ("polish", "zloty"): "PLN",
              ("russian", "ruble"): "RUB", ("russian", "rouble"): "RUB", ("kenyan", "shilling"): "KES"}
_QUALIFIED_RE = re.compile(r"\b(" + "|".join(sorted({a for a, _ in _QUALIFIED}, key=len, reverse=True)) + r")\s+("
                           + "|".join(sorted({b for _, b in _QUALIFIED}, key=len, reverse=True)) + r")s?\b",
                           re.IGNORECASE)


def text_currencies(text: str) -> list[str]:
    """The ISO 4217 codes ``text`` writes or names, in order, each once: codes (``CHF 860``), symbols (``€``,
    ``£``, ``A$``; a bare ``$`` is USD) and words (``euros``, ``pounds``)."""
    return list(dict.fromkeys(code for _, _, code in currency_mentions(text)))


# a code in capitals, or in lowercase right after an amount or a to/in/into/from ("12000 yen to aud", "100 usd"), but
# for the codes that are English words in lowercase ("to try", "in all")
_CODE_WORDS = frozenset({"try", "all", "cup", "top", "mad", "bam", "mop", "pen", "gel", "sos", "bob", "dop", "lak"})
_CODE_RE = re.compile(r"\b[A-Z]{3}\b|(?:(?<=\d )|(?<=\d)|(?<=\bto )|(?<=\bin )|(?<=\binto )|(?<=\bfrom ))[a-z]{3}\b")


def currency_mentions(text: str) -> list[tuple[int, int, str]]:
    """(start, end, code) of every currency ``text`` names (:func:`text_currencies`), in order, repeats included."""
    found: list[tuple[int, int, str]] = [(m.start(), m.end(), m.group().upper()) for m in _CODE_RE.finditer(text)
                                    if m.group().upper() in CURRENCY_CODES and m.group() not in _CODE_WORDS]
    taken: set[int] = set()
    for sym, code in _SYMBOLS:  # longest forms first: A$ before $
        for m in re.finditer(re.escape(sym), text):
            end = m.end() - 1
            if end not in taken and not (sym == "$" and m.start() and text[m.start() - 1].isalpha()):
                found.append((m.start(), m.end(), code))
                taken.add(end)
    qualified = []
    for m in _QUALIFIED_RE.finditer(text):
        code = _QUALIFIED.get((re.sub(r"\s+", " ", m.group(1).lower()), m.group(2).lower()))
        if code:
            qualified.append((m.start(), m.end(), code))
    found += qualified
    for m in re.finditer(r"\b[^\W\d_]+\b", text):
        code = _WORDS.get(m.group().lower())
        if code and not any(a <= m.start() < b for a, b, _ in qualified):
            found.append((m.start(), m.end(), code))
    return sorted(found)


def occurrences(value: Any, text: str, kind: str) -> list[tuple[int, int]]:
    """Where ``text`` gives ``value`` for a field of ``kind`` (``number``, ``date``, ``currency``, or a string: its
    case-insensitive occurrences): (start, end) offsets, in order."""
    if kind == "number":
        return [(a, b) for a, b, v in number_mentions(text) if v == value and not isinstance(value, bool)]
    if kind == "date":
        return [(a, b) for a, b, iso in date_mentions(text) if iso == value]
    if kind == "currency":
        return [(a, b) for a, b, code in currency_mentions(text) if code == value]
    if not isinstance(value, str) or not value:
        return []
    low, v = text.casefold(), value.casefold()
    out, i = [], low.find(v)
    while i >= 0:
        out.append((i, i + len(v)))
        i = low.find(v, i + 1)
    return out


# -- identifiers ------------------------------------------------------------------------------------------------

CODE_PATTERN = r"^[^\s]*[0-9][^\s]*$"
CODE_WORDS = frozenset({"number", "no", "num", "nr", "id", "code", "ref", "reference"})  # an identifier's name
# a code: letters and digits, joined by - / . (``INV-3302``, ``AC/2291``, ``20250611``), not in an email or a word
_CODE = re.compile(r"(?<![\w@.#/-])#?([^\W_]+(?:[-/.][^\W_]+)*)(?![\w@])")


def is_code(name: str) -> bool:
    """Whether a string field holds an identifier: its name ends in one of :data:`CODE_WORDS` (``invoice_number``,
    ``order_id``, ``po_no``) after a word of its own."""
    words = [w.lower() for w in name_words(name)]
    return len(words) >= 2 and words[-1] in CODE_WORDS


def code_mentions(text: str) -> list[tuple[int, int, str]]:
    """(start, end, code) of the codes ``text`` writes: a word with a digit (``INV-3302``, ``8841``, ``4471-B``),
    not a piece of a date, an amount (``1,120.50``, ``€245.80``, ``15,600 SEK``) or a run of digit groups (a phone
    number's ``5555 0190``)."""
    taken = [(a, b) for a, b, _ in date_mentions(text)] + [(a, b) for a, b, _ in currency_mentions(text)]
    out = []
    for m in _CODE.finditer(text):
        a, b = m.span(1)
        v = m.group(1)
        before, after = text[max(0, a - 2):a], text[b:b + 2]
        piece = bool(re.fullmatch(r"\d[, \t]", before) or re.fullmatch(r"[, \t]\d", after))  # of 15,600 or 555 0190
        if (not any(c.isdigit() for c in v) or re.fullmatch(r"\d+\.\d+", v) or piece
                or any(x <= b and y >= a for x, y in taken)):
            continue
        out.append((a, b, v))
    return out


def _code_like(v: str) -> bool:
    """A code by its look: letters and digits, a joiner, a leading zero or five digits or more (``1187`` is a
    code only where a field's word names it: ``invoice 1187``)."""
    return (any(c.isalpha() for c in v) or not v.isdigit() or v.startswith("0") or len(v) >= 5)


def anchored_codes(name: str, text: str, names: tuple[str, ...] = ()) -> list[str]:
    """The codes of ``text`` (:func:`code_mentions`) an identifier field ``name`` may take: those written after a
    word of its own (``invoice 8841``, ``Invoice no. KD-0417``, ``inv. no. 2025-118`` for ``invoice_number``) or
    beginning with one (``PO-1502`` for ``po_number``); otherwise the codes that look like one (:func:`_code_like`)
    and no other field's word anchors; ``[]`` where none."""
    own = {w.lower() for w in name_words(name) if len(w) >= 2} - CODE_WORDS
    others = {w.lower() for n in names if n != name for w in name_words(n) if len(w) >= 2} - CODE_WORDS - own
    mine, free = [], []
    for a, _, v in code_mentions(text):
        word, prefix = cue_word(text, a), re.match(r"[^\W\d_]*", v).group().lower()
        if cued(word, own) or (len(prefix) >= 2 and cued(prefix, own)):
            mine.append(v)
        elif not (cued(word, others) or (len(prefix) >= 2 and cued(prefix, others))) and _code_like(v):
            free.append(v)
    return list(dict.fromkeys(mine or free))


# -- placeholders -----------------------------------------------------------------------------------------------

STOCK_VALUES = ("123-456-7890", "(123) 456-7890", "555-555-5555", "555-1234", "000-000-0000", "1234567890",
                "john.doe@example.com", "jane.doe@example.com", "john@example.com", "email@example.com",
                "user@example.com", "example@example.com", "John Doe", "Jane Doe", "John Smith", "string", "N/A",
                "n/a", "none", "null", "unknown", "TBD", "YYYY-MM-DD", "Name", "Company", "City", "Location")


def placeholders(name: str, sub: dict[str, Any], text: str, names: tuple[str, ...] = ()) -> list[str]:
    """The values a string field never takes unless ``text`` holds them (case-insensitively): the field's name and
    the other field names ``names`` in their usual spellings (``attendees``, ``Attendees``, ``due date``, ``Due
    Date``), its title and description, and :data:`STOCK_VALUES`."""
    forms: set[str] = set()
    for n in (name, *names):
        words = n.replace("_", " ").replace("-", " ").strip()
        forms |= {n, words, words.lower(), words.title(), words.capitalize(), words.upper(), n.capitalize()}
    for key in ("title", "description"):
        if isinstance(sub.get(key), str) and len(sub[key]) <= 80:
            forms.add(sub[key])
    low = text.casefold()
    return sorted(v for v in forms | set(STOCK_VALUES) if v and v.casefold() not in low)


def name_mentions(names: tuple[str, ...], text: str) -> list[str]:
    """Where ``text`` writes one of the field ``names`` as a word or words (``nights``, ``Room type``, ``date``;
    a plural ``s`` either way): those pieces of the text, which a span of a field never is by itself."""
    out: set[str] = set()
    for n in names:
        phrase = r"[\s_-]+".join(re.escape(w) for w in name_words(n))
        if not phrase:
            continue
        out.update(m.group() for m in re.finditer(r"(?<!\w)" + phrase.removesuffix("s") + r"s?(?!\w)", text,
                                                  re.IGNORECASE))
    return sorted(out)


# -- the schema, field by field ---------------------------------------------------------------------------------

SHAPES = {  # field names held to a shape, with the pattern of that shape (a span of the text must match it)
    "phone": r"^\+?\(?[0-9]{1,5}\)?(?:[ ./-]?[0-9]{1,6}){0,4}[ ./-]?[0-9]{2,6}$",
    "email": r"^[^@\s,;:<>()]+@[^@\s,;:<>()]+\.[A-Za-z]{2,}$",
}
_SHAPE_NAMES = {"phone": ("phone", "mobile", "tel", "telephone", "fax", "cell"), "email": ("email", "e_mail", "mail")}


def _shape(name: str) -> str | None:
    low = name.lower()
    parts = set(re.split(r"[_\W]+", low))
    for shape, names in _SHAPE_NAMES.items():
        if low in names or parts & set(names):
            return shape
    return None


def _is_day(name: str) -> bool:
    """A string field that names a day: ``date``, ``day``, ``event_date``, ``when`` (a ``format: date`` one is
    grounded as ISO dates)."""
    return bool({"date", "day", "when"} & {w.lower() for w in name_words(name)})


def _days(name: str, sub: dict[str, Any], text: str) -> list[str]:
    """A day argument's values: the days ``text`` names; for a date (named ``date``, or described with
    ``YYYY-MM-DD``), each as the ISO date it names (:func:`~agentkit.constrain.dates.resolve_day`, in a year the
    text writes where it writes one: "from 2023 April 4th"); a ``day`` keeps "Saturday" as written."""
    phrases = day_phrases(text)
    if "date" not in {w.lower() for w in name_words(name)} and "YYYY" not in str(sub.get("description", "")):
        return phrases
    year = re.search(r"\b(?:19|20)\d{2}\b", text)
    return list(dict.fromkeys(resolve_day(d, year=int(year.group()) if year else None) or d for d in phrases))


_EXPRESSION_NAMES = frozenset({"expression", "expr", "formula", "equation", "calculation", "arithmetic"})


def _is_expression(name: str, sub: dict[str, Any]) -> bool:
    """A field that holds an arithmetic expression: named so (``expression``, ``math_expr``, ``formula``) or
    described as one (``an arithmetic expression``, ``a math expression``)."""
    desc = str(sub.get("description", "")).lower()
    return bool(_EXPRESSION_NAMES & {w.lower() for w in name_words(name)}) or bool(
        re.search(r"\b(?:arithmetic|math(?:ematical)?) expression", desc))


def is_currency(name: str, sub: dict[str, Any]) -> bool:
    """Whether a string field holds a currency code (its name or description says so)."""
    low = name.lower()
    desc = str(sub.get("description", "")).lower()
    return (low in ("currency", "currency_code", "currencycode") or "currency" in (w.lower() for w in name_words(name))
            or "currency code" in desc)


@dataclass
class Grounding:
    """What :func:`ground_schema` did: the rewritten ``schema``, the JSON pointers of the string slots grounded to
    spans (``/name``, ``/attendees/*``), the required fields it could not ground (``ungrounded``), and the
    values each string slot refuses (``exclude``: placeholders for an ungrounded one, the field names the text
    writes for a span)."""

    schema: dict[str, Any]
    text: str
    spans: set[str] = field(default_factory=set)
    ungrounded: list[str] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)  # pointer -> the kind grounded there
    no_span: frozenset[str] = frozenset()  # string fields whose slot no span of the text fits
    exclude: dict[str, tuple[str, ...]] = field(default_factory=dict)  # pointer -> values its slot refuses
    names: tuple[str, ...] = ()  # every property name and title in the schema (placeholders for any field)
    fields: tuple[str, ...] = ()  # every property name in the schema (the words that anchor a number)
    fences: dict[str, Fence] = field(default_factory=dict)  # pointer -> where its span may go in the text
    proper: set[str] = field(default_factory=set)  # pointers of proper-name string fields (:func:`is_proper`)
    whole_names: dict[str, list[str]] = field(default_factory=dict)  # pointer -> the whole names its span may be
    fenced: bool = True  # an extraction's field rules (:func:`ground_schema`)


def check_option(value: Any, where: str) -> bool | None:
    """A grounded option (``True``, ``False`` or None for the default); anything else is a ``UserError``."""
    if value is None or isinstance(value, bool):
        return value
    raise UserError(f"{where} must be true, false or null, got {value!r}", param=where)


def ground_schema(schema: dict[str, Any], text: str, *, grounded: bool | None = None,
                  kinds: frozenset[str] = KINDS, no_span: frozenset[str] = frozenset(),
                  fenced: bool = True) -> Grounding:
    """``schema`` rewritten so each field's value comes from ``text`` (the module's docstring says how, per kind).
    ``grounded``: the call's default (None: :data:`KINDS`; False: no field grounded unless it says
    ``"grounded": true``; True: every kind). ``fenced``: an extraction's field rules, each string field's fence
    (:mod:`agentkit.constrain.fences`), identifiers held to the text's codes and dates to the one after the field's
    word (off for a tool call's arguments). Local ``$ref``s are followed (not through a cycle)."""
    check_option(grounded, "grounded")
    kinds = frozenset() if grounded is False else (frozenset(KINDS) if grounded else kinds)
    out = Grounding(schema={}, text=text, no_span=no_span, names=tuple(_names(schema)),
                    fields=tuple(_names(schema, titles=False)), fenced=fenced)
    root = _inline(copy.deepcopy(schema), schema.get("$defs") or schema.get("definitions") or {}, 0)
    out.schema = _object(root, "", text, kinds, out) if isinstance(root, dict) else root
    return out


def _names(node: Any, titles: bool = True) -> list[str]:
    """The property names (and ``titles``) anywhere in a schema, each once."""
    out: dict[str, None] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if titles and isinstance(n.get("title"), str):
                out[n["title"]] = None
            if isinstance(n.get("properties"), dict):
                out.update(dict.fromkeys(n["properties"]))
            stack.extend(v for k, v in n.items() if k not in ("enum", "const", "default", "examples", "required"))
        elif isinstance(n, list):
            stack.extend(n)
    return list(out)


def _inline(node: Any, defs: dict[str, Any], depth: int) -> Any:
    if isinstance(node, list):
        return [_inline(x, defs, depth) for x in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")) and depth < 8:
        target = defs.get(ref.rsplit("/", 1)[1])
        if isinstance(target, dict):
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return _inline({**copy.deepcopy(target), **rest}, defs, depth + 1)
    return {k: (v if k in ("enum", "const", "default", "examples", "required") else _inline(v, defs, depth))
            for k, v in node.items()}


def _object(node: dict[str, Any], ptr: str, text: str, kinds: frozenset[str], out: Grounding) -> dict[str, Any]:
    props = node.get("properties")
    if not isinstance(props, dict):
        return node
    required = set(node.get("required") or ())
    new: dict[str, Any] = {}
    asked: list[str] = []
    for name, sub in props.items():
        if not isinstance(sub, dict):
            new[name] = sub
            continue
        flag = check_option(sub.get("grounded"), f"{ptr}/{name}: grounded")
        own = kinds if flag is None else (frozenset(KINDS) if flag else frozenset())
        value = _field(name, sub, f"{ptr}/{name}", text, own, out)
        if value is None:  # no value in the text
            if name in required:
                out.ungrounded.append(f"{ptr}/{name}".lstrip("/"))
                new[name] = _plain(name, sub, f"{ptr}/{name}", text, out)
            elif allows_null(sub):
                new[name] = {"type": "null"}
        else:
            new[name] = value
            if name not in required and allows_null(value) and kinds:
                asked.append(name)  # written, as a value or null: the model decides there, not by leaving it out
    return {**node, "properties": new, **({"required": [*node.get("required", []), *asked]} if asked else {})}


def allows_null(sub: dict[str, Any]) -> bool:
    """Whether the schema ``sub`` admits null (``type: null`` in it or in one of its ``anyOf``/``oneOf``)."""
    branches = sub.get("anyOf") or sub.get("oneOf") or [sub]
    return any(isinstance(b, dict) and (b.get("type") == "null" or (isinstance(b.get("type"), list)
                                                                    and "null" in b["type"])) for b in branches)


def _plain(name: str, sub: dict[str, Any], ptr: str, text: str, out: Grounding) -> dict[str, Any]:
    """``sub`` ungrounded; its string slot (if it has one) refuses the placeholders (:func:`placeholders`)."""
    split = type_branches(sub)
    branches = split.get("anyOf") or split.get("oneOf") or [split]
    if any(isinstance(b, dict) and b.get("type") == "string" and "enum" not in b and "const" not in b
           for b in branches):
        words = placeholders(name, sub, text, out.names)
        if words:
            out.exclude[ptr] = tuple(json.dumps(w, ensure_ascii=False)[1:-1] for w in words)
    return sub


_ANNOTATIONS = ("format", "pattern", "minLength", "maxLength", "description")


GENERIC_KEYS = ("title", "description", "default", "examples", "grounded", "$comment", "deprecated", "readOnly",
                "writeOnly")  # a schema's keys that say nothing of its type's values


def type_branches(sub: dict[str, Any]) -> dict[str, Any]:
    """``sub`` with a list of types (``{"type": ["string", "null"]}``, OpenAI's strict form of an optional field)
    written as the ``anyOf`` of one branch per type, as pydantic writes an ``Optional``: the keys of the types'
    values (``format``, ``items``, ...) in each branch but null's, the others (:data:`GENERIC_KEYS`) beside the
    ``anyOf``. Any other schema as it is."""
    types = sub.get("type")
    if not isinstance(types, list):
        return sub
    outer = {k: v for k, v in sub.items() if k in GENERIC_KEYS}
    inner = {k: v for k, v in sub.items() if k not in GENERIC_KEYS and k != "type"}
    return {"anyOf": [{"type": t, **inner} if t != "null" else {"type": "null"} for t in types], **outer}


def _field(name: str, sub: dict[str, Any], ptr: str, text: str, kinds: frozenset[str],
           out: Grounding) -> dict[str, Any] | None:
    """The grounded schema of one property (None: the text has no value for it)."""
    sub = type_branches(sub)
    for key in ("anyOf", "oneOf"):
        if isinstance(sub.get(key), list):
            branches = [b for b in sub[key] if not (isinstance(b, dict) and b.get("type") == "null")]
            nulls = [b for b in sub[key] if isinstance(b, dict) and b.get("type") == "null"]
            kept = []
            outer = {k: v for k, v in sub.items() if k in _ANNOTATIONS}  # they apply to every branch
            for b in branches:
                g = _field(name, {**outer, **b}, ptr, text, kinds, out) if isinstance(b, dict) else b
                if g is not None:
                    kept.append(g)
            if not kept:
                return None
            return {**{k: v for k, v in sub.items() if k != key}, key: kept + nulls}
    t = sub.get("type")
    if t == "object":
        return _object(sub, ptr, text, kinds, out)
    if t == "array" and isinstance(sub.get("items"), dict):
        items = _field(name, sub["items"], ptr + "/*", text, kinds, out)
        return None if items is None else {**sub, "items": items}
    if t in ("integer", "number") and "number" in kinds and ("enum" not in sub or not out.fenced):
        nums = anchored_numbers(name, text, out.fields, integers=t == "integer")
        if "enum" in sub:  # an argument held to some numbers (anchor_pairs: a conversion's measured amount)
            nums = [n for n in nums if n in sub["enum"]]
            if not nums:
                return sub
        return _enum(sub, nums, ptr, "number", out)
    if t != "string":
        return sub
    return _string(name, sub, ptr, text, kinds, out)


def _string(name: str, sub: dict[str, Any], ptr: str, text: str, kinds: frozenset[str],
            out: Grounding) -> dict[str, Any] | None:
    if "enum" in sub:
        if "enum" not in kinds and not (is_currency(name, sub) and "currency" in kinds):
            return sub
        low = text.casefold()
        codes = set(text_currencies(text)) if is_currency(name, sub) else set()
        said = [v for v in sub["enum"] if isinstance(v, str) and (v in codes or re.search(
            r"(?<!\w)" + re.escape(v.casefold()) + r"(?!\w)", low))]
        if said:
            out.kinds[ptr] = "enum"
        return {**sub, "enum": said} if said else sub
    if "const" in sub:
        return sub
    if sub.get("format") == "date":
        dates = anchored_dates(name, text, out.fields) if out.fenced else text_dates(text)
        return _enum(sub, dates, ptr, "date", out) if "date" in kinds \
            else _plain(name, sub, ptr, text, out)
    if is_currency(name, sub):
        return _enum(sub, text_currencies(text), ptr, "currency", out) if "currency" in kinds \
            else _plain(name, sub, ptr, text, out)
    if is_unit(name, sub) and "unit" in kinds and "pattern" not in sub and not sub.get("format"):
        return _enum(sub, text_units(text), ptr, "unit", out)
    if _is_day(name) and "day" in kinds and "pattern" not in sub and not sub.get("format"):
        return _enum(sub, _days(name, sub, text), ptr, "date", out)
    if _is_expression(name, sub) and "expression" in kinds and "pattern" not in sub and not sub.get("format"):
        return _expression(sub, ptr, text, out)
    spans = _clauses(name, text) if "query" in kinds and "pattern" not in sub and not out.fenced else []
    if spans and not sub.get("format"):  # a query's clause, a place's name; else the request's spans
        return _enum(sub, spans, ptr, "string", out) or _string(name, sub, ptr, text, kinds - {"query"}, out)
    if "string" not in kinds or sub.get("format") not in (None, "email"):
        return _plain(name, sub, ptr, text, out)
    shape = "email" if sub.get("format") == "email" else _shape(name)
    if out.fenced and not shape and is_code(name) and "pattern" not in sub and not sub.get("format"):
        codes = anchored_codes(name, text, out.fields)
        grounded = _enum(sub, codes, ptr, "code", out) if codes else None
        if grounded is not None:
            return grounded
        sub = {**sub, "pattern": CODE_PATTERN}  # no code the field may take: a span that is one word with a digit
    shaped = dict(sub)
    if shape and "pattern" not in sub and not sub.get("format"):
        shaped["pattern"] = SHAPES[shape]
    if ptr in out.no_span:
        return None
    out.spans.add(ptr)
    named = name_mentions((name, *out.names), text)
    if not out.fenced and not shape and _names_or_queries(name):
        named += _typed_values(text)
        if "pattern" not in sub and not sub.get("format"):  # "45 km a day" is no query, "1,230 m" no city
            shaped["pattern"] = r"^[^0-9]"
    if named:
        out.exclude[ptr] = tuple(dict.fromkeys(json.dumps(w, ensure_ascii=False)[1:-1] for w in named))
    out.kinds[ptr] = shape or "string"
    if shape != "email" and out.fenced:
        _fence(name, ptr, text, shape, out)
    return shaped


def _expression(sub: dict[str, Any], ptr: str, text: str, out: Grounding) -> dict[str, Any] | None:
    """An expression argument: one the text writes in signs, copied whole (:func:`written_expressions`), else the
    text's numbers joined by the operators its words name (:func:`expression_pattern`; None: it writes too few)."""
    written = written_expressions(text)
    if written:
        return _enum(sub, written, ptr, "expression", out)
    pattern = expression_pattern(text)
    if pattern is None:
        return None
    out.kinds[ptr] = "expression"
    return {**sub, "pattern": pattern}


_QUERY_WORDS = frozenset({"query", "q", "search", "keywords", "keyword", "topic", "term", "terms"})


def _clauses(name: str, text: str) -> list[str]:
    """What a query argument (:func:`~agentkit.constrain.queries.query_spans`) or a place argument (``city``,
    ``location``: :func:`~agentkit.constrain.places.place_spans`) takes from ``text`` (empty: its spans)."""
    if _is_query(name):
        return query_spans(text)
    return place_spans(text) if is_place(name) else []


def _is_query(name: str) -> bool:
    """Whether a string field holds a search query (``query``, ``search_term``, ``q``)."""
    return bool(_QUERY_WORDS & {w.lower() for w in name_words(name)})


def _names_or_queries(name: str) -> bool:
    """Whether a string field holds a name (a city, a person, a company: :func:`~agentkit.constrain.fences.is_proper`)
    or a search query (``query``, ``search_term``): neither is a number or a day alone, nor starts with a digit.
    Another field may (``season="2021"``, ``version="3.13"``)."""
    words = [w.lower() for w in name_words(name)]
    return is_proper(words) or _is_query(name)


def _typed_values(text: str) -> list[str]:
    """The numbers and the days ``text`` writes, as written (``1972``, ``3.13``, ``Tuesday``, ``20 March``): a name
    or a query argument (:func:`_names_or_queries`) is not one of them whole. Held to the text's spans alone, a small model
    called ``get_weather(city="20 March")`` and ``web_search(query="1972")``."""
    numbers = [text[a:b] for a, b, _ in digit_mentions(text)]
    days = [text[a:b] for a, b, _ in date_mentions(text)] + [d for d in day_phrases(text) if d in text]
    days += [d[4:] for d in days if d.lower().startswith("the ")]
    days += [m.group() for m in re.finditer(r"\b" + WEEKDAY + r"\b", text, re.IGNORECASE)]
    return list(dict.fromkeys(numbers + days))


def _fence(name: str, ptr: str, text: str, shape: str | None, out: Grounding) -> None:
    """The string field's fence (:func:`~agentkit.constrain.fences.field_fence`) in ``out.fences``; a proper name
    in ``out.proper``; a field held to its own word's phrase is of kind ``held``."""
    words = [w.lower().removesuffix("s") for w in name_words(name)]
    others = set().union(*(_stems(n) for n in out.fields if n != name)) if out.fields else set()
    proper = shape is None and is_proper(words)
    if proper:
        out.proper.add(ptr)
    amounts, digits, spelled = _amount_edges(text) if shape is None else ((), (), ())
    fence = field_fence(text, _stems(name), others, proper=proper, phone=shape == "phone", amounts=amounts,
                        numbers=[*digits, *(() if proper else spelled)], function_words=FUNCTION_WORDS,
                        thing=shape is None and not proper and is_thing(words))
    if fence:
        out.fences[ptr] = fence
        if fence.held:
            out.kinds[ptr] = "held"


def _amount_edges(text: str) -> tuple[list[int], list[int], list[int]]:
    """Where ``text`` writes an amount (a currency and the number it goes with: ``€2.40``, ``SEK 6,450.00``,
    ``15,600 SEK``), a number in digits, and one in words: an amount is no string's value, nor does a string's span
    start with a number (``1 standing desk``; ``one`` of ``one night`` is no room type)."""
    currencies = currency_mentions(text)
    walls = [a for a, _, _ in currencies]
    digits, words = [], []
    for a, b, _ in number_mentions(text):
        if text[a].isdigit() or text[a] == "-":
            digits.append(a)
            if any((y <= a and not text[y:a].strip()) or (x >= b and not text[b:x].strip()) for x, y, _ in currencies):
                walls.append(a)
        else:
            words.append(a)
    return walls, digits, words



def _enum(sub: dict[str, Any], values: list[Any], ptr: str, kind: str, out: Grounding) -> dict[str, Any] | None:
    """``sub`` with its values limited to ``values`` that still validate against it (None: none do)."""
    import jsonschema

    check = jsonschema.Draft202012Validator({k: v for k, v in sub.items() if k not in ("default", "grounded")})
    ok = [v for v in values if check.is_valid(v)]
    if not ok:
        return None
    out.kinds[ptr] = kind
    return {**sub, "enum": ok}


# -- the template -----------------------------------------------------------------------------------------------

PLAIN_BODY = '(?:[^\\x00-\\x1f"\\\\]|\\\\[btnfr"\\\\])*'  # a JSON string body with no constraint


def grounded_template(schema: dict[str, Any], text: str, compile_schema: Callable[[dict[str, Any]], Template], *,
                      grounded: bool | None = None, kinds: frozenset[str] = KINDS,
                      fenced: bool = True) -> tuple[Template, Grounding]:
    """The template of ``schema`` grounded in ``text`` (``compile_schema`` compiles a schema) and what grounding
    did (``kinds``, ``fenced``: as :func:`ground_schema`'s). A string field whose compiled slot no span of the text fits (an email field, a text without an email) is
    grounded again as a field without a value."""
    g = ground_schema(schema, text, grounded=grounded, kinds=kinds, fenced=fenced)
    template = compile_schema(g.schema)
    body = json.dumps(text, ensure_ascii=False)[1:-1]
    empty = frozenset(s.name for s in slots(template.root) if s.name in g.spans and not any(
        x not in g.exclude.get(s.name, ()) for x in fenced_spans(body, None, s.regex)))  # ("Name a city.": "Name")
    if empty:
        g = ground_schema(schema, text, grounded=grounded, kinds=kinds, no_span=empty, fenced=fenced)
        template = compile_schema(g.schema)
    for s in slots(template.root):  # a fence no span fits is dropped: the field's spans are the text's
        if s.name in g.fences and not any(x not in g.exclude.get(s.name, ())
                                          for x in fenced_spans(body, g.fences[s.name], s.regex)):
            del g.fences[s.name]
            if g.kinds.get(s.name) == "held":
                g.kinds[s.name] = "string"
        if s.name in g.proper:
            allowed = set(fenced_spans(body, g.fences.get(s.name), s.regex)) - set(g.exclude.get(s.name, ()))
            g.whole_names[s.name] = [n for n in (text[run[0][0]:run[-1][1]] for run in name_runs(text))
                               if json.dumps(n, ensure_ascii=False)[1:-1] in allowed]
    return ground_template(template, g, schema), g


def spans_fit(regex: str, body: str, fence: Fence | None = None) -> bool:
    """Whether some span of the JSON-escaped text ``body`` (starting and ending where :func:`span_edges` and the
    field's ``fence`` allow, at most :data:`SPAN_CHARS` characters) is in a slot's language ``regex``."""
    if regex == PLAIN_BODY and not fence:
        return bool(body.strip())
    return next(fenced_spans(body, fence, regex), None) is not None


def fenced_spans(body: str, fence: Fence | None = None, regex: str = PLAIN_BODY) -> Iterator[str]:
    """The spans of the JSON-escaped text ``body`` a field with ``fence`` and slot language ``regex`` may take
    (:func:`spans_fit`), as JSON string bodies, in order of their start."""
    fence = fence or Fence()
    rx = re.compile(regex, re.DOTALL)
    raw = body.encode()
    starts, ends = (e - f for e, f in zip(span_edges(raw), (fence.no_start, fence.no_end)))
    stop = span_breaks(raw, fence.walls)
    offsets = [len(body[:k].encode()) for k in range(len(body) + 1)]
    for i in range(len(body)):
        if offsets[i] not in starts:
            continue
        for j in range(i + 1, min(len(body), i + SPAN_CHARS) + 1):
            if offsets[j] > stop[offsets[i]]:
                break
            if offsets[j] in ends and rx.fullmatch(body, i, j):
                yield body[i:j]


def ground_template(template: Template, grounding: Grounding, schema: Any = None) -> Template:
    """A copy of ``template`` (compiled from ``grounding.schema``) with each string slot named in
    ``grounding.spans`` given the JSON-escaped text as its source (the token automaton reads such a slot as
    :class:`~agentkit.constrain.spans.SpanDFA`), labelled with ``schema`` (the output's own; None: the template's)
    and, in ``meta``, the grounded schema and fields."""
    body = json.dumps(grounding.text, ensure_ascii=False)[1:-1]
    memo: dict[int, Node] = {}

    def walk(node: Node) -> Node:
        hit = memo.get(id(node))
        if hit is not None:
            return hit
        new: Node = node
        if isinstance(node, Slot) and node.name in grounding.spans:
            new = Slot(node.regex, node.max_tokens, node.name, source=body, exclude=_producible(node, grounding),
                       fence=grounding.fences.get(node.name))
        elif isinstance(node, Slot) and node.name in grounding.exclude:
            new = Slot(node.regex, node.max_tokens, node.name, exclude=_producible(node, grounding))
        elif isinstance(node, Seq):
            new = Seq(tuple(walk(i) for i in node.items))
        elif isinstance(node, Choice):
            new = Choice(tuple(walk(o) for o in node.options))
        elif isinstance(node, Repeat):
            new = Repeat(walk(node.item), node.sep, node.min, node.max)
        memo[id(node)] = new
        return new

    meta = {**template.meta, "grounded": dict(sorted(grounding.kinds.items())), "grounded_schema": grounding.schema}
    return type(template)(root=walk(template.root) if grounding.spans or grounding.exclude else template.root,
                          schema=template.schema if schema is None else schema, compile_ms=template.compile_ms,
                          kind=template.kind, meta=meta)


def _producible(slot: Slot, grounding: Grounding) -> tuple[str, ...]:
    """The values ``slot`` refuses (``grounding.exclude``) that its own language holds: refusing the others is a
    no-op, and each refusal costs the token automaton a product (a ``[\\s\\S]{256}`` slot refusing ``Name``)."""
    words = grounding.exclude.get(slot.name, ())
    if not words:
        return ()
    rx = re.compile(slot.regex, re.DOTALL)
    return tuple(w for w in words if rx.fullmatch(w))


# a span does not end with one of these lowercase words (``The spring fundraiser is on``): a value ends in a content
# word, a number or a code, so a span of function words alone is never a value (``attendees: ["the"]``)
FUNCTION_WORDS = frozenset({"a", "an", "the", "and", "or", "but", "nor", "of", "on", "in", "at", "to", "for", "from",
                            "by", "with", "via", "per", "into", "onto", "over", "under", "about", "as", "is", "are",
                            "was", "were", "be", "been", "am", "it", "its", "this", "that", "these", "those", "my",
                            "our", "your", "their", "his", "her", "we", "you", "they", "he", "she", "i", "me", "us",
                            "them", "him", "do", "does", "did", "has", "have", "had", "will", "would", "can",
                            "could", "should", "please", "not", "no", "so", "then", "than", "if", "when", "where",
                            "each", "every", "all", "any", "some", "both", "here", "there", "also", "just", "only",
                            "hi", "hello", "hey", "dear", "thanks"})
# the ". " after a title or a short form is not a clause break (``Mr. Eamon Fitzgerald``, ``St. Mary's``)
_ABBREVIATION = re.compile(rb"(?<![\w.])(?:Mr|Mrs|Ms|Mx|Dr|Prof|Rev|Sr|Jr|St|Mt|Fr|Capt|Col|Gen|Lt|Sgt|No|Nr|Inc|Ltd|Co|"
                           rb"Corp|approx|vs|etc|e\.g|i\.e)\.$")
# nor starts with one of these (``at the Marlow Arts Centre``): a value is what follows the preposition
LEADING_WORDS = frozenset({"at", "on", "in", "for", "from", "with", "to", "by", "of", "and", "or", "but", "via", "per",
                           "into", "onto", "as"})
_THOUSANDS = re.compile(r",\d{3}(?!\d)")
BREAKS = (", ", "; ", ". ", ": ", " — ", " – ", " - ", "\\n")  # clause breaks: a span does not cross one


def span_breaks(body: bytes, walls: frozenset[int] = frozenset()) -> list[int]:
    """For each byte offset of the JSON-escaped text ``body``, the offset of the next clause break (:data:`BREAKS`),
    date (:func:`date_mentions`) or one of ``walls`` (a field's own, :mod:`agentkit.constrain.fences`) at or after
    it (``len(body)`` where none): a span starting at ``p`` ends by ``span_breaks(body)[p]``."""
    text = body.decode("utf-8")
    dates = {len(text[:k].encode()) for a, b, _ in date_mentions(text)  # a date (and its weekday): a value of its own
             for k in (_weekday_start(text, a), b)}
    marks = sorted({i for b in BREAKS for i in _finds(body, b.encode()) if not _ABBREVIATION.search(body, 0, i + 1)}
                   | dates | walls)
    out, nxt = [len(body)] * (len(body) + 1), len(body)
    for p in range(len(body), -1, -1):
        if marks and p == marks[-1]:
            nxt = marks.pop()
        out[p] = nxt
    return out


_WEEKDAY_BEFORE = re.compile(r"\b" + WEEKDAY + r",?[ \t]+$", re.IGNORECASE)


def _weekday_start(text: str, at: int) -> int:
    """Where the weekday written right before the date at ``at`` starts (``Tuesday 14 October 2025``), else ``at``."""
    m = _WEEKDAY_BEFORE.search(text, 0, at)
    return m.start() if m else at


def _finds(data: bytes, sub: bytes) -> list[int]:
    out, i = [], data.find(sub)
    while i >= 0:
        out.append(i)
        i = data.find(sub, i + 1)
    return out


def span_edges(body: bytes) -> tuple[frozenset[int], frozenset[int]]:
    """(the byte offsets a span of the JSON-escaped text ``body`` may start at, those it may end at): word edges
    outside an escape sequence and a date. A span starts with a letter, a digit or one of :data:`OPENERS`, ends with a letter,
    a digit or one of :data:`CLOSERS`, and does not start or end inside a word (``Lisbon``, not ``isbo``;
    ``INV-3302``, not ``3302``: :data:`JOINERS` between letters or digits join them)."""
    text = body.decode("utf-8")
    inside: set[int] = set()  # character offsets inside an escape sequence (after its backslash)
    i = 0
    while i < len(text):
        if text[i] == "\\":
            width = 6 if text[i + 1:i + 2] == "u" else 2
            inside.update(range(i + 1, i + width))
            i += width
        else:
            i += 1
    at = [0]
    for ch in text:
        at.append(at[-1] + len(ch.encode("utf-8")))

    def alnum(k: int) -> bool:
        return 0 <= k < len(text) and text[k].isalnum() and k not in inside

    def word(k: int) -> bool:  # a letter or digit, or a joiner between two (INV-20931, O'Riordan, 2024/0931)
        return alnum(k) or (0 <= k < len(text) and (text[k] in JOINERS and alnum(k - 1) and alnum(k + 1)
                                                    or thousands(k)))

    def thousands(k: int) -> bool:  # the comma of 1,120.50: between a digit and three digits
        return text[k] == "," and k > 0 and text[k - 1].isdigit() and bool(_THOUSANDS.match(text, k))

    def signed(k: int) -> bool:  # the digits of +54 11 ...: a span takes the sign
        return text[k].isdigit() and k > 0 and text[k - 1] == "+" and not word(k - 2)

    def function_word(k: int) -> bool:  # the word ending at k is a lowercase function word
        a = k
        while a > 0 and text[a - 1].isalpha():
            a -= 1
        return text[a:k] in FUNCTION_WORDS and not (a > 0 and word(a - 1))

    def preposition(k: int) -> bool:  # the word starting at k is a lowercase preposition or conjunction
        b = k
        while b < len(text) and text[b].isalpha():
            b += 1
        return text[k:b] in LEADING_WORDS and not word(b)

    in_date = {k for a, b, _ in date_mentions(text) for k in range(_weekday_start(text, a), b)}  # no piece of a date
    starts = frozenset(at[k] for k in range(len(text)) if k not in inside and (alnum(k) or text[k] in OPENERS)
                       and not (word(k) and word(k - 1)) and not signed(k) and not preposition(k) and k not in in_date)
    ends = frozenset(at[k] for k in range(1, len(text) + 1) if k - 1 not in inside and (
        alnum(k - 1) or text[k - 1] in CLOSERS) and not (word(k - 1) and word(k)) and not function_word(k))
    return starts, ends


# -- tool arguments ---------------------------------------------------------------------------------------------

_PAIRS = (("from", "to"), ("source", "target"), ("origin", "destination"))
_TO_CUE = re.compile(r"\b(?:to|in|into|as|how many|how much)\s+", re.IGNORECASE)
_FROM_CUE = re.compile(r"\bfrom\s+", re.IGNORECASE)
_STOP = "|".join(sorted(FUNCTION_WORDS | {"into", "how", "many", "much", "what", "what's"}, key=len, reverse=True))
# one or two words; the second not a function word (``CAD a month`` is ``CAD``)
# (case kept: ``US dollars`` is no pronoun)
_PHRASE = re.compile(r"(?!(?:" + _STOP + r")\b)°?[^\W\d_][\w°'-]*(?:\s+(?!(?:" + _STOP + r")\b)[^\W\d_][\w'-]*)?")


def pair_fields(parameters: dict[str, Any]) -> list[tuple[str, str]]:
    """The (from, to) pairs among a tool's required string arguments: ``from_currency``/``to_currency``,
    ``source_lang``/``target_lang``, ``origin``/``destination``."""
    props = parameters.get("properties") or {}
    required = [k for k in parameters.get("required") or () if isinstance(props.get(k), dict)
                and props[k].get("type") == "string"]
    out = []
    for a in required:
        wa = [w.lower() for w in name_words(a)]
        for first, second in _PAIRS:
            if first in wa:
                rest = [second if w == first else w for w in wa]
                b = next((k for k in required if [w.lower() for w in name_words(k)] == rest), None)
                if b is not None:
                    out.append((a, b))
    return out


def pair_phrases(text: str) -> tuple[list[str], list[str]]:
    """What a conversion's two sides are called in ``text``: the from side, a phrase right after a number or
    ``from`` (``1,500 Mexican pesos``, ``100 F``, ``from Paris``) or a currency symbol right before a number
    (``€60``, ``US$ 20``); the to side, one right after ``to``/``in``/``into``/``as``/``how many`` (``in Canadian
    dollars``, ``to miles``, ``How many yen``), and a unit or currency listed on after one (``in litres and
    kilometres``). Each phrase is one or two words, not function words, in order, each
    once."""
    mentions = number_mentions(text)
    numbers = {a for a, _, _ in mentions}
    symbols = [(a, text[a:b]) for a, b, _ in currency_mentions(text)
               if not text[a:b].isalpha() and b + text[b:b + 1].isspace() in numbers]
    starts_from = [b for _, b, _ in mentions] + [m.end() for m in _FROM_CUE.finditer(text)]
    starts_to = [m.end() for m in _TO_CUE.finditer(text)]

    def phrases(starts: list[int], listed: bool = False) -> list[str]:
        found, todo = [], list(starts)
        while todo:
            p = todo.pop(0)
            while p < len(text) and text[p].isspace():
                p += 1
            m = None if p in numbers else _PHRASE.match(text, p)  # "in one sentence" marks no side
            if m:
                found.append((p, m.group()))
                more = _LISTED.match(text, m.end()) if listed and _measure(m.group()) else None
                if more and _measure(text[more.end():more.end() + 24]):
                    todo.append(more.end())
        return list(dict.fromkeys(v for _, v in sorted(found)))
    froms = phrases(sorted(set(starts_from)))
    return list(dict.fromkeys([s for _, s in symbols] + froms)), phrases(starts_to, listed=True)


_LISTED = re.compile(r"\s*(?:,\s*(?:and|or)?|and|or|&)\s+", re.IGNORECASE)


def _measure(phrase: str) -> bool:
    """Whether ``phrase`` begins with a unit or a currency (a to side listed on: "in litres and kilometres")."""
    return any(a == 0 for a, _, _ in unit_mentions(phrase)) or any(a == 0 for a, _, _ in currency_mentions(phrase))


def anchor_pairs(parameters: dict[str, Any], sources: str, one_dimension: bool = True) -> dict[str, Any]:
    """``parameters`` with each (from, to) pair (:func:`pair_fields`) held to its side of the conversation
    (:func:`pair_phrases`): a currency code to the codes its side names, a string to its side's phrases, a unit
    pair to one dimension (:func:`_one_dimension`; ``one_dimension`` False: to every unit its side names). A side
    the text does not mark leaves the pair as it is, but for a side of units or currencies where the other side is
    marked: the others the text names ("2.5 lbs of flour and my scale only shows grams"). The conversion's one required number is one written
    with a currency or a unit where the text writes any (:func:`measured_numbers`: "45,000 yen a night ... 10% tax"
    converts 45000)."""
    pairs = pair_fields(parameters)
    if not pairs:
        return parameters
    froms, tos = pair_phrases(sources)
    props = dict(parameters["properties"])
    kinds = set()
    for a, b in pairs:
        kind = "currency" if is_currency(a, props[a]) else "unit" if is_unit(a, props[a]) else None
        kinds.add(kind)
        values = _apart([_side(props[a], a, froms, number_units(sources)), _side(props[b], b, tos)])
        if kind is not None and values[0] and not values[1] and "enum" not in props[b]:
            values[1] = _others(sources, kind, values[0])
        elif kind is not None and values[1] and not values[0] and "enum" not in props[a]:
            values[0] = _others(sources, kind, values[1])
        if one_dimension and kind == "unit" and is_unit(b, props[b]):
            values = _one_dimension(values)
        if all(values) and values[0] != values[1]:
            props[a], props[b] = ({**props[k], "enum": v} for k, v in zip((a, b), values))
    amounts = [k for k in parameters.get("required") or () if isinstance(props.get(k), dict)
               and props[k].get("type") in ("number", "integer") and not {"enum", "const"} & props[k].keys()
               and props[k].get("grounded") is not False]
    froms_held = [v for a, _ in pairs for v in props[a].get("enum") or ()]
    measured = (measured_numbers(sources, kinds - {None}, froms_held) if froms_held else []) \
        or measured_numbers(sources, kinds - {None})
    if len(amounts) == 1 and measured:
        props[amounts[0]] = {**props[amounts[0]], "enum": measured}
    return {**parameters, "properties": props}


def _others(text: str, kind: str, taken: list[str]) -> list[str]:
    """The units (or currencies) ``text`` names other than those of ``taken``, as written."""
    if kind == "unit":
        keys = {unit_key(u) for u in taken}
        return [u for u in text_units(text) if unit_key(u) not in keys]
    codes = {c for t in taken for _, _, c in currency_mentions(t)} | set(taken)
    return [c for c in text_currencies(text) if c not in codes]


def measured_numbers(text: str, kinds: set[str], of: Sequence[str] | None = None) -> list[int | float]:
    """The numbers ``text`` writes with a currency (``kinds`` holds ``currency``: ``45,000 yen``, ``£250``, ``1.2k
    kronor``, ``eighty quid``) or a unit (``unit``: ``2.5 lbs``, ``-40 degrees Fahrenheit``) right beside them, in
    order, each once. ``of``: only those beside one of these units or currency codes (a conversion's from side: "I'm
    154 lbs and 1.75 m ... my weight to kg" converts 154, and "over 5 miles high ... its height in miles" the
    height the search found in metres, not the 5)."""
    keys = None if of is None else {unit_key(str(u)) for u in of} | {str(u).upper() for u in of}
    spans = [(a, b) for a, b, c in currency_mentions(text) if keys is None or c in keys] if "currency" in kinds else []
    spans += [(a, b) for a, b, u in unit_mentions(text)
              if keys is None or unit_key(u) in keys] if "unit" in kinds else []
    out = []
    for a, b, v in number_mentions(text):  # "eighty quid" too
        if any((s >= b and _BESIDE_AFTER.fullmatch(text[b:s])) or (e <= a and _BESIDE_BEFORE.fullmatch(text[e:a]))
               for s, e in spans):
            out.append(v)
    return list(dict.fromkeys(out))


_BESIDE_AFTER = re.compile(r"[ \t]{0,2}(?:degrees?[ \t]+)?", re.IGNORECASE)
_BESIDE_BEFORE = re.compile(r"[ \t]?")


def _apart(values: list[list[str]]) -> list[list[str]]:
    """A pair's two sides with a value the other side is held to alone taken out of it (a conversion is between two
    different things: "85 francs ... into US dollars ... a 5 dollar fee" has USD on both sides, and the from side is
    francs). A side left empty by that keeps its values."""
    key = lambda v: str(v).casefold().lstrip("°")
    out = [list(v) for v in values]
    for i in (0, 1):
        other = values[1 - i]
        if len(other) == 1:
            out[i] = [v for v in values[i] if key(v) != key(other[0])] or list(values[i])
    return out


def _one_dimension(values: list[list[str]]) -> list[list[str]]:
    """A unit pair's two sides held to one dimension: that of the first from unit, in the text's order, that a to
    unit shares ("12 lbs and 60 cm: the weight in kg and the length in inches" converts pounds to kg, then what is
    left, centimetres to inches). Sides with no shared dimension are kept as they are."""
    froms, tos = values
    for unit in froms:
        dim = dimension(unit)
        if dim is not None and any(dimension(u) == dim for u in tos):
            return [[u for u in froms if dimension(u) == dim], [u for u in tos if dimension(u) == dim]]
    return values


def _side(sub: dict[str, Any], name: str, phrases: list[str], numbered: list[str] = ()) -> list[str]:
    """The values one side of a pair may take: its own ``enum`` when it has one, a currency's codes, a unit's units
    (``numbered``: the units the text writes its numbers in, a from side's too), else the phrases themselves."""
    if "enum" in sub:
        return list(sub["enum"])
    if "const" in sub or sub.get("grounded") is False:
        return []
    if is_currency(name, sub):
        return list(dict.fromkeys(c for p in phrases for _, _, c in currency_mentions(p)))
    if is_unit(name, sub):
        said = [u for p in phrases for a, _, u in unit_mentions(p) if a == 0] + list(numbered)
        return list({u.casefold(): u for u in reversed(said)}.values())[::-1]
    return phrases


def required_only(parameters: dict[str, Any]) -> dict[str, Any]:
    """``parameters`` with its optional arguments and its arrays left ungrounded (``"grounded": false``, unless
    they say otherwise). An argument with a default is the tool's to fill, and the model may write a value it knows
    (the speed of light, an initial speed of 0 "from rest") where the conversation writes none. An array's items
    are written in the text's order by the copy prior; held to a choice among the text's numbers each, a point
    ``[46.603354, 1.888334]`` came out ``[46.603354, 46.603354]`` (two of 20 BFCL calls through the server)."""
    props = parameters.get("properties")
    if not isinstance(props, dict):
        return parameters
    required = set(parameters.get("required") or ())

    def exempt(name: str, sub: dict[str, Any]) -> bool:
        return name not in required or sub.get("type") == "array"

    return {**parameters, "properties": {
        k: ({"grounded": False, **v} if isinstance(v, dict) and exempt(k, v) else v) for k, v in props.items()}}


def ground_arguments(parameters: dict[str, Any], text: str, one_dimension: bool = True) -> Grounding:
    """A tool's ``parameters`` schema grounded in ``text`` (a conversation's user and tool messages) as a call's
    arguments are (:mod:`agentkit.steps.arguments`): its required arguments only (:func:`required_only`), its
    (from, to) pairs held to their sides (:func:`anchor_pairs`), with :data:`ARGUMENT_KINDS`. As in ``extract``,
    each place in the text gives one argument its value: where the text writes fewer numbers than the required
    number arguments (``add(a, b)`` on "Name three colours."), those arguments are ungrounded. ``one_dimension``:
    as :func:`anchor_pairs` takes it."""
    g = ground_schema(anchor_pairs(required_only(parameters), text, one_dimension), text, kinds=ARGUMENT_KINDS,
                      fenced=False)
    numbers = [ptr for ptr, kind in g.kinds.items() if kind == "number" and ptr.count("/") == 1
               and ptr[1:] in (parameters.get("required") or ())]
    if len(numbers) > len(number_mentions(text)):
        g.ungrounded += [ptr[1:] for ptr in numbers if ptr[1:] not in g.ungrounded]
    props = g.schema.get("properties") or {}
    for a, b in pair_fields(parameters):  # a conversion needs two values: "Convert 5 km" names one currency
        held = [props.get(k, {}).get("enum") for k in (a, b)]
        if all(isinstance(h, list) for h in held) and not _convertible(held, is_unit(a, props.get(a, {}))):
            g.ungrounded += [k for k in (a, b) if k not in g.ungrounded]
    return g


def _convertible(held: list[list[Any]], units: bool) -> bool:
    """Whether a (from, to) pair held to these values converts something: two different values, and for units,
    two different units of one dimension ("3.4m long ... cubic metres" converts nothing; "120cm ... litres" cannot)."""
    if not units:
        return len({str(v).casefold() for h in held for v in h}) >= 2
    return any(canonical_unit(str(x)) != canonical_unit(str(y)) and dimension(str(x)) == dimension(str(y))
               for x in held[0] for y in held[1])


def grounded_argument_template(parameters: dict[str, Any], text: str,
                               compile_schema: Callable[[dict[str, Any]], Template]) -> Template:
    """The template of a tool's arguments (``compile_schema`` compiles a schema) grounded as
    :func:`ground_arguments` grounds them."""
    return grounded_template(anchor_pairs(required_only(parameters), text), text, compile_schema,
                             kinds=ARGUMENT_KINDS, fenced=False)[0]
