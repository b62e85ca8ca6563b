"""DiffusionGemma (transformers ``diffusion_gemma``) in the engine: its backbone and its uniform-noise sampler.

The architecture, as transformers implements it:

- an **encoder** (a causal Gemma 4 text model) writes the KV cache: the prompt once, then each finished canvas;
- a **decoder** with the same weights reads that cache read-only and denoises a whole canvas with bidirectional
  attention. Position ``i`` of the canvas is predicted from the decoder's output at ``i`` (no shift);
- **self-conditioning**: each denoising step also receives the previous step's (temperature-scaled) logits, turned
  into soft embeddings.

The uniform-noise sampler (transformers' ``EntropyBoundSampler`` + ``LinearTemperatureScheduleLogitsProcessor`` +
``StableAndConfidentStoppingCriteria``): the canvas starts as uniform random tokens; each step samples a denoised
canvas, accepts the lowest-entropy positions while (sum of entropies - max) <= ``entropy_bound``, and renoises every
other position with fresh uniform tokens. A block ends when the argmax canvas has been unchanged for
``stable_steps`` steps and the mean entropy is below ``entropy_threshold``, or after ``max_denoising_steps``; the
block's tokens are the last argmax canvas. Unconstrained, :class:`EntropyBoundDenoiser` performs the same tensor
operations in the same order, drawing from the same random stream, as ``model.generate`` (see
``tests/engine/test_diffusion_gemma.py``).

With a template, each step walks the argmax canvas left to right under the constraint: a pinned position gets a
one-hot distribution on its forced token (zero entropy: always accepted, never resampled or renoised, and the
self-conditioning sees it as certain); a slot position's distribution is masked to the tokens the template allows
after the argmax prefix; positions after the template is complete are pinned to EOS. The argmax canvas (the output)
is therefore in the template's language by construction.

AR and verify modes read the encoder causally: the encoder's final hidden state through the tied LM head (with the
decoder's logit soft-capping) is the next-token distribution; transformers returns exactly this hidden state as
``encoder_last_hidden_state`` "to compute an autoregressive loss on the encoder".
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from transformers import DynamicCache

from ..config import DecodeConfig
from ..errors import UnsupportedModeError
from ..models.loader import LoadedModel
from .backbone import crop_dynamic
from .sampler import nucleus
from .sizing import DEFAULT_CURVE

if TYPE_CHECKING:
    from .decode import Block, Decoder


class GemmaBackbone:
    """``encode`` runs DiffusionGemma's causal encoder (writes the cache); ``denoise`` its bidirectional decoder
    (reads the cache, never writes it), optionally self-conditioned on the previous step's logits. A
    :class:`~agentkit.engine.faces.BackboneLike` whose passes run alone (``batchable`` is False) and whose pass
    sizing reads the default cost curve (none measured for it)."""

    cost_curve = DEFAULT_CURVE

    def __init__(self, lm: LoadedModel) -> None:
        self.lm = lm
        self.model = lm.model  # DiffusionGemmaForBlockDiffusion
        self.encoder = lm.model.model.encoder
        self.decoder = lm.model.model.decoder
        self.head = lm.model.get_output_embeddings()
        self.softcap = lm.model.final_logit_softcapping
        self.vocab_size = lm.model.config.text_config.vocab_size
        self.canvas_length = lm.model.config.canvas_length  # what the weights were trained with
        self.device = next(lm.model.parameters()).device
        self.shift = False  # the decoder predicts each canvas position from its own output

    def new_cache(self, room: int = 0) -> DynamicCache:
        cache = DynamicCache(config=self.model.config.get_text_config(decoder=True))
        # Sliding-window layers keep only their window; recording lets verify roll a pass back (``crop``).
        # ``_settle`` trims back to the window before every pass, so each pass sees what transformers' cache holds.
        cache.activate_past_recording()
        return cache

    @staticmethod
    def crop(cache: DynamicCache, length: int) -> None:
        """Keep the first ``length`` cached positions (recorded sliding-window positions come back)."""
        crop_dynamic(cache, length)

    def batchable(self, cache: DynamicCache | None = None) -> bool:
        return False

    @staticmethod
    def _settle(cache: DynamicCache) -> None:
        if cache.get_seq_length() > 0:
            cache.crop(0)  # sliding layers: drop what is outside the window (no-op for full-attention layers)

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.head(hidden).float()
        if self.softcap is not None:  # as DiffusionGemmaForBlockDiffusion.forward
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    @torch.inference_mode()
    def encode(self, ids: Sequence[int], cache: DynamicCache, rows: Sequence[int] = (-1,)) -> torch.Tensor:
        """Causal encoder pass over ``ids`` appended to the cache; next-token logits at ``rows``.

        Inputs, masks and position ids are built as ``generate`` builds them (``_prepare_encoder_inputs``)."""
        assert len(ids) > 0
        self._settle(cache)
        past, t = cache.get_seq_length(), len(ids)
        x = torch.tensor([list(ids)], dtype=torch.long, device=self.device)
        pos = torch.arange(past, past + t, dtype=torch.int32, device=self.device).unsqueeze(0)
        masks = self.encoder.create_masks_for_generate(
            config=self.model.config,
            inputs_embeds=torch.empty((1, t, 0), dtype=self.model.dtype, device=self.device),
            attention_mask=torch.ones((1, past + t), dtype=torch.bool, device=self.device),
            cache=cache, position_ids=pos,
        )
        hidden = self.encoder(input_ids=x, attention_mask=masks, cache=cache, position_ids=pos).last_hidden_state[0]
        if not len(rows):
            return hidden.new_zeros((0, self.vocab_size))
        return self._head(hidden[list(rows)])

    @torch.inference_mode()
    def denoise(self, ids: Sequence[int] | torch.Tensor, cache: DynamicCache, rows: Sequence[int] | None = None,
                bidirectional: bool = True, *, self_cond: torch.Tensor | None = None) -> torch.Tensor:
        """Decoder pass over a canvas against the cached prefix (the cache is only read).

        ``self_cond``: the previous step's logits [T, V] (None on a block's first step). Logits at ``rows``
        ([k, V]); ``rows=None`` gives all T rows, computed exactly as ``generate``'s ``_denoising_step`` does."""
        assert bidirectional, "DiffusionGemma's decoder attends bidirectionally over the canvas"
        self._settle(cache)
        x = ids if isinstance(ids, torch.Tensor) else torch.tensor([list(ids)], dtype=torch.long)
        x = x.reshape(1, -1).to(self.device)
        past, t = cache.get_seq_length(), x.shape[1]
        pos = torch.arange(past, past + t, dtype=torch.int32, device=self.device).unsqueeze(0)
        masks = self.decoder.create_diffusion_decoder_attention_mask(
            config=self.model.config, inputs_embeds=x.unsqueeze(-1), cache=cache,
            decoder_attention_mask=torch.ones((1, past + t), dtype=torch.bool, device=self.device),
        )
        sc = None
        if self_cond is not None:
            sc = self_cond.reshape(1, t, -1).to(self.decoder.embed_tokens.weight.dtype)
        logits = self.model(decoder_input_ids=x, self_conditioning_logits=sc, decoder_attention_mask=masks,
                            cache=cache, decoder_position_ids=pos).logits[0]  # [T, V] float32, soft-capped
        return logits if rows is None else logits[list(rows)]


