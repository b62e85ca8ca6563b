"""Nucleus (top-p) sampling: what the filter keeps and that a request's top_p reaches the sampler."""

import pytest
import torch

from agentkit.config import DecodeConfig
from agentkit.engine.sampler import greedy_by_byte, logits_to_probs, nucleus, pick
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
    hot = tiny.generate("abc", DecodeConfig(max_new_tokens=8, temperature=2.0, top_p=1e-6, seed=3)).text
    assert hot == greedy
    assert tiny.generate("abc", DecodeConfig(max_new_tokens=8, temperature=2.0, seed=3)).text != greedy


# -- greedy over bytes ------------------------------------------------------------------------------------------

BYTES = [b",", b"}", b"}}", b"7", b"ab", b"abc", b"ax", None]  # token id -> bytes (7: EOS, no bytes)


def _greedy(probs: list[float], allowed=None, k: int = 64) -> int:
    logits = torch.log(torch.tensor(probs))
    first = torch.tensor([b[0] if b else 256 for b in BYTES])
    ok = torch.ones(len(probs), dtype=torch.bool) if allowed is None else torch.tensor(allowed)
    return greedy_by_byte(logits, ok, first, BYTES, k=k)


def test_greedy_by_byte_weighs_two_spellings_of_one_choice_together():
    # "," is the likeliest token, but "}" and "}}" both start with "}", which holds more of the mass
    probs = [0.33, 0.25, 0.24, 0.08, 0.03, 0.03, 0.02, 0.02]
    assert pick(torch.log(torch.tensor(probs))[None])[0].item() == 0
    assert _greedy(probs) == 1  # byte "}", then "}" alone (0.25) against "}" + "}" (0.24)
    assert _greedy([0.33, 0.2, 0.25, 0.08, 0.05, 0.05, 0.02, 0.02]) == 2


def test_greedy_by_byte_descends_byte_by_byte_and_a_token_may_end_first():
    # byte "a" (0.5) beats "," (0.3); then "b" (0.35) beats "x" (0.15); then "ab" ending (0.15) loses to "c" (0.2)
    assert _greedy([0.3, 0.1, 0.05, 0.05, 0.15, 0.2, 0.15, 0.0]) == 5
    assert _greedy([0.3, 0.1, 0.05, 0.05, 0.25, 0.1, 0.15, 0.0]) == 4  # "ab" ending (0.25) beats "abc" (0.1)


def test_greedy_by_byte_reads_only_allowed_tokens():
    probs = [0.38, 0.2, 0.2, 0.22, 0.0, 0.0, 0.0, 0.0]
    assert _greedy(probs) == 1  # 0.38 < 0.2 + 0.2
    assert _greedy(probs, [True, True, False, True, False, False, False, False]) == 0  # "}}" ruled out


def test_greedy_by_byte_keeps_an_argmax_over_half_the_allowed_mass():
    assert _greedy([0.1, 0.6, 0.2, 0.1, 0.0, 0.0, 0.0, 0.0]) == 1
    # 0.3 of an allowed 0.5: the argmax, although "}" + "}}" would hold 0.4 of everything
    assert _greedy([0.3, 0.2, 0.2, 0.1, 0.1, 0.05, 0.05, 0.0], [True, False, False, True, True, False, False, False]) == 0


def test_greedy_setting_is_checked():
    assert DecodeConfig().greedy == "byte"
    with pytest.raises(InvalidRequestError, match="greedy"):
        DecodeConfig(greedy="argmax")


@pytest.mark.parametrize("mode", ["verify", "diffusion"])
@pytest.mark.parametrize("greedy", ["byte", "token"])
def test_verify_and_causal_canvas_equal_ar_under_each_greedy(tiny, mode, greedy):
    from agentkit.constrain.compiler import compile_schema

    tpl = compile_schema({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"},
                                                           "c": {"type": "array", "items": {"type": "string"}}},
                          "required": ["a"], "additionalProperties": False}, style="compact")
    for prompt in ("data:", "x", "{"):
        ar = tiny.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=60, greedy=greedy), template=tpl, raw=True)
        other = tiny.generate(prompt, DecodeConfig(mode=mode, max_new_tokens=60, canvas_length=8, greedy=greedy),
                              template=tpl, raw=True)
        assert other.token_ids == ar.token_ids, (prompt, ar.text, other.text)


