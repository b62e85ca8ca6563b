"""Row-exact passes (Backbone.exact_rows): a position's logits do not depend on how many positions its pass had, so
verify and the causal canvas equal AR bit for bit without fixed-shape passes."""

import pytest
import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.backbone import Backbone
from agentkit.engine.engine import Engine
from agentkit.engine.sizing import interpolate, pieced_curve
from agentkit.errors import InvalidRequestError
from agentkit.models.head import int8_head_available
from agentkit.models.q4 import MAX_ROWS, use_q4_steps
from agentkit.models.tiny import tiny_llama, tiny_q4_llama

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(not int8_head_available(), reason="torch's int8 weight kernel does not run here")]
DTYPES = [torch.float32, torch.bfloat16]
PROMPTS = ["hello there", "def add(a, b): return", '{"name":"Alice","age":', "The quick brown fox"]


def _engine(dtype: torch.dtype, seed: int = 5, **config) -> Engine:
    lm, source = tiny_q4_llama(seed, dtype=dtype)
    use_q4_steps(lm.model, source.get, float32=True)
    return Engine.from_loaded(lm, EngineConfig(**config))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_pass_gives_each_position_the_logits_of_one_token_steps(dtype):
    bb = _engine(dtype).backbone
    assert bb.exact_rows == MAX_ROWS
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, 200, (11,), generator=g).tolist()
    new = torch.randint(0, 200, (3 * MAX_ROWS + 3,), generator=g).tolist()  # several pieces and a rest
    one, whole, canvas = bb.new_cache(), bb.new_cache(), bb.new_cache()
    for c in (one, whole, canvas):
        bb.encode(prompt, c)
    steps = torch.cat([bb.encode([t], one) for t in new])
    rows = list(range(len(new)))
    assert torch.equal(bb.encode(new, whole, rows=rows), steps)
    assert whole.get_seq_length() == one.get_seq_length() == len(prompt) + len(new)
    assert torch.equal(bb.denoise(new, canvas, rows=rows, bidirectional=False), steps)  # a causal canvas pass
    assert canvas.get_seq_length() == len(prompt)  # ... leaves the cache as it was


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", [5, 6])
@pytest.mark.parametrize(("mode", "canvas"), [("verify", 32), ("diffusion", 32), ("diffusion", 12)])
def test_verify_and_the_causal_canvas_equal_ar_bit_for_bit_at_any_pass_size(dtype, seed, mode, canvas):
    eng = _engine(dtype, seed)
    assert eng.backbone.exact_rows and not eng.lm.bidirectional  # a causal LM: diffusion is the causal canvas
    for prompt in PROMPTS:
        ar = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=24), raw=True)
        other = eng.generate(prompt, DecodeConfig(mode=mode, max_new_tokens=24, canvas_length=canvas), raw=True)
        assert other.token_ids == ar.token_ids, prompt


def test_without_row_exact_kernels_passes_are_one_piece():
    assert _engine(torch.float32, row_exact="off").backbone.exact_rows == 0
    assert _engine(torch.float32, attention="sdpa").backbone.exact_rows == 0  # torch's kernel: not per row
    assert Engine.from_loaded(tiny_llama(1)).backbone.exact_rows == 0  # dense float32 layers
    lm, source = tiny_q4_llama()
    use_q4_steps(lm.model, source.get)
    assert Backbone(lm, row_exact=False).exact_rows == 0
    with pytest.raises(InvalidRequestError, match="row_exact"):
        EngineConfig(row_exact="on")


def test_pieced_curve_costs_long_passes_as_pieces():
    curve = {1: 10.0, 4: 16.0, 8: 20.0, 16: 24.0, 32: 30.0}
    out = pieced_curve(curve, 8)
    assert {n: out[n] for n in (1, 4, 8)} == {1: 10.0, 4: 16.0, 8: 20.0}
    assert out[16] == 40.0 and out[32] == 80.0
    assert pieced_curve({1: 10.0, 16: 40.0}, 8) == {1: 10.0, 8: interpolate({1: 10.0, 16: 40.0}, 8), 16: 2 * interpolate({1: 10.0, 16: 40.0}, 8)}
    assert pieced_curve({1: 10.0, 20: 40.0}, 8)[20] == 2 * interpolate({1: 10.0, 20: 40.0}, 8) + interpolate(
        {1: 10.0, 20: 40.0}, 4)


@pytest.mark.parametrize("mode", ["verify", "diffusion"])
def test_a_merged_loras_8bit_passes_are_row_exact_where_the_probe_finds_the_kernel_so(tmp_path, mode):
    """The 8-bit short passes of a merged LoRA (models/q4.py: Q8Linear) count for row-exact passes only where a
    probe on this machine finds the int8 kernel computing rows one by one; where it does, verify and the causal
    canvas equal AR bit for bit with the LoRA too."""
    from agentkit.models.q4 import Q8Linear
    from agentkit.models.tiny import tiny_merged_q4_lora

    merged, _ = tiny_merged_q4_lora(tmp_path)
    eng = Engine.from_loaded(merged, EngineConfig(q4_steps="int8"))
    layers = [m for m in eng.lm.model.modules() if isinstance(m, Q8Linear)]
    assert layers and eng.backbone.exact_rows == (MAX_ROWS if all(m.rows_independent() for m in layers) else 0)
    if not eng.backbone.exact_rows:
        pytest.skip("the int8 kernel does not compute rows one by one on this CPU")
    for prompt in PROMPTS:
        ar = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=24), raw=True)
        other = eng.generate(prompt, DecodeConfig(mode=mode, max_new_tokens=24, canvas_length=32), raw=True)
        assert other.token_ids == ar.token_ids, prompt


@pytest.mark.parametrize("mode", ["verify", "diffusion"])
def test_a_merged_loras_fitted_4bit_passes_are_row_exact(tmp_path, monkeypatch, mode):
    """A merged LoRA's short passes on fitted 4-bit grids (models/gptq.py) run the int4 kernel, row by row: verify
    and the causal canvas equal AR bit for bit with the LoRA."""
    from agentkit.models.q4 import Q4Linear
    from agentkit.models.tiny import tiny_merged_q4_lora

    monkeypatch.setenv("AGENTKIT_CACHE", str(tmp_path / "cache"))
    merged, _ = tiny_merged_q4_lora(tmp_path)
    eng = Engine.from_loaded(merged)
    assert sum(isinstance(m, Q4Linear) for m in eng.lm.model.modules()) == 14
    assert eng.backbone.exact_rows == MAX_ROWS
    for prompt in PROMPTS:
        ar = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=24), raw=True)
        other = eng.generate(prompt, DecodeConfig(mode=mode, max_new_tokens=24, canvas_length=32), raw=True)
        assert other.token_ids == ar.token_ids, prompt


def test_short_rows_sets_the_piece_width_and_the_logits_stay_the_one_token_steps():
    bb = _engine(torch.bfloat16).backbone
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 200, (9,), generator=g).tolist()
    new = torch.randint(0, 200, (2 * MAX_ROWS + 5,), generator=g).tolist()
    out = {}
    for width in (MAX_ROWS, 8, 4):
        bb.short_rows(width)
        assert bb.exact_rows == width
        # a longer pass costs its pieces
        assert interpolate(bb.cost_curve, 2 * width) == pytest.approx(2 * interpolate(bb.cost_curve, width))
        c = bb.new_cache()
        bb.encode(prompt, c)
        out[width] = bb.encode(new, c, rows=list(range(len(new))))
    bb.short_rows(MAX_ROWS)
    assert torch.equal(out[MAX_ROWS], out[8]) and torch.equal(out[8], out[4])