def gemma_sampler(cfg: DecodeConfig) -> str:
    """The canvas sampler for a DiffusionGemma model: only the uniform-noise one fits its training."""
    if cfg.mode != "diffusion":
        return "uniform"  # AR and verify modes do not use a canvas sampler
    if cfg.frequency_penalty or cfg.presence_penalty or cfg.logit_bias:  # its steps resample every position
        raise UnsupportedModeError(
            "frequency_penalty, presence_penalty and logit_bias are not applied by DiffusionGemma's uniform sampler "
            "(each step resamples the whole canvas); use mode='ar' or 'verify', or leave them unset")
    if cfg.sampler in ("auto", "uniform"):
        return "uniform"
    raise UnsupportedModeError(
        f"sampler={cfg.sampler!r} does not fit DiffusionGemma: it was trained to denoise uniform-noise canvases "
        "(no mask token, bidirectional canvas); use sampler='uniform' or 'auto'"
    )


class EntropyBoundDenoiser:
    """Denoises one canvas of a :class:`~agentkit.engine.decode.Decoder` with DiffusionGemma's uniform sampler."""

    def __init__(self, dec: Decoder) -> None:
        self.dec, self.cfg, self.bb = dec, dec.cfg, dec.bb
        self.V = self.bb.vocab_size
        self.fill = min(dec.eos) if dec.eos else 0  # what follows the end of a constrained output

    # -- one block ------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def run(self, block: Block) -> int:
        dec, cfg, gen, V = self.dec, self.cfg, self.dec.gen, self.V
        L = max(cfg.canvas_length, block.n)
        canvas = torch.randint(low=0, high=V, size=(1, L), generator=gen)  # EntropyBoundSampler.initialize_canvas
        history = torch.full((cfg.stable_steps, 1, L), -1, dtype=torch.long)
        self_cond: torch.Tensor | None = None
        steps, walk = 0, None
        for cur_step in range(cfg.max_denoising_steps, 0, -1):  # generate counts the steps remaining: N..1
            t0 = time.perf_counter()
            raw = self.bb.denoise(canvas, dec.cache, None, True, self_cond=self_cond)[None]  # [1, L, V]
            processed = self._temper(raw, cur_step)
            walk = self._constrain(processed) if dec.c is not None else None
            argmax = torch.argmax(processed, dim=-1)
            if cfg.temperature > 0:
                probs = torch.softmax(processed, dim=-1, dtype=torch.float32)
                if cfg.top_p is not None and cfg.top_p < 1.0:
                    probs = nucleus(probs, cfg.top_p)
                denoised = torch.multinomial(probs.view(-1, V), num_samples=1, generator=gen)
                denoised = denoised.squeeze(-1).view(1, L)
            else:
                denoised = argmax  # greedy: the argmax canvas is what gets accepted
            entropy = torch.distributions.Categorical(logits=processed).entropy()  # [1, L]
            accepted = self._accept(entropy)
            canvas = torch.where(accepted, denoised, canvas)
            noise = torch.randint(low=0, high=V, size=(1, L), generator=gen)  # renoise_canvas
            canvas = torch.where(~accepted, noise, canvas)
            if walk is not None and walk.pinned:
                idx = torch.tensor(walk.pinned)
                canvas[0, idx] = torch.tensor(walk.tokens)  # pinned positions are never renoised
            stop = self._stable(history, argmax) & self._confident(entropy, walk)
            self_cond = processed  # generate feeds the processed logits back (cast to the embedding dtype)
            steps += 1
            dec.stats.decoder_forwards += 1
            dec.stats.denoise_ms += 1000 * (time.perf_counter() - t0)
            draft = argmax[0, : block.n].tolist()
            dec.drafts.append(draft)
            if dec.on_draft is not None:
                pinned = set(walk.pinned) if walk is not None else set()
                dec.on_draft(draft, [bool(accepted[0, j]) or j in pinned for j in range(block.n)])
            if bool(stop.all()):
                break
        self._finish(block, argmax[0], entropy[0], processed[0], walk)
        return steps

    # -- pieces, each as generate computes it ---------------------------------------------------------------
    def _temper(self, raw: torch.Tensor, cur_step: int) -> torch.Tensor:
        """Linear temperature schedule from ``temperature`` (first step) to ``final_temperature`` (last step)."""
        cfg = self.cfg
        if cfg.temperature <= 0:
            return raw  # greedy: entropies and stopping read the T=1 distribution
        if cfg.final_temperature is None:
            return raw / cfg.temperature
        t_min, t_max = cfg.final_temperature, cfg.temperature
        step = torch.tensor(cur_step, dtype=torch.int32)  # LinearTemperatureScheduleLogitsProcessor arithmetic
        return raw / (t_min + ((t_max - t_min) * (step / cfg.max_denoising_steps)))

    def _accept(self, entropy: torch.Tensor) -> torch.Tensor:
        """EntropyBoundSampler.accept_canvas: the k lowest-entropy positions with sum - max <= bound."""
        ordered, order = torch.sort(entropy, dim=-1, descending=False)
        within = torch.cumsum(ordered, dim=-1) - ordered <= self.cfg.entropy_bound
        return torch.scatter(input=torch.zeros_like(within), dim=-1, index=order, src=within)

    @staticmethod
    def _stable(history: torch.Tensor, argmax: torch.Tensor) -> torch.Tensor:
        """StableAndConfidentStoppingCriteria, stability half: argmax canvas unchanged for ``stable_steps``."""
        stable = (history == argmax[None, :, :]).all(dim=-1).all(dim=0)
        history[:] = torch.roll(history, shifts=-1, dims=0)
        history[-1] = argmax
        return stable

    def _confident(self, entropy: torch.Tensor, walk: _Walk | None) -> torch.Tensor:
        """Confidence half: mean entropy below ``entropy_threshold`` (over the positions that are not pinned)."""
        if walk is not None and walk.pinned:
            open_ = torch.ones(entropy.shape[-1], dtype=torch.bool)
            open_[walk.pinned] = False
            if not open_.any():
                return torch.ones(1, dtype=torch.bool)
            entropy = entropy[:, open_]
        return torch.mean(entropy, dim=-1) < self.cfg.entropy_threshold

    def _constrain(self, processed: torch.Tensor) -> _Walk:
        """Walk the argmax canvas under the template (in place on ``processed`` [1, L, V]): pinned positions become
        one-hot on their forced token, slot positions are masked to what the template allows there."""
        dec, row = self.dec, processed[0]
        walk, state = _Walk(), dec.state
        for j in range(row.shape[0]):
            if walk.end is None and dec.is_complete(state):
                walk.end = j
            if walk.end is not None:
                walk.pin(row, j, self.fill)
                continue
            forced = dec.forced_tokens(state)
            if forced:
                walk.pin(row, j, forced[0])
                state = dec.advance(state, forced[0])
                continue
            allowed = dec.allowed_tokens(state)
            keep = torch.zeros(row.shape[-1], dtype=torch.bool)
            n = min(len(allowed), len(keep))
            keep[:n] = allowed[:n]
            row[j].masked_fill_(~keep, float("-inf"))
            t = int(row[j].argmax())
            if t not in dec.eos and not dec.c.fits(state, t, dec.budget - j):  # close the template in time
                closing = dec.c.closing(state, dec.budget - j)
                keep[:] = False
                keep[:n] = closing[:n]
                row[j].masked_fill_(~keep, float("-inf"))
                t = int(row[j].argmax())
            if t in dec.eos:
                walk.end = j  # the template may end here, and the model ends it
                continue
            state = dec.advance(state, t)
        return walk

    def _finish(self, block: Block, argmax: torch.Tensor, entropy: torch.Tensor, logits: torch.Tensor,
                walk: _Walk | None) -> None:
        """The block is the last argmax canvas (as ``generate`` appends ``argmax_canvas``), cut at EOS / the end."""
        toks = argmax[: block.n].tolist()
        conf = torch.softmax(logits[: block.n], dim=-1).gather(-1, argmax[: block.n, None])[:, 0].tolist()
        pinned = set(walk.pinned) if walk is not None else set()
        for j, t in enumerate(toks):
            block.tok[j], block.frozen[j], block.pinned[j] = t, True, j in pinned
            block.conf[j], block.ent[j] = conf[j], float(entropy[j])
        end = walk.end if walk is not None else next((j for j, t in enumerate(toks) if t in self.dec.eos), None)
        if end is not None and end < block.n:
            block.end = end


class _Walk:
    """Where a constrained walk pinned tokens, and where the output ends."""

    def __init__(self) -> None:
        self.pinned: list[int] = []
        self.tokens: list[int] = []
        self.end: int | None = None

    def pin(self, row: torch.Tensor, j: int, tok: int) -> None:
        row[j].fill_(float("-inf"))
        row[j, tok] = 0.0
        self.pinned.append(j)
        self.tokens.append(tok)


def denoise_uniform(dec: Decoder, block: Block) -> int:
    """The ``Decoder`` hook: denoise ``block`` with the uniform-noise sampler; returns the steps taken."""
    return EntropyBoundDenoiser(dec).run(block)
