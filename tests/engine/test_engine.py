"""Engine behaviour on tiny random models: cache reuse, exactness of each mode, pinned positions, errors."""

import itertools

import pytest
import torch

from agentkit.config import DecodeConfig
from agentkit.constrain.nodes import Choice, Lit, Repeat, Slot, Template, seq
from agentkit.engine.backbone import Backbone
from agentkit.engine.engine import Engine
from agentkit.errors import InvalidRequestError, ModelNotFoundError, UnsupportedModeError
from agentkit.models.tiny import tiny_llama

PROMPTS = ["hello there", "def add(a, b): return", "The quick brown fox", '{"name":"Alice","age":']


def test_denoise_against_cached_prefix_equals_full_recompute():
    bb = Backbone(tiny_llama(0))
    ids = list(range(5, 29))
    full = bb.encode(ids, bb.new_cache(), rows=list(range(len(ids))))
    cache = bb.new_cache()
    bb.encode(ids[:16], cache)
    canvas = bb.denoise(ids[16:], cache, rows=list(range(8)), bidirectional=False)
    assert cache.get_seq_length() == 16  # the prefix cache was read, not extended
    torch.testing.assert_close(canvas, full[16:], atol=1e-5, rtol=1e-5)


def test_bidirectional_denoise_leaves_cache_and_differs_from_causal():
    bb = Backbone(tiny_llama(0))
    ids = list(range(5, 29))
    cache = bb.new_cache()
    bb.encode(ids[:16], cache)
    causal = bb.denoise(ids[16:], cache, rows=[0], bidirectional=False)
    bidi = bb.denoise(ids[16:], cache, rows=[0], bidirectional=True)
    assert cache.get_seq_length() == 16
    assert not torch.allclose(causal, bidi)  # position 0 now sees the rest of the canvas


def test_commit_equals_encoding_from_scratch():
    bb = Backbone(tiny_llama(0))
    ids = list(range(5, 29))
    scratch = bb.encode(ids, bb.new_cache(), rows=[-1])
    cache = bb.new_cache()
    bb.encode(ids[:10], cache)
    bb.denoise(ids[10:18], cache, rows=[0], bidirectional=True)  # a denoise pass in between changes nothing
    bb.encode(ids[10:18], cache)
    committed = bb.encode(ids[18:], cache, rows=[-1])
    torch.testing.assert_close(committed, scratch, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_ar_greedy_equals_transformers_generate(tiny, prompt):
    ids = tiny.encode_prompt(prompt, raw=True)
    ref = tiny.lm.model.generate(torch.tensor([ids]), max_new_tokens=30, do_sample=False)[0, len(ids):].tolist()
    got = tiny.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=30), raw=True).token_ids
    eos = set(tiny.lm.eos_ids)
    assert got == [t for t in ref if t not in eos][: len(got)] and (len(got) == 30 or ref[len(got)] in eos)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("mode", ["diffusion", "verify"])
def test_causal_canvas_and_verify_equal_greedy_ar(seed, mode):
    eng = Engine.from_loaded(tiny_llama(seed))
    for prompt in PROMPTS:
        ar = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=24), raw=True)
        other = eng.generate(prompt, DecodeConfig(mode=mode, max_new_tokens=24, canvas_length=8), raw=True)
        assert other.token_ids == ar.token_ids
        assert other.stats.forwards <= ar.stats.forwards + ar.stats.output_tokens // 8 + 1


def _template():
    name = Slot(r'[a-z]{1,6}', max_tokens=6, name="/name")
    tags = Repeat(seq(Lit('"'), Slot(r'[a-z]{1,4}', max_tokens=4), Lit('"')), ",", 0, 3)
    return Template(seq(Lit('{"name":"'), name, Lit('","ok":'), Choice((Lit("true"), Lit("false"))),
                        Lit(',"tags":['), tags, Lit("]}")))


@pytest.mark.parametrize("mode", ["ar", "diffusion", "verify"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_template_output_is_always_in_the_language(mode, seed):
    eng = Engine.from_loaded(tiny_llama(seed))
    tpl = _template()
    res = eng.generate("data:", DecodeConfig(mode=mode, max_new_tokens=80, canvas_length=12), template=tpl, raw=True)
    assert res.stats.finish_reason == "template"
    assert tpl.matches(res.text), res.text
    assert res.value["ok"] in (True, False)
    assert res.stats.pinned_tokens > 0 and res.stats.pinned_tokens + res.stats.slot_tokens == res.stats.output_tokens


@pytest.mark.parametrize("mode", ["ar", "diffusion", "verify"])
def test_template_modes_agree_under_greedy(mode):
    eng = Engine.from_loaded(tiny_llama(5))
    tpl = _template()
    ar = eng.generate("data:", DecodeConfig(mode="ar", max_new_tokens=80), template=tpl, raw=True)
    other = eng.generate("data:", DecodeConfig(mode=mode, max_new_tokens=80, canvas_length=12), template=tpl, raw=True)
    assert other.text == ar.text


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_verify_never_passes_more_than_ar_on_a_template(seed):
    # every verify pass commits at least what an AR forward does (a sampled token and the pinned run after it), and
    # neither runs a pass once the template is complete: a check of the closing text alone decides nothing
    eng = Engine.from_loaded(tiny_llama(seed))
    for prompt in ("data:", "the the"):
        ar = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=80), template=_template(), raw=True)
        ver = eng.generate(prompt, DecodeConfig(mode="verify", max_new_tokens=80, canvas_length=12),
                           template=_template(), raw=True)
        assert ver.token_ids == ar.token_ids and ver.stats.finish_reason == "template"
        assert ver.stats.forwards <= ar.stats.forwards, (seed, prompt, ver.stats.forwards, ar.stats.forwards)


@pytest.mark.parametrize("seed", [2, 3])
def test_final_and_pinned_positions_never_change_during_denoising(seed):
    eng = Engine.from_loaded(tiny_llama(seed))
    tpl = _template()
    snaps: list[tuple[list[int], list[bool]]] = []
    res = eng.generate("x", DecodeConfig(mode="diffusion", max_new_tokens=80, canvas_length=16), template=tpl,
                       raw=True, on_draft=lambda toks, frozen: snaps.append((toks, frozen)))
    assert snaps, "the canvas was denoised at least once"
    c = eng.constraint(tpl)
    assert c.forced(c.start())  # the opening '{"name":"' is pinned into the cache before any step
    for (a, fa), (b, fb) in itertools.pairwise(snaps):
        if len(a) == len(b) and sum(fb) >= sum(fa):  # same block (a new block starts with fewer final positions)
            assert all(x == y for x, y, f in zip(a, b, fa) if f)
    # pinned tokens were never predicted: fewer forwards than predicted (slot) tokens + 1 per block
    assert res.stats.decoder_forwards <= res.stats.slot_tokens + res.stats.blocks


def test_errors_are_typed_and_clear(tiny, tmp_path):
    with pytest.raises(InvalidRequestError, match="empty"):
        tiny.generate("   ")
    with pytest.raises(InvalidRequestError, match="max_new_tokens"):
        DecodeConfig(max_new_tokens=0)
    with pytest.raises(UnsupportedModeError, match="mask token"):
        tiny.generate("hi", DecodeConfig(mode="diffusion", sampler="mask"))
    with pytest.raises(ModelNotFoundError, match="not a directory"):
        from agentkit.models.loader import load_model

        load_model(str(tmp_path / "nope"))
