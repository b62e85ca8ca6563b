"""The block-diffusion adapter: a hand-written LoRA on attention projections plus the ``<|mask|>`` embedding row.

File format (``adapter.safetensors``): ``<module>.lora_a`` [r, in] and ``<module>.lora_b`` [out, r] for each adapted
linear layer, ``mask_embedding`` [H]; the safetensors metadata holds ``agentkit_adapter`` (JSON: rank, alpha,
targets, mask token text and id, base model name, vocab size). ``apply_adapter`` merges it into a copy of a loaded
model and returns a ``LoadedModel`` with ``bidirectional=True`` and ``mask_token_id`` set.

An ``"ar"`` adapter may be trained on weights that already hold another ``"ar"`` adapter (the repair adapter on the
loop adapter): ``AdapterConfig.on`` names that adapter's folder and ``on_sha256`` its file. :func:`load_adapter`
then returns the two stacked as one LoRA (ranks concatenated, each factor ``A`` scaled by its own ``alpha / rank``,
scale 1), so every consumer of a LoRA (``merge_lora``, the engine's short passes) gets the weights it was trained
on; an ``on`` adapter whose file has another SHA-256 is an :class:`~agentkit.errors.AdapterMismatchError`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from ..errors import AdapterMismatchError
from .loader import LoadedModel, wrap
from .q4 import dense_linears

MASK_TOKEN = "<|mask|>"
FILE = "adapter.safetensors"
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "adapters" / "smollm2-135m-bd"
# the loop adapter for the default model (an "ar" LoRA trained on agent-loop traces, agentkit/training/sft.py):
# merged by default (EngineConfig.lora=None; "none" or --lora none: the weights as loaded; MODEL_CARD.md there)
LOOP_DIR = DEFAULT_DIR.parent / "smollm2-135m-loop"


@dataclass
class AdapterConfig:
    rank: int = 16
    alpha: float = 32.0
    targets: tuple[str, ...] = ("q_proj", "v_proj")
    mask_token: str = MASK_TOKEN
    mask_token_id: int = -1
    base: str = ""
    vocab_size: int = 0
    # "adapted": the LoRA ran over the clean prefix too (a diffusion request encodes its prompt with the adapted
    # weights); "base": only over the noisy block, so the prefix's KV cache is the base model's and one cache
    # serves AR, verify and the adapter's canvas (self-speculation drafts need no second prompt pass)
    prefix: str = "adapted"
    # "block-diffusion": LoRA + mask row, merged for the bidirectional canvas (apply_adapter); "ar": a LoRA alone,
    # merged into the causal weights every mode decodes with (merge_lora; the loop adapter, training/sft.py)
    kind: str = "block-diffusion"
    # whether an agent's call/no-call decision on these weights is calibrated against a content-free question
    # (agentkit.decide.calibrated); False: the weights were trained on the decisions themselves (the loop adapter),
    # so the request's own scores decide (agentkit.decide.calibrates reads it)
    calibrate: bool = True
    # the "ar" adapter these weights were trained on top of (its folder's name, found beside this adapter's folder
    # or in agentkit's adapters/) and its file's SHA-256; "": trained on the weights as loaded
    on: str = ""
    on_sha256: str = ""

    @property
    def scale(self) -> float:
        return self.alpha / self.rank


class LoRALinear(nn.Module):
    """``base(x) + scale * x A^T B^T``; ``base`` frozen, ``B`` starts at zero (the adapted model starts as the base)."""

    def __init__(self, base: nn.Linear, rank: int, scale: float) -> None:
        super().__init__()
        self.base, self.scale = base, scale
        self.rows: torch.Tensor | None = None  # training: [N, T, 1] where the LoRA applies (None: everywhere)
        w = base.weight
        self.lora_a = nn.Parameter(torch.empty(rank, w.shape[1], device=w.device, dtype=torch.float32))
        self.lora_b = nn.Parameter(torch.zeros(w.shape[0], rank, device=w.device, dtype=torch.float32))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)
        d = ((x @ self.lora_a.to(x.dtype).T) @ self.lora_b.to(x.dtype).T) * self.scale
        return y + (d if self.rows is None else d * self.rows.to(d.dtype))

    def delta(self) -> torch.Tensor:
        return (self.lora_b @ self.lora_a) * self.scale


def inject_lora(model: nn.Module, cfg: AdapterConfig) -> dict[str, LoRALinear]:
    """Replace each ``nn.Linear`` whose name ends with a target by a ``LoRALinear``; freeze everything else."""
    for p in model.parameters():
        p.requires_grad_(False)
    out: dict[str, LoRALinear] = {}
    for name, mod in list(model.named_modules()):
        if isinstance(mod, nn.Linear) and name.split(".")[-1] in cfg.targets:
            parent = model.get_submodule(name.rsplit(".", 1)[0])
            lora = LoRALinear(mod, cfg.rank, cfg.scale)
            setattr(parent, name.rsplit(".", 1)[1], lora)
            out[name] = lora
    if not out:
        raise ValueError(f"no linear layer named {cfg.targets} in the model")
    return out


def ensure_mask_token(model: nn.Module, tokenizer, text: str = MASK_TOKEN) -> int:
    """Add the absorbing-mask token to ``tokenizer`` (if missing) and make the embeddings big enough for it."""
    tid = tokenizer.convert_tokens_to_ids(text)
    if tid is None or tid == tokenizer.unk_token_id or tokenizer.convert_ids_to_tokens(tid) != text:
        tokenizer.add_special_tokens({"mask_token": text})
        tid = tokenizer.convert_tokens_to_ids(text)
    elif tokenizer.mask_token is None:
        tokenizer.mask_token = text
    emb = model.get_input_embeddings()
    if tid >= emb.weight.shape[0]:
        n = emb.weight.shape[0]
        model.resize_token_embeddings(tid + 1, mean_resizing=False)
        with torch.no_grad():  # new rows: the mean embedding (a neutral start)
            w = model.get_input_embeddings().weight
            w[n:] = w[:n].mean(0)
    return int(tid)


class NoMaskHead(nn.Linear):
    """The output head with the mask token's logit pinned very low: the mask is an input symbol, never an output.
    Shares the original head's weight (so tied embeddings stay tied, and the trained mask embedding row can be
    set without making the model predict the mask)."""

    def __init__(self, head: nn.Linear, mask_id: int) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = head.in_features, head.out_features
        self.weight, self.bias = head.weight, head.bias
        self.mask_id = mask_id

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        keep = torch.ones(y.shape[-1], dtype=y.dtype, device=y.device)
        keep[self.mask_id] = 0
        return y * keep + (1 - keep) * -1e4


def suppress_mask_logit(model: nn.Module, mask_id: int) -> None:
    head = model.get_output_embeddings()
    if not isinstance(head, NoMaskHead):
        model.set_output_embeddings(NoMaskHead(head, mask_id))


def adapter_state(loras: dict[str, LoRALinear], mask_embedding: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    state = {}
    for name, m in loras.items():
        state[f"{name}.lora_a"] = m.lora_a.detach().float().cpu().contiguous()
        state[f"{name}.lora_b"] = m.lora_b.detach().float().cpu().contiguous()
    if mask_embedding is not None:
        state["mask_embedding"] = mask_embedding.detach().float().cpu().contiguous()
    return state


def save_adapter(path: str | Path, state: dict[str, torch.Tensor], cfg: AdapterConfig) -> Path:
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    meta = asdict(cfg)
    tmp = path / (FILE + ".tmp")
    save_file(state, str(tmp), metadata={"format": "pt", "agentkit_adapter": json.dumps(meta)})
    tmp.replace(path / FILE)
    (path / "adapter_config.json").write_text(json.dumps(meta, indent=2) + "\n")
    return path / FILE


def adapter_file(path: str | Path) -> Path:
    path = Path(path)
    return path / FILE if path.is_dir() else path


def adapter_sha256(path: str | Path) -> str:
    """The SHA-256 of an adapter's file (a folder: its ``adapter.safetensors``)."""
    return hashlib.sha256(adapter_file(path).read_bytes()).hexdigest()


