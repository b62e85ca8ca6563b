"""Short passes on a checkpoint's 4-bit weights (agentkit/models/q4.py) and long ones on weights prepacked for oneDNN
(agentkit/models/packed.py)."""

import pytest
import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.errors import InvalidRequestError
from agentkit.models.packed import PackedLinear, prepack_available, use_packed_weights
from agentkit.models.q4 import MAX_ROWS, Q4Linear, dense_linears, q4_groups, use_q4_steps
from agentkit.models.tiny import quantize_q4_1, tiny_llama, tiny_merged_q4_lora, tiny_q4_llama

pytestmark = pytest.mark.usefixtures("one_thread")
needs_prepack = pytest.mark.skipif(not prepack_available(), reason="this torch has no oneDNN prepacking")
PROMPTS = ["hello there", "def add(a, b): return", '{"name":"Alice","age":']


def test_the_4bit_form_is_recovered_exactly_or_not_at_all():
    w = quantize_q4_1(torch.randn(48, 64))
    q, d, m = q4_groups(w)
    assert q.min() >= 0 and q.max() <= 15
    assert torch.equal((q.view(48, 2, 32) * d[..., None] + m[..., None]).view(48, 64), w)
    assert q4_groups(torch.randn(48, 64)) is None  # not a 4-bit quantization
    assert q4_groups(w.bfloat16()) is None and q4_groups(torch.randn(48, 40)) is None


def test_short_passes_read_the_4bit_weights_and_long_ones_the_dense():
    lm, source = tiny_q4_llama()
    n = use_q4_steps(lm.model, source.get)
    layers = [m for m in lm.model.modules() if isinstance(m, Q4Linear)]
    assert n == len(layers) == 2 * 7
    lin = layers[0]
    w = source[next(k for k in source)].float()
    for rows in (1, 3, MAX_ROWS):
        x = torch.randn(rows, lin.in_features).bfloat16()
        torch.testing.assert_close(lin(x).float(), x.float() @ w.t(), atol=0.05, rtol=0.02)
    x = torch.randn(MAX_ROWS + 1, lin.in_features).bfloat16()
    assert torch.equal(lin(x), torch.nn.functional.linear(x, lin.weight))


def test_other_checkpoints_and_float32_models_are_left_dense():
    lm = tiny_llama(5)
    lm.model.to(torch.bfloat16)
    src = {n: p.detach().float() for n, p in lm.model.named_parameters()}  # not 4-bit groups
    assert use_q4_steps(lm.model, src.get) == 0
    lm32, source = tiny_q4_llama(dtype=torch.float32)
    assert use_q4_steps(lm32.model, source.get) == 0  # float32 arithmetic unless asked (float32=True)


def test_a_float32_model_runs_short_passes_on_the_4bit_weights_with_bf16_inputs():
    lm, source = tiny_q4_llama(dtype=torch.float32)
    assert use_q4_steps(lm.model, source.get, float32=True) == 14
    lin = next(m for m in lm.model.modules() if isinstance(m, Q4Linear))
    w = source[next(k for k in source)]
    assert lin.scales.dtype == torch.bfloat16  # the kernel's fast path on every x86 CPU
    for rows in (1, MAX_ROWS):
        x = torch.randn(1, rows, lin.in_features)
        out = lin(x)
        assert out.dtype == torch.float32 and out.shape == (1, rows, lin.out_features)
        torch.testing.assert_close(out, x @ w.t(), atol=0.05, rtol=0.02)  # bf16 inputs and scales
        assert not torch.equal(out, x @ w.t())  # ... so not the dense float32 product
    x = torch.randn(MAX_ROWS + 1, lin.in_features)
    assert torch.equal(lin(x), torch.nn.functional.linear(x, lin.weight))  # longer passes: float32, dense


