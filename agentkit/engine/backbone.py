"""A causal LM seen as the two passes block diffusion needs.

- ``encode``: a causal pass that *writes* the KV cache (prompt prefill, block commit, verify, AR step).
- ``denoise``: a canvas pass that *reads* the cache and leaves it as it was (the canvas is appended, then cropped
  away; the prefix entries are never rewritten). Attention inside the canvas is bidirectional for
  diffusion-trained weights, causal for plain AR checkpoints.

Logits are computed only at the rows asked for (the output head is the biggest matmul of a small model).

``forward_many`` (and its two faces ``encode_many`` / ``denoise_many``) runs the passes of several requests, each
with its own cache of its own length, as ONE batched forward (continuous batching, ``agentkit/engine/batch.py``):
the cached keys/values are left-padded into one batch cache, every row gets its own position ids (continuing from
its own cache length) and its own 4-D boolean mask (padding masked out, causal over its prefix, causal or
bidirectional inside its new tokens), the new tokens are right-padded to the longest, and afterwards each
``encode`` row appends only its own real new keys/values to its own cache.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from ..models.head import Int8Head, int8_head_available
from ..models.loader import LoadedModel, cpu_flags, native_bf16
from ..models.packed import PackedLinear
from ..models.q4 import ShortPassLinear
from .attention import NAME as STEP_ATTENTION
from .attention import SDPA_LIKE
from .sizing import DEFAULT_CURVE, pieced_curve

# ms per forward by positions after a 200-token prefix on the default model, 1 thread, measured with
# ``python evals/bench_forward.py --threads 1`` on one machine of each CPU kind (:func:`cpu_kind`); other models:
# DEFAULT_CURVE's shape.
# - "amx" (native bf16 dot products on AMX tiles): an otherwise idle 2-core Xeon with AMX
#   (evals/results/engine/bench_forward_s9.json; plain bfloat16, with neither of the two below: bench_forward_s7.json, a
#   2-core EPYC with avx512_bf16). "+q4": passes of up to 8 positions on the 4-bit weights (agentkit/models/q4.py);
#   "+packed": weights prepacked for oneDNN (agentkit/models/packed.py)
# - "avx512_bf16" (native bf16 dot products, no AMX): an otherwise idle 2-core AMD EPYC (Zen 5)
#   (evals/results/engine/bench_forward_s13.json). Its short passes cost another shape than AMX's: 2 positions about
#   what 1 does, 8 about twice (AMX: 1.23x and 1.84x). A combination not measured there (llama.cpp) reads "amx"'s.
# - "avx2" (no native bf16, so the engine runs float32 there): a 2-core AMD EPYC (Zen 3) without AVX-512
#   (evals/results/engine/bench_forward_s10b.json, a BFCL shard on the other core); "float32+q4": float32 with the 4-bit
#   short passes, what dtype="auto" runs there
SHIPPED_CURVES: dict[str, dict[tuple[str, str], dict[int, float]]] = {
    "avx512_bf16": {
        ("torch", "float32"): {1: 38.56, 2: 62.05, 4: 58.17, 8: 74.2, 16: 96.81, 32: 161.47, 64: 260.43},
        ("torch", "bfloat16+packed"): {1: 23.38, 2: 27.81, 4: 29.11, 8: 33.88, 16: 46.31, 32: 70.32, 64: 118.59},
        ("torch", "bfloat16+q4"): {1: 16.25, 2: 18.26, 4: 24.01, 8: 35.41, 16: 69.3, 32: 141.01, 64: 289.69},
        ("torch", "bfloat16+q4+packed"): {1: 17.91, 2: 17.91, 4: 22.6, 8: 34.65, 16: 74.6, 32: 139.01, 64: 288.31},
    },
    "amx": {
        ("llama.cpp", "q4_1"): {1: 22.81, 2: 35.73, 4: 64.76, 8: 112.23, 16: 217.88, 32: 453.67, 64: 553.48},
        ("torch", "float32"): {1: 52.7, 2: 61.15, 4: 106.23, 8: 113.38, 16: 119.15, 32: 156.62, 64: 226.49},
        ("torch", "bfloat16"): {1: 28.99, 2: 31.29, 4: 32.54, 8: 35.78, 16: 43.64, 32: 59.45, 64: 102.02},
        ("torch", "bfloat16+packed"): {1: 47.26, 2: 51.26, 4: 50.91, 8: 54.72, 16: 57.76, 32: 76.37, 64: 116.8},
        ("torch", "bfloat16+q4"): {1: 30.89, 2: 38.63, 4: 41.45, 8: 57.52, 16: 71.84, 32: 90.67, 64: 121.06},
        ("torch", "bfloat16+q4+packed"): {1: 29.44, 2: 36.25, 4: 40.32, 8: 54.28, 16: 61.87, 32: 75.86, 64: 100.72},
    },
    "avx2": {
        ("torch", "float32+q4"): {1: 79.94, 2: 119.02, 4: 139.32, 8: 190.86, 16: 297.86, 32: 423.1, 64: 577.84},
        ("torch", "float32"): {1: 126.65, 2: 201.09, 4: 210.42, 8: 236.0, 16: 300.66, 32: 414.02, 64: 571.02},
        ("torch", "bfloat16+q4"): {1: 70.81, 2: 87.41, 4: 119.55, 8: 194.5, 16: 686.35, 32: 1244.74, 64: 2330.43},
        ("torch", "bfloat16"): {1: 82.36, 2: 122.21, 4: 203.91, 8: 348.82, 16: 702.0, 32: 1204.67, 64: 2344.16},
        ("llama.cpp", "q4_1"): {1: 26.28, 2: 46.67, 4: 74.07, 8: 130.88, 16: 266.49, 32: 488.39, 64: 840.72},
    },
}


NEAREST_KIND = {"avx512_bf16": "amx"}  # where a kind's table lacks a combination, the kind whose table is read


def cpu_kind(flags: AbstractSet[str] | None = None) -> str:
    """Which machine's shipped cost curves apply to this CPU: ``amx`` or ``avx512_bf16`` where it has native bf16
    dot products (where ``dtype="auto"`` runs bfloat16), ``avx2`` otherwise (float32): the relative cost of a pass,
    and of llama.cpp against torch, differ by several times between them."""
    flags = cpu_flags() if flags is None else flags
    if not native_bf16(flags):
        return "avx2"
    return "amx" if "amx_bf16" in flags else "avx512_bf16"


def shipped_table(kind: str) -> dict[tuple[str, str], dict[int, float]]:
    """A CPU kind's shipped curves, its nearest kind's filling the combinations it did not measure."""
    nearest = NEAREST_KIND.get(kind)
    return {**(shipped_table(nearest) if nearest else {}), **SHIPPED_CURVES.get(kind, {})}


def cost_curve(backend: str, dtype: str, lm: LoadedModel, kind: str | None = None) -> dict[int, float]:
    """The cost curve that sizes verify blocks and canvas passes (``agentkit/engine/sizing.py``) and routes free
    text between backends: the shipped one for this CPU kind (``kind``, default :func:`cpu_kind`) on the default
    model, DEFAULT_CURVE's shape otherwise."""
    table = shipped_table(kind or cpu_kind()) if lm.meta.get("default") else {}
    # an unmeasured combination reads the nearest measured one: "+packed", then "+q4" dropped
    names = [dtype, dtype.replace("+packed", ""), dtype.split("+")[0]]
    curve = next((table[(backend, d)] for d in names if (backend, d) in table), DEFAULT_CURVE)
    out, low = {}, float("inf")
    for n in sorted(curve, reverse=True):  # non-decreasing: a longer pass never costs less (noise aside)
        low = out[n] = min(low, curve[n])
    return dict(sorted(out.items()))