def read_adapter(path: str | Path) -> tuple[dict[str, torch.Tensor], AdapterConfig]:
    """One adapter file's tensors and config, as saved (nothing stacked)."""
    from safetensors import safe_open

    f = adapter_file(path)
    if not f.is_file():
        raise FileNotFoundError(f"no adapter at {str(f)!r} (expected {FILE})")
    with safe_open(str(f), framework="pt") as h:
        meta = json.loads(h.metadata()["agentkit_adapter"])
        state = {k: h.get_tensor(k) for k in h.keys()}  # noqa: SIM118 (safe_open is not iterable)
    meta["targets"] = tuple(meta["targets"])
    return state, AdapterConfig(**meta)


def under_adapter(path: str | Path, cfg: AdapterConfig) -> Path:
    """The folder of the adapter ``cfg.on`` names: beside ``path``'s folder, else in agentkit's ``adapters/``,
    whichever holds a file with ``cfg.on_sha256`` (:class:`AdapterMismatchError` when neither does)."""
    here = adapter_file(path).parent
    found = [d for d in dict.fromkeys((here.parent / cfg.on, DEFAULT_DIR.parent / cfg.on)) if (d / FILE).is_file()]
    for d in found:
        if adapter_sha256(d) == cfg.on_sha256:
            return d
    seen = ", ".join(f"{d} (SHA-256 {adapter_sha256(d)[:12]})" for d in found) or "none found"
    raise AdapterMismatchError(f"the adapter at {str(path)!r} was trained on top of {cfg.on!r} with SHA-256 "
                               f"{cfg.on_sha256[:12]}: {seen}; it needs those weights")


