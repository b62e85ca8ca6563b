"""A causal LM seen as the two passes block diffusion needs.

- ``encode``: a causal pass that *writes* the KV cache (prompt prefill, block commit, verify, AR step).
- ``denoise``: a canvas pass that *reads* the cache and leaves it as it was (the canvas is appended, then cropped
  away; the prefix entries are never rewritten). Attention inside the canvas is bidirectional for
  diffusion-trained weights, causal for plain AR checkpoints.

Logits are computed only at the rows asked for (the output head is the biggest matmul of a small model).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import DynamicCache

from ..models.loader import LoadedModel


class Backbone:
    def __init__(self, lm: LoadedModel) -> None:
        self.lm = lm
        self.model = lm.model
        self.body = getattr(lm.model, lm.model.base_model_prefix)
        self.head = lm.model.get_output_embeddings()
        self.device = next(lm.model.parameters()).device
        self.shift = True  # position i is predicted from the output at i-1 (AR head; Dream/Fast-dLLM v2)

    def new_cache(self) -> DynamicCache:
        return DynamicCache(config=self.model.config)

    @torch.inference_mode()
    def _run(self, ids: Sequence[int], cache: DynamicCache, mask: torch.Tensor | None) -> torch.Tensor:
        x = torch.tensor([list(ids)], dtype=torch.long, device=self.device)  # [1, T]
        out = self.body(input_ids=x, cache=cache, attention_mask=mask, use_cache=True)
        return out.last_hidden_state[0]  # [T, H]

    def _logits(self, hidden: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
        if not len(rows):
            return hidden.new_zeros((0, self.head.out_features))
        with torch.inference_mode():
            return self.head(hidden[list(rows)]).float()  # [k, V]

    def encode(self, ids: Sequence[int], cache: DynamicCache, rows: Sequence[int] = (-1,)) -> torch.Tensor:
        """Causal pass over ``ids`` appended to the cache; logits at ``rows`` (indices into ``ids``)."""
        assert len(ids) > 0
        hidden = self._run(ids, cache, None)
        return self._logits(hidden, rows)

    def denoise(
        self, ids: Sequence[int], cache: DynamicCache, rows: Sequence[int], bidirectional: bool
    ) -> torch.Tensor:
        """Canvas pass: reads the cache, leaves it unchanged; logits at ``rows``."""
        past = cache.get_seq_length()
        mask = None
        if bidirectional:
            t = len(ids)
            mask = torch.ones((1, 1, t, past + t), dtype=torch.bool, device=self.device)  # [B, 1, Q, K]
        hidden = self._run(ids, cache, mask)
        self.crop(cache, past)
        return self._logits(hidden, rows)

    @staticmethod
    def crop(cache: DynamicCache, length: int) -> None:
        """Keep the first ``length`` cached positions."""
        extra = cache.get_seq_length() - length
        assert extra >= 0
        if extra:
            cache.crop(-extra)
