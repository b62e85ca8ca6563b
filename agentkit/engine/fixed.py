"""Fixed-shape passes: a position's logits do not depend on how its tokens were grouped into passes.

On a CPU in bfloat16 a row's result depends on the shape of the pass that computed it: the matmul kernels block
and round by the number of rows, attention by the number of keys. So a verify block and AR's one-token steps
compute the same position slightly differently, near ties resolve differently, and verify parts from AR (38 of 40
BFCL questions identical with the dynamic passes of :class:`~agentkit.engine.backbone.Backbone`).

Here every pass after the prompt is exactly ``width`` positions (the tokens, then padding), and its attention
reads the cached positions rounded up to a multiple of :data:`ROUND` = 512 (from preallocated buffers,
``FixedCache.capacity``: the prompt, the request's room and one pass), each row masked to the positions it may see.
512 is torch's CPU flash-attention key block: a key count below it is one block of that size, whose matmuls round
differently (rows computed over 320 keys and over 384 differ in their last bits, measured on the default model),
while whole blocks of masked keys past a row add exact zeros. A longer run of tokens is cut into ``width``-position
passes. Every position is then computed by the same kernels on the same numbers whatever the mode, so verify and
the causal canvas equal AR bit for bit in every dtype (``tests/engine/test_fixed.py``); the output head is
row-independent (``refined_logits``) and runs over all ``width`` rows.

The prompt is one plain causal pass as long as itself (the same in every mode), copied into the buffers. A
bidirectional canvas (the adapter's) is one pass of its own length padded to a multiple of ``width``: a diffusion
draft is a different distribution anyway.

Cost (``evals/bench_fixed.py``): a ``width``-8 pass costs about a 1-token dynamic pass in bf16 on this CPU, but a
pinned run longer than ``width`` takes several passes, and a short context's attention reads 512 keys. Continuous
batching does not take these caches (``batchable`` is False): a request on this backbone runs its passes alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import DynamicCache
from transformers.cache_utils import Cache, StaticLayer

from ..models.loader import LoadedModel
from .backbone import Backbone

ROUND = 512  # attention reads the cached positions rounded up to a multiple of this (torch's CPU flash-attention
# key block); capacities are rounded too


class _Layer(StaticLayer):
    """transformers' static layer (writes at ``cumulative_length``, which the backbone sets before each pass) that
    hands attention only its first ``visible`` positions: a pass reads what it may see rounded up to ``ROUND``,
    not the whole capacity (whole masked key blocks change no bits; see the module docstring)."""

    visible = 0

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        keys, values = super().update(key_states, value_states, *args, **kwargs)
        return keys[:, :, : self.visible], values[:, :, : self.visible]


def _round_up(n: int, to: int = ROUND) -> int:
    return -(-n // to) * to


class FixedCache:
    """One request's keys/values in buffers of ``capacity`` positions, ``length`` of them valid. Allocated at the
    first pass (the prompt), sized by its length plus ``room`` (new tokens the request may add) plus one pass."""

    __slots__ = ("capacity", "hf", "length", "room")

    def __init__(self, room: int) -> None:
        self.room, self.length, self.capacity = room, 0, 0
        self.hf: Cache | None = None

    def get_seq_length(self) -> int:
        return self.length


class FixedShapeBackbone(Backbone):
    """:class:`Backbone` whose passes have one shape (see the module docstring); ``width`` positions a pass."""

    piecewise_prompts = False  # its prompt is one pass, into buffers of its own

    def __init__(self, lm: LoadedModel, width: int = 8) -> None:
        super().__init__(lm, row_exact=False)  # its own exactness: one shape for every pass
        if width < 1:
            raise ValueError(f"pass width must be >= 1, got {width}")
        self.width = width
        # every pass costs the same up to ``width`` positions; a longer run is several passes (sizes verify blocks
        # and causal canvases: they fill a pass, and stop there)
        one = self.cost_curve[min(self.cost_curve)]
        self.cost_curve = {n: one * -(-n // width) for n in sorted({*range(1, width + 1), 2 * width, 4 * width})}

    def new_cache(self, room: int = 0) -> FixedCache:
        return FixedCache(room)

    def batchable(self, cache=None) -> bool:
        return False

    @staticmethod
    def crop(cache: FixedCache, length: int) -> None:
        """Keep the first ``length`` cached positions (the buffers stay; positions past ``length`` are masked)."""
        assert 0 <= length <= cache.length
        cache.length = length

    def encode(self, ids: Sequence[int], cache: FixedCache, rows: Sequence[int] = (-1,)) -> torch.Tensor:
        """Causal pass(es) over ``ids`` appended to the cache; logits at ``rows`` (indices into ``ids``)."""
        assert len(ids) > 0
        return self._passes(list(ids), cache, rows, bidirectional=False)

    def denoise(self, ids: Sequence[int], cache: FixedCache, rows: Sequence[int], bidirectional: bool) -> torch.Tensor:
        """Canvas pass(es): as ``encode``, then the cache is cut back to where it was."""
        past = cache.length
        out = self._passes(list(ids), cache, rows, bidirectional)
        cache.length = past
        return out

    # -- passes -------------------------------------------------------------------------------------------------
    def _passes(self, ids: list[int], cache: FixedCache, rows: Sequence[int], bidirectional: bool) -> torch.Tensor:
        n, w = len(ids), self.width
        want = [r + n if r < 0 else r for r in rows]
        assert all(0 <= r < n for r in want), "row index out of range"
        if cache.hf is None:  # the prompt: one pass of its own length, the same in every mode
            return self.head_logits(self._prefill(ids, cache), want)
        if bidirectional:  # the canvas attends to all of itself: one pass
            spans = [(0, n, _round_up(n, w))]
        else:
            spans = [(s, min(s + w, n), w) for s in range(0, n, w)]
        logits: dict[int, torch.Tensor] = {}
        for start, end, width in spans:
            hidden = self._pass(ids[start:end], cache, width, bidirectional)
            mine = [r for r in want if start <= r < end]
            if mine:
                with torch.inference_mode():
                    out = self._head(hidden)  # all rows: the head's shape does not depend on the rows asked
                for r in mine:
                    logits[r] = out[r - start]
        if not want:
            return torch.zeros((0, self.head.out_features))
        return torch.stack([logits[r] for r in want])

    @torch.inference_mode()
    def _pass(self, ids: list[int], cache: FixedCache, width: int, bidirectional: bool) -> torch.Tensor:
        """One pass of ``width`` positions (``ids`` then padding) from ``cache.length`` on; the real tokens' keys
        and values stay (``cache.length`` advances by ``len(ids)``). Returns the hidden states ``[width, H]``."""
        n, start, dev = len(ids), cache.length, self.device
        if start + width > cache.capacity:  # a request past its room (a caller that gave none): a larger buffer;
            self._reallocate(cache, start + width, cache.hf.layers)  # attention reads by position: no result changes
        pos = torch.arange(start, start + width, device=dev)
        visible = min(cache.capacity, _round_up(start + width))
        keys = torch.arange(visible, device=dev)
        mask = keys[None, :] <= pos[:, None]  # causal over everything cached and this pass  [width, visible]
        if bidirectional:
            mask[:n, : start + n] = True
        mask = self.attention_mask(mask[None, None])
        for layer in cache.hf.layers:  # transformers' static layers write at their own running length
            layer.visible = visible
            if layer.is_initialized:
                layer.cumulative_length.fill_(start)
        x = torch.tensor([ids + [ids[-1]] * (width - n)], dtype=torch.long, device=dev)
        hidden = self.body(input_ids=x, cache=cache.hf, attention_mask=mask, position_ids=pos[None],
                           cache_position=pos, use_cache=True).last_hidden_state[0]
        cache.length = start + n
        return hidden

    @torch.inference_mode()
    def _prefill(self, ids: list[int], cache: FixedCache) -> torch.Tensor:
        """The prompt: a plain causal pass (transformers' own causal attention, which skips the masked half) into a
        growing cache, whose keys/values are then copied into the request's buffers. It is the same pass in every
        mode, so how it is computed does not matter for exactness; only the passes after it must share a shape."""
        scratch = DynamicCache(config=self.model.config)
        hidden = self.hidden_states(ids, scratch, None)
        self._reallocate(cache, len(ids), scratch.layers)
        cache.length = len(ids)
        return hidden

    def _reallocate(self, cache: FixedCache, need: int, layers) -> None:
        """New buffers for ``need`` positions plus the request's room and one pass, holding ``layers``' keys/values."""
        cache.capacity = _round_up(need + cache.room + self.width)
        cache.hf = Cache(layers=[_Layer(max_cache_len=cache.capacity) for _ in layers])
        for src, dst in zip(layers, cache.hf.layers):
            if src.is_initialized:
                dst.lazy_initialization(src.keys, src.values)
                dst.keys[:, :, : src.keys.shape[2]] = src.keys
                dst.values[:, :, : src.values.shape[2]] = src.values
