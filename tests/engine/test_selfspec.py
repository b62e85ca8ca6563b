"""Self-speculative verify: the adapter drafts, the base weights check; the output is greedy AR's, exactly."""

from dataclasses import replace

import pytest
import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.constrain.nodes import Choice, Lit, Repeat, Slot, Template, seq
from agentkit.engine.backbone import Backbone
from agentkit.engine.engine import Engine
from agentkit.engine.selfspec import MIN_DRAFT, Drafter, SyncBackbone
from agentkit.errors import InvalidRequestError, UnsupportedModeError
from agentkit.models.adapter import apply_adapter
from agentkit.models.tiny import tiny_llama
from agentkit.training.recipe import TrainConfig, Trainer

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def adapter_dir(tmp_path_factory):
    """A random adapter for tiny_llama(0), saved with the training code (LoRA B not zero, so it changes drafts)."""
    torch.manual_seed(1)
    tr = Trainer(tiny_llama(0), TrainConfig(steps=1, rank=4, alpha=8.0, device="cpu"))
    with torch.no_grad():
        for m in tr.loras.values():
            m.lora_b.normal_(0, 0.05)
    out = tmp_path_factory.mktemp("adapter")
    tr.save(out)
    return out


@pytest.fixture(scope="module")
def engine(adapter_dir):
    return Engine.from_loaded(tiny_llama(0), EngineConfig(adapter_path=str(adapter_dir)))


def _template():
    name = Slot(r"[a-z]{1,6}", max_tokens=6, name="/name")
    tags = Repeat(seq(Lit('"'), Slot(r"[a-z]{1,4}", max_tokens=4), Lit('"')), ",", 0, 3)
    return Template(seq(Lit('{"name":"'), name, Lit('","ok":'), Choice((Lit("true"), Lit("false"))),
                        Lit(',"tags":['), tags, Lit("]}")))


PROMPTS = ["What is the weather in Paris today?", "def add(a, b):", '{"name":"Alice","age":31', "The quick brown"]


@pytest.mark.parametrize("steps", [1, 2])
@pytest.mark.parametrize("prompt", PROMPTS)
def test_adapter_drafted_verify_equals_ar_constrained(engine, prompt, steps):
    t = _template()
    ar = engine.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=40), template=t)
    v = engine.generate(prompt, DecodeConfig(mode="verify", draft="adapter", draft_steps=steps, max_new_tokens=40),
                        template=t)
    assert v.token_ids == ar.token_ids and v.text == ar.text
    assert v.stats.finish_reason == ar.stats.finish_reason


@pytest.mark.parametrize("prompt", PROMPTS)
def test_adapter_drafted_verify_equals_ar_free_text(engine, prompt):
    ar = engine.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=24))
    v = engine.generate(prompt, DecodeConfig(mode="verify", draft="adapter", max_new_tokens=24, canvas_length=8))
    assert v.token_ids == ar.token_ids


@pytest.mark.parametrize("prompt", PROMPTS[:2])
def test_adapter_drafted_verify_keeps_ars_samples(engine, prompt):
    for template in (None, _template()):
        for seed in (0, 1):
            cfg = DecodeConfig(mode="ar", max_new_tokens=30, temperature=0.8, seed=seed)
            ar = engine.generate(prompt, cfg, template=template)
            v = engine.generate(prompt, replace(cfg, mode="verify", draft="adapter", canvas_length=8),
                                template=template)
            assert v.token_ids == ar.token_ids


def test_stats_count_draft_and_verify_passes(engine):
    v = engine.generate(PROMPTS[0], DecodeConfig(mode="verify", draft="adapter", draft_steps=2, max_new_tokens=24))
    s = v.stats
    assert s.verify_forwards == s.blocks >= 1
    assert 1 <= s.draft_forwards == s.decoder_forwards <= 2 * s.blocks
    assert s.forwards == s.encoder_forwards + s.decoder_forwards - 1
    lookup = engine.generate(PROMPTS[0], DecodeConfig(mode="verify", max_new_tokens=24))
    assert lookup.stats.draft_forwards == 0 and lookup.stats.verify_forwards == lookup.stats.blocks


def test_sync_pass_equals_encode_then_denoise(adapter_dir):
    """Pending tokens fed in front of the canvas: same canvas logits and same cache as a separate encode pass."""
    lm = apply_adapter(tiny_llama(0), adapter_dir)
    bb = Backbone(lm)
    prompt, pend, canvas = [5, 9, 14, 3], [20, 21, 22], [30, lm.mask_token_id, lm.mask_token_id]
    a, b = bb.new_cache(), bb.new_cache()
    bb.encode(prompt, a)
    bb.encode(prompt, b)
    bb.encode(pend, a)
    want = bb.denoise(canvas, a, [0, 1, 2], True)
    sync = SyncBackbone(bb)
    sync.pending = list(pend)
    got = sync.denoise(canvas, b, [0, 1, 2], True)
    assert sync.pending == [] and b.get_seq_length() == a.get_seq_length() == len(prompt) + len(pend)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(b.layers[0].keys, a.layers[0].keys, atol=1e-5, rtol=1e-5)


