"""The engine: prompt in, tokens out, in AR, diffusion or verify mode, with or without a template."""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .. import _threads
from ..config import NO_LORA, DecodeConfig, EngineConfig
from ..constrain.limits import Cancel, CompileLimits
from ..constrain.nodes import Template, json_lines
from ..constrain.runtime import TokenConstraint
from ..constrain.vocab import token_vocab
from ..errors import (
    AdapterMismatchError,
    DrafterMismatchError,
    InvalidRequestError,
    ModelNotFoundError,
    UnsupportedModeError,
    UserError,
)
from ..models.gptq import lora_grids
from ..models.loader import DIFFUSION_GEMMA, LoadedModel, load_model, resolve_dtype
from ..models.packed import use_packed_weights
from ..models.q4 import MAX_ROWS as Q4_MAX_ROWS
from ..models.q4 import merged_source, q4_applies, safetensors_source, use_q4_steps
from ..validate import check_prompt_bound, check_prompt_length, check_prompt_text
from .attention import use_fast_decode_attention
from .backbone import Backbone
from .batch import BatchSeat, Locked
from .decode import Decoder
from .faces import BackboneLike
from .gemma import GemmaBackbone, gemma_sampler
from .kept import KeptSlot
from .lines import RepeatedLine
from .llama_cpp import LlamaOptions, choose_backend
from .llama_cpp import load_default as load_default_llama
from .loops import LoopStop
from .prefix import Chunking, PrefixCache, default_bytes, message_marks, unsupported
from .stats import GenerationResult

Prompt = str | list[dict[str, str]]
_CONSTRAINTS_LOCK = threading.Lock()  # guards every Engine's LRU of token automata (dict operations only)
log = logging.getLogger("agentkit.engine")


def engine_lora(config: EngineConfig) -> str | None:
    """The LoRA a torch engine merges: ``EngineConfig.lora``'s path, none for ``"none"``, and for None the model's
    own: the loop adapter for the embedded default model (``agentkit.models.adapter.LOOP_DIR``)."""
    from ..models.adapter import FILE, LOOP_DIR

    if config.lora == NO_LORA:
        return None
    if config.lora is not None:
        return config.lora
    if config.model is not None:
        return None
    if not (LOOP_DIR / FILE).is_file():  # an install without the repository's adapters/ folder
        log.warning("the default model's loop adapter is not at %s: the weights as loaded (EngineConfig.lora)",
                    LOOP_DIR)
        return None
    return str(LOOP_DIR)


def merged_lora(lm: LoadedModel, path: str) -> LoadedModel:
    """``lm`` with the ``"ar"`` LoRA at ``path`` merged in (:func:`agentkit.models.adapter.merge_lora`); its
    weights are off the checkpoint's 4-bit grid then, so short passes read grids fitted to them (``_short_steps``)."""
    from ..models.adapter import merge_lora

    try:
        return merge_lora(lm, path)
    except AdapterMismatchError:
        raise
    except (FileNotFoundError, ValueError) as e:
        raise ModelNotFoundError(f"EngineConfig.lora {path!r}: {e}") from e