def test_byte_greedy_changes_picks_on_a_tiny_model(tiny):
    # the byte rule is live in decoding: over a few prompts some template output differs from token greedy's
    from agentkit.constrain.compiler import compile_schema

    tpl = compile_schema({"type": "object", "properties": {"s": {"type": "string", "maxLength": 12},
                                                           "n": {"type": "integer"}},
                          "required": ["s", "n"], "additionalProperties": False}, style="compact")
    outs = {g: [tiny.generate(p, DecodeConfig(mode="ar", max_new_tokens=40, greedy=g), template=tpl, raw=True).text
                for p in ("a", "b", "c", "d", "e", "f")] for g in ("byte", "token")}
    assert outs["byte"] != outs["token"]
    assert all(tpl.matches(t) for t in outs["byte"] + outs["token"])


def test_position_noise_samples_follow_the_distribution():
    # Gumbel-max over log p is an exact draw from p: 6,000 positions' draws land within 0.03 of each probability
    from agentkit.engine.sampler import PositionNoise

    logits = torch.tensor([2.0, 1.0, 0.5, -1.0, 0.0])
    probs = logits_to_probs(logits, 0.8)
    noise = PositionNoise(seed=11)
    toks = [int(pick(logits[None], None, 0.8, noise=noise.at(i, 5))[0]) for i in range(6000)]
    freq = torch.bincount(torch.tensor(toks), minlength=5).float() / len(toks)
    assert (freq - probs).abs().max() < 0.03, (freq, probs)


def test_position_noise_is_keyed_by_seed_and_position_not_by_order():
    from agentkit.engine.sampler import PositionNoise

    a, b = PositionNoise(seed=5), PositionNoise(seed=5)
    forward = [a.at(i, 50) for i in range(6)]
    backward = [b.at(i, 50) for i in reversed(range(6))][::-1]
    assert all(torch.equal(x, y) for x, y in zip(forward, backward))
    assert not torch.equal(a.at(0, 50), PositionNoise(seed=6).at(0, 50))
    assert not torch.equal(a.at(0, 50), a.at(1, 50))
    torch.manual_seed(3)
    first = PositionNoise(None).at(2, 50)
    torch.manual_seed(3)
    assert torch.equal(first, PositionNoise(None).at(2, 50))


@pytest.mark.parametrize("settings", [{"temperature": 0.4}, {"temperature": 1.0, "top_p": 0.9},
                                      {"temperature": 0.7, "top_k": 5, "frequency_penalty": 0.5}])
def test_verify_keeps_the_tokens_ar_samples_with_the_same_seed(tiny, settings):
    # free text and a template: verify's output is AR's sampled output, token for token, for each seed; drafts are
    # kept along the way (a check that kept nothing would pass trivially)
    from agentkit.constrain.compiler import compile_schema

    tpl = compile_schema({"type": "object", "properties": {"a": {"type": "integer"}, "c": {"type": "array",
                          "items": {"type": "string"}}}, "required": ["a", "c"], "additionalProperties": False},
                         style="compact")
    kept = 0
    for seed in range(4):
        for prompt, template in (("the the the", None), ("data:", tpl)):
            cfg = DecodeConfig(mode="ar", max_new_tokens=40, seed=seed, **settings)
            ar = tiny.generate(prompt, cfg, template=template, raw=True)
            ver = tiny.generate(prompt, DecodeConfig(**{**cfg.__dict__, "mode": "verify", "canvas_length": 8}),
                                template=template, raw=True)
            assert ver.token_ids == ar.token_ids, (seed, prompt, ar.text, ver.text)
            kept += ver.stats.output_tokens - ver.stats.verify_forwards
    assert kept > 0


def test_seeds_change_sampled_text(tiny):
    outs = {tiny.generate("hello", DecodeConfig(mode="verify", max_new_tokens=20, temperature=1.0, seed=s),
                          raw=True).text for s in range(5)}
    assert len(outs) > 1
