"""Attention for one-token decode steps on CPU.

transformers' ``sdpa`` attention sends a one-token query to torch's CPU flash-attention kernel, which is built for
long queries: on the default model (9 query heads over 3 key/value heads, head dim 64, 1 thread, bf16) it takes
0.20 ms a layer against 300 cached positions and 0.44 ms against 600, about a fifth of a decode step. Written as two
small float32 matmuls over the key/value heads (the query heads of a group stacked as rows, so no ``repeat_kv``) the
same attention takes 0.04 and 0.07 ms (``evals/bench_attention.py``).

``agentkit-sdpa`` is transformers' ``sdpa`` everywhere except there: a one-token query with no mask (an AR step on
a growing cache) takes the matmul path, scores and softmax in float32. Every pass with a mask, every longer pass
and the prompt stay on torch's kernel, so what the other modes compute is unchanged. :func:`use_fast_decode_attention`
switches a CPU model that runs ``sdpa`` to it.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "agentkit-sdpa"
SDPA_LIKE = ("sdpa", NAME)  # attention implementations that take sdpa's boolean 4-D masks
_SDPA_ONLY = ("softcap", "sliding_window", "position_bias", "s_aux")  # options only sdpa's own path handles


def decode_step_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                          attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                          is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention signature: query [B, H, Q, D], key/value [B, KVH, K, D] -> ([B, Q, H, D], None)."""
    if (query.shape[2] != 1 or attention_mask is not None or dropout or query.device.type != "cpu"
            or any(kwargs.get(k) is not None for k in _SDPA_ONLY)):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    b, h, _, d = query.shape
    kvh = key.shape[1]
    scale = scaling if scaling is not None else d ** -0.5
    q = query.reshape(b, kvh, h // kvh, d).float()  # the query heads of each key/value head as rows
    scores = torch.matmul(q, key.float().transpose(-1, -2)) * scale  # [B, KVH, H/KVH, K]
    out = torch.matmul(scores.softmax(-1), value.float())  # [B, KVH, H/KVH, D]
    return out.to(query.dtype).reshape(b, 1, h, d), None


AttentionInterface.register(NAME, decode_step_attention)
AttentionMaskInterface.register(NAME, sdpa_mask)


def use_fast_decode_attention(model) -> bool:
    """Switch ``model`` (a transformers model on CPU running ``sdpa``) to :data:`NAME`; True if it was switched."""
    cfg = model.config
    if getattr(cfg, "_attn_implementation", None) != "sdpa" or next(model.parameters()).device.type != "cpu":
        return False
    model.set_attn_implementation(NAME)
    return True