@pytest.mark.parametrize("q4_steps, q4", [("auto", False), ("on", True), ("off", False)])
def test_a_shared_float32_model_keeps_float32_unless_asked(tmp_path, q4_steps, q4):
    """Engine.from_loaded shares a model loaded elsewhere (tests and the adapter share weights this way): its
    float32 was not this engine's dtype="auto" choice, so only q4_steps="on" swaps in the 4-bit layers (the
    engine that loads the model itself with dtype auto on a CPU without native bf16 takes them:
    tests/integration/test_default_model.py)."""
    from safetensors.torch import save_file

    lm, source = tiny_q4_llama(dtype=torch.float32)
    save_file(source, tmp_path / "w.safetensors")
    lm.meta["weights"] = str(tmp_path / "w.safetensors")
    eng = Engine.from_loaded(lm, EngineConfig(q4_steps=q4_steps))
    assert any(isinstance(m, Q4Linear) for m in eng.lm.model.modules()) is q4
    assert eng.backbone.cost_curve  # an unmeasured "float32+q4" still gets a curve
    out = eng.generate(PROMPTS[0], DecodeConfig(mode="ar", max_new_tokens=8), raw=True)
    assert len(out.token_ids) == 8


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("mode", ["ar", "verify"])
def test_greedy_tokens_are_the_dense_models_within_bf16_tolerance(mode, dtype):
    """Not bit for bit (the kernel rounds scales, the dense path weights; in a float32 model, inputs too): every
    token the 4-bit engine picks must be the dense engine's argmax on the same prefix or within bf16 rounding of it."""
    lm, _ = tiny_q4_llama(dtype=dtype)
    dense = Engine.from_loaded(lm)
    lm4, source4 = tiny_q4_llama(dtype=dtype)
    use_q4_steps(lm4.model, source4.get, float32=True)
    fast = Engine.from_loaded(lm4)
    for prompt in PROMPTS:
        ids = dense.encode_prompt(prompt, raw=True)
        out = fast.generate(prompt, DecodeConfig(mode=mode, max_new_tokens=16), raw=True).token_ids
        seq = ids + out
        logits = dense.backbone.encode(seq, dense.backbone.new_cache(), rows=list(range(len(ids) - 1, len(seq) - 1)))
        for step, tok in enumerate(out):
            assert logits[step].max() - logits[step][tok] < 0.1, (prompt, step)


def test_verify_equals_ar_bit_for_bit_on_fixed_passes_of_8():
    lm, source = tiny_q4_llama()
    use_q4_steps(lm.model, source.get)
    eng = Engine.from_loaded(lm, EngineConfig(pass_width=MAX_ROWS))
    for prompt in PROMPTS:
        ar = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=20), raw=True).token_ids
        ver = eng.generate(prompt, DecodeConfig(mode="verify", max_new_tokens=20), raw=True).token_ids
        assert ver == ar


def test_dense_linears_puts_the_dense_layers_back():
    lm, source = tiny_q4_llama()
    use_q4_steps(lm.model, source.get)
    x = torch.randn(1, 5, 64).bfloat16()
    want = lm.model.model.layers[0].mlp.up_proj.weight
    assert dense_linears(lm.model) == 14
    up = lm.model.model.layers[0].mlp.up_proj
    assert type(up) is torch.nn.Linear and up.weight is want
    assert torch.equal(up(x), torch.nn.functional.linear(x, want))


def test_an_unknown_q4_setting_is_a_typed_error():
    with pytest.raises(InvalidRequestError, match="q4_steps"):
        EngineConfig(q4_steps="always")


# -- prepacked dense weights ------------------------------------------------------------------------------------
def _bf16_tiny(seed: int = 5):
    lm = tiny_llama(seed)
    lm.model.to(torch.bfloat16)
    return lm


@needs_prepack
def test_packed_layers_compute_what_the_plain_ones_do():
    lm = _bf16_tiny()
    plain = {n: m for n, m in lm.model.named_modules() if type(m) is torch.nn.Linear and ".layers." in f".{n}"}
    names = sorted(dict(lm.model.state_dict()))
    head = lm.model.get_output_embeddings()
    assert use_packed_weights(lm.model) == len(plain) + 1 == 2 * 7 + 1  # the layers and the output head
    assert sorted(dict(lm.model.state_dict())) == names  # same parameters, same names
    for name, old in plain.items():
        new = lm.model.get_submodule(name)
        assert isinstance(new, PackedLinear) and new.weight is old.weight
        for rows in (1, 8, 77):
            x = torch.randn(2, rows, new.in_features).bfloat16()
            torch.testing.assert_close(new(x), torch.nn.functional.linear(x, old.weight), atol=1e-2, rtol=1e-2)
    packed_head = lm.model.get_output_embeddings()
    assert isinstance(packed_head, PackedLinear) and packed_head.weight is head.weight
    assert packed_head.weight is lm.model.get_input_embeddings().weight  # still tied


@needs_prepack
def test_float32_models_are_left_as_they_are():
    lm = tiny_llama(5)
    assert use_packed_weights(lm.model) == 0
    assert not any(isinstance(m, PackedLinear) for m in lm.model.modules())