REFINED = 64  # candidates per row whose logits are recomputed in float32 (see refined_logits)


def refined_logits(hidden: torch.Tensor, head: torch.nn.Linear, k: int = REFINED,
                   coarse: Int8Head | None = None) -> torch.Tensor:
    """Output-head logits ``[rows, V]`` in float32: the bias-free ``head``'s matmul in its weight's dtype (bf16:
    one rounding per logit, so near-equal logits tie; a :class:`~agentkit.models.packed.PackedLinear` head runs
    it on its prepacked weight), then each row's top ``k`` recomputed as float32 dot products of the same
    values. A greedy pick among the refined tokens is a float32 head's (a coarse value is within one bf16 rounding
    of the exact one, far less than the gap down to the 64th); where a constraint rules out all of them, the pick
    is made on the coarse values (``evals/bench_head.py`` counts how often that changes one). ``coarse``: an int8
    copy of the head (agentkit/models/head.py) ranks instead of the head's own matmul."""
    rough = head(hidden).float() if coarse is None else coarse(hidden)  # [r, V]
    top = rough.topk(min(k, rough.shape[-1]), dim=-1).indices  # [r, k]
    exact = torch.einsum("rh,rkh->rk", hidden.float(), head.weight[top].float())  # [r, k]
    return rough.scatter_(-1, top, exact)