def test_draft_length_adapts():
    assert Drafter.next_length(8, kept=8, drafted=8, cap=32) == 16  # all accepted: longer
    assert Drafter.next_length(16, kept=16, drafted=16, cap=32) == 32
    assert Drafter.next_length(32, kept=32, drafted=32, cap=32) == 32  # capped at canvas_length
    assert Drafter.next_length(16, kept=5, drafted=16, cap=32) == 7  # rejected: what was kept plus a margin
    assert Drafter.next_length(16, kept=1, drafted=16, cap=32) == MIN_DRAFT


def test_adapter_draft_needs_an_adapter_and_valid_config(tiny):
    with pytest.raises(UnsupportedModeError, match="draft='adapter'"):
        tiny.generate("hi", DecodeConfig(mode="verify", draft="adapter", max_new_tokens=4))
    with pytest.raises(InvalidRequestError, match="draft"):
        DecodeConfig(mode="verify", draft="medusa")
    with pytest.raises(InvalidRequestError, match="draft_steps"):
        DecodeConfig(mode="verify", draft="adapter", draft_steps=0)


@pytest.fixture(scope="module")
def base_prefix_engine(tmp_path_factory):
    """An adapter trained with the LoRA on block positions only (prefix encoded by the base weights)."""
    torch.manual_seed(3)
    tr = Trainer(tiny_llama(0), TrainConfig(steps=1, rank=4, alpha=8.0, device="cpu", lora_prefix=False))
    with torch.no_grad():
        for m in tr.loras.values():
            m.lora_b.normal_(0, 0.05)
    out = tmp_path_factory.mktemp("adapter-base-prefix")
    tr.save(out)
    return Engine.from_loaded(tiny_llama(0), EngineConfig(adapter_path=str(out)))


def test_base_prefix_adapter_shares_the_verifier_cache(base_prefix_engine):
    from agentkit.engine.selfspec import SplitBackbone

    eng = base_prefix_engine
    lm, bb = eng._diffusion_model()
    assert lm.meta["adapter_config"]["prefix"] == "base" and isinstance(bb, SplitBackbone)
    t = _template()
    for prompt in PROMPTS[:2]:
        ar = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=40), template=t)
        v = eng.generate(prompt, DecodeConfig(mode="verify", draft="adapter", max_new_tokens=40), template=t)
        assert v.token_ids == ar.token_ids
        assert v.stats.draft_forwards <= v.stats.blocks  # one canvas pass a block, no prompt pass
    d = eng.generate(PROMPTS[0], DecodeConfig(mode="diffusion", max_new_tokens=40), template=t)
    assert t.matches(d.text) and d.stats.decoder_forwards >= 1


def test_diffusion_mode_puts_the_block_diffusion_adapter_on_the_weights_as_loaded(adapter_dir, tmp_path, monkeypatch):
    """With a LoRA merged into the default model (the loop adapter), the block-diffusion adapter, trained on the
    weights as loaded, is applied to those (reloaded), not to the merged ones."""
    from agentkit.engine import engine as engine_mod
    from agentkit.engine.engine import merged_lora
    from agentkit.models.adapter import AdapterConfig, apply_adapter, save_adapter

    g = torch.Generator().manual_seed(0)
    plain = tiny_llama(0)
    state = {}
    for name, mod in plain.model.named_modules():
        if name.endswith(("q_proj", "v_proj")):
            state[f"{name}.lora_a"] = torch.randn(4, mod.in_features, generator=g) * 0.1
            state[f"{name}.lora_b"] = torch.randn(mod.out_features, 4, generator=g) * 0.1
    save_adapter(tmp_path / "loop", state, AdapterConfig(rank=4, alpha=8, kind="ar", targets=("q_proj", "v_proj")))
    merged = merged_lora(tiny_llama(0), str(tmp_path / "loop"))
    merged.meta["default"] = True  # as the embedded default model's
    loads = []
    monkeypatch.setattr(engine_mod, "load_model", lambda *a, **k: loads.append(a) or tiny_llama(0))
    eng = Engine.from_loaded(merged, EngineConfig(adapter_path=str(adapter_dir)))
    lm, _ = eng._diffusion_model()
    want = apply_adapter(tiny_llama(0), adapter_dir)
    name = "model.layers.0.self_attn.q_proj.weight"
    assert len(loads) == 1
    assert torch.equal(lm.model.state_dict()[name], want.model.state_dict()[name])
    assert not torch.equal(merged.model.state_dict()[name], plain.model.state_dict()[name])  # the LoRA is there
    del merged.meta["default"]  # a model shared by from_loaded that the engine cannot reload keeps its weights
    other = Engine.from_loaded(merged, EngineConfig(adapter_path=str(adapter_dir)))
    other._diffusion_model()
    assert len(loads) == 1
