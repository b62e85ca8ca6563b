"""Nucleus (top-p) sampling: what the filter keeps and that a request's top_p reaches the sampler."""

import pytest
import torch

from agentkit.config import DecodeConfig
from agentkit.engine.sampler import logits_to_probs, nucleus, pick
from agentkit.errors import InvalidRequestError


def test_nucleus_keeps_smallest_set_reaching_top_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    assert torch.allclose(nucleus(probs, 0.5), torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
    assert torch.allclose(nucleus(probs, 0.7), torch.tensor([[0.625, 0.375, 0.0, 0.0]]))
    assert torch.allclose(nucleus(probs, 1.0), probs)
    assert nucleus(probs, 1e-6)[0, 0] == 1.0  # always the most likely token


def test_nucleus_respects_vocabulary_order():
    probs = torch.tensor([0.1, 0.6, 0.3])
    assert torch.allclose(nucleus(probs, 0.8), torch.tensor([0.0, 2 / 3, 1 / 3]))


def test_top_p_restricts_sampled_tokens():
    logits = torch.log(torch.tensor([[0.4, 0.35, 0.15, 0.1]])).repeat(200, 1)
    gen = torch.Generator().manual_seed(0)
    free, _, _ = pick(logits, temperature=1.0, generator=gen)
    nuc, _, _ = pick(logits, temperature=1.0, generator=gen, top_p=0.7)
    assert set(free.tolist()) == {0, 1, 2, 3}
    assert set(nuc.tolist()) == {0, 1}


def test_logits_to_probs_top_p_after_temperature():
    p = logits_to_probs(torch.tensor([2.0, 1.0, 0.0]), 1.0, top_p=0.5)
    assert p.tolist()[1:] == [0.0, 0.0]


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5])
def test_top_p_out_of_range_is_a_typed_error(bad):
    with pytest.raises(InvalidRequestError, match="top_p"):
        DecodeConfig(top_p=bad)


def test_engine_top_p_narrows_sampled_text(tiny):
    # a near-zero nucleus is greedy whatever the temperature
    greedy = tiny.generate("abc", DecodeConfig(max_new_tokens=8)).text
    hot = tiny.generate("abc", DecodeConfig(max_new_tokens=8, temperature=5.0, top_p=1e-6, seed=3)).text
    assert hot == greedy
    assert tiny.generate("abc", DecodeConfig(max_new_tokens=8, temperature=5.0, seed=3)).text != greedy