def row_exact_width(model: torch.nn.Module, coarse: Int8Head | None) -> int:
    """The longest pass (positions) whose every row ``model`` computes independently of the others, or 0: its
    decoder layers' linear layers all low-bit copies whose kernel computes rows one by one up to its ``max_rows``
    (:class:`Q4Linear`; :class:`Q8Linear` where a probe on this machine finds it so), attention the stepwise one
    (``agentkit-sdpa``) on CPU, and an int8 coarse head."""
    if coarse is None or getattr(model.config, "_attn_implementation", None) != STEP_ATTENTION:
        return 0
    linears = [m for name, m in model.named_modules()
               if ".layers." in f".{name}" and isinstance(m, (torch.nn.Linear, ShortPassLinear))]
    if not linears or not all(isinstance(m, ShortPassLinear) and m.rows_independent() for m in linears):
        return 0
    return min(m.max_rows for m in linears)


def dynamic_layers_only(cache: DynamicCache) -> bool:
    """Whether every layer of ``cache`` is a plain growing full-attention ``DynamicLayer`` (no sliding window, no
    static buffers): the caches whose positions can be batched, copied out and copied back."""
    return all(type(layer) is DynamicLayer for layer in cache.layers)


def crop_dynamic(cache: DynamicCache, length: int) -> None:
    """Keep the first ``length`` positions of a transformers cache."""
    extra = cache.get_seq_length() - length
    assert extra >= 0
    if extra:
        cache.crop(-extra)


class Pass(NamedTuple):
    """One request's pass in a batched forward: ``write`` True is an ``encode`` (the new keys/values are appended
    to ``cache``), False a ``denoise`` (the cache is only read)."""

    ids: Sequence[int]
    cache: DynamicCache
    rows: Sequence[int]
    write: bool
    bidirectional: bool = False