def stack(lower: tuple[dict[str, torch.Tensor], AdapterConfig],
          upper: tuple[dict[str, torch.Tensor], AdapterConfig]) -> tuple[dict[str, torch.Tensor], AdapterConfig]:
    """One LoRA whose deltas are the sum of ``lower``'s and ``upper``'s (ranks concatenated, scale 1)."""
    (ls, lc), (us, uc) = lower, upper
    names = dict.fromkeys(k[: -len(".lora_a")] for k in [*ls, *us] if k.endswith(".lora_a"))
    state: dict[str, torch.Tensor] = {}
    for n in names:
        parts = [(s[f"{n}.lora_a"].float() * c.scale, s[f"{n}.lora_b"].float()) for s, c in ((ls, lc), (us, uc))
                 if f"{n}.lora_a" in s]
        state[f"{n}.lora_a"] = torch.cat([a for a, _ in parts], 0)
        state[f"{n}.lora_b"] = torch.cat([b for _, b in parts], 1)
    rank = lc.rank + uc.rank
    targets = tuple(dict.fromkeys([*lc.targets, *uc.targets]))
    return state, AdapterConfig(**{**asdict(uc), "rank": rank, "alpha": float(rank), "targets": targets})


def load_adapter(path: str | Path) -> tuple[dict[str, torch.Tensor], AdapterConfig]:
    """An adapter's tensors and config; one trained on top of another ``"ar"`` adapter (``cfg.on``) comes
    stacked on it (module docstring)."""
    state, cfg = read_adapter(path)
    if not cfg.on:
        return state, cfg
    if cfg.kind != "ar":
        raise AdapterMismatchError(f"{str(path)!r}: only an 'ar' adapter stacks on another, this is {cfg.kind!r}")
    lower = load_adapter(under_adapter(path, cfg))
    if lower[1].kind != "ar" or lower[1].vocab_size != cfg.vocab_size:
        raise AdapterMismatchError(f"{str(path)!r} stacks on {cfg.on!r}, which is not an 'ar' adapter for the "
                                   f"same vocabulary")
    return stack(lower, (state, cfg))