@needs_prepack
def test_4bit_layers_get_the_packed_copy_for_their_long_passes():
    lm, source = tiny_q4_llama()
    use_q4_steps(lm.model, source.get)
    assert use_packed_weights(lm.model) == 15
    lin = next(m for m in lm.model.modules() if isinstance(m, Q4Linear))
    assert lin.packed_dense is not None
    x = torch.randn(MAX_ROWS + 5, lin.in_features).bfloat16()
    torch.testing.assert_close(lin(x), torch.nn.functional.linear(x, lin.weight), atol=1e-2, rtol=1e-2)
    assert dense_linears(lm.model) == 15  # undone before an adapter merge: the copies would be stale
    assert not any(isinstance(m, (Q4Linear, PackedLinear)) for m in lm.model.modules())


@needs_prepack
def test_dense_linears_puts_plain_layers_back_with_their_bias():
    lm = _bf16_tiny()
    use_packed_weights(lm.model)
    up = lm.model.model.layers[0].mlp.up_proj
    want = up.weight
    assert dense_linears(lm.model) == 15
    back = lm.model.model.layers[0].mlp.up_proj
    assert type(back) is torch.nn.Linear and back.weight is want and back.bias is None
    lin = torch.nn.Linear(64, 32).bfloat16()
    holder = torch.nn.Module()
    holder.layers = torch.nn.ModuleList([torch.nn.Module()])
    holder.layers[0].proj = lin
    assert use_packed_weights(holder) == 1 and isinstance(holder.layers[0].proj, PackedLinear)
    x = torch.randn(5, 64).bfloat16()
    torch.testing.assert_close(holder.layers[0].proj(x), lin(x), atol=1e-2, rtol=1e-2)  # the bias is added
    assert dense_linears(holder) == 1 and holder.layers[0].proj.bias is lin.bias


@needs_prepack
@pytest.mark.parametrize("mode", ["ar", "verify"])
def test_packed_greedy_tokens_do_not_change(mode):
    """Same weights, another layout: the packed engine writes the plain engine's greedy tokens."""
    plain = Engine.from_loaded(_bf16_tiny(), EngineConfig(prepack="off"))
    packed = Engine.from_loaded(_bf16_tiny(), EngineConfig(prepack="auto"))
    assert any(isinstance(m, PackedLinear) for m in packed.lm.model.modules())
    assert not any(isinstance(m, PackedLinear) for m in plain.lm.model.modules())
    for prompt in PROMPTS:
        cfg = DecodeConfig(mode=mode, max_new_tokens=16)
        assert packed.generate(prompt, cfg, raw=True).token_ids == plain.generate(prompt, cfg, raw=True).token_ids


def test_prepack_setting_is_checked():
    with pytest.raises(InvalidRequestError, match="prepack"):
        EngineConfig(prepack="always")


@needs_prepack
def test_copies_of_a_packed_model_pack_their_own_weights():
    """oneDNN's packed tensors are opaque (no storage to copy): a deep copy (the adapter merge copies the model)
    or a pickle packs the copied weights again and computes the same."""
    import copy
    import pickle

    lm, source = tiny_q4_llama()
    use_q4_steps(lm.model, source.get)
    use_packed_weights(lm.model)
    x = torch.randint(0, 100, (1, 12))
    with torch.no_grad():
        want = lm.model(x).logits
        for twin in (copy.deepcopy(lm.model), pickle.loads(pickle.dumps(lm.model))):
            head, q4 = twin.get_output_embeddings(), next(m for m in twin.modules() if isinstance(m, Q4Linear))
            assert head.packed is not None and q4.packed_dense is not None
            assert head.weight is twin.get_input_embeddings().weight
            assert torch.equal(twin(x).logits, want)


@pytest.fixture
def grid_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "grids"


def _merged_dense(merged) -> dict[str, torch.Tensor]:
    return {n: m.weight.detach().float().clone() for n, m in merged.model.named_modules()
            if isinstance(m, torch.nn.Linear) and ".layers." in f".{n}"}