class Backbone:
    """A causal LM on torch as the engine's backbone (:class:`~agentkit.engine.faces.BackboneLike`), with batched
    passes (:class:`~agentkit.engine.faces.Batching`) and its pass and head apart
    (:class:`~agentkit.engine.faces.HiddenPasses`)."""

    exact_rows = 0  # row-exact passes up to this many positions (0: none); see __init__
    coarse: Int8Head | None = None
    # a prompt may be encoded in pieces (``encode(..., whole=True)`` each) into a growing cache and its keys/values
    # reused by the prefix cache (agentkit/engine/prefix.py); False for a subclass with passes of its own
    piecewise_prompts = True

    def __init__(self, lm: LoadedModel, row_exact: bool = True) -> None:
        """``row_exact``: use :attr:`exact_rows` where the model allows it (``EngineConfig.row_exact``)."""
        self.lm = lm
        self.model = lm.model
        self.body = getattr(lm.model, lm.model.base_model_prefix)
        self.head = lm.model.get_output_embeddings()
        self.device = next(lm.model.parameters()).device
        self.shift = True  # position i is predicted from the output at i-1 (AR head; Dream/Fast-dLLM v2)
        dtype = str(self.model.dtype).removeprefix("torch.")
        if any(isinstance(m, ShortPassLinear) for m in self.model.modules()):
            dtype += "+q4"  # short passes on low-bit copies: its own curve (8-bit ones, a merged LoRA's: the same shape)
        if any(isinstance(m, PackedLinear) or getattr(m, "packed_dense", None) is not None
               for m in self.model.modules()):
            dtype += "+packed"  # longer passes on prepacked weights (models/packed.py): its own curve
        self.curve_dtype = dtype  # the cost curves' name for these weights (SHIPPED_CURVES' keys)
        self.cost_curve = cost_curve("torch", dtype, lm)
        # A low-precision model's logits: the head matmul in its own dtype (bf16 on the default model: 3.4 ms a row
        # against 13.3 ms in float32, 1 thread -- the fp32 head was a third of an AR step), then the REFINED
        # candidates -- the top ones of each row -- recomputed exactly in float32. bf16 logits alone tie often
        # enough to change greedy picks (and break verify == AR); the refined ones are float32 dot products of the
        # same bf16 values, so greedy picks match a float32 head wherever the pick is among them.
        plain = type(self.head) in (torch.nn.Linear, PackedLinear) and self.head.bias is None
        # On CPU the coarse ranking runs on an int8 copy of the head (a quarter of float32's bytes, half of bf16's;
        # its rows independent of each other), in float32 models too: the refined candidates stay exact.
        self.coarse = (Int8Head(self.head.weight) if plain and self.device.type == "cpu" and int8_head_available()
                       else None)
        self._refine = plain and (self.coarse is not None or self.head.weight.dtype != torch.float32)
        # Row-exact passes: where every op of a pass of up to ``exact_rows`` positions computes each row on its own
        # (the 4-bit layers' kernel, the stepwise attention, the int8 coarse head; elementwise ops and row norms
        # are so anyway), a position's logits do not depend on how many positions its pass had. Passes after the
        # prompt are then cut into pieces of at most that many, so verify blocks and causal canvases give every
        # position the logits of the AR step at it, bit for bit, whatever their sizes. 0: not available.
        self._whole_curve = self.cost_curve
        self.exact_rows = row_exact_width(lm.model, self.coarse) if row_exact else 0
        if self.exact_rows:
            self.cost_curve = pieced_curve(self.cost_curve, self.exact_rows)

    def short_rows(self, rows: int, curve: dict[int, float] | None = None) -> None:
        """Run passes of up to ``rows`` positions on the low-bit copies (with row-exact passes, cut passes after the
        prompt into pieces of that many), the width ``agentkit/models/q4.py``'s ``MAX_ROWS`` sets at load, on a
        loaded engine, so that ``evals/row_pieces.py`` can compare widths in one process; ``curve``: the unpieced
        cost curve measured at that width (default: the shipped one), pieced at it."""
        for m in self.model.modules():
            if isinstance(m, ShortPassLinear):
                m.max_rows = rows
        if curve is not None:
            self._whole_curve = curve
        if self.exact_rows:
            self.exact_rows = row_exact_width(self.model, self.coarse)
            self.cost_curve = pieced_curve(self._whole_curve, self.exact_rows)

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        if not self._refine:
            return self.head(hidden).float()
        return refined_logits(hidden, self.head, coarse=self.coarse)  # [k, V]

    def attention_mask(self, allowed: torch.Tensor) -> torch.Tensor:
        """A 4-D boolean mask (True: may attend) as this model's attention takes it: as it is for sdpa, additive
        (0 / dtype min) for eager attention, which adds the mask to the scores."""
        if getattr(self.model.config, "_attn_implementation", None) != "eager":
            return allowed
        dtype = self.model.dtype
        return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed,
                                                                                         torch.finfo(dtype).min)

    def new_cache(self, room: int = 0) -> DynamicCache:
        """A request's KV cache; ``room``: new tokens it may add after the prompt (a fixed-size cache sizes itself
        by it, a growing one ignores it)."""
        return DynamicCache(config=self.model.config)

    @torch.inference_mode()
    def hidden_states(self, ids: Sequence[int], cache: DynamicCache, mask: torch.Tensor | None,
                      causal_rows: bool = False) -> torch.Tensor:
        """One pass appending ``ids`` to the cache under ``mask`` (None: causal) -> hidden states [T, H];
        ``causal_rows``: a causal pass whose rows the stepwise attention computes one by one."""
        x = torch.tensor([list(ids)], dtype=torch.long, device=self.device)  # [1, T]
        kw = {"causal_rows": True} if causal_rows else {}
        out = self.body(input_ids=x, cache=cache, attention_mask=mask, use_cache=True, **kw)
        return out.last_hidden_state[0]  # [T, H]

    def _causal(self, ids: Sequence[int], cache: DynamicCache, whole: bool = False) -> torch.Tensor:
        """A causal pass appending ``ids`` to the cache -> hidden [T, H]; after the prompt, with row-exact passes,
        in pieces of at most :attr:`exact_rows` positions (``whole``: one pass anyway)."""
        step = self.exact_rows
        if not step or whole or cache.get_seq_length() == 0:
            return self.hidden_states(ids, cache, None)  # the prompt: one pass on the dense weights
        ids = list(ids)
        parts = [self.hidden_states(ids[i:i + step], cache, None, causal_rows=True) for i in range(0, len(ids), step)]
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def head_logits(self, hidden: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
        """The output head's float32 logits at ``rows`` of ``hidden`` -> [k, V]."""
        if not len(rows):
            return hidden.new_zeros((0, self.head.out_features))
        with torch.inference_mode():
            return self._head(hidden[list(rows)])  # [k, V]

    def encode(self, ids: Sequence[int], cache: DynamicCache, rows: Sequence[int] = (-1,),
               whole: bool = False) -> torch.Tensor:
        """Causal pass over ``ids`` appended to the cache; logits at ``rows`` (indices into ``ids``). ``whole``: one
        pass, not row-exact pieces, like a prompt's (the rest of a prompt whose start came from a prefix cache)."""
        assert len(ids) > 0
        hidden = self._causal(ids, cache, whole)
        return self.head_logits(hidden, rows)

    def denoise(
        self, ids: Sequence[int], cache: DynamicCache, rows: Sequence[int], bidirectional: bool
    ) -> torch.Tensor:
        """Canvas pass: reads the cache, leaves it unchanged; logits at ``rows``."""
        past = cache.get_seq_length()
        if bidirectional:
            t = len(ids)
            mask = torch.ones((1, 1, t, past + t), dtype=torch.bool, device=self.device)  # [B, 1, Q, K]
            hidden = self.hidden_states(ids, cache, mask)
        else:
            hidden = self._causal(ids, cache)
        self.crop(cache, past)
        return self.head_logits(hidden, rows)

    @torch.inference_mode()
    def branches(self, branches: Sequence[Sequence[int]], cache: DynamicCache) -> list[torch.Tensor]:
        """Continuations of the cached prefix in one pass (:class:`~agentkit.engine.faces.Branching`): the
        branches side by side, each attending to the cache and causally to its own tokens, at the positions
        after the cache; the cache is cropped back after it -> each branch's logits at its positions [len, V]."""
        past, dev = cache.get_seq_length(), self.device
        bounds = list(itertools.accumulate((len(b) for b in branches), initial=0))
        t = bounds[-1]
        allowed = torch.zeros((1, 1, t, past + t), dtype=torch.bool, device=dev)
        allowed[..., :past] = True
        pos = torch.empty(t, dtype=torch.long, device=dev)
        for s, e in itertools.pairwise(bounds):
            allowed[0, 0, s:e, past + s:past + e] = torch.ones((e - s, e - s), dtype=torch.bool, device=dev).tril()
            pos[s:e] = torch.arange(past, past + e - s, device=dev)
        x = torch.tensor([[tok for b in branches for tok in b]], dtype=torch.long, device=dev)
        hidden = self.body(input_ids=x, cache=cache, attention_mask=self.attention_mask(allowed),
                           position_ids=pos[None], use_cache=True).last_hidden_state[0]
        self.crop(cache, past)
        logits = self.head_logits(hidden, range(t))
        return [logits[s:e] for s, e in itertools.pairwise(bounds)]

    @staticmethod
    def crop(cache: DynamicCache, length: int) -> None:
        """Keep the first ``length`` cached positions."""
        crop_dynamic(cache, length)

    # -- batched passes (continuous batching) ------------------------------------------------------------------
    def batchable(self, cache: DynamicCache | None = None) -> bool:
        """Whether this backbone's passes can join a batched forward: the plain ``encode``/``denoise`` of this
        class (a subclass that overrides them cannot), an attention implementation that
        takes an explicit 4-D mask, and a cache made only of full-attention ``DynamicLayer``s."""
        cls = type(self)
        if cls.encode is not Backbone.encode or cls.denoise is not Backbone.denoise:
            return False
        if getattr(self.model.config, "_attn_implementation", None) not in (*SDPA_LIKE, "eager"):
            return False
        return cache is None or dynamic_layers_only(cache)

    def encode_many(self, items: Sequence[tuple[Sequence[int], DynamicCache, Sequence[int]]]) -> list[torch.Tensor]:
        """``encode`` for several requests in one forward: ``[(ids, cache, rows), ...]`` -> logits per request."""
        return self.forward_many([Pass(ids, cache, rows, True) for ids, cache, rows in items])

    def denoise_many(
        self, items: Sequence[tuple[Sequence[int], DynamicCache, Sequence[int], bool]]
    ) -> list[torch.Tensor]:
        """``denoise`` for several requests in one forward: ``[(ids, cache, rows, bidirectional), ...]``."""
        return self.forward_many([Pass(ids, cache, rows, False, bidi) for ids, cache, rows, bidi in items])

    @torch.inference_mode()
    def forward_many(self, items: Sequence[Pass]) -> list[torch.Tensor]:
        """Encode and denoise passes of different requests (caches of different lengths) as one forward.

        Row ``b`` holds request ``b``: its cache left-padded to the longest (``P``), its new tokens right-padded to
        the longest (``Q``). Row ``b`` attends to its own cached positions and, inside its new tokens, causally
        (encode, causal denoise) or to all of them (bidirectional denoise); padding keys are never attended, and a
        padding query attends only to itself (so no row is all-masked). Positions continue from each row's own
        cache length. Returns each request's logits at its ``rows`` (indices into its ``ids``, negative allowed)."""
        if not items:
            return []
        dev, cfg = self.device, self.model.config
        n = len(items)
        past = [it.cache.get_seq_length() for it in items]
        lens = [len(it.ids) for it in items]
        assert min(lens) > 0
        P, Q = max(past), max(lens)
        x = torch.zeros((n, Q), dtype=torch.long, device=dev)
        pos = torch.arange(Q, device=dev).unsqueeze(0) + torch.tensor(past, device=dev).unsqueeze(1)  # [n, Q]
        mask = torch.zeros((n, 1, Q, P + Q), dtype=torch.bool, device=dev)
        tril = torch.ones((Q, Q), dtype=torch.bool, device=dev).tril()
        diag = torch.eye(Q, dtype=torch.bool, device=dev)
        for b, (it, p, q) in enumerate(zip(items, past, lens)):
            x[b, :q] = torch.tensor(list(it.ids), dtype=torch.long, device=dev)
            mask[b, 0, :q, P - p:P] = True
            mask[b, 0, :q, P:P + q] = True if it.bidirectional and not it.write else tril[:q, :q]
            mask[b, 0, q:, P:] = diag[q:]
        mask = self.attention_mask(mask)
        batch_cache = DynamicCache(config=cfg)
        if P:
            for layer in range(len(items[0].cache.layers)):
                ref = next(it.cache.layers[layer] for it, p in zip(items, past) if p)
                k = ref.keys.new_zeros((n, ref.keys.shape[1], P, ref.keys.shape[3]))
                v = ref.values.new_zeros((n, ref.values.shape[1], P, ref.values.shape[3]))
                for b, (it, p) in enumerate(zip(items, past)):
                    if p:
                        k[b, :, P - p:] = it.cache.layers[layer].keys[0]
                        v[b, :, P - p:] = it.cache.layers[layer].values[0]
                batch_cache.update(k, v, layer)
        hidden = self.body(input_ids=x, cache=batch_cache, attention_mask=mask, position_ids=pos,
                           use_cache=True).last_hidden_state  # [n, Q, H]
        for b, (it, q) in enumerate(zip(items, lens)):
            if it.write:  # append this row's real new keys/values (not the padding) to its own cache
                for layer, bl in enumerate(batch_cache.layers):
                    it.cache.update(bl.keys[b:b + 1, :, P:P + q], bl.values[b:b + 1, :, P:P + q], layer)
        rows = [[r + q if r < 0 else r for r in it.rows] for it, q in zip(items, lens)]
        for r, q in zip(rows, lens):
            assert all(0 <= i < q for i in r), "row index out of range"
        picked = [hidden[b, r] for b, r in enumerate(rows) if r]
        if not picked:
            return [hidden.new_zeros((0, self.head.out_features)).float() for _ in items]
        logits = self._head(torch.cat(picked))  # one head matmul for every request's rows
        out, i = [], 0
        for r in rows:
            out.append(logits[i:i + len(r)])
            i += len(r)
        return out


#: Whether :func:`continuation_logits` reads the continuations in one pass where the backbone can (False: a pass
#: each, cropped back; ``evals/prefetch_call.py`` compares the two in the agent loop).
ONE_PASS_CONTINUATIONS = True
#: The most positions one such pass holds (more continuations: a pass per group of them), which bounds its logits
#: (positions x vocabulary floats) and its mask.
MAX_BRANCH_POSITIONS = 256


def _groups(heads: Sequence[Sequence[int]], limit: int) -> list[list[Sequence[int]]]:
    """``heads`` in order, cut into runs of at most ``limit`` tokens (a longer head alone in its run)."""
    groups: list[list[Sequence[int]]] = [[]]
    size = 0
    for h in heads:
        if groups[-1] and size + len(h) > limit:
            groups.append([])
            size = 0
        groups[-1].append(h)
        size += len(h)
    return groups


def continuation_logits(bb: Any, cache: DynamicCache, heads: Sequence[Sequence[int]]) -> list[torch.Tensor]:
    """Each of ``heads`` read after what ``cache`` holds -> its logits at every one of its positions, the cache
    left as it was: in one pass where ``bb`` scores branches (:class:`~agentkit.engine.faces.Branching`, on a cache
    it can batch), else one pass each, cropped back. The tool step's decision reads its names so
    (``agentkit/decide.py``), and a grounded extraction its candidate values (``agentkit/steps/grounded.py``)."""
    from .faces import Branching

    if not heads:
        return []
    if ONE_PASS_CONTINUATIONS and isinstance(bb, Branching) and bb.batchable(cache):
        return [x for group in _groups(heads, MAX_BRANCH_POSITIONS) for x in bb.branches(group, cache)]
    past, out = cache.get_seq_length(), []
    for ids in heads:
        out.append(bb.encode(ids, cache, rows=list(range(len(ids)))))
        bb.crop(cache, past)
    return out
