"""Engine dtype: what ``auto`` picks, exactness of verify / causal canvas in each dtype, bf16 against fp32."""

import pytest
import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.errors import InvalidRequestError
from agentkit.models.loader import resolve_dtype
from agentkit.models.tiny import tiny_llama

pytestmark = pytest.mark.usefixtures("one_thread")
PROMPTS = ["hello there", "def add(a, b): return", "The quick brown fox", '{"name":"Alice","age":']


@pytest.mark.parametrize(("flags", "device", "want"), [
    ({"avx2", "avx512f", "avx512_bf16"}, "cpu", "bfloat16"),
    ({"avx2", "amx_bf16", "amx_tile"}, "cpu", "bfloat16"),
    ({"avx2", "avx512f"}, "cpu", "float32"),
    (set(), "cpu", "float32"),
    (set(), "cuda", "bfloat16"),
    (set(), "cuda:1", "bfloat16"),
])
def test_auto_dtype_follows_cpu_flags_and_device(flags, device, want):
    assert resolve_dtype("auto", device, flags) == want


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_explicit_dtype_is_kept(dtype):
    assert resolve_dtype(dtype, "cpu", {"avx512_bf16"}) == dtype
    assert resolve_dtype(dtype, "cpu", set()) == dtype


def test_bad_engine_options_are_typed_errors():
    with pytest.raises(InvalidRequestError, match="dtype"):
        EngineConfig(dtype="float16")
    with pytest.raises(InvalidRequestError, match="backend"):
        EngineConfig(backend="onnx")


def _tiny(seed: int, dtype: torch.dtype) -> Engine:
    lm = tiny_llama(seed)
    lm.model.to(dtype)
    return Engine.from_loaded(lm)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("mode", ["verify", "diffusion"])
def test_verify_and_causal_canvas_equal_greedy_ar_in_each_dtype(dtype, seed, mode):
    eng = _tiny(seed, dtype)
    assert next(eng.lm.model.parameters()).dtype == dtype
    for prompt in PROMPTS:
        ar = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=24), raw=True)
        other = eng.generate(prompt, DecodeConfig(mode=mode, max_new_tokens=24, canvas_length=8), raw=True)
        assert other.token_ids == ar.token_ids


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bf16_greedy_tokens_are_fp32_greedy_within_tolerance(seed):
    """bf16 is not expected to reproduce fp32 bit for bit; every token bf16 picks must be fp32's argmax or within
    bf16 rounding of it (fp32 logit margin below the tolerance) on the same prefix."""
    e32, e16 = _tiny(seed, torch.float32), _tiny(seed, torch.bfloat16)
    tol = 0.05  # bf16 keeps 8 bits of mantissa: relative error ~0.4% per op, a few ops deep in a 2-layer model
    for prompt in PROMPTS:
        ids = e32.encode_prompt(prompt, raw=True)
        out16 = e16.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=24), raw=True).token_ids
        seq = ids + out16
        logits = e32.backbone.encode(seq, e32.backbone.new_cache(), rows=list(range(len(ids) - 1, len(seq) - 1)))
        for step, tok in enumerate(out16):
            row = logits[step]
            assert row.max() - row[tok] < tol, (prompt, step)
        logits16 = e16.backbone.encode(ids, e16.backbone.new_cache(), rows=[-1])
        torch.testing.assert_close(logits16, logits[:1], atol=tol, rtol=0.02)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_refined_bf16_head_picks_what_a_float32_head_picks(seed):
    """refined_logits: bf16 matmul, then each row's top candidates as float32 dot products. Its greedy picks --
    unconstrained and with the favourites ruled out down to the refined set's edge -- are a float32 head's, where
    a plain bf16 head ties and picks otherwise on some rows."""
    from agentkit.engine.backbone import refined_logits
    from agentkit.models.packed import PackedLinear, prepack_available

    g = torch.Generator().manual_seed(seed)
    weight = (torch.randn(4096, 64, generator=g) * 0.5).bfloat16()
    hidden = torch.randn(512, 64, generator=g).bfloat16()
    exact = torch.nn.functional.linear(hidden.float(), weight.float())
    head = torch.nn.Linear(64, 4096, bias=False, dtype=torch.bfloat16)
    head.weight = torch.nn.Parameter(weight, requires_grad=False)
    for h in [head] + ([PackedLinear(head)] if prepack_available() else []):  # the coarse matmul packed or not
        _assert_refined_is_float32s(refined_logits(hidden, h), exact)
    plain = torch.nn.functional.linear(hidden, weight).float()
    assert not torch.equal(plain.argmax(-1), exact.argmax(-1)) or seed != 0  # why the refinement exists


def _assert_refined_is_float32s(refined: torch.Tensor, exact: torch.Tensor) -> None:
    from agentkit.engine.backbone import REFINED

    assert refined.dtype == torch.float32 and refined.shape == exact.shape
    assert torch.equal(refined.argmax(-1), exact.argmax(-1))
    top = exact.topk(REFINED // 2, -1).indices  # well inside the refined set (its edge may differ)
    torch.testing.assert_close(refined.gather(-1, top), exact.gather(-1, top), rtol=1e-5, atol=1e-5)
    for drop in (1, 8, REFINED // 2):  # a constraint that rules out the model's first ``drop`` favourites
        ruled_out = torch.zeros_like(exact, dtype=torch.bool).scatter_(-1, exact.topk(drop, -1).indices, True)
        assert torch.equal(refined.masked_fill(ruled_out, -1e9).argmax(-1), exact.masked_fill(ruled_out, -1e9).argmax(-1))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_int8_coarse_head_refined_picks_what_a_float32_head_picks(seed):
    """The int8 copy (agentkit/models/head.py) only ranks: after the refinement the picks -- unconstrained and with
    the favourites ruled out down to the refined set's edge -- are the float32 head's, and its rows do not depend
    on how many rows the call has."""
    from agentkit.engine.backbone import refined_logits
    from agentkit.models.head import MAX_ROWS, Int8Head, int8_head_available

    if not int8_head_available():
        pytest.skip("torch's int8 weight kernel does not run on this CPU")
    g = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(64, 4096, bias=False)
    head.weight = torch.nn.Parameter(torch.randn(4096, 64, generator=g) * 0.5, requires_grad=False)
    hidden = torch.randn(512, 64, generator=g)
    coarse = Int8Head(head.weight)
    assert coarse.q.dtype == torch.int8 and coarse.scale.dtype == torch.bfloat16
    rough = coarse(hidden)
    assert rough.dtype == torch.float32 and rough.shape == (512, 4096)
    assert not torch.equal(rough, head(hidden))  # it is a coarse copy, not the head
    _assert_refined_is_float32s(refined_logits(hidden, head, coarse=coarse), head(hidden))
    one_by_one = torch.cat([coarse(hidden[i:i + 1]) for i in range(MAX_ROWS + 3)])
    assert torch.equal(one_by_one, rough[:MAX_ROWS + 3])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_engines_rank_on_the_int8_head_and_refine(dtype):
    from agentkit.models.head import int8_head_available

    bb = _tiny(1, dtype).backbone
    if not int8_head_available():
        assert bb.coarse is None and bb._refine == (dtype == torch.bfloat16)
        return
    assert bb.coarse is not None and bb._refine
