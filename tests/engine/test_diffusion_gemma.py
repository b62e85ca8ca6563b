"""DiffusionGemma (transformers' native ``diffusion_gemma``) in the engine, on a tiny random model.

Exactness: the engine's uniform-noise sampler reproduces ``DiffusionGemmaForBlockDiffusion.generate`` token for
token under the same seed and settings, *and* step for step: every intermediate argmax canvas that ``generate``
streams (``put_draft``) equals the engine's, so the initial uniform canvas, the self-conditioned decoder logits, the
temperature schedule, the multinomial draws, the entropy-bound acceptance, the renoising, the stop step of each
block and the encoder commit between blocks all agree. The random stream is the same because the engine makes the
same draws in the same order (``randint`` canvas, then per step one ``multinomial`` over the canvas and one
``randint`` renoise) from a generator seeded like ``torch.manual_seed``.

Settings map as: ``temperature``/``final_temperature`` = ``t_max``/``t_min``, ``entropy_bound`` =
``EntropyBoundSamplerConfig.entropy_bound``, ``stable_steps``/``entropy_threshold`` =
``stability_threshold``/``confidence_threshold``, ``canvas_length`` = ``config.canvas_length``. Two deliberate
differences: the engine stops at ``max_new_tokens`` and at EOS (``generate`` returns whole canvases, padding after
EOS), and ``temperature=0`` is a greedy variant that ``generate`` does not have.
"""

import dataclasses
import itertools

import pytest
import torch
from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

from agentkit.config import DecodeConfig
from agentkit.constrain.nodes import Choice, Lit, Repeat, Slot, Template, seq
from agentkit.engine import gemma
from agentkit.engine.engine import Engine
from agentkit.errors import UnsupportedModeError
from agentkit.models.loader import DIFFUSION_GEMMA, load_model
from agentkit.models.tiny import tiny_diffusion_gemma

CANVAS = 8  # the tiny model's config.canvas_length


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def lm():
    return tiny_diffusion_gemma(0)


@pytest.fixture(scope="module")
def eng(lm):
    return Engine.from_loaded(lm)


class Recorder:
    """A streamer that keeps every argmax canvas ``generate`` produces (one per decoder pass)."""

    def __init__(self) -> None:
        self.drafts: list[list[int]] = []

    def put(self, value) -> None:
        pass

    def put_draft(self, value) -> None:
        self.drafts.append(value[0].tolist())

    def end(self) -> None:
        pass


def reference(lm, ids, s, seed, max_new_tokens, eos=None):
    torch.manual_seed(seed)
    rec = Recorder()
    out = lm.model.generate(
        torch.tensor([ids]), max_new_tokens=max_new_tokens, max_denoising_steps=s["steps"], t_max=s["t"],
        t_min=s["t_final"], sampler_config=EntropyBoundSamplerConfig(entropy_bound=s["bound"]),
        stability_threshold=s["stable"], confidence_threshold=s["threshold"], streamer=rec,
        eos_token_id=eos if eos is not None else lm.eos_ids[0], pad_token_id=lm.tokenizer.pad_token_id,
    )
    return out.sequences[0, len(ids):].tolist(), rec.drafts


def ours(eng, prompt, s, seed, max_new_tokens):
    cfg = DecodeConfig(mode="diffusion", max_new_tokens=max_new_tokens, canvas_length=CANVAS, seed=seed,
                       temperature=s["t"], final_temperature=s["t_final"], entropy_bound=s["bound"],
                       max_denoising_steps=s["steps"], stable_steps=s["stable"], entropy_threshold=s["threshold"])
    return eng.generate(prompt, cfg, raw=True)


