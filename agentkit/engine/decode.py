"""The decode loops: AR, block diffusion (canvas) and verify, with or without a template constraint.

Read top to bottom: ``prefill`` -> one of ``ar`` / ``diffusion`` / ``verify``. Each loop keeps one invariant:
``self.logits`` are the logits that predict the next output position, given everything in the KV cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..config import DecodeConfig
from ..constrain.runtime import TokenConstraint
from ..constrain.vocab import TokenVocab
from ..errors import InvalidRequestError
from .copy import CopyPrior
from .draft import PromptSpelling, lookup
from .faces import BackboneLike
from .gemma import denoise_uniform
from .prefix import Chunking, FeatureSource, cached_prompt_pass
from .sampler import PositionNoise, add_bias, bias_rows, greedy_by_byte, masked_logits, penalize, pick
from .sizing import DRAFT, EXACT, PINNED, AcceptRate, interpolate, keep_chance, pass_length
from .stats import DecodeStats

log = logging.getLogger(__name__)
# verify's number drafts (Decoder._copy_draft); False: prompt lookup's only, for measurement (evals/drafter_verify.py
# --number-drafts both)
NUMBER_DRAFTS = True
# verify's string drafts: the rest of a phrase the copy source writes, inside a string value (Decoder._copy_draft);
# False: prompt lookup's only, for measurement
STRING_DRAFTS = True
# verify's free-text drafts: the rest of a source value a reply has begun copying (Decoder._copy_draft); False: off
TEXT_DRAFTS = True
# accepted, proposed: where a request's copy-draft accept rate begins (0.8 at 5 drafts' weight). Copy drafts were kept
# 0.97 of the time in replies and 0.84 in tool calls (40 dev agent-loop tasks and 60 BFCL questions; lookup's: 0.71);
# at Beta(1, 1) a request's first copy was cut to two or three tokens
COPY_PRIOR = (4.0, 5.0)

DRAFT_CANDIDATES = 8  # a block drafter's best tokens at a position that verify tries against the template
DRAFTER_TRIAL = 4  # block-drafter passes a request runs before it asks whether the drafter pays (Decoder._drafter_pays)


@dataclass
class Block:
    """One canvas: drafts, which of them are final (frozen) and which were placed by the template (pinned)."""

    n: int
    tok: list[int | None] = field(default_factory=list)
    frozen: list[bool] = field(default_factory=list)
    pinned: list[bool] = field(default_factory=list)
    conf: list[float] = field(default_factory=list)
    ent: list[float] = field(default_factory=list)
    end: int | None = None  # output ends before this position (EOS / template complete)

    def __post_init__(self) -> None:
        self.tok = [None] * self.n
        self.frozen = [False] * self.n
        self.pinned = [False] * self.n
        self.conf = [0.0] * self.n
        self.ent = [0.0] * self.n

    @property
    def length(self) -> int:
        return self.n if self.end is None else self.end

    def done(self) -> bool:
        return all(self.frozen[: self.length])


class Decoder:
    """Decodes one request. ``constraint`` None means free text ending at EOS."""

    def __init__(self, bb: BackboneLike, cfg: DecodeConfig, constraint: TokenConstraint | None, eos_ids, *,
                 mask_token_id: int | None = None, bidirectional: bool = False, sampler: str = "jacobi",
                 on_draft=None, on_tokens=None, drafter=None, block_drafter=None, should_stop=None, prefix=None,
                 copy_text: str | None = None, prompt_chunk: int | Chunking = 0,
                 vocab: TokenVocab | None = None, features: FeatureSource | None = None) -> None:
        self.bb, self.cfg, self.c = bb, cfg, constraint
        self.should_stop = should_stop  # checked before each forward: True stops decoding there (timeout, cancel)
        self.halted = False
        self.drafter = drafter  # verify: a selfspec.Drafter (adapter drafts); None: prompt-lookup drafts
        # verify: a drafter.BlockDraftSource (a trained block drafter drafts each block's slots in one pass)
        self.block_drafter = block_drafter
        self.prefix = prefix  # a prefix.PrefixCache: the prompt's longest run of held blocks is copied, not encoded
        # the base's features of the prompt pass, kept with the prefix cache's pieces (prefix.FeatureSource): the
        # block drafter's source, or a recorder for an undrafted request once the engine has a drafter
        self.features = features if features is not None else block_drafter
        # the prompt pass in pieces cut at multiples of this many positions and at chat messages (a prefix.Chunking;
        # 0: one pass); with a prefix cache its cuts are the cache's, so reused and encoded pieces are the same bits
        self.prompt_chunk = prompt_chunk
        self.eos = set(eos_ids)
        self.mask_id, self.bidirectional, self.sampler = mask_token_id, bidirectional, sampler
        self.on_draft = on_draft
        self.on_tokens = on_tokens  # called with each run of tokens committed to the output (streaming)
        self.cache = bb.new_cache(room=cfg.max_new_tokens + cfg.canvas_length)
        self.stats = DecodeStats(mode=cfg.mode)
        self.gen = torch.Generator().manual_seed(cfg.seed) if cfg.seed is not None else None
        # left-to-right modes sample by position (so verify keeps AR's samples); a diffusion canvas from ``gen``
        self.noise = PositionNoise(cfg.seed) if cfg.temperature > 0 and cfg.mode != "diffusion" else None
        self.out: list[int] = []
        self.state = constraint.start() if constraint else None
        self.finished = False
        self.logits: torch.Tensor | None = None  # [V]
        self.drafts: list[list[int]] = []
        self.prompt: list[int] = []
        self.accept = AcceptRate()  # drafted positions accepted so far (sizes verify blocks and canvas passes)
        self.drafter_kept = 0  # block-drafter drafts kept so far
        # copy drafts (Decoder._copy_draft) kept so far: their own rate, from COPY_PRIOR (they hold far more often
        # than lookup's); the block being built: how many of its list drafts ahead are copies, and which are
        self.copy_accept = AcceptRate(*COPY_PRIOR)
        self._pending_copies, self._copied = 0, []
        self._drafter_pass_ms = 0.0  # the block drafter's last pass (after its first, which fuses the prompt)
        self._open_before: list[int] = []  # causal canvas: open positions fed to the last pass
        self.copy_text = copy_text  # the copy prior's source text; None: the prompt (free text: no prior)
        self.vocab = vocab  # the model's tokens, for a free-text copy prior and its drafts (a template has its own)
        # DecodeConfig.copy_bias: its source indexed once, at prefill; a drafter's decoder shares its verifier's
        self.copy_prior: CopyPrior | None = None
        self._spelling: PromptSpelling | None = None  # copy drafts spelled as the prompt spells them (built once)
        self._bias: tuple[torch.Tensor, torch.Tensor] | None = None  # DecodeConfig.logit_bias, set at prefill

    # -- the decoder's hooks (faces.DecoderHooks): the template's constraint at a state, the canvas walk
    # (``layout``) and ``finish_reason``, for the loops outside this module (DiffusionGemma's canvas, the drafter)
    # and the engine ---------------------------------------------------------------------------------------
    def forced_tokens(self, state) -> list[int]:
        return self.c.forced(state) if self.c is not None and state is not None else []

    def allowed_tokens(self, state) -> torch.Tensor | None:
        if self.c is None:
            return None
        t0 = time.perf_counter()
        m = self.c.allowed(state)
        self.stats.constraint_ms += 1000 * (time.perf_counter() - t0)
        return m

    def advance(self, state, tok: int):
        return self.c.advance(state, tok) if self.c is not None else None

    def is_complete(self, state) -> bool:
        return self.c is not None and state is not None and self.c.is_done(state)

    def _fits(self, state, tok: int, budget: int) -> bool:
        """``tok`` is allowed at ``state`` and leaves the template a way to finish within ``budget`` tokens."""
        return self.c is None or bool(self.allowed_tokens(state)[tok]) and self.c.fits(state, tok, budget)

    def _pick(self, logits: torch.Tensor, state, budget: int | None = None,
              tail: Sequence[int] = ()) -> tuple[int, float, float]:
        """Sample under the constraint; ``budget`` (tokens left, this one included) makes the template close in
        time: a token that would leave no completion within it is redrawn from the closing tokens. ``tail``: the
        tokens between the output so far and this pick (a block's earlier positions), for the copy prior."""
        allowed = self.allowed_tokens(state)
        if self._bias is not None:
            logits = add_bias(logits, self._bias)
        if self.cfg.frequency_penalty or self.cfg.presence_penalty:
            logits = penalize(logits, [*self.out, *map(int, tail)], self.cfg.frequency_penalty,
                              self.cfg.presence_penalty)
        if self.copy_prior is not None:
            logits = self._copy_bias(logits, allowed, tail)
        noise = None if self.noise is None else self.noise.at(len(self.out) + len(tail), logits.shape[-1])
        t, conf, ent = pick(logits[None], None if allowed is None else allowed[None], self.cfg.temperature,
                            self.cfg.top_k, self.gen, self.cfg.top_p, noise)
        if allowed is not None and self.cfg.temperature == 0 and self.cfg.greedy == "byte":
            t0 = time.perf_counter()
            best = greedy_by_byte(logits, allowed, self.c.vocab.first_bytes, self.c.vocab.token_bytes)
            self.stats.constraint_ms += 1000 * (time.perf_counter() - t0)
            if best != int(t[0]):  # its share of the allowed mass, as pick reports the argmax's
                t[0], conf[0] = best, torch.softmax(masked_logits(logits, allowed).float(), -1)[best]
        if allowed is not None and budget is not None and not self.c.fits(state, int(t[0]), budget):
            t0 = time.perf_counter()
            closing = self.c.closing(state, budget)
            self.stats.constraint_ms += 1000 * (time.perf_counter() - t0)
            t, conf, ent = pick(logits[None], closing[None], self.cfg.temperature, self.cfg.top_k, self.gen,
                                self.cfg.top_p, noise)
        return int(t[0]), float(conf[0]), float(ent[0])

    def _copy_bias(self, logits: torch.Tensor, allowed: torch.Tensor | None, tail: Sequence[int]) -> torch.Tensor:
        """The copy prior on ``logits``: inside a template's JSON values (``allowed``: its mask), or over a free
        text (``allowed`` None)."""
        t0 = time.perf_counter()
        out = self._out_bytes(tail)
        if allowed is None:
            biased = self.copy_prior.bias_text(logits, out, self.cfg.copy_text_bias)
        else:
            biased = self.copy_prior.bias(logits, allowed, out, self.cfg.copy_bias, numbers=self.cfg.copy_numbers,
                                          first_digit=self.cfg.copy_first_digit)
        self.stats.constraint_ms += 1000 * (time.perf_counter() - t0)
        return biased

    def _out_bytes(self, tail: Sequence[int]) -> bytes:
        """The bytes of the output so far and ``tail`` after it (special tokens: none), as the copy prior reads them."""
        tb = self.copy_prior.token_bytes
        return b"".join(tb[int(t)] or b"" for t in (*self.out, *tail) if int(t) < len(tb))

    def _emit(self, toks: list[int], pinned: int = 0) -> None:
        self.out.extend(toks)
        self.stats.pinned_tokens += pinned
        self.stats.slot_tokens += len(toks) - pinned
        if toks and self.on_tokens is not None:
            self.on_tokens(list(toks))

    def _halt(self) -> bool:
        """Whether the caller asked to stop (checked before each forward); the output so far stays."""
        if not self.halted and self.should_stop is not None and self.should_stop():
            self.halted = self.finished = True
        return self.halted

    @property
    def budget(self) -> int:
        return self.cfg.max_new_tokens - len(self.out)

    # -- passes ---------------------------------------------------------------------------------------------
    def prefill(self, prompt_ids: list[int]) -> None:
        t0 = time.perf_counter()
        if self.c is not None and self.c.min_tokens(self.state) > self.cfg.max_new_tokens:
            raise InvalidRequestError(
                f"max_new_tokens={self.cfg.max_new_tokens} cannot hold this template: its shortest completion "
                f"takes about {self.c.min_tokens(self.state):g} tokens")
        forced = self.forced_tokens(self.state)[: self.budget]  # pinned text before the first slot goes straight in
        for t in forced:
            self.state = self.advance(self.state, t)
        self._emit(forced, pinned=len(forced))
        seq = prompt_ids + forced
        logits, reused = cached_prompt_pass(self.bb, self.cache, seq, self.prefix, self.prompt_chunk, self.features,
                                            stop=self._halt)  # a stop asked for mid-prompt ends it at a piece
        self.stats.prompt_tokens = len(prompt_ids)
        self.stats.cached_prompt_tokens = reused
        if logits is None:  # halted: the output stays empty
            self.stats.prefill_ms += 1000 * (time.perf_counter() - t0)
            return
        self.logits = logits
        self._bias = bias_rows(self.cfg.logit_bias, self.logits.shape[-1])  # the vocabulary's size is the logits'
        self.prompt = list(prompt_ids)
        if self.c is not None and self.cfg.copy_bias:
            tb = self.c.vocab.token_bytes
            self.copy_prior = (CopyPrior.from_tokens(self.prompt, tb) if self.copy_text is None
                               else CopyPrior(self.copy_text.encode(), tb))
        elif self.cfg.copy_text_bias and self.copy_text and self.vocab is not None:  # free text: a source
            self.copy_prior = CopyPrior(self.copy_text.encode(), self.vocab.token_bytes, fold_case=False)
        self.stats.encoder_forwards += 1
        self.stats.prefill_ms += 1000 * (time.perf_counter() - t0)
        if self.is_complete(self.state) or self.budget <= 0:
            self.finished = True

    def _commit(self, toks: list[int], rows=(-1,)) -> torch.Tensor:
        t0 = time.perf_counter()
        logits = self.bb.encode(toks, self.cache, rows=rows)
        self.stats.encoder_forwards += 1
        self.stats.commit_ms += 1000 * (time.perf_counter() - t0)
        return logits

    # -- AR ---------------------------------------------------------------------------------------------------
    def ar(self) -> None:
        """Left to right; pinned runs after a sampled token are fed in the same forward (jump-forward)."""
        while not self.finished and not self._halt():
            t, _, _ = self._pick(self.logits, self.state, self.budget)
            if t in self.eos:
                self.finished = True
                break
            self.state = self.advance(self.state, t)
            self._emit([t])
            forced = self.forced_tokens(self.state)[: self.budget]
            for f in forced:
                self.state = self.advance(self.state, f)
            self._emit(forced, pinned=len(forced))
            if self.is_complete(self.state) or self.budget <= 0:
                self.finished = True
                break
            t0 = time.perf_counter()
            self.logits = self.bb.encode([t] + forced, self.cache)[0]
            self.stats.encoder_forwards += 1
            self.stats.denoise_ms += 1000 * (time.perf_counter() - t0)
        self.stats.finish_reason = self.finish_reason()

    # -- block diffusion ----------------------------------------------------------------------------------------
    def diffusion(self) -> None:
        """Blocks of ``canvas_length``: denoise against the cached prefix until every position is final, commit."""
        while not self.finished and not self._halt():
            block = Block(self._canvas_length())
            steps = denoise_uniform(self, block) if self.sampler == "uniform" else self._denoise_block(block)
            toks = [int(t) for t in block.tok[: block.length]]
            eos_at = next((j for j, t in enumerate(toks) if t in self.eos), None)
            if eos_at is not None:  # a final EOS ends the output (the sampler may have frozen it after the walk)
                toks, block.end = toks[:eos_at], eos_at
            self._emit(toks, pinned=sum(block.pinned[: block.length]))
            for t in toks:
                self.state = self.advance(self.state, t)
            self.stats.blocks += 1
            self.stats.steps_per_block.append(steps)
            if block.end is not None or self.budget <= 0 or self.is_complete(self.state):
                self.finished = True  # nothing follows: no commit pass needed
                break
            self.logits = self._commit(toks)[0]
        self.stats.finish_reason = self.finish_reason()

    def _denoise_block(self, block: Block) -> int:
        pred: dict[int, torch.Tensor] = {0: self.logits}  # position -> logits predicting it
        fed: list[int] | None = None  # canvas tokens of the last denoiser pass
        steps = 0
        while True:
            changed = self.layout(block, pred, fed)
            self._count_canvas(block, fed)
            if block.done():
                return steps
            stable = fed is not None and not changed
            if steps >= self.cfg.max_denoising_steps or (stable and self._confident(block)):
                for j in range(block.length):  # adaptive stop: the canvas is final as it stands
                    block.frozen[j] = block.tok[j] is not None
                self.layout(block, pred, fed)  # re-derive where it ends (a draft EOS is final now)
                if block.done():
                    return steps
            if self._halt():  # stopped: keep the final prefix of the canvas, drop the rest
                block.end = next((j for j in range(block.length) if not block.frozen[j]), block.length)
                return steps
            # denoise: one pass over the canvas, logits only where a position is still open
            fed = [t if t is not None else self._filler(block, j) for j, t in enumerate(block.tok[: block.length])]
            self._open_before = [j for j in range(len(fed)) if not block.frozen[j] and not block.pinned[j]]
            open_pos = [j for j in range(1, block.length) if not block.frozen[j] and not block.pinned[j]]
            rows = [j - 1 for j in open_pos] if self.bb.shift else open_pos
            t0 = time.perf_counter()
            logits = self.bb.denoise(fed, self.cache, rows, self.bidirectional)
            self.stats.denoise_ms += 1000 * (time.perf_counter() - t0)
            self.stats.decoder_forwards += 1
            steps += 1
            pred = {0: self.logits, **{j: logits[i] for i, j in enumerate(open_pos)}}
            if self.on_draft is not None:
                self.on_draft(list(fed), list(block.frozen[: block.length]))
            self.drafts.append(list(fed))

    def _filler(self, block: Block, j: int) -> int:
        """What an open position holds in the denoiser input: the mask token, or a prompt-lookup guess."""
        if self.mask_id is not None and self.sampler == "mask":
            return self.mask_id
        known = [t for t in block.tok[:j] if t is not None]
        guess = lookup(self.prompt + self.out + known, 1)
        return guess[0] if guess else (known[-1] if known else (self.out or self.prompt)[-1])

    def _confident(self, block: Block) -> bool:
        if self.sampler == "jacobi":
            return True  # a causal canvas unchanged by a full pass is the greedy fixed point
        open_ = [block.ent[j] for j in range(block.length) if not block.pinned[j]]
        return not open_ or sum(open_) / len(open_) < self.cfg.entropy_threshold

    def layout(self, block: Block, pred: dict[int, torch.Tensor], fed: list[int] | None) -> bool:
        """Walk the canvas left to right under the constraint: place pinned tokens, redraft open positions from
        ``pred`` (position -> the logits predicting it; ``fed``: the canvas of the last pass, None before the
        first), freeze what the sampler accepts. Returns whether any draft changed. A hook: the self-speculative
        drafter walks its drafts with it."""
        state, changed, prefix_frozen = self.state, False, True
        candidates: list[int] = []
        block.end = None  # re-derived on every walk: an earlier draft may have ended the output sooner
        for j in range(block.n):
            if self.is_complete(state):
                block.end = j
                break
            forced = self.forced_tokens(state)
            if forced:
                changed |= block.tok[j] != forced[0]
                block.tok[j], block.pinned[j], block.frozen[j] = forced[0], True, prefix_frozen
                state = self.advance(state, forced[0])
                continue
            block.pinned[j] = False
            if block.frozen[j] and self._fits(state, block.tok[j], self.budget - j):
                t = block.tok[j]
            elif j in pred:
                t, block.conf[j], block.ent[j] = self._pick(pred[j], state, self.budget - j, block.tok[:j])
                block.frozen[j] = False
                changed |= block.tok[j] != t
                block.tok[j] = t
                exact = prefix_frozen and (j == 0 or (fed is not None and fed[:j] == block.tok[:j]))
                if self.sampler == "jacobi" or not self.bidirectional:
                    block.frozen[j] = exact  # causal canvas: exact given a final prefix
                if not block.frozen[j]:
                    candidates.append(j)
            else:
                block.tok[j], block.frozen[j] = None, False
                for k in range(j + 1, block.n):
                    block.tok[k], block.frozen[k], block.pinned[k] = None, False, False
                break
            prefix_frozen = prefix_frozen and block.frozen[j]
            if t in self.eos:
                block.end = j if block.frozen[j] and prefix_frozen else None
                if block.end is not None:
                    block.tok[j] = t
                    break
            state = self.advance(state, t)
            if self.c is not None and state is None:  # a provisional draft earlier made this one invalid: reopen the rest
                for k in range(j + 1, block.n):
                    block.tok[k], block.frozen[k], block.pinned[k] = None, False, False
                break
        if self.sampler == "mask" and candidates:
            self._accept_confident(block, candidates)
        return changed

    def _accept_confident(self, block: Block, candidates: list[int]) -> None:
        """Absorbing-mask sampler: freeze drafts above the threshold, always at least the most confident."""
        best = max(candidates, key=lambda j: block.conf[j])
        for j in candidates:
            if block.conf[j] >= self.cfg.confidence_threshold or j == best:
                block.frozen[j] = True

    # -- verify ---------------------------------------------------------------------------------------------------
    def verify(self) -> None:
        """Draft a block, check it with one causal pass, keep the longest prefix greedy AR agrees with plus the
        corrected token. Output equals greedy AR exactly. A ladder: build the block, check it, commit what
        greedy agrees with."""
        drafts: list[int] = []  # the last check's stale continuations: drafts where prompt lookup finds none
        n_draft = self.drafter.first_length(self) if self.drafter is not None else 0
        while not self.finished and not self._halt():
            block, n_pinned, chances = self._verify_block(n_draft, drafts)
            if block[0] in self.eos:
                self.finished = True
                break
            if self.drafter is None:
                block = block[: self._verify_length(block, n_pinned, chances)]
            if self._settle(block):  # nothing left to check: the output is complete
                break
            logits, keep, state, pinned_kept = self._check_block(block, chances)
            drafts, eos_hit = self._keep_checked(block, logits, keep, state, pinned_kept)
            if self.drafter is not None:
                n_draft = self.drafter.next_length(n_draft, keep, len(block), self.cfg.canvas_length)
            self.stats.blocks += 1
            if eos_hit or self.is_complete(self.state) or self.budget <= 0:
                self.finished = True
        self.stats.finish_reason = self.finish_reason()

    def _settle(self, block: list[int]) -> bool:
        """Commit ``block`` without a pass where a check would decide nothing: its first token (exact) and pinned
        text after it complete the template. AR stops there without a forward too; the pass over the closing
        ``}}`` was one forward of every templated step. Returns whether the output was settled (and finished)."""
        if self.c is None:
            return False
        state = self.advance(self.state, block[0])
        for t in block[1:]:
            forced = self.forced_tokens(state)
            if not forced or forced[0] != t:
                return False
            state = self.advance(state, t)
        if not self.is_complete(state):
            return False
        pinned = len(block) - (0 if self.forced_tokens(self.state) else 1)
        self._emit(block, pinned=pinned)
        self.state = state
        self.stats.blocks += 1
        self.finished = True
        return True

    def _verify_block(self, n_draft: int, drafts: list[int]) -> tuple[list[int], int, list[float | None]]:
        """The block to check, how many of its tokens are pinned and each position's own chance of being kept (the
        block drafter's drafts have one, :func:`~agentkit.engine.sizing.keep_chance`; None elsewhere): the adapter
        drafter's canvas of ``n_draft``, or the exact first token, then pinned runs and drafts. Drafts come from
        prompt lookup; a block it has no guess for is drafted by the block drafter where there is one, else from
        ``drafts`` (the last check's stale continuations, consumed)."""
        self._pending_copies, self._copied = 0, []
        if self.drafter is not None:
            block = self.drafter.block(self, min(n_draft, self.budget))
            self._copied = [False] * len(block)
            return block, 0, [None] * len(block)
        block: list[int] = []
        chances: list[float | None] = []
        state, n_pinned, source = self.state, 0, None
        while len(block) < min(self.cfg.canvas_length, self.budget):
            forced, chance, copied = self.forced_tokens(state), None, False
            if forced:
                t = forced[0]
                n_pinned += 1
            elif not block:
                t, _, _ = self._pick(self.logits, state, self.budget)
            else:
                if source is None:  # the block's first draft: lookup's guess, else the drafter's or the stale ones
                    found = self._fresh_drafts(block, state)
                    drafts[:] = found or drafts
                    source = self._block_draft(block) if not found and self._drafter_pays() else drafts
                    if source is drafts and not drafts:
                        break  # nothing to draft (lookup was just asked: not again)
                t, chance, copied = self._next_draft(source, block, state)
                if t is None:
                    break
            block.append(t)
            chances.append(chance)
            self._copied.append(copied)
            if t in self.eos:
                break
            state = self.advance(state, t)
            if self.is_complete(state):
                break
        return block, n_pinned, chances

    def _next_draft(self, source: list[int] | torch.Tensor | None, block: list[int],
                    state) -> tuple[int | None, float | None, bool]:
        """The draft at the block's next position from ``source`` (drafter logits by row, or a list of draft tokens
        that this consumes and tops up by a copy draft or prompt lookup), its own chance of being kept (drafter
        drafts: their confidence; copy drafts: the request's copy accept rate) and whether it is a copy draft; None
        where the block ends: no draft, or one the template could not finish after."""
        chance, copied = None, False
        if isinstance(source, torch.Tensor):
            t, chance = self._drafted(source, len(block), state)
        elif source is None:  # the drafter could not draft (a warning was logged): the block ends here
            return None, None, False
        else:
            if not source:
                source.extend(self._fresh_drafts(block, state))
            t = source.pop(0) if source else None
            if t is not None and self._pending_copies:
                self._pending_copies -= 1
                chance, copied = self.copy_accept.rate, True
        # a draft must only lead somewhere the template can finish: no allowed-token mask is built for states off
        # greedy's path (a draft the mask rules out is rejected by the check anyway)
        if t is None or (self.c is not None and not self.c.fits(state, t, self.budget - len(block))):
            return None, None, False
        return t, chance, copied

    def _fresh_drafts(self, block: list[int], state) -> list[int]:
        """New drafts after the output and ``block``: a copy draft where there is one (and how many of the drafts
        ahead are copies), else prompt lookup's."""
        copies = self._copy_draft(block, state)
        self._pending_copies = len(copies)
        return copies or lookup(self.prompt + self.out + block, self.cfg.canvas_length)

    def _copy_draft(self, block: list[int], state) -> list[int]:
        """Drafts of what the copy source writes, after the output and ``block``. In a templated step: a number where a
        value may begin or a number is open (:meth:`CopyPrior.number_draft`), the rest of a phrase inside a string
        value that has begun copying one (:meth:`CopyPrior.string_draft`), in the first spelling whose tokens the
        template allows from ``state`` (greedy longest tokens of the vocabulary). In free text with a source (an
        answer's tool results): the rest of a value the text has begun copying (:meth:`CopyPrior.text_draft`). []
        where there is none. Prompt lookup would draft what follows the same tokens anywhere in the prompt: a worked
        example's ``12``, and nothing after a value's first word, which the prompt spells with a space before it."""
        cp = self.copy_prior
        if cp is None:
            return []
        out = self._out_bytes(block)
        if self.c is None:
            texts = cp.text_draft(out) if TEXT_DRAFTS and self.vocab is not None else []
            return self._spell(texts[0], self.vocab) if texts else []
        texts = (cp.number_draft(out) if NUMBER_DRAFTS and cp.numbers else []) \
            + (cp.string_draft(out) if STRING_DRAFTS else [])
        for text in texts:
            toks, st = self._spell(text, self.c.vocab), state
            for t in toks:
                st = None if st is None else self.c.advance(st, t)
            if toks and st is not None:
                return toks
        return []

    def _spell(self, text: bytes, vocab: TokenVocab) -> list[int]:
        """``text`` as the prompt spells it (:class:`~agentkit.engine.draft.PromptSpelling`)."""
        if self._spelling is None:
            self._spelling = PromptSpelling(self.prompt, vocab)
        return self._spelling.spell(text)

    def _check_block(self, block: list[int],
                     chances: Sequence[float | None] | None = None) -> tuple[torch.Tensor, int, Any, int]:
        """One causal pass over ``block`` (written into the cache, then cropped to what is kept): its logits, how
        many tokens greedy AR agrees with (the first always), the state after them and how many were pinned.
        ``chances``: the drafts that carry their own chance of being kept, left out of the running accept rate."""
        base = self.cache.get_seq_length()
        t0 = time.perf_counter()
        logits = self.bb.encode(block, self.cache, rows=list(range(len(block))))
        self.stats.encoder_forwards += 1
        self.stats.verify_forwards += 1
        self.stats.denoise_ms += 1000 * (time.perf_counter() - t0)
        keep = 1
        state = self.advance(self.state, block[0])
        pinned_kept = 1 if self.forced_tokens(self.state) else 0
        while keep < len(block) and not self.is_complete(state) and block[keep - 1] not in self.eos:
            forced = self.forced_tokens(state)
            want = forced[0] if forced else self._pick(logits[keep - 1], state, self.budget - keep, block[:keep])[0]
            if want != block[keep]:
                break
            pinned_kept += 1 if forced else 0
            state = self.advance(state, block[keep])
            keep += 1
        if self.drafter is None:
            kinds = self._kinds(block, self.state)
            self._count_accepted(kinds, keep, chances)
            self.stats.accepted_slot_tokens += sum(k == DRAFT for k in kinds[:keep])
        self.bb.crop(self.cache, base + keep)
        return logits, keep, state, pinned_kept

    def _keep_checked(self, block: list[int], logits: torch.Tensor, keep: int, state: Any,
                      pinned_kept: int) -> tuple[list[int], bool]:
        """Emit the kept tokens (an end-of-sequence token ends the output and is not emitted) and move to the state
        after them; the pass's stale continuations are the next drafts. Returns them and whether it ended."""
        kept = block[:keep]
        eos_hit = kept[-1] in self.eos
        if eos_hit:
            kept = kept[:-1]
        self._emit(kept, pinned=pinned_kept - (1 if eos_hit and self.forced_tokens(self.state) else 0))
        self.state = state
        self.logits = logits[keep - 1]
        return logits[keep:].argmax(-1).tolist(), eos_hit

    def _block_draft(self, block: list[int]) -> torch.Tensor | None:
        """The block drafter's logits for a canvas of the block so far (its first token and pinned run) and masks
        up to its trained width; None (and lookup drafts from then on, with one warning) when it cannot draft."""
        bd = self.block_drafter
        width = min(bd.d.c.block, self.cfg.canvas_length, self.budget)
        before = bd.ms
        rows = bd.logits(list(block) + [None] * max(0, width - len(block)), self.prompt + self.out)
        if bd.passes > 1:
            self._drafter_pass_ms = bd.ms - before
        self.stats.drafter_passes, self.stats.drafter_ms = bd.passes, bd.ms
        if rows is None:
            log.warning("the block drafter's features are out of step with the KV cache (a batched or reused pass): "
                        "prompt-lookup drafts for the rest of this request")
            self.block_drafter = None
        return rows

    def _drafter_pays(self) -> bool:
        """Whether to ask the block drafter for this block: there is one, and after ``DRAFTER_TRIAL`` passes its
        kept drafts per pass still pay for a pass (each kept token saves about a one-position base pass, the cost
        curve's first point). One that keeps too little drafts no more in this request (on general chat, which it was
        not trained on, it keeps almost nothing), and the blocks it would have drafted get the stale drafts."""
        if self.block_drafter is None:
            return False
        passes = self.stats.drafter_passes
        if passes < DRAFTER_TRIAL:
            return True
        return self.drafter_kept / passes * interpolate(self._curve, 1) >= self._drafter_pass_ms

    def _drafted(self, rows: torch.Tensor, j: int, state) -> tuple[int | None, float | None]:
        """The drafted token at block position ``j`` (row ``j - 1``): the likeliest one the template allows there,
        and its chance of being kept (from its probability among what the template allows). The drafter's
        ``DRAFT_CANDIDATES`` best are tried one by one first: a draft's state is off greedy's path, where building
        the whole mask costs milliseconds; it is built only when none of them is allowed."""
        if j - 1 >= len(rows):
            return None, None
        probs = torch.softmax(rows[j - 1].float(), -1)
        top = torch.topk(probs, DRAFT_CANDIDATES)
        ruled_out = 0.0
        for p, t in zip(top.values.tolist(), top.indices.tolist()):
            if not p > 0:  # outside the drafter's vocabulary (or no finite logit at all)
                return None, None
            if self.c is None or self.c.advance(state, t) is not None:
                return t, keep_chance(min(1.0, p / (1.0 - ruled_out)))
            ruled_out += p
        allowed = probs.masked_fill(~self.allowed_tokens(state), 0.0)
        t = int(allowed.argmax())
        total = float(allowed.sum())
        return (t, keep_chance(float(allowed[t]) / total)) if total > 0 else (None, None)

    # -- pass sizing (agentkit/engine/sizing.py) --------------------------------------------------------------
    def _kinds(self, toks: list[int], state, first_exact: bool = True) -> list[int]:
        """EXACT / PINNED / DRAFT for each position of a block starting at ``state`` (pinned: the template forces
        it once everything before it is kept)."""
        kinds = []
        for i, t in enumerate(toks):
            forced = self.forced_tokens(state) if state is not None else []
            kinds.append(EXACT if i == 0 and first_exact else PINNED if forced and forced[0] == t else DRAFT)
            state = self.advance(state, t) if state is not None else None
        return kinds

    def _verify_length(self, block: list[int], n_pinned: int, chances: Sequence[float | None]) -> int:
        """How many positions of ``block`` to check in this pass (all of them when sizing is off)."""
        if not self.cfg.sized_passes or len(block) <= 1:
            return len(block)
        kinds = self._kinds(block, self.state) if n_pinned else [EXACT] + [DRAFT] * (len(block) - 1)
        return pass_length(kinds, self.accept.rate, self._curve, chances=chances)

    def _count_accepted(self, kinds: list[int], keep: int, chances: Sequence[float | None] | None) -> None:
        """After a check of a block of ``kinds``: the running accept rate takes lookup's (and the stale) drafts
        checked up to the first rejected one, the copy accept rate the copy drafts; the block drafter's, which
        carry their own chance of being kept, are counted in ``drafter_kept``."""
        own = chances if chances is not None else [None] * len(kinds)
        copied = [i < len(self._copied) and self._copied[i] for i in range(len(kinds))]
        checked = min(keep + 1, len(kinds))  # the first rejected one too
        for rate, rated in ((self.accept, [k == DRAFT and own[i] is None for i, k in enumerate(kinds)]),
                            (self.copy_accept, [k == DRAFT and copied[i] for i, k in enumerate(kinds)])):
            rate.update(sum(rated[:keep]), sum(rated[:checked]))
        self.drafter_kept += sum(1 for i, k in enumerate(kinds[:keep]) if k == DRAFT and own[i] is not None
                                 and not copied[i])

    def _canvas_length(self) -> int:
        """Causal canvas: as many positions as pay for themselves (every pass of a block runs over the whole
        block, so the block is sized, not the pass); a bidirectional canvas keeps the trained length."""
        n = min(self.cfg.canvas_length, self.budget)
        if not self.cfg.sized_passes or self.bidirectional or self.sampler != "jacobi" or n <= 1:
            return n
        kinds, state = [], self.state
        for _ in range(n):  # the pinned run the block starts with is certain; the rest is drafts
            forced = self.forced_tokens(state)
            if not forced:
                break
            kinds.append(PINNED)
            state = self.advance(state, forced[0])
        kinds = (kinds or [EXACT]) + [DRAFT] * (n - max(len(kinds), 1))
        return pass_length(kinds, self.accept.rate, self._curve)

    @property
    def _curve(self) -> dict[int, float]:
        return self.bb.cost_curve

    def _count_canvas(self, block: Block, fed: list[int] | None) -> None:
        """After a causal canvas pass: which of its open positions (past the first, always exact) froze."""
        if fed is None or self.bidirectional or len(self._open_before) < 2:
            return
        later = self._open_before[1:]
        self.accept.update(sum(1 for j in later if j < block.n and block.frozen[j]), len(later))
        self._open_before = []

    def finish_reason(self) -> str:
        if self.halted:
            return "cancelled"  # should_stop() asked to stop; the output is what was committed by then
        if self.c is not None and self.state is not None and self.c.can_end(self.state):
            return "template"  # complete, or ended (EOS) where the template may end
        return "length" if self.budget <= 0 else "stop"
