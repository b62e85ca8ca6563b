"""Self-speculative drafts: the block-diffusion adapter (LoRA on) drafts a block, the base weights verify it.

``Decoder.verify`` with a :class:`Drafter` keeps its accept rule (the longest prefix greedy AR, under the
constraint, agrees with, plus the corrected token), so the output equals ar-constrained greedy by construction;
only where the drafts come from changes. A draft is a short canvas denoised by the adapter with the absorbing-mask
sampler for ``steps`` passes (the first position is the base model's exact pick, pinned template text is placed by
the walk), then cut at the first EOS or open position.

The drafter keeps its own KV cache (adapter weights), one block behind the verifier: the tokens accepted since the
last draft are fed *causally* in the same forward as the first canvas pass (prefix causal, canvas bidirectional
over it: the training layout of ``training/recipe.py``), so staying in sync costs no extra forward. The first
draft of a request therefore carries the prompt: one prompt-length draft pass, counted as a draft forward.

An adapter trained with the LoRA over the noisy block only (``AdapterConfig.prefix == "base"``) reads the
verifier's own cache instead: the prefix keys/values are the base model's by construction, so there is no second
cache, no sync and no prompt pass; a draft costs only its canvas passes (:class:`SplitBackbone` is the same idea
for diffusion mode: commits with the base weights, canvas passes with the adapter's).

The draft length adapts: it doubles (up to ``canvas_length``) after a block whose drafts were all accepted, and
falls back to what was accepted plus a margin after a rejection.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from .backbone import Backbone
from .sizing import DEFAULT_CURVE

if TYPE_CHECKING:  # decode imports this module's users, not the other way round
    from .decode import Decoder

MIN_DRAFT = 4  # shortest draft canvas after a rejection


class SyncBackbone:
    """The adapter backbone with a queue of ``pending`` tokens (accepted by the verifier, not yet in this cache):
    the next ``denoise`` (or ``encode``) runs them causally in front of its tokens and keeps their keys/values. A
    :class:`~agentkit.engine.faces.BackboneLike` over a torch backbone (:class:`~agentkit.engine.faces.HiddenPasses`)
    or a :class:`SplitBackbone`; its passes run alone."""

    def __init__(self, bb: Backbone | SplitBackbone) -> None:
        self.bb, self.shift, self.cost_curve = bb, bb.shift, bb.cost_curve
        self.pending: list[int] = []
        self.extra_forwards = 0  # SplitBackbone: pending tokens need their own (base-weights) pass

    def new_cache(self, room: int = 0):
        return self.bb.new_cache(room)

    def crop(self, cache, length: int) -> None:
        self.bb.crop(cache, length)

    def batchable(self, cache=None) -> bool:
        return False

    def encode(self, ids, cache, rows=(-1,)) -> torch.Tensor:
        """The pending tokens, then ``ids``, causally into the cache; logits at ``rows`` of ``ids``."""
        pend, self.pending = self.pending, []
        return self.bb.encode(pend + list(ids), cache, [len(pend) + r if r >= 0 else r for r in rows])

    def denoise(self, ids, cache, rows, bidirectional: bool) -> torch.Tensor:
        if not self.pending:
            return self.bb.denoise(ids, cache, rows, bidirectional)
        pend, self.pending = self.pending, []
        if isinstance(self.bb, SplitBackbone):  # base-encoded prefix (verifier on another backend): two passes
            self.bb.encode(pend, cache, rows=[])
            self.extra_forwards += 1
            return self.bb.denoise(ids, cache, rows, bidirectional)
        past, n, t = cache.get_seq_length(), len(pend), len(ids)
        dev = self.bb.device
        mask = torch.zeros((1, 1, n + t, past + n + t), dtype=torch.bool, device=dev)  # [B, 1, Q, K]
        mask[0, 0, :, :past] = True
        mask[0, 0, :n, past:past + n] = torch.ones(n, n, dtype=torch.bool, device=dev).tril()  # prefix: causal
        mask[0, 0, n:, past:past + n] = True  # the canvas sees every pending token
        inner = torch.ones(t, t, dtype=torch.bool, device=dev)
        mask[0, 0, n:, past + n:] = inner if bidirectional else inner.tril()
        hidden = self.bb.hidden_states(pend + list(ids), cache, self.bb.attention_mask(mask))
        self.bb.crop(cache, past + n)  # keep the pending tokens' keys/values, drop the canvas
        return self.bb.head_logits(hidden, [n + r for r in rows])


class SplitBackbone:
    """Encode (prefill, commits) with the base weights, denoise (canvas passes) with the adapter's: for adapters
    trained with ``prefix == "base"``, whose canvas attends to a base-encoded prefix. A
    :class:`~agentkit.engine.faces.BackboneLike` holding both; its passes run alone, sized by the default cost
    curve (its passes run on two sets of weights, no one measured curve)."""

    cost_curve = DEFAULT_CURVE

    def __init__(self, base: Backbone, adapted: Backbone) -> None:
        self.base, self.adapted = base, adapted
        self.shift, self.device, self.model = base.shift, base.device, base.model

    def new_cache(self, room: int = 0):
        return self.base.new_cache(room)

    def crop(self, cache, length: int) -> None:
        self.base.crop(cache, length)

    def encode(self, ids, cache, rows=(-1,)) -> torch.Tensor:
        return self.base.encode(ids, cache, rows)

    def denoise(self, ids, cache, rows, bidirectional: bool) -> torch.Tensor:
        return self.adapted.denoise(ids, cache, rows, bidirectional)

    def batchable(self, cache=None) -> bool:
        return False


class Drafter:
    """Drafts blocks for ``Decoder.verify`` with the adapted weights ``bb`` (``mask_id``: the absorbing mask).
    ``shared``: the adapter reads the verifier's cache (``AdapterConfig.prefix == "base"``); else it keeps its own."""

    def __init__(self, bb: Backbone | SplitBackbone, mask_id: int, steps: int, shared: bool = False) -> None:
        assert steps >= 1
        self.sync = SyncBackbone(bb)
        self.shared = shared
        self.mask_id, self.steps = mask_id, steps
        self.sub: Decoder | None = None
        self.synced = 0  # prompt + output tokens already in the drafter's cache

    def first_length(self, dec: Decoder) -> int:
        return min(dec.cfg.canvas_length, 2 * MIN_DRAFT)

    @staticmethod
    def next_length(n: int, kept: int, drafted: int, cap: int) -> int:
        """All drafts accepted: twice as long; a rejection: what was kept plus a margin."""
        return min(cap, 2 * n if kept >= drafted else max(MIN_DRAFT, kept + 2))

    def _bind(self, dec: Decoder) -> Decoder:
        from .decode import Decoder

        if self.sub is None:
            cfg = replace(dec.cfg, mode="diffusion", sampler="mask")
            self.sub = Decoder(self.sync, cfg, dec.c, dec.eos, mask_token_id=self.mask_id, bidirectional=True,
                               sampler="mask")
        sub = self.sub
        sub.state, sub.out, sub.prompt, sub.logits = dec.state, dec.out, dec.prompt, dec.logits
        sub.copy_prior = dec.copy_prior  # the verifier's copy prior (built at its prefill): position 0 is its exact pick
        sub.noise = dec.noise  # the verifier's sampling noise: position 0 is its exact sample, the rest drafted alike
        sub.stats = dec.stats  # constraint time is the request's
        if self.shared:
            sub.cache = dec.cache  # read only: a canvas pass crops what it appended
            return sub
        ctx = dec.prompt + dec.out
        self.sync.pending = ctx[self.synced:]
        self.synced = len(ctx)
        return sub

    def block(self, dec: Decoder, n: int) -> list[int]:
        """A draft of up to ``n`` tokens continuing ``dec``: position 0 is ``dec``'s exact pick (greedy or sampled)."""
        from .decode import Block

        sub = self._bind(dec)
        block = Block(max(1, n))
        pred: dict[int, torch.Tensor] = {0: dec.logits}
        fed: list[int] | None = None
        for _ in range(self.steps if n > 1 else 0):
            sub.layout(block, pred, fed)
            open_pos = [j for j in range(1, block.length) if not block.frozen[j] and not block.pinned[j]]
            if not open_pos:
                break
            fed = [t if t is not None else self.mask_id for t in block.tok[: block.length]]
            rows = [j - 1 for j in open_pos] if self.sync.shift else open_pos
            t0 = time.perf_counter()
            logits = self.sync.denoise(fed, sub.cache, rows, True)
            dec.stats.denoise_ms += 1000 * (time.perf_counter() - t0)
            extra, self.sync.extra_forwards = self.sync.extra_forwards, 0
            dec.stats.decoder_forwards += 1 + extra
            dec.stats.draft_forwards += 1 + extra
            pred = {0: dec.logits, **{j: logits[i] for i, j in enumerate(open_pos)}}
        sub.layout(block, pred, fed)  # the final walk fills every open position from the latest predictions
        out: list[int] = []
        for t in block.tok[: block.length]:
            if t is None:
                break
            out.append(int(t))
            if t in dec.eos:
                break
        if self.sync.pending:  # no canvas pass ran (a one-token draft): the tokens wait for the next one
            self.synced -= len(self.sync.pending)
            self.sync.pending = []
        return out