SETTINGS = {
    # transformers' defaults (bound 0.1, T 0.8 -> 0.4): random weights never get confident, every block runs all steps
    "defaults": {"t": 0.8, "t_final": 0.4, "bound": 0.1, "stable": 1, "threshold": 0.005, "steps": 6},
    # accept everything at low temperature: the canvas reaches a fixed point and adaptive stopping fires early
    "early-stop": {"t": 0.05, "t_final": 0.01, "bound": 1e4, "stable": 1, "threshold": 0.5, "steps": 16},
    "stable-2": {"t": 0.05, "t_final": 0.01, "bound": 50.0, "stable": 2, "threshold": 0.5, "steps": 16},
    "hot": {"t": 1.5, "t_final": 0.5, "bound": 3.0, "stable": 1, "threshold": 0.005, "steps": 5},
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_uniform_sampler_reproduces_transformers_generate(lm, eng, name):
    s, seed, prompt = SETTINGS[name], 3, "def add(a, b):"
    ids = eng.encode_prompt(prompt, raw=True)
    ref, ref_drafts = reference(lm, ids, s, seed, 3 * CANVAS)
    res = ours(eng, prompt, s, seed, 3 * CANVAS)
    assert res.token_ids == ref
    assert res.drafts == ref_drafts  # every step of every block, including where each block stopped
    assert res.stats.decoder_forwards == len(ref_drafts) == sum(res.stats.steps_per_block)
    assert res.stats.blocks == 3 and res.stats.encoder_forwards == 3  # prefill + one commit per later block
    if name in ("early-stop", "stable-2"):
        assert min(res.stats.steps_per_block) < s["steps"], "adaptive stopping was exercised"
    else:
        assert res.stats.steps_per_block == [s["steps"]] * 3


def test_eos_ends_generation_where_transformers_does(lm):
    s, seed, prompt = SETTINGS["defaults"], 5, "hello there"
    ids = lm.tokenizer.encode(prompt, add_special_tokens=False)
    ref, _ = reference(lm, ids, s, seed, 3 * CANVAS)
    # make a token the second block produces the EOS, so generation must stop inside that block
    j = next(j for j in range(CANVAS, 2 * CANVAS) if ref[j] not in ref[:j])
    eos = ref[j]
    ref_eos, ref_drafts = reference(lm, ids, s, seed, 3 * CANVAS, eos=eos)
    assert ref_eos[: j + 1] == ref[: j + 1] and len(ref_eos) == 2 * CANVAS  # generate stopped after that canvas
    res = ours(Engine.from_loaded(dataclasses.replace(lm, eos_ids=(eos,))), prompt, s, seed, 3 * CANVAS)
    assert res.token_ids == ref[:j]
    assert res.drafts == ref_drafts and res.stats.blocks == 2 and res.stats.finish_reason == "stop"


def test_decoder_reads_the_cache_and_matches_a_full_forward(lm, eng):
    bb, model = eng.backbone, lm.model
    assert bb.shift is False  # the canvas predicts itself
    prompt = list(range(5, 35))  # longer than the 24-token sliding window
    canvas = torch.randint(0, bb.vocab_size, (1, CANVAS), generator=torch.Generator().manual_seed(0))
    cache = bb.new_cache()
    bb.encode(prompt, cache)
    first = bb.denoise(canvas, cache)  # (sliding layers are trimmed back to their window before a pass)
    keys = [layer.keys.clone() for layer in cache.layers]
    second = bb.denoise(canvas, cache, self_cond=first)
    assert cache.get_seq_length() == len(prompt)
    assert all(torch.equal(k, layer.keys) for k, layer in zip(keys, cache.layers))  # read, never written
    with torch.no_grad():
        full = model(input_ids=torch.tensor([prompt]), decoder_input_ids=canvas).logits[0]
        full_sc = model(input_ids=torch.tensor([prompt]), decoder_input_ids=canvas,
                        self_conditioning_logits=full[None]).logits[0]
    torch.testing.assert_close(first, full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(second, full_sc, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(first, second)  # self-conditioning changes the prediction
    torch.testing.assert_close(bb.denoise(canvas, cache, rows=[2, 5]), first[[2, 5]])


def test_commit_in_pieces_equals_encoding_from_scratch(eng):
    bb = eng.backbone
    ids = list(range(5, 50))
    scratch = bb.encode(ids, bb.new_cache(), rows=list(range(len(ids))))
    cache = bb.new_cache()
    parts = [bb.encode(ids[:12], cache, rows=list(range(12)))]
    for a in range(12, len(ids), CANVAS):
        bb.denoise(torch.tensor([ids[a:a + CANVAS]]), cache)  # a denoise pass in between changes nothing
        chunk = ids[a:a + CANVAS]
        parts.append(bb.encode(chunk, cache, rows=list(range(len(chunk)))))
    torch.testing.assert_close(torch.cat(parts), scratch, atol=1e-5, rtol=1e-5)


def _greedy_from_scratch(lm, ids, n):
    """AR readout of the same weights without a cache: encoder over the whole sequence, tied head, soft-cap."""
    model, out = lm.model, []
    cap = model.final_logit_softcapping
    with torch.no_grad():
        for _ in range(n):
            h = model.model.encoder(input_ids=torch.tensor([ids + out])).last_hidden_state[0, -1]
            t = int((torch.tanh(model.lm_head(h) / cap) * cap).argmax())
            if t in lm.eos_ids:
                break
            out.append(t)
    return out


@pytest.mark.parametrize("prompt", ["hello there", "The quick brown fox"])
def test_ar_and_verify_read_the_encoder_causally(lm, eng, prompt):
    ids = eng.encode_prompt(prompt, raw=True)
    want = _greedy_from_scratch(lm, ids, 30)  # crosses the sliding window: verify must roll it back
    ar = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=30), raw=True)
    verify = eng.generate(prompt, DecodeConfig(mode="verify", max_new_tokens=30, canvas_length=CANVAS), raw=True)
    assert ar.token_ids == want
    assert verify.token_ids == want
    assert ar.stats.decoder_forwards == 0 and verify.stats.decoder_forwards == 0


def test_load_model_from_a_saved_directory(lm, eng, tmp_path):
    lm.model.save_pretrained(tmp_path)
    lm.tokenizer.save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path))
    assert loaded.kind == DIFFUSION_GEMMA and loaded.bidirectional and loaded.eos_ids == lm.eos_ids
    assert loaded.model.config.canvas_length == CANVAS
    s = SETTINGS["hot"]
    assert ours(Engine.from_loaded(loaded), "hello", s, 1, 2 * CANVAS).token_ids == ours(eng, "hello", s, 1, 2 * CANVAS).token_ids


