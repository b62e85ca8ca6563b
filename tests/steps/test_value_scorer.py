"""The grounded extraction's value scorer: its scores are a fresh scorer's whatever the heads before, and a head
that extends the last one encodes only its new tokens."""

import pytest
import torch

from agentkit.steps.grounded import ValueScorer

pytestmark = pytest.mark.usefixtures("one_thread")

MESSAGES = [{"role": "user", "content": "Invoice INV-3302 from Larkspur Bakery, total 245.80 EUR."}]
HEADS = ['{"vendor":', '{"vendor": "Larkspur Bakery", "total":', '{"vendor": "Lark", "total":', '{"vendor":']
CONTS = [' "Larkspur Bakery"', " 245.8", " null"]


def reference(engine, head: str, conts: list[str]) -> list[list[float]]:
    """Each continuation's token log-probabilities from one causal pass over prompt, head and continuation."""
    bb, tok = engine.backbone, engine.tokenizer
    prompt = engine.encode_prompt(MESSAGES) + tok.encode(head, add_special_tokens=False)
    out = []
    for cont in conts:
        ids = tok.encode(cont, add_special_tokens=False)
        logits = bb.encode(prompt + ids, bb.new_cache(), rows=list(range(len(prompt) - 1, len(prompt) + len(ids) - 1)),
                           whole=True)
        logp = torch.log_softmax(logits.float(), dim=-1)
        out.append([float(logp[i, t]) for i, t in enumerate(ids)])
    return out


def test_scores_are_one_pass_log_probabilities_whatever_the_last_head(tiny):
    scorer = ValueScorer(tiny, MESSAGES)
    for head in HEADS:  # extends, diverges from, and returns to an earlier head
        got, fresh, want = scorer.scores(head, CONTS), ValueScorer(tiny, MESSAGES).scores(head, CONTS), \
            reference(tiny, head, CONTS)
        assert [len(g) for g in got] == [len(w) for w in want]
        for g, f, w in zip(got, fresh, want):
            assert g == pytest.approx(f, abs=1e-5), head
            assert g == pytest.approx(w, abs=1e-4), head


def test_a_head_that_extends_the_last_encodes_only_its_new_tokens(tiny, monkeypatch):
    scorer = ValueScorer(tiny, MESSAGES)
    fed: list[int] = []
    encode = tiny.backbone.encode
    monkeypatch.setattr(tiny.backbone, "encode", lambda ids, *a, **k: fed.append(len(ids)) or encode(ids, *a, **k))
    scorer.scores(HEADS[0], [" null"])  # the prompt's pass, then the head in one call after it
    assert fed[-1] == len(tiny.tokenizer.encode(HEADS[0], add_special_tokens=False))
    fed.clear()
    scorer.scores(HEADS[1], [" null"])
    whole = len(tiny.tokenizer.encode(HEADS[1], add_special_tokens=False))
    assert 0 < sum(fed) < whole  # the shared start stayed in the cache
    fed.clear()
    scorer.scores(HEADS[1], [" null", " 245.8"])
    assert sum(fed) == 0  # the same head again: nothing re-encoded ("245.8"'s tokens read side by side, not encoded)