def apply_adapter(lm: LoadedModel, path: str | Path | None = None, *, copy_model: bool = True) -> LoadedModel:
    """A ``LoadedModel`` with the adapter merged into (a copy of) ``lm``'s weights: LoRA deltas added to the
    target projections, the mask token added to the tokenizer and its embedding row set. ``copy_model=False``
    modifies ``lm.model`` in place (saves memory; the base weights are then gone)."""
    state, cfg = load_adapter(DEFAULT_DIR if path is None else path)
    if cfg.kind != "block-diffusion":
        raise ValueError(f"{str(path)!r} is a {cfg.kind!r} adapter, not a block-diffusion one (see merge_lora)")
    model = copy.deepcopy(lm.model) if copy_model else lm.model
    dense_linears(model)  # merged weights: a 4-bit copy of the base weights would be stale
    tok = copy.deepcopy(lm.tokenizer)
    tid = ensure_mask_token(model, tok, cfg.mask_token)
    if cfg.mask_token_id >= 0 and tid != cfg.mask_token_id:
        raise ValueError(f"mask token id {tid} differs from the adapter's {cfg.mask_token_id}: wrong base model?")
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        emb[tid] = state["mask_embedding"].to(emb.dtype).to(emb.device)
    _add_deltas(model, state, cfg)
    suppress_mask_logit(model, tid)
    meta = {**lm.meta, "adapter": str(path or DEFAULT_DIR), "adapter_config": asdict(cfg)}
    return wrap(model, tok, name=f"{lm.name} + block-diffusion adapter", kind=lm.kind, bidirectional=True,
                mask_token_id=tid, chat=lm.chat, meta=meta)


def lora_deltas(state: dict[str, torch.Tensor], cfg: AdapterConfig) -> dict[str, torch.Tensor]:
    """Each adapted layer's ``B @ A * scale`` (float32), by the name of the weight it is added to."""
    return {key[: -len(".lora_a")] + ".weight": (state[key[: -len(".lora_a")] + ".lora_b"].float() @ a.float())
            * cfg.scale for key, a in state.items() if key.endswith(".lora_a")}


def _add_deltas(model: nn.Module, state: dict[str, torch.Tensor], cfg: AdapterConfig) -> None:
    """Add each ``B @ A * scale`` of ``state`` to its linear layer's weight (the layers dense already)."""
    with torch.no_grad():
        for name, delta in lora_deltas(state, cfg).items():
            w = model.get_submodule(name[: -len(".weight")]).weight
            w += delta.to(w.dtype).to(w.device)


def merge_lora(lm: LoadedModel, path: str | Path, *, copy_model: bool = False) -> LoadedModel:
    """A ``LoadedModel`` whose causal weights have the ``"ar"`` adapter at ``path`` merged in (every mode then
    decodes with them: the loop adapter, ``EngineConfig.lora``). ``copy_model=False`` changes ``lm.model``."""
    state, cfg = load_adapter(path)
    if cfg.kind != "ar":
        raise ValueError(f"{str(path)!r} is a {cfg.kind!r} adapter; merge_lora takes an 'ar' one (a LoRA alone)")
    if cfg.vocab_size and cfg.vocab_size != lm.model.get_input_embeddings().weight.shape[0]:
        raise AdapterMismatchError(f"{str(path)!r} was trained on a model with {cfg.vocab_size} tokens, this one "
                                   f"has {lm.model.get_input_embeddings().weight.shape[0]}: wrong base model?")
    if cfg.on and cfg.base and cfg.base != lm.name:
        raise AdapterMismatchError(f"{str(path)!r} was trained on {cfg.on!r} merged into {cfg.base!r}; this model "
                                   f"is {lm.name!r}")
    model = copy.deepcopy(lm.model) if copy_model else lm.model
    dense_linears(model)
    _add_deltas(model, state, cfg)
    # the checkpoint's 4-bit weights (the engine's 4-bit steps read them) are not these any more; the engine's
    # short passes read an 8-bit copy of the checkpoint's weights plus the deltas instead ("base_weights")
    meta = {**lm.meta, "weights": None, "base_weights": lm.meta.get("weights"), "lora": str(path),
            "lora_config": asdict(cfg)}
    return wrap(model, lm.tokenizer, name=f"{lm.name} + LoRA {Path(path).name}", kind=lm.kind,
                bidirectional=lm.bidirectional, mask_token_id=lm.mask_token_id, chat=lm.chat, meta=meta)
