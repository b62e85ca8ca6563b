"""A block-diffusion drafter conditioned on the base model's own hidden states (DFlash's shape, sized for a CPU).

The drafter is one or two decoder layers at the base's width that share the base's frozen token embeddings and
output head; only its own weights are stored (``drafter.safetensors`` + ``drafter.json``). It drafts a whole block
in one pass:

- **canvas**: position 0 holds the last committed token (the base's exact pick), the template's pinned run after it
  stays in place, every other position holds a learned mask embedding;
- **context**: the base's hidden states at a few layers (:attr:`DrafterConfig.feature_layers`) over every committed
  position, concatenated and fused by a learned projection; each drafter layer reads them as keys and values (their
  own ``k_proj``/``v_proj`` over the fused features), next to the canvas's own keys and values;
- **attention**: the canvas attends to the whole context and, bidirectionally, to every canvas position;
- **output**: as the base's head reads it, position ``j`` predicts the token at ``j + 1`` (the shift of an AR head).

A fresh drafter starts as the base's last layer(s) reading the base's own input to that layer (the projection
initialised to pick the feature layer just below): position 0 then predicts almost what the base predicts.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import DrafterMismatchError, ModelNotFoundError

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "adapters" / "smollm2-135m-drafter"  # the default model's
WEIGHTS = "drafter.safetensors"
CONFIG = "drafter.json"


def base_fingerprint(model: nn.Module) -> str:
    """What a drafter is tied to: the base's shape and the bytes of its output head (embeddings, tied) sampled at a
    fixed stride; another model, or another vocabulary, gives another fingerprint."""
    cfg = model.config
    w = model.get_output_embeddings().weight.detach()
    # read at bf16 precision: the same weights loaded in float32 (a CPU without native bf16) give the same print
    sample = w[:: max(1, w.shape[0] // 64), :16].to(torch.bfloat16).float().contiguous()
    h = hashlib.sha256(json.dumps([cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size]).encode())
    h.update(sample.mul(1024).round().to(torch.int32).numpy().tobytes())
    return h.hexdigest()[:16]


@dataclass
class DrafterConfig:
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    rope_theta: float
    eps: float
    feature_layers: tuple[int, ...]  # base decoder layers whose outputs are fused into the context
    layers: int = 1
    block: int = 16  # canvas positions a training block has
    # the drafter's vocabulary: token ids below this (a BPE's first merges: its most frequent tokens) and every token
    # of the request's context (what it copies); held-out answers' tokens are 97.8% in it at 16384 (96.3% at 8192)
    head_top: int = 16384
    base: str = ""  # base_fingerprint of the model it drafts for
    base_name: str = ""
    meta: dict = field(default_factory=dict)

    @classmethod
    def for_base(cls, model: nn.Module, layers: int = 1, block: int = 16, name: str = "") -> DrafterConfig:
        c = model.config
        n = c.num_hidden_layers
        feats = tuple(sorted({min(2, n - 1), n // 2, max(0, n - 1 - layers)}))  # the last: below the copied layers
        rope = (getattr(c, "rope_parameters", None) or {}).get("rope_theta") or getattr(c, "rope_theta", 10000.0)
        return cls(hidden=c.hidden_size, heads=c.num_attention_heads, kv_heads=c.num_key_value_heads,
                   head_dim=c.hidden_size // c.num_attention_heads, intermediate=c.intermediate_size,
                   vocab=c.vocab_size, rope_theta=float(rope), eps=float(c.rms_norm_eps),
                   feature_layers=feats, layers=layers, block=block,
                   base=base_fingerprint(model), base_name=name)


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embedding (Llama's half-split layout) of ``x`` [N, heads, d] at positions ``pos`` [N]."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = pos.float()[:, None] * inv[None]  # [N, d/2]
    cos, sin = ang.cos()[:, None].to(x.dtype), ang.sin()[:, None].to(x.dtype)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight.to(x.dtype)


class DrafterLayer(nn.Module):
    """A Llama decoder layer whose keys and values are the fused context's followed by the canvas's own."""

    def __init__(self, c: DrafterConfig) -> None:
        super().__init__()
        self.c = c
        h, kv = c.hidden, c.kv_heads * c.head_dim
        self.input_layernorm = RMSNorm(h, c.eps)
        self.post_attention_layernorm = RMSNorm(h, c.eps)
        self.q_proj, self.o_proj = nn.Linear(h, h, bias=False), nn.Linear(h, h, bias=False)
        self.k_proj, self.v_proj = nn.Linear(h, kv, bias=False), nn.Linear(h, kv, bias=False)
        self.gate_proj = nn.Linear(h, c.intermediate, bias=False)
        self.up_proj = nn.Linear(h, c.intermediate, bias=False)
        self.down_proj = nn.Linear(c.intermediate, h, bias=False)

    def context_kv(self, ctx: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys (rotated) and values of context positions ``ctx`` [T, H] at ``pos`` [T] -> 2 x [T, kvh, d]."""
        c = self.c
        h = self.input_layernorm(ctx)
        k = self.k_proj(h).view(-1, c.kv_heads, c.head_dim)
        v = self.v_proj(h).view(-1, c.kv_heads, c.head_dim)
        return rope(k, pos, c.rope_theta), v

    def forward(self, x: torch.Tensor, pos: torch.Tensor, ctx_k: torch.Tensor, ctx_v: torch.Tensor,
                mask: torch.Tensor | None) -> torch.Tensor:
        """``x`` [N, H] canvas states at ``pos`` [N]; ``mask`` [N, T + N] (True: may attend; None: all)."""
        c = self.c
        h = self.input_layernorm(x)
        q = rope(self.q_proj(h).view(-1, c.heads, c.head_dim), pos, c.rope_theta)
        k = torch.cat([ctx_k, rope(self.k_proj(h).view(-1, c.kv_heads, c.head_dim), pos, c.rope_theta)])
        v = torch.cat([ctx_v, self.v_proj(h).view(-1, c.kv_heads, c.head_dim)])
        rep = c.heads // c.kv_heads
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)  # [T+N, heads, d]
        att = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                             v.transpose(0, 1)[None], attn_mask=None if mask is None else mask[None, None],
                                             scale=1.0 / math.sqrt(c.head_dim))[0]  # [heads, N, d]
        x = x + self.o_proj(att.transpose(0, 1).reshape(-1, c.hidden))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class BlockDrafter(nn.Module):
    """The drafter's own weights; the base's embeddings and head are passed in, never stored."""

    def __init__(self, c: DrafterConfig) -> None:
        super().__init__()
        self.c = c
        self.fc = nn.Linear(len(c.feature_layers) * c.hidden, c.hidden, bias=False)
        self.mask_embedding = nn.Parameter(torch.zeros(c.hidden))
        self.layers = nn.ModuleList(DrafterLayer(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.hidden, c.eps)

    def init_from_base(self, model: nn.Module) -> None:
        """Start as the base's last ``layers`` decoder layers, reading the fused feature of the layer below them."""
        base_layers = model.model.layers
        n = len(base_layers)
        with torch.no_grad():
            for i, layer in enumerate(self.layers):
                src = base_layers[n - self.c.layers + i]
                for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                    getattr(layer, name).weight.copy_(getattr(src.self_attn, name).weight.float())
                for name in ("gate_proj", "up_proj", "down_proj"):
                    getattr(layer, name).weight.copy_(getattr(src.mlp, name).weight.float())
                layer.input_layernorm.weight.copy_(src.input_layernorm.weight.float())
                layer.post_attention_layernorm.weight.copy_(src.post_attention_layernorm.weight.float())
            self.norm.weight.copy_(model.model.norm.weight.float())
            h = self.c.hidden
            self.fc.weight.zero_()
            self.fc.weight[:, -h:] = torch.eye(h)  # the last feature layer (the input of the copied layer)
            self.mask_embedding.copy_(model.get_input_embeddings().weight.float().mean(0))

    def fuse(self, feats: torch.Tensor) -> torch.Tensor:
        """Base features [T, len(feature_layers) * H] -> the fused context [T, H]."""
        return self.fc(feats.to(self.fc.weight.dtype))

    def context_kv(self, ctx: torch.Tensor, pos: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [layer.context_kv(ctx, pos) for layer in self.layers]

    def forward(self, x: torch.Tensor, pos: torch.Tensor, kv: list[tuple[torch.Tensor, torch.Tensor]],
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """Canvas embeddings ``x`` [N, H] at ``pos`` [N] over the context keys/values ``kv`` -> hidden [N, H]
        (normed: the base's head reads it)."""
        for layer, (k, v) in zip(self.layers, kv):
            x = layer(x, pos, k, v, mask)
        return self.norm(x)

    # -- files --------------------------------------------------------------------------------------------------
    def save(self, out: str | Path, dtype: torch.dtype = torch.bfloat16) -> None:
        from safetensors.torch import save_file

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().to(dtype).contiguous() for k, v in self.state_dict().items()},
                  str(out / (WEIGHTS + ".partial")))
        (out / (WEIGHTS + ".partial")).replace(out / WEIGHTS)
        cfg = asdict(self.c)
        cfg["feature_layers"] = list(cfg["feature_layers"])
        (out / CONFIG).write_text(json.dumps(cfg, indent=1) + "\n")


def load_drafter(path: str | Path, model: nn.Module | None = None) -> BlockDrafter:
    """A drafter saved by :meth:`BlockDrafter.save`; with ``model``, checked to be made for that base
    (:class:`DrafterMismatchError` otherwise). A missing folder or file is a :class:`ModelNotFoundError`."""
    from safetensors.torch import load_file

    p = Path(path)
    if not (p / WEIGHTS).is_file() or not (p / CONFIG).is_file():
        raise ModelNotFoundError(f"no drafter at {p} (expected {WEIGHTS} and {CONFIG})")
    raw = json.loads((p / CONFIG).read_text())
    raw["feature_layers"] = tuple(raw["feature_layers"])
    c = DrafterConfig(**raw)
    if model is not None:
        want = base_fingerprint(model)
        if c.base != want:
            raise DrafterMismatchError(f"the drafter at {p} was trained for another base model ({c.base_name or '?'}, "
                                       f"fingerprint {c.base}); this model's fingerprint is {want}")
    d = BlockDrafter(c)
    d.load_state_dict({k: v.float() for k, v in load_file(str(p / WEIGHTS)).items()})
    return d.eval()


def draft_mask(anchors: list[int], block: int, ctx_len: int) -> torch.Tensor:
    """The attention mask of several blocks drafted at once over one sequence's context (training): block ``i``
    (its canvas starting at position ``anchors[i]``, its context the positions before it) attends to
    ``ctx[:anchors[i]]`` and to its own canvas, bidirectionally -> [n * block, ctx_len + n * block]."""
    n = len(anchors)
    m = torch.zeros((n * block, ctx_len + n * block), dtype=torch.bool)
    for i, a in enumerate(anchors):
        rows = slice(i * block, (i + 1) * block)
        m[rows, :a] = True
        m[rows, ctx_len + i * block: ctx_len + (i + 1) * block] = True
    return m


class FeatureTap:
    """Forward hooks on the base's feature layers. On a thread that called :meth:`begin`, every pass of the base
    leaves its feature-layer outputs, concatenated ([T, n * H] per pass, batch of one), for :meth:`take`; other
    threads' passes (and passes while nothing is recording) are not kept."""

    def __init__(self, model: nn.Module, layers: tuple[int, ...]) -> None:
        self.layers = tuple(layers)
        self.local = threading.local()
        self.handles = [model.model.layers[i].register_forward_hook(self._hook(i)) for i in self.layers]

    def _hook(self, i: int):
        def hook(_module, _args, out):
            rec = getattr(self.local, "rec", None)
            if rec is None:
                return
            h = out[0] if isinstance(out, tuple) else out
            if h.dim() == 3 and h.shape[0] != 1:
                rec["bad"] = True  # a batched pass (several requests): not this request's alone
                return
            rec["layers"][i] = h.detach().reshape(-1, h.shape[-1])
            if i == self.layers[-1]:
                got = rec.pop("layers")
                rec["layers"] = {}
                if len(got) == len(self.layers):
                    rec["passes"].append(torch.cat([got[j] for j in self.layers], -1))
                else:
                    rec["bad"] = True
        return hook

    def begin(self) -> None:
        """Start keeping this thread's passes (what was kept before is dropped)."""
        self.local.rec = {"layers": {}, "passes": [], "bad": False}

    def take(self) -> torch.Tensor | None:
        """The features of this thread's passes since the last take ([T, n * H], in pass order), or None when a
        pass could not be kept whole (a batched pass)."""
        got = self.peek()
        if got is not None:
            self.local.rec["passes"] = []
        return got

    def peek(self) -> torch.Tensor | None:
        """What :meth:`take` would return, left in place."""
        rec = getattr(self.local, "rec", None)
        if rec is None or rec["bad"]:
            return None
        passes = rec["passes"]
        return torch.cat(passes) if passes else torch.zeros((0, 0))

    def end(self) -> None:
        self.local.rec = None

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


class DraftHead:
    """The base's output head over the drafter's vocabulary (:attr:`DrafterConfig.head_top` plus the context's own
    tokens): a fifth of the head's cost at 15 rows (0.9-1.8 ms against 9 ms in bf16, one thread)."""

    def __init__(self, weight: torch.Tensor, top: int) -> None:
        self.w, self.top = weight, min(top, weight.shape[0])
        self.extra: list[int] = []
        self.where: dict[int, int] = {}  # extra token -> its column
        self.w_extra: torch.Tensor | None = None

    def add(self, ids) -> None:
        """Take the tokens of ``ids`` outside the top ids into the vocabulary."""
        new = [t for t in dict.fromkeys(int(t) for t in ids) if t >= self.top and t not in self.where]
        if new:
            for t in new:
                self.where[t] = self.top + len(self.extra)
                self.extra.append(t)
            self.w_extra = self.w[torch.tensor(self.extra)]

    def column(self, t: int) -> int:
        return t if t < self.top else self.where[t]

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        """Hidden [r, H] -> logits over the vocabulary's columns [r, top + len(extra)]."""
        h = h.to(self.w.dtype)
        out = F.linear(h, self.w[: self.top])
        return out if self.w_extra is None else torch.cat([out, F.linear(h, self.w_extra)], -1)

    def full(self, cols: torch.Tensor) -> torch.Tensor:
        """Column logits -> logits over the whole vocabulary (-inf outside the drafter's)."""
        out = torch.full((cols.shape[0], self.w.shape[0]), float("-inf"))
        out[:, : self.top] = cols[:, : self.top].float()
        if self.extra:
            out[:, torch.tensor(self.extra)] = cols[:, self.top:].float()
        return out


class PromptFeatures:
    """A :class:`~agentkit.engine.prefix.FeatureSource` for a request the drafter does not draft: the base's features
    of its prompt pass, kept with the prefix-cache pieces it stores, so a drafted request that starts the same way
    (an agent's reply after its tool call) reuses them. Recording ends with the prompt pass."""

    reads_prompt = False

    def __init__(self, tap: FeatureTap) -> None:
        self.tap = tap
        tap.begin()

    def prime(self, feats: torch.Tensor) -> None:
        raise AssertionError("an undrafted request restores keys/values only")

    def encoded(self) -> torch.Tensor | None:
        return self.tap.peek()

    def prompt_done(self) -> None:
        self.tap.end()


class BlockDraftSource:
    """One request's drafts from a :class:`BlockDrafter` for ``Decoder.verify``: the context's keys/values are kept
    in step with the verifier's KV cache (the base's passes leave their features on the :class:`FeatureTap`; a
    rejected tail is cropped as the cache is), and :meth:`logits` drafts a block in one pass."""

    def __init__(self, drafter: BlockDrafter, tap: FeatureTap, embeddings: torch.Tensor, head: torch.Tensor) -> None:
        self.d, self.tap, self.emb = drafter, tap, embeddings
        self.head = DraftHead(head, drafter.c.head_top)
        self.seen = 0  # context tokens already taken into the head's vocabulary
        self.kv: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.last_all: torch.Tensor | None = None  # fused features of the context (the last one joins the canvas)
        self.length = 0
        self.primed: torch.Tensor | None = None  # features of prompt positions restored from the prefix cache
        self.passes = 0
        self.ms = 0.0
        tap.begin()

    def close(self) -> None:
        self.tap.end()

    # -- prefix.FeatureSource: the prompt's features, reused from the prefix cache and kept there ----------------
    reads_prompt = True

    def prime(self, feats: torch.Tensor) -> None:
        self.primed = feats

    def encoded(self) -> torch.Tensor | None:
        return None if self.length else self.tap.peek()  # before drafting: the prompt pass's passes only

    def prompt_done(self) -> None:
        """Drafting goes on reading the tap."""

    def _sync(self, length: int) -> bool:
        """Take the base's new features, keep the first ``length`` context positions; False if out of step."""
        new = self.tap.take()
        if new is None:
            return False
        if self.primed is not None:  # the restored prompt positions come first
            new = torch.cat([self.primed, new]) if new.numel() else self.primed
            self.primed = None
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            if new.numel():
                ctx = self.d.fuse(new)
                kv = self.d.context_kv(ctx, torch.arange(self.length, self.length + len(new)))
                self.kv = kv if not self.kv else [(torch.cat([k0, k]), torch.cat([v0, v]))
                                                  for (k0, v0), (k, v) in zip(self.kv, kv)]
                self.length += len(new)
                self.last_all = ctx if self.last_all is None else torch.cat([self.last_all, ctx])
            if length > self.length or length < 1:
                return False
            self.kv = [(k[:length], v[:length]) for k, v in self.kv]
            self.last_all = self.last_all[:length]
            self.length = length
        return True

    def logits(self, canvas: list[int | None], context: list[int]) -> torch.Tensor | None:
        """Draft logits for a block whose canvas is ``canvas`` (position 0 the last committed token, pinned tokens
        in place, None where masked) after the committed tokens ``context``: row ``j`` drafts position ``j + 1``
        -> [len(canvas), V] float (-inf outside the drafter's vocabulary), or None when the features are out of step
        with the cache."""
        t0 = time.perf_counter()
        context_length = len(context)
        if not self._sync(context_length):
            return None
        self.head.add(context[self.seen:])
        self.seen = context_length
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            ids = torch.tensor([t if t is not None else 0 for t in canvas])
            x = self.emb[ids].float()
            masked = torch.tensor([t is None for t in canvas])
            x = torch.where(masked[:, None], self.d.mask_embedding[None].expand_as(x), x) + self.last_all[-1]
            pos = torch.arange(context_length, context_length + len(canvas))
            h = self.d(x, pos, self.kv)
            out = self.head.full(self.head(h))
        self.passes += 1
        self.ms += 1000 * (time.perf_counter() - t0)
        return out
