"""Tokens that cross the end of pinned text (``TokenConstraint._spanning``) are found through a first-byte filter;
the filter must keep exactly what reading every token that starts with the literal's rest would keep."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from agentkit.constrain.canonical import STYLES
from agentkit.constrain.compiler import compile_schema_uncached
from agentkit.constrain.runtime import END, TokenConstraint
from agentkit.constrain.vocab import token_vocab
from agentkit.models.tiny import tiny_tokenizer

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
CALL = {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 30},
    "units": {"enum": ["metric", "imperial"]}, "tags": {"type": "array", "items": {"type": "string"}},
    "scale": {"type": "number"}}, "required": ["city"], "additionalProperties": False}


def _brute(c: TokenConstraint, th: tuple) -> list[int]:
    _, lit, off, cont = th
    rem = c._lit_bytes[id(lit)][off:]
    nxt = c._close(cont)
    return sorted(t for t, tb in c.vocab.with_prefix(rem) if len(tb) > len(rem) and c._consume(nxt, tb[len(rem):]))


def _lit_threads(c: TokenConstraint, walks: int, seed: int) -> list[tuple]:
    """Literal threads met on random walks through the constraint (each walk picks allowed tokens at random)."""
    rng, seen = random.Random(seed), {}
    for _ in range(walks):
        s = c.start()
        for _ in range(80):
            for th in s:
                if th is not END and th[0] == "lit":
                    seen[id(th)] = th
            ids = c.allowed(s).nonzero().flatten().tolist()
            ids = [t for t in ids if t not in c.vocab.eos_ids]
            if not ids:
                break
            s = c.advance(s, rng.choice(ids))
    return list(seen.values())


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("schema", ["person.json", "plan.json", "call"])
def test_filtered_spanning_equals_reading_every_token(schema, style):
    tok = tiny_tokenizer()
    doc = CALL if schema == "call" else json.loads((SCHEMAS / schema).read_text())
    c = TokenConstraint(compile_schema_uncached(doc, style=style), token_vocab(tok), tok)
    threads = _lit_threads(c, walks=30, seed=0)
    assert len(threads) >= 5
    crossing = 0
    for th in threads:
        got = c._spanning(th)
        assert got == _brute(c, th), (c._lit_bytes[id(th[1])][th[2]:], got)
        crossing += bool(got)
    assert crossing, "no literal end was crossed by any token: the comparison checked nothing"
