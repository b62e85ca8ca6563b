"""The reply benchmark's checks, its sign test and its committed instructions."""

from pathlib import Path

import pytest

from agentkit.errors import UserError
from agentkit.evals import replies

DATA = Path(__file__).resolve().parents[2] / "evals" / "replies" / "instructions.jsonl"


@pytest.mark.parametrize("text, spec, ok", [
    ("The three colours are: blue, red, and green.", {"type": "count_of", "set": "colours", "n": 3}, True),
    ("The answer is three.", {"type": "count_of", "set": "colours", "n": 3}, False),
    ("red", {"type": "count_of", "set": "colours", "n": 3}, False),
    ("Jupiter and Saturn are bigger than Earth.", {"type": "count_of", "set": "planets", "n": 2,
                                                   "exclude": ["earth"]}, True),
    ("Green.", {"type": "one_word", "accept": ["green"]}, True),
    ("It is green.", {"type": "one_word", "accept": ["green"]}, False),
    ("A dog has four legs.", {"type": "number", "value": 4}, True),
    ("- a\n- b\n1. c", {"type": "bullets", "n": 3}, True),
    ("HELLO THERE", {"type": "uppercase"}, True),
    ("No, penguins cannot fly.", {"type": "starts_with", "any": ["no"]}, True),
    ('```json\n{"name": "Sam", "age": 30}\n```', {"type": "json_keys", "keys": ["name", "age"]}, True),
    ("One. Two. Three.", {"type": "max_sentences", "n": 2}, False),
    ("I like apples", {"type": "contains", "words": ["apple"]}, True),
])
def test_checks(text, spec, ok):
    assert replies.check(text, spec) is ok


def test_unknown_checks_are_refused():
    with pytest.raises(UserError, match="unknown reply check"):
        replies.check("x", {"type": "vibes"})
    with pytest.raises(UserError, match="unknown word set"):
        replies.check("x", {"type": "count_of", "set": "cars", "n": 1})


def test_sign_test():
    assert replies.sign_test(0, 0) == 1.0 and replies.sign_test(5, 5) == 1.0
    assert abs(replies.sign_test(9, 1) - 0.0215) < 1e-3  # two-sided, 10 untied pairs


def test_the_committed_instructions():
    items = replies.load_items(DATA)
    assert len(items) >= 100 and len({it["id"] for it in items}) == len(items)
    assert min(len(replies.load_items(DATA, s)) for s in ("dev", "held_out")) >= 50
    assert any(it["prompt"] == "Name three colours." for it in items)
