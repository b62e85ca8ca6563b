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

A short causal pass after the prompt (``causal_rows=True``, which :class:`~agentkit.engine.backbone.Backbone` passes
for its row-exact passes) takes the same path one query row at a time: row ``i`` attends to the cache and rows
``0..i`` through exactly the arithmetic of a one-token step at its position, so its output does not depend on how
many rows the pass had (verify blocks and causal canvases then see what AR steps see, bit for bit).
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
                          is_causal: bool | None = None, causal_rows: bool = False,
                          **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention signature: query [B, H, Q, D], key/value [B, KVH, K, D] -> ([B, Q, H, D], None).
    ``causal_rows``: the pass is plain causal over the cache (no padding), whatever mask transformers built for it;
    its rows take the one-token path one by one."""
    q_len = query.shape[2]
    stepwise = causal_rows or (q_len == 1 and attention_mask is None)
    if (not stepwise or dropout or query.device.type != "cpu"
            or any(kwargs.get(k) is not None for k in _SDPA_ONLY)):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    past = key.shape[2] - q_len
    k, v = key.float(), value.float()
    rows = [_step(query[:, :, i:i + 1], k[:, :, :past + i + 1], v[:, :, :past + i + 1], scale) for i in range(q_len)]
    return (rows[0] if q_len == 1 else torch.cat(rows, 1)), None


def _step(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float) -> torch.Tensor:
    """One query row [B, H, 1, D] against float32 keys/values [B, KVH, K, D] -> [B, 1, H, D]."""
    b, h, _, d = query.shape
    kvh = key.shape[1]
    q = query.reshape(b, kvh, h // kvh, d).float()  # the query heads of each key/value head as rows
    scores = torch.matmul(q, key.transpose(-1, -2)) * scale  # [B, KVH, H/KVH, K]
    out = torch.matmul(scores.softmax(-1), value)  # [B, KVH, H/KVH, D]
    return out.to(query.dtype).reshape(b, 1, h, d)


AttentionInterface.register(NAME, decode_step_attention)
AttentionMaskInterface.register(NAME, sdpa_mask)


def use_fast_decode_attention(model) -> bool:
    """Switch ``model`` (a transformers model on CPU running ``sdpa``) to :data:`NAME`; True if it was switched."""
    cfg = model.config
    if getattr(cfg, "_attn_implementation", None) != "sdpa" or next(model.parameters()).device.type != "cpu":
        return False
    model.set_attn_implementation(NAME)
    return True
