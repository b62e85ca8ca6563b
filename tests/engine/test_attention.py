"""The one-token decode-step attention (agentkit/engine/attention.py) against transformers' sdpa."""

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.attention import NAME, decode_step_attention
from agentkit.engine.engine import Engine
from agentkit.errors import InvalidRequestError
from agentkit.models.tiny import tiny_llama

pytestmark = pytest.mark.usefixtures("one_thread")


class _Module(torch.nn.Module):
    num_key_value_groups = 3
    is_causal = True


def _qkv(q_len: int, k_len: int, dtype: torch.dtype, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 9, q_len, 64, generator=g).to(dtype)
    k = torch.randn(1, 3, k_len, 64, generator=g).to(dtype)
    v = torch.randn(1, 3, k_len, 64, generator=g).to(dtype)
    return q, k, v


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)])
@pytest.mark.parametrize("k_len", [1, 37, 600])
def test_a_one_token_step_equals_sdpa_within_float_tolerance(dtype, tol, k_len):
    q, k, v = _qkv(1, k_len, dtype)
    want, _ = sdpa_attention_forward(_Module(), q, k, v, None, scaling=0.125)
    got, _ = decode_step_attention(_Module(), q, k, v, None, scaling=0.125)
    assert got.shape == want.shape == (1, 1, 9, 64) and got.dtype == dtype
    torch.testing.assert_close(got.float(), want.float(), atol=tol, rtol=tol)
    ref = torch.softmax((q.float().reshape(3, 3, 64) @ k.float()[0].transpose(-1, -2)) * 0.125, -1) @ v.float()[0]
    torch.testing.assert_close(got.float().reshape(3, 3, 64), ref, atol=tol, rtol=tol)


@pytest.mark.parametrize(("q_len", "masked"), [(1, True), (8, False), (8, True)])
def test_other_passes_are_sdpas_bit_for_bit(q_len, masked):
    q, k, v = _qkv(q_len, 40, torch.bfloat16, seed=1)
    mask = torch.ones(1, 1, q_len, 40, dtype=torch.bool).tril(40 - q_len) if masked else None
    want, _ = sdpa_attention_forward(_Module(), q, k, v, mask, scaling=0.125)
    got, _ = decode_step_attention(_Module(), q, k, v, mask, scaling=0.125)
    assert torch.equal(got, want)


def _tiny(dtype: torch.dtype, attention: str) -> Engine:
    lm = tiny_llama(3)
    lm.model.to(dtype)
    return Engine.from_loaded(lm, EngineConfig(attention=attention))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mode", ["ar", "verify"])
def test_greedy_tokens_are_sdpas(dtype, mode):
    fast, plain = _tiny(dtype, "auto"), _tiny(dtype, "sdpa")
    assert fast.backbone.model.config._attn_implementation == NAME
    assert plain.backbone.model.config._attn_implementation == "sdpa"
    cfg = DecodeConfig(mode=mode, max_new_tokens=24)
    for prompt in ["hello there", "def add(a, b): return", '{"name":"Alice","age":']:
        assert fast.generate(prompt, cfg, raw=True).token_ids == plain.generate(prompt, cfg, raw=True).token_ids


def test_an_unknown_attention_is_a_typed_error():
    with pytest.raises(InvalidRequestError, match="attention"):
        EngineConfig(attention="flash")