def test_a_merged_lora_runs_short_passes_on_4bit_grids_fitted_to_its_weights(tmp_path, grid_cache):
    merged, source = tiny_merged_q4_lora(tmp_path)
    assert merged.meta["weights"] is None and merged.meta["base_weights"]  # off the checkpoint's grid now
    dense = _merged_dense(merged)
    eng = Engine.from_loaded(merged)
    layers = {n: m for n, m in eng.lm.model.named_modules() if isinstance(m, Q4Linear)}
    assert len(layers) == 14 and len(list(grid_cache.glob("*.safetensors"))) == 1
    for name, lin in layers.items():
        w = dense[name]
        assert not torch.equal(w, source[f"{name}.weight"].bfloat16().float())  # the LoRA moved the weights
        x = torch.randn(MAX_ROWS, lin.in_features).bfloat16()
        got, want = lin(x).float(), x.float() @ w.t()
        assert (got - want).norm() < 0.15 * want.norm(), name  # a 4-bit grid of the merged weights
        x = torch.randn(MAX_ROWS + 1, lin.in_features).bfloat16()
        assert torch.equal(lin(x), torch.nn.functional.linear(x, lin.weight))  # long passes: the dense weights
    out = eng.generate(PROMPTS[1], DecodeConfig(mode="ar", max_new_tokens=8), raw=True)
    assert len(out.token_ids) == 8


def test_fitted_grids_are_read_back_from_the_cache(tmp_path, grid_cache, monkeypatch):
    from agentkit.models import gptq

    first = Engine.from_loaded(tiny_merged_q4_lora(tmp_path)[0])
    monkeypatch.setattr(gptq, "fit_grid", lambda *a, **k: (_ for _ in ()).throw(AssertionError("refitted")))
    again = Engine.from_loaded(tiny_merged_q4_lora(tmp_path)[0])
    a = {n: m.packed for n, m in first.lm.model.named_modules() if isinstance(m, Q4Linear)}
    b = {n: m.packed for n, m in again.lm.model.named_modules() if isinstance(m, Q4Linear)}
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)


def test_gptq_keeps_a_layers_outputs_closer_than_rounding_does():
    """On inputs with the calibration's second moment, GPTQ's grid computes the layer's outputs closer to the
    float32 weights' than rounding each weight onto a fresh grid of the same form."""
    from agentkit.models.gptq import dequantized, fit_grid

    g = torch.Generator().manual_seed(0)
    mix = torch.randn(64, 64, generator=g)
    x = torch.randn(2048, 64, generator=g) @ mix  # correlated inputs, as activations are
    w = torch.randn(48, 64, generator=g) * 0.1
    q, d, m = fit_grid(w, x.t() @ x / len(x))
    assert q.dtype == torch.int32 and int(q.min()) >= 0 and int(q.max()) <= 15 and d.shape == (48, 2)
    gm = w.view(48, 2, 32)
    lo = gm.min(-1).values
    step = (gm.max(-1).values - lo) / 15
    rtn = (((gm - lo[..., None]) / step[..., None]).round() * step[..., None] + lo[..., None]).view(48, 64)
    err = lambda v: (x @ v.t() - x @ w.t()).norm().item()
    assert err(dequantized((q, d, m))) < 0.85 * err(rtn)  # 0.70 here; without the error feedback, 1.0


def test_q4_steps_int8_puts_a_merged_lora_on_an_8bit_copy(tmp_path, grid_cache):
    """``q4_steps="int8"``: the merged weights' 8-bit copy, which keeps what the checkpoint's 4-bit grid would
    round away (no grids fitted)."""
    from agentkit.models.q4 import Q8Linear

    merged, source = tiny_merged_q4_lora(tmp_path)
    dense = _merged_dense(merged)
    eng = Engine.from_loaded(merged, EngineConfig(q4_steps="int8"))
    layers = {n: m for n, m in eng.lm.model.named_modules() if isinstance(m, Q8Linear)}
    assert len(layers) == 14 and not any(isinstance(m, Q4Linear) for m in eng.lm.model.modules())
    assert not grid_cache.exists()
    name, lin = next(iter(layers.items()))
    for rows in (1, MAX_ROWS):
        x = torch.randn(rows, lin.in_features).bfloat16()
        torch.testing.assert_close(lin(x).float(), x.float() @ dense[name].t(), atol=0.05, rtol=0.02)
    base = source[f"{name}.weight"]
    x = torch.randn(4, lin.in_features).bfloat16()
    want = x.float() @ lin.weight.float().t() - x.float() @ base.t()  # the LoRA's share of the product
    got = lin(x).float() - x.float() @ base.t()
    assert torch.nn.functional.cosine_similarity(got.flatten(), want.flatten(), dim=0) > 0.95


def test_q4_steps_off_keeps_a_merged_lora_dense(tmp_path, grid_cache):
    from agentkit.models.q4 import Q8Linear

    merged, _ = tiny_merged_q4_lora(tmp_path)
    eng = Engine.from_loaded(merged, EngineConfig(q4_steps="off"))
    assert not any(isinstance(m, (Q8Linear, Q4Linear)) for m in eng.lm.model.modules())
    assert not grid_cache.exists()
