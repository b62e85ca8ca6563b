"""An int8 copy of the output head, for the coarse half of the refined logits.

The output head is the largest matrix of a small model (the default model's tied 49152 x 576 embedding: 113 MB in
float32, a quarter of a one-token step's weight reads on a float32 CPU). The engine's logits are *refined*
(:func:`agentkit.engine.backbone.refined_logits`): a coarse matmul over the whole vocabulary, then each row's top
candidates recomputed exactly in float32, so greedy picks among them are a float32 head's. The coarse half only has
to rank; :class:`Int8Head` does it on one int8 per weight and a bf16 scale per vocabulary row (torch's
``_weight_int8pack_mm``, bf16 activations): a quarter of float32's bytes. On a 2-core AMD EPYC without AVX-512, 1
thread: one row 19.2 -> 11.0 ms with the refinement, 8 rows 51.9 -> 29.7 ms.

Its rows are also computed independently of each other (a row's values do not depend on how many rows the matmul
has), which float32 and bf16 GEMMs do not promise: what lets the engine's short passes give every position the
logits a one-token step would (``Backbone.exact_rows``).
"""

from __future__ import annotations

import functools

import torch

MAX_ROWS = 16  # rows per call; longer calls are split (the kernel runs rows one after another; at 32 rows it is
#                 slower than float32's GEMM: 94 vs 62 ms on the default model's head)


class Int8Head:
    """Per vocabulary row ``v``: ``w[v] ~= s[v] * q[v]`` with ``q`` int8 and ``s = max |w[v]| / 127`` in bf16."""

    def __init__(self, weight: torch.Tensor) -> None:
        w = weight.detach().float()
        scale = (w.abs().amax(1) / 127).clamp_min(torch.finfo(torch.float32).tiny).to(torch.bfloat16)
        self.q = (w / scale.float()[:, None]).round_().clamp_(-127, 127).to(torch.int8).contiguous()  # [V, H]
        self.scale = scale  # [V]
        self.out_features = w.shape[0]

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        """``hidden`` [r, H] -> coarse float32 logits [r, V]."""
        x = hidden.to(torch.bfloat16)
        parts = [torch._weight_int8pack_mm(x[i:i + MAX_ROWS], self.q, self.scale) for i in range(0, len(x), MAX_ROWS)]
        return (parts[0] if len(parts) == 1 else torch.cat(parts)).float()


@functools.cache
def int8_head_available() -> bool:
    """Whether torch's CPU int8 weight kernel runs here, with bf16 activations and scales (probed once)."""
    if not hasattr(torch, "_weight_int8pack_mm"):
        return False
    try:
        w = torch.arange(64 * 32, dtype=torch.float32).reshape(64, 32).sin()
        head = Int8Head(w)
        out = head(torch.ones(2, 32))
    except RuntimeError:
        return False
    return out.shape == (2, 64) and bool(torch.isfinite(out).all())