class Engine:
    """One set of weights, three ways to decode."""

    batches = True  # generate(batch=seat) runs this request's forwards batched with others' (faces.EngineLike)

    def __init__(self, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        threads = self.config.threads or _threads.default_threads()
        if threads:
            torch.set_num_threads(threads)  # before loading: the load's own passes (prepacking) run with it
        if threads != 1 and not _threads.passive_openmp() and not _threads.WARNED:
            _threads.WARNED = True
            log.warning("torch was loaded before agentkit with OMP_WAIT_POLICY unset: OpenMP threads spin, and on a "
                        "busy machine Engine.generate can run many times slower (docs/threads.md); set "
                        "OMP_WAIT_POLICY=PASSIVE, import agentkit first, or use EngineConfig(threads=1)")
        # fixed-shape passes are a torch backbone (EngineConfig refuses them with backend="llama.cpp")
        self.backend = "torch" if self.config.pass_width else choose_backend(self.config)
        if self.backend == "llama.cpp":
            lm, bb = load_default_llama(LlamaOptions(threads=self.config.threads))
            self._init(lm, bb)
        else:
            c = self.config
            lora = engine_lora(c)
            if lora is None:
                lm = load_model(c.model, dtype=c.dtype, device=c.device)
            else:  # merged in float32 (a LoRA's small deltas vanish in bf16 weights), then cast
                lm = merged_lora(load_model(c.model, dtype="float32", device=c.device), lora)
                lm.model.to(getattr(torch, resolve_dtype(c.dtype, c.device)))
            self._init(lm, chose_dtype=self.config.dtype == "auto")

    @classmethod
    def from_loaded(cls, lm: LoadedModel, config: EngineConfig | None = None) -> Engine:
        self = cls.__new__(cls)
        if lm.model is None:
            raise UserError(f"{lm.name!r} runs on llama.cpp and has no torch weights to share; load the model "
                            "with EngineConfig(backend='torch') for Engine.from_loaded")
        self.config = config or EngineConfig()
        self.backend = "torch"
        self._init(lm)
        return self

    def _init(self, lm: LoadedModel, backbone: BackboneLike | None = None, chose_dtype: bool = False) -> None:
        """``chose_dtype``: this engine loaded ``lm`` in the dtype ``auto`` chose (``from_loaded`` shares a model
        loaded elsewhere: its float32 arithmetic is left as it is)."""
        self.lm = lm
        # torch threads, applied on the thread of every generate call (docs/threads.md); None: torch's own
        self.threads = self.config.threads or _threads.default_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        self.tokenizer = lm.tokenizer
        self.backbone = backbone or self._backbone(lm, chose_dtype)
        self.vocab = token_vocab(lm.tokenizer, lm.eos_ids)
        self._said_no_drafter = False  # draft="drafter" without a drafter: warned once
        self._constraints: dict[int, TokenConstraint] = {}
        self._adapted: tuple[LoadedModel, BackboneLike] | None = None
        self._unmerged: tuple[LoadedModel, BackboneLike] | None = None  # the weights as loaded, beside a merged LoRA
        # earlier prompts' keys/values in blocks, for prompts that start the same way (agentkit/engine/prefix.py)
        self.chunking, self.prefixes, self.prefix_status = self._prefix_cache()
        self.prompt_chunk = self.chunking.block
        # the last decode's keys/values, where it asked to keep them (DecodeConfig.keep_cache; agentkit/engine/kept.py)
        self.kept = KeptSlot()
        # guards what concurrent generate() calls share: the tokenizer, the constraint LRU and the automata in it
        self.lock = threading.RLock()
        log.info("model %s ready (%s, %s, %s parameters)", lm.name, lm.kind, getattr(self.config, "dtype", "?"),
                 f"{sum(p.numel() for p in lm.model.parameters()) / 1e6:.1f} M"
                 if getattr(lm, "model", None) is not None else "?")

    def _short_steps(self, lm: LoadedModel, chose_dtype: bool) -> None:
        """Short passes on the checkpoint's 4-bit weights (agentkit/models/q4.py), or, with a LoRA merged into
        them, on 4-bit grids fitted to the merged weights (agentkit/models/gptq.py; ``q4_steps="int8"``: an 8-bit
        copy of them)."""
        float32 = self.config.q4_steps == "on" or chose_dtype  # float32 was auto's choice for this engine
        if not q4_applies(lm.model, float32):
            return
        grids, int8 = None, False
        if lm.meta.get("weights"):
            source = safetensors_source(lm.meta["weights"])
        elif lm.meta.get("lora") and lm.meta.get("base_weights"):
            from ..models.adapter import load_adapter, lora_deltas

            state, cfg = load_adapter(lm.meta["lora"])
            base = safetensors_source(lm.meta["base_weights"])
            if self.config.q4_steps == "int8":
                source, int8 = merged_source(base, lora_deltas(state, cfg)), True
            else:  # the layers the LoRA left alone are still on the checkpoint's grid
                source, grids = base, lora_grids(lm, state, cfg, base)
        else:
            return
        n = use_q4_steps(lm.model, source, float32=float32, int8=int8, grids=grids)
        if n:
            log.info("%d linear layers read %s weights in passes of up to %d positions", n,
                     "8-bit merged" if int8 else "fitted 4-bit" if grids else "4-bit", Q4_MAX_ROWS)

    def _backbone(self, lm: LoadedModel, chose_dtype: bool = False) -> BackboneLike:
        if lm.kind == DIFFUSION_GEMMA:
            if self.config.pass_width:
                raise UnsupportedModeError("EngineConfig.pass_width (fixed-shape passes) runs causal LMs on torch; "
                                           "DiffusionGemma's encoder-decoder has its own passes")
            return GemmaBackbone(lm)
        if self.config.attention == "auto":
            use_fast_decode_attention(lm.model)
        if self.config.q4_steps != "off":
            self._short_steps(lm, chose_dtype)
        if self.config.prepack == "auto" and (n := use_packed_weights(lm.model)):
            log.info("%d linear layers read weights prepacked for oneDNN in longer passes", n)
        if self.config.pass_width:
            from .fixed import FixedShapeBackbone

            return FixedShapeBackbone(lm, self.config.pass_width)
        return Backbone(lm, row_exact=self.config.row_exact != "off")

    def _prefix_cache(self) -> tuple[Chunking, PrefixCache | None, str]:
        """The base backbone's prompt pieces (block 0: one pass), its prefix cache (None: off) and a line saying
        which. The pieces are cut at multiples of ``prompt_chunk`` and before each chat message's start token."""
        c = self.config
        why = unsupported(self.backbone)
        chunk = 0 if why else getattr(c, "prompt_chunk", 0)
        chunking = Chunking(chunk, message_marks(self.tokenizer) if chunk else frozenset())
        if not getattr(c, "prefix_cache", False):
            return chunking, None, "off (EngineConfig.prefix_cache=False)"
        if why:
            log.info("prefix cache off: %s", why)
            return chunking, None, f"off: {why}"
        if not chunk:
            log.info("prefix cache off: prompt_chunk=0 (a one-pass prompt's keys/values cannot be reused exactly)")
            return chunking, None, "off: EngineConfig.prompt_chunk=0 (one-pass prompts cannot be reused exactly)"
        cap = default_bytes() if c.prefix_cache_bytes is None else c.prefix_cache_bytes
        cuts = " and at each chat message" if chunking.marks else ""
        return chunking, PrefixCache(chunking, cap), (f"on: pieces of at most {chunk} tokens{cuts}, at most "
                                                      f"{cap / 2 ** 20:.0f} MiB")

    # -- block-diffusion adapter ------------------------------------------------------------------------------
    @property
    def adapter_path(self) -> Path | None:
        """The block-diffusion adapter used for diffusion mode, if any (default model + shipped adapter)."""
        if not self.config.adapter or self.lm.kind != "causal" or self.lm.bidirectional:
            return None
        return self._adapter_file

    @functools.cached_property
    def _adapter_file(self) -> Path | None:
        """``config.adapter_path`` checked, or the shipped adapter of the default model; resolved once (the
        filesystem is not asked again on every request)."""
        from ..models.adapter import DEFAULT_DIR, FILE

        path = self.config.adapter_path
        if path is None:
            default = self.config.model is None and self.lm.meta.get("default") and (DEFAULT_DIR / FILE).is_file()
            return DEFAULT_DIR if default else None
        p = Path(path)
        if not (p / FILE).is_file() and not (p.is_file() and p.suffix == ".safetensors"):
            raise ModelNotFoundError(f"adapter_path {path!r}: no block-diffusion adapter there (expected a "
                                     f"directory with {FILE}, as `python -m agentkit.training` writes)")
        return p

    def _diffusion_model(self) -> tuple[LoadedModel, BackboneLike]:
        """Adapted weights (bidirectional canvas, mask token) for diffusion mode; built on first use."""
        with self.lock:
            if self._adapted is None:
                from ..models.adapter import DEFAULT_DIR, apply_adapter, load_adapter

                # an adapter trained with the LoRA on the block only reads a base-encoded prefix (SplitBackbone)
                prefix_base = load_adapter(self.adapter_path or DEFAULT_DIR)[1].prefix == "base"
                base, copy = self.lm, True
                # llama.cpp backend: the adapter canvas needs the torch weights; a merged LoRA (the loop adapter):
                # the block-diffusion adapter was trained on the weights as loaded, so it goes on those (reloaded
                # where this engine loaded them; a model shared by from_loaded keeps its merged weights)
                reload = base.meta.get("lora") and (self.config.model is not None or base.meta.get("default"))
                if base.model is None or reload:
                    if base.model is None and self.config.backend == "llama.cpp":
                        raise UnsupportedModeError(
                            "backend='llama.cpp' cannot run the block-diffusion adapter's bidirectional canvas "
                            "(its LoRA and mask token are not in the GGUF); use backend='auto' (runs that canvas "
                            "on torch), backend='torch', or DecodeConfig(weights='base') for the causal canvas")
                    base, copy = load_model(self.config.model, dtype=self.config.dtype, device=self.config.device), False
                lm = apply_adapter(base, self.adapter_path, copy_model=copy or prefix_base)
                bb: BackboneLike = Backbone(lm)
                if prefix_base:
                    from .selfspec import SplitBackbone

                    shared = base is self.lm and type(self.backbone) is Backbone  # its caches are the adapter's kind
                    bb = SplitBackbone(self.backbone if shared else Backbone(base), bb)
                self._adapted = (lm, bb)
            return self._adapted

    def can_load_unmerged(self) -> bool:
        """Whether ``DecodeConfig(weights="loaded")`` decodes with other weights than the engine's own: a LoRA is
        merged into them (``EngineConfig.lora``) and the engine loaded the model itself, so it can load it again
        (the SDK's plain replies ask for them)."""
        return bool(self.lm.meta.get("lora")) and (self.config.model is not None or bool(self.lm.meta.get("default")))

    def _unmerged_model(self) -> tuple[LoadedModel, BackboneLike]:
        """The weights as loaded, without the merged LoRA, for ``weights="loaded"``: loaded on first use and then
        kept beside the merged ones (a second copy of the weights: about 0.5 GB more for the default model; a step
        costs what a step on the merged weights costs, both on 4-bit weights)."""
        with self.lock:
            if self._unmerged is None:
                if not self.can_load_unmerged():
                    raise UnsupportedModeError(f"weights='loaded': model {self.name!r} was given to the engine "
                                               "with its LoRA merged (Engine.from_loaded); load it with "
                                               "EngineConfig(model=..., lora=...) to keep both")
                lm = load_model(self.config.model, dtype=self.config.dtype, device=self.config.device)
                self._unmerged = (lm, self._backbone(lm, chose_dtype=self.config.dtype == "auto"))
            return self._unmerged

    @property
    def name(self) -> str:
        return self.lm.name

    def _decode_locked(self, ids: list[int]) -> str:
        with self.lock:  # the tokenizer is shared with concurrent requests
            return self.tokenizer.decode(ids, skip_special_tokens=False)

    @functools.cached_property
    def context_length(self) -> int | None:
        """The model's context in tokens (prompt and output together): the torch model's
        ``max_position_embeddings``, or a llama.cpp backbone's trained context (else its KV cells); None if
        neither says."""
        cfg = getattr(self.lm.model, "config", None) if self.lm.model is not None else None
        n = getattr(cfg, "max_position_embeddings", None) or getattr(getattr(cfg, "text_config", None),
                                                                     "max_position_embeddings", None)
        if n is None:
            opts = getattr(self.backbone, "options", None)
            n = getattr(self.backbone, "n_ctx_train", None) or getattr(opts, "n_ctx", None)
        return int(n) if isinstance(n, int) and n > 0 else None

    @functools.cached_property
    def longest_token_chars(self) -> int:
        """Bytes of the vocabulary's longest token: a prompt of C characters holds at least C / this tokens."""
        return max((len(b) for b in self.vocab.token_bytes if b), default=1)

    def check_request(self, prompt: Prompt, cfg: DecodeConfig) -> None:
        """What ``generate`` checks before any work (``agentkit/validate.py``; the server calls the same): every
        ``cfg`` field, the prompt's text valid Unicode, and the prompt with ``max_new_tokens`` within the context
        (bounded from the prompt's characters first, so a huge prompt is refused before it is tokenized)."""
        if not isinstance(cfg, DecodeConfig):
            raise InvalidRequestError(f"config must be a DecodeConfig, got {type(cfg).__name__}")
        cfg.validate()
        check_prompt_text(prompt)
        check_prompt_bound(prompt, self.longest_token_chars, self.context_length, cfg.max_new_tokens)

    # -- prompts --------------------------------------------------------------------------------------------
    def encode_prompt(self, prompt: Prompt, *, raw: bool = False) -> list[int]:
        if isinstance(prompt, str):
            if not prompt.strip():
                raise InvalidRequestError("prompt is empty")
            if raw or not self.lm.chat:
                return self.tokenizer.encode(prompt, add_special_tokens=False)
            prompt = [{"role": "user", "content": prompt}]
        if not isinstance(prompt, list) or not prompt:
            raise InvalidRequestError("prompt must be a non-empty string or a non-empty list of chat messages")
        for i, m in enumerate(prompt):
            if not isinstance(m, dict) or "role" not in m or not isinstance(m.get("content"), str):
                raise InvalidRequestError(f"message {i} must be a dict with 'role' and string 'content'")
        ids = self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)

    def constraint(self, template: Template, *, limits: CompileLimits | None = None,
                   cancel: Cancel | None = None) -> TokenConstraint:
        """The token automaton of ``template`` (an LRU of the last 64: each holds per-state masks). A new one is
        built *outside* the engine's lock (other requests keep decoding), within ``limits`` (SchemaLimitError past
        one) and stopping when ``cancel`` is set (CompileCancelled); see ``agentkit.constrain.build_constraint``."""
        with _CONSTRAINTS_LOCK:  # a lock of its own: a decode holding self.lock never delays a build
            c = self._constraints.get(id(template))
        if c is None or c.template is not template:
            c = TokenConstraint(template, self.vocab, self.tokenizer, limits=limits, cancel=cancel)
        with _CONSTRAINTS_LOCK:
            old = self._constraints.pop(id(template), None)
            if old is not None and old.template is template:
                c = old  # built by a concurrent call meanwhile: keep the one already in use
            self._constraints[id(template)] = c
            while len(self._constraints) > 64:
                self._constraints.pop(next(iter(self._constraints)))
            return c

    # -- generate -------------------------------------------------------------------------------------------
    def generate(
        self,
        prompt: Prompt,
        config: DecodeConfig | None = None,
        *,
        template: Template | None = None,
        raw: bool = False,
        on_draft: Callable[[list[int], list[bool]], None] | None = None,
        batch: BatchSeat | None = None,
        on_tokens: Callable[[list[int]], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> GenerationResult:
        """Decode one request. ``batch``: this request's seat at a :class:`~agentkit.engine.batch.Batcher`; its
        model forwards then run batched with those of the other requests decoding concurrently (continuous
        batching, ``agentkit/engine/batch.py``). None (the default) runs them directly. ``on_tokens(ids)`` is
        called (on the decoding thread) with each run of tokens as it is committed to the output: an AR token
        and the pinned run after it, a diffusion block, a verified prefix (streaming). ``should_stop()`` is checked
        before each model forward, the prompt pass's pieces included; once it returns True decoding stops there,
        with finish_reason "cancelled" and the output committed so far (timeouts and cancellation that bite within
        one forward; the prompt's pieces encoded by then stay in the prefix cache)."""
        cfg = config or DecodeConfig()
        self.check_request(prompt, cfg)
        t_encode = time.perf_counter()
        with self.lock:
            ids = self.encode_prompt(prompt, raw=raw)
        check_prompt_length(len(ids), self.context_length, cfg.max_new_tokens)
        encode_s = time.perf_counter() - t_encode
        index_ms = 0.0
        if template is not None and id(template) not in self._constraints:
            index_ms = self.constraint(template).index_ms  # token DFAs: a one-time compile cost, reported apart
        t_start = time.perf_counter() - encode_s  # the latency counts the prompt's encoding, not the index build
        if self.threads and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)  # a per-thread OpenMP setting: this thread may be new
        lm, backbone = self.lm, self.backbone
        adapted = cfg.weights == "adapted" or (cfg.weights == "auto" and cfg.mode == "diffusion")
        if cfg.weights == "adapted" and self.adapter_path is None:
            raise UnsupportedModeError(f"weights='adapted' needs a block-diffusion adapter; model {self.name!r} "
                                       "has none (or the engine was built with adapter=False)")
        if adapted and self.adapter_path is not None:
            lm, backbone = self._diffusion_model()  # by default AR and verify keep the base weights
        elif cfg.weights == "loaded" and self.lm.meta.get("lora"):
            lm, backbone = self._unmerged_model()  # without the merged LoRA (the SDK's plain replies)
        backend = self.backend  # one backend per engine: "auto" never moves a request to another one
        sampler = self._sampler(cfg, lm)
        base = backbone is self.backbone
        # the weights as loaded take the base's prompt pieces (not its cache): a lora="none" engine's passes
        pieces = base or (self._unmerged is not None and backbone is self._unmerged[1])
        block_drafter = self._block_drafter(cfg, template is None and batch is None) if base else None
        # the base weights' caches only (a block drafter reuses the pieces that keep the base's features too)
        prefix = self.prefixes if base else None
        features = self._prompt_features() if prefix is not None and block_drafter is None else None
        constraint = self.constraint(template) if template is not None else None
        if batch is not None:
            backbone = batch.wrap(backbone)
            if constraint is not None:
                constraint = Locked(constraint, self.lock)  # shared with concurrent requests on this template
        repeated = None
        if template is not None and template.kind == "jsonl":  # ends at its first repeated line (engine/lines.py)
            repeated = RepeatedLine(self._decode_locked, lambda: dec.out)
            should_stop = _either(repeated.check, should_stop)
        loops = None
        if cfg.stop_loops:  # the output ends at a loop (engine/loops.py)
            loops = LoopStop(lambda: dec.out, cfg.stop_loops)
            should_stop = _either(loops.check, should_stop)
        dec = Decoder(
            backbone, cfg, constraint, lm.eos_ids,
            mask_token_id=lm.mask_token_id, bidirectional=lm.bidirectional and cfg.mode != "ar",
            sampler=sampler, on_draft=on_draft, on_tokens=on_tokens, drafter=self._drafter(cfg),
            block_drafter=block_drafter,
            should_stop=should_stop, prefix=prefix, features=features,
            copy_text=_copy_text(prompt, cfg) if template is not None else cfg.copy_source,
            prompt_chunk=self.chunking if pieces else 0, vocab=self.vocab,
        )
        dec.stats.backend = backend
        if template is not None:
            dec.stats.compile_ms = template.compile_ms + index_ms
        if cfg.keep_cache:
            self.kept.clear()  # what an earlier decode kept is not this one's
        try:
            dec.prefill(ids)
            if not dec.finished:
                {"ar": dec.ar, "diffusion": dec.diffusion, "verify": dec.verify}[cfg.mode]()
            else:
                dec.stats.finish_reason = dec.finish_reason()
            if cfg.keep_cache and base:  # the base weights' own cache, batched or not (a plain growing one: put)
                self.kept.put(ids + dec.out, dec.cache)
        finally:
            if block_drafter is not None:
                block_drafter.close()
            if features is not None:
                features.prompt_done()  # ended with the prompt pass, unless that never ran
        return self._result(dec, cfg, template, repeated, loops, t_start)

    def _result(self, dec: Decoder, cfg: DecodeConfig, template: Template | None, repeated: RepeatedLine | None,
                loops: LoopStop | None, t_start: float) -> GenerationResult:
        """The decoded output as a result: its text (a ``jsonl`` output cut at its first repeated line, any output at
        its first loop and at a stop string), the template's parsed value when it completed, the latency
        from ``t_start``."""
        text = None
        cut = repeated.cut(dec.out) if repeated is not None else None
        if cut is not None:  # the first repeated line and what follows dropped: the lines before it, complete
            text, dec.out = cut
            dec.stats.finish_reason = "template"
        kept = loops.cut(dec.out) if loops is not None else None
        if kept is not None:  # a mode that commits many tokens at once may have gone past the loop: cut at its end
            text, dec.out = None, kept
            dec.stats.finish_reason = "loop"
        if text is None:
            text = self._decode_locked(dec.out)
        if cfg.stop:
            at = min((i for i in (text.find(s) for s in cfg.stop) if i >= 0), default=-1)
            if at >= 0:
                text, dec.stats.finish_reason = text[:at], "stop"
        stats = dec.stats
        stats.output_tokens = len(dec.out)
        stats.latency_ms = 1000 * (time.perf_counter() - t_start)
        value: Any = None
        if template is not None and template.kind == "json" and stats.finish_reason == "template":
            value = json.loads(text)
        elif template is not None and template.kind == "jsonl" and stats.finish_reason == "template":
            value = json_lines(text)  # several calls, one per line (agentkit.toolcall.calls_template)
        return GenerationResult(text=text, token_ids=dec.out, stats=stats, value=value, drafts=dec.drafts)

    def _drafter(self, cfg: DecodeConfig):
        """Verify mode with ``draft="adapter"``: a self-speculative drafter on the adapted weights (per request:
        it holds the request's draft KV cache)."""
        if cfg.mode != "verify" or cfg.draft != "adapter":
            return None
        if self.adapter_path is None:
            raise UnsupportedModeError(f"draft='adapter' needs a block-diffusion adapter; model {self.name!r} has "
                                       "none (or the engine was built with adapter=False); use draft='lookup'")
        from .selfspec import Drafter

        lm, bb = self._diffusion_model()
        shared = getattr(bb, "base", None) is self.backbone  # SplitBackbone on this engine's own backbone
        return Drafter(bb.adapted if shared else bb, lm.mask_token_id, cfg.draft_steps, shared=shared)

    def _prompt_features(self):
        """A recorder of an undrafted request's prompt features, once this engine has loaded its block drafter (so
        a drafted request after it reuses its prompt: ``engine/prefix.py``); None before."""
        loaded = self.__dict__.get("_block_drafter_model")  # the cached property, only if it was loaded
        if loaded is None:
            return None
        from .drafter import PromptFeatures

        return PromptFeatures(loaded[1])

    def _block_drafter(self, cfg: DecodeConfig, free_text_alone: bool):
        """Verify mode's block drafter for this request (None: lookup drafts): with ``draft="drafter"``, the
        engine's drafter, or None where it has none, said once by a warning; with ``draft="auto"``, the drafter for a
        free-text request decoded alone (``free_text_alone``) where the engine has one (templated steps: lookup's
        drafts measured faster, ``adapters/smollm2-135m-drafter/MODEL_CARD.md``; a batched pass cannot feed it)."""
        wanted = cfg.draft == "drafter" or (cfg.draft == "auto" and free_text_alone)
        if cfg.mode != "verify" or not wanted:
            return None
        loaded = self._block_drafter_model
        if loaded is None:
            if cfg.draft == "drafter" and not self._said_no_drafter:
                self._said_no_drafter = True
                log.warning("draft='drafter': no block drafter for model %r (EngineConfig.drafter_path); verify drafts "
                            "by prompt lookup", self.name)
            return None
        from .drafter import BlockDraftSource

        drafter, tap = loaded
        model = self.lm.model
        return BlockDraftSource(drafter, tap, model.get_input_embeddings().weight,
                                model.get_output_embeddings().weight)

    @functools.cached_property
    def _block_drafter_model(self):
        """(drafter, feature tap), loaded once; None where there is no drafter (said by ``_block_drafter``), or where
        the default model's drafter was trained for other weights (another LoRA, none). A drafter that
        ``EngineConfig.drafter_path`` names for another base is a :class:`~agentkit.errors.DrafterMismatchError`."""
        from .drafter import CONFIG, DEFAULT_DIR, FeatureTap, load_drafter

        path = Path(self.config.drafter_path) if self.config.drafter_path else (
            DEFAULT_DIR if self.config.model is None and self.lm.meta.get("default") else None)
        if self.lm.model is None or path is None or not (path / CONFIG).is_file():
            log.info("no block drafter %s; verify drafts by prompt lookup",
                     f"at {path}" if path is not None else f"for model {self.name!r}")
            return None
        try:
            drafter = load_drafter(path, self.lm.model)
        except DrafterMismatchError as e:
            if self.config.drafter_path:
                raise  # the drafter the config names: for other weights is an error
            log.info("the default model's drafter is not for these weights (%s); verify drafts by prompt lookup", e)
            return None
        return drafter, FeatureTap(self.lm.model, drafter.c.feature_layers)

    def _sampler(self, cfg: DecodeConfig, lm: LoadedModel | None = None) -> str:
        lm = lm or self.lm
        if lm.kind == DIFFUSION_GEMMA:
            return gemma_sampler(cfg)
        sampler = cfg.sampler
        if sampler == "auto":
            sampler = "mask" if lm.mask_token_id is not None and lm.bidirectional else "jacobi"
        if sampler == "mask" and lm.mask_token_id is None:
            raise UnsupportedModeError(
                f"model {self.name!r} has no mask token, so it cannot decode with the absorbing-mask sampler; "
                "use sampler='jacobi' (causal canvas) or load a block-diffusion adapter"
            )
        if sampler == "uniform":
            raise UnsupportedModeError("the uniform-noise sampler is available for diffusion_gemma models only")
        return sampler


def _either(first: Callable[[], bool], other: Callable[[], bool] | None) -> Callable[[], bool]:
    """A ``should_stop`` true when ``first()`` or ``other()`` is."""
    return first if other is None else (lambda: first() or other())


def _copy_text(prompt: Prompt, cfg: DecodeConfig) -> str | None:
    """The copy prior's source: ``DecodeConfig.copy_source`` when set; else (``copy_from``) None for the whole
    prompt, or the last user message's text (a plain-string prompt is all user text)."""
    if cfg.copy_bias and cfg.copy_source is not None:
        return cfg.copy_source
    if not cfg.copy_bias or cfg.copy_from == "prompt":
        return None
    if isinstance(prompt, str):
        return prompt
    return next((m.get("content") or "" for m in reversed(prompt) if m.get("role") == "user"), "")