def _template():
    name = Slot(r'[a-z]{1,6}', max_tokens=6, name="/name")
    tags = Repeat(seq(Lit('"'), Slot(r'[a-z]{1,4}', max_tokens=4), Lit('"')), ",", 0, 3)
    return Template(seq(Lit('{"name":"'), name, Lit('","ok":'), Choice((Lit("true"), Lit("false"))),
                        Lit(',"tags":['), tags, Lit("]}")))


@pytest.mark.parametrize("temperature,seed", [(0.0, 0), (0.8, 1), (1.2, 2)])
def test_template_constrained_uniform_sampler(eng, monkeypatch, temperature, seed):
    """Output is in the template's language, and a pinned position is never renoised: the canvas fed to the next
    step holds the forced token wherever the previous step pinned one."""
    events: list[tuple] = []
    run, constrain, denoise = gemma.EntropyBoundDenoiser.run, gemma.EntropyBoundDenoiser._constrain, eng.backbone.denoise

    def spy_run(self, block):
        events.append(("block",))
        return run(self, block)

    def spy_constrain(self, processed):
        walk = constrain(self, processed)
        events.append(("walk", dict(zip(walk.pinned, walk.tokens))))
        return walk

    def spy_denoise(ids, cache, rows=None, bidirectional=True, *, self_cond=None):
        events.append(("canvas", ids[0].tolist()))
        return denoise(ids, cache, rows, bidirectional, self_cond=self_cond)

    monkeypatch.setattr(gemma.EntropyBoundDenoiser, "run", spy_run)
    monkeypatch.setattr(gemma.EntropyBoundDenoiser, "_constrain", spy_constrain)
    monkeypatch.setattr(eng.backbone, "denoise", spy_denoise)
    tpl = _template()
    cfg = DecodeConfig(mode="diffusion", max_new_tokens=60, canvas_length=CANVAS, temperature=temperature,
                       final_temperature=temperature / 2 if temperature else None, max_denoising_steps=6, seed=seed)
    res = eng.generate("data:", cfg, template=tpl, raw=True)
    assert res.stats.finish_reason == "template"
    assert tpl.matches(res.text), res.text
    assert res.value["ok"] in (True, False)
    assert res.stats.pinned_tokens > 0 and res.stats.pinned_tokens + res.stats.slot_tokens == res.stats.output_tokens
    checked = 0
    for prev, nxt in itertools.pairwise(events):
        if prev[0] == "walk" and nxt[0] == "canvas":
            assert all(nxt[1][j] == t for j, t in prev[1].items())
            checked += len(prev[1])
    assert checked > 0


def test_greedy_default_and_errors(lm, eng):
    res = eng.generate("hi", DecodeConfig(mode="diffusion", max_new_tokens=CANVAS, canvas_length=CANVAS,
                                          max_denoising_steps=4, seed=0), raw=True)  # sampler auto -> uniform
    assert len(res.token_ids) == CANVAS and res.stats.decoder_forwards == sum(res.stats.steps_per_block) <= 4
    again = eng.generate("hi", DecodeConfig(mode="diffusion", max_new_tokens=CANVAS, canvas_length=CANVAS,
                                            max_denoising_steps=4, seed=0), raw=True)
    assert again.token_ids == res.token_ids  # seeded: reproducible
    for sampler in ("jacobi", "mask"):
        with pytest.raises(UnsupportedModeError, match="uniform"):
            eng.generate("hi", DecodeConfig(mode="diffusion", sampler=sampler))
    with pytest.raises(UnsupportedModeError, match="diffusion_gemma"):
        from agentkit.engine import tiny_engine

        tiny_engine(0).generate("hi", DecodeConfig(mode="diffusion", sampler="uniform"))
