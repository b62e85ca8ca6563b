"""The reply benchmark: plain replies (no tools) to instructions whose constraints a program can check, in the
style of IFEval (Zhou et al. 2023, arXiv:2311.07911): item counts, lengths, one-word answers, formats, required and
forbidden words.

Items (``evals/replies/instructions.jsonl``) are ``{"id", "split", "prompt", "checks": [...]}``; ``split`` is
``"dev"`` or ``"held_out"``. A reply follows an item when every check passes (:func:`follows`). The checks:

- ``count_of`` ``{"set", "n", "exclude"?}``: exactly ``n`` distinct members of a word set (:data:`SETS`) are named,
  the ``exclude``d ones not counted (a question's own subject: "two planets bigger than Earth")
- ``one_word`` ``{"accept"?}``: one word (punctuation aside), one of ``accept`` when given
- ``max_words`` / ``min_words`` ``{"n"}``, ``max_sentences`` ``{"n"}``
- ``contains`` / ``not_contains`` ``{"words"}``: every word present / none (whole words; a plural ``s`` allowed),
  ``contains_any`` ``{"words"}``: at least one
- ``starts_with`` ``{"any"}``: the first word is one of them
- ``number`` ``{"value"}``: the number appears (in digits or as a word up to twenty)
- ``bullets`` ``{"n"}``: exactly ``n`` lines that start with ``-``, ``*``, ``•`` or ``1.`` / ``1)``
- ``uppercase`` / ``lowercase``: every letter in that case; ``no_commas``; ``not_contains_char`` ``{"char"}``
- ``ends_with`` ``{"text"}``: the last word (punctuation aside); ``quoted``: the reply is in double quotes
- ``json_keys`` ``{"keys"}``: the reply (a fenced block's inside, if fenced) is a JSON object with those keys

The runner, the paired comparison of two engines and its sign test: ``evals/replies.py``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError


def _words_of(text: str) -> frozenset[str]:
    return frozenset(text.split())


SETS: dict[str, frozenset[str]] = {
    "colours": _words_of("red orange yellow green blue purple violet pink brown black white grey gray indigo "
                         "turquoise teal navy beige gold silver maroon cyan magenta lavender crimson"),
    "fruits": _words_of("apple banana orange pear grape strawberry cherry lemon lime mango pineapple peach plum kiwi "
                        "watermelon melon apricot raspberry blueberry papaya pomegranate fig coconut grapefruit "
                        "cranberry blackberry"),
    "vegetables": _words_of("carrot potato tomato onion broccoli cabbage lettuce spinach pea bean cucumber pepper "
                            "celery cauliflower corn garlic leek zucchini courgette eggplant aubergine pumpkin radish "
                            "beetroot kale asparagus"),
    "animals": _words_of("lion tiger elephant giraffe zebra bear wolf fox deer monkey gorilla cow pig sheep goat horse "
                         "chicken duck dog cat rabbit mouse whale dolphin shark octopus seal turtle penguin eagle owl "
                         "snake crocodile kangaroo koala hippo rhino cheetah leopard squirrel jellyfish crab "
                         "starfish"),
    "planets": _words_of("mercury venus earth mars jupiter saturn uranus neptune"),
    "months": _words_of("january february march april may june july august september october november "
                        "december"),
    "continents": frozenset(["africa", "antarctica", "asia", "australia", "europe", "north america",
                             "south america", "oceania"]),
    "countries": frozenset(["france", "germany", "spain", "italy", "portugal", "brazil", "argentina", "chile", "peru",
                            "colombia", "venezuela", "ecuador", "bolivia", "uruguay", "paraguay", "mexico", "canada",
                            "china", "japan", "india", "russia", "australia", "egypt", "kenya", "nigeria",
                            "norway", "sweden", "finland", "denmark", "poland", "greece", "ireland", "netherlands",
                            "belgium", "austria", "switzerland", "turkey", "england", "scotland", "wales",
                            "united kingdom", "united states", "usa", "uk", "hungary", "romania", "ukraine",
                            "czech republic", "croatia", "iceland", "guyana", "suriname"]),
    "sports": frozenset(["football", "soccer", "basketball", "tennis", "volleyball", "baseball", "rugby", "cricket",
                         "golf", "hockey", "handball", "badminton", "swimming", "water polo", "surfing", "diving",
                         "rowing", "sailing", "kayaking", "table tennis", "netball", "softball", "bowling",
                         "snorkeling", "canoeing"]),
    "instruments": frozenset(["piano", "guitar", "violin", "cello", "viola", "drums", "drum", "flute", "trumpet",
                              "saxophone", "clarinet", "harp", "bass", "double bass", "trombone", "oboe", "bassoon",
                              "banjo", "ukulele", "mandolin", "harmonica", "tuba", "horn", "french horn", "timpani",
                              "organ", "accordion", "sitar", "lute", "xylophone"]),
}
_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                 "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+\S")


def words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9]+(?:['’-][A-Za-z0-9]+)*", text)


def _has_word(text: str, word: str) -> bool:
    """``word`` (or a phrase) as whole words, case aside, a plural ``s``/``es`` allowed."""
    return re.search(rf"(?<![A-Za-z]){re.escape(word)}(?:e?s)?(?![A-Za-z])", text, re.IGNORECASE) is not None


def _count_of(text: str, spec: dict[str, Any]) -> bool:
    exclude = {w.lower() for w in spec.get("exclude", ())}
    named = {w for w in SETS[spec["set"]] if w not in exclude and _has_word(text, w)}
    named -= {w for w in named if any(w != o and w in o.split() for o in named)}  # "bass" in "double bass"
    return len(named) == spec["n"]


def _one_word(text: str, spec: dict[str, Any]) -> bool:
    ws = words(text)
    accept = [a.lower() for a in spec.get("accept", ())]
    return len(ws) == 1 and (not accept or ws[0].lower() in accept) or (
        bool(accept) and " ".join(ws).lower() in accept)


def _sentences(text: str) -> int:
    return len([s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if words(s)])


def _number(text: str, spec: dict[str, Any]) -> bool:
    v = spec["value"]
    digits = re.search(rf"(?<![\d.]){v}(?![\d]|\.\d)", text) is not None
    return digits or (0 <= v < len(_NUMBER_WORDS) and _has_word(text, _NUMBER_WORDS[v]))


def _json_keys(text: str, spec: dict[str, Any]) -> bool:
    m = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    body = (m.group(1) if m else text).strip()
    try:
        value = json.loads(body)
    except ValueError:
        return False
    return isinstance(value, dict) and all(k in value for k in spec["keys"])


def _ends_with(text: str, spec: dict[str, Any]) -> bool:
    ws = words(text)
    return bool(ws) and ws[-1].lower() == spec["text"].lower()


CHECKS: dict[str, Callable[[str, dict[str, Any]], bool]] = {
    "count_of": _count_of,
    "one_word": _one_word,
    "max_words": lambda t, s: len(words(t)) <= s["n"],
    "min_words": lambda t, s: len(words(t)) >= s["n"],
    "max_sentences": lambda t, s: 1 <= _sentences(t) <= s["n"],
    "contains": lambda t, s: all(_has_word(t, w) for w in s["words"]),
    "contains_any": lambda t, s: any(_has_word(t, w) for w in s["words"]),
    "not_contains": lambda t, s: not any(_has_word(t, w) for w in s["words"]),
    "starts_with": lambda t, s: bool(words(t)) and words(t)[0].lower() in [a.lower() for a in s["any"]],
    "number": _number,
    "bullets": lambda t, s: sum(1 for line in t.splitlines() if _BULLET.match(line)) == s["n"],
    "uppercase": lambda t, s: any(c.isalpha() for c in t) and not any(c.islower() for c in t),
    "lowercase": lambda t, s: any(c.isalpha() for c in t) and not any(c.isupper() for c in t),
    "no_commas": lambda t, s: "," not in t,
    "not_contains_char": lambda t, s: s["char"].lower() not in t.lower(),
    "ends_with": _ends_with,
    "quoted": lambda t, s: len(t.strip()) > 2 and t.strip()[0] in "\"“" and t.strip()[-1] in "\"”",
    "json_keys": _json_keys,
}


def check(text: str, spec: dict[str, Any]) -> bool:
    """Whether ``text`` passes one check (``spec["type"]`` one of :data:`CHECKS`)."""
    if spec.get("type") not in CHECKS:
        raise UserError(f"unknown reply check {spec.get('type')!r}; one of {sorted(CHECKS)}")
    if spec["type"] == "count_of" and spec.get("set") not in SETS:
        raise UserError(f"unknown word set {spec.get('set')!r}; one of {sorted(SETS)}")
    return CHECKS[spec["type"]](text, spec)


def follows(text: str, item: dict[str, Any]) -> bool:
    """Whether ``text`` passes every check of ``item``."""
    return all(check(text, c) for c in item["checks"])


def load_items(path: str | Path, split: str | None = None) -> list[dict[str, Any]]:
    """The items of a JSONL file (every check's type known), those of ``split`` when given."""
    items = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    for it in items:
        for c in it["checks"]:
            check("", c)  # unknown types and sets fail here, before any model runs
    return [it for it in items if split is None or it["split"] == split]


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test p-value for ``wins`` against ``losses`` (ties dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    p = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * p)
