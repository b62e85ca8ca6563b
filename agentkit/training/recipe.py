"""The block-diffusion objective (stage 1 of the DiffusionGemma recipe, Fast-dLLM v2 style token shift).

One training row is ``[clean prefix | noisy block]``: the prefix is a prompt plus the start of its answer, encoded
causally; the block is the next ``block`` answer tokens with a per-row mask ratio ``r ~ U(0, 1)`` (absorbing
``<|mask|>``, optionally some uniform-token noise). Attention is causal over the prefix and bidirectional inside
the block, which attends to the whole prefix: exactly what ``Backbone.denoise`` runs at decode time. Targets are
token-shifted: block token ``j`` is predicted from the output at ``j - 1`` (the last prefix position for ``j = 0``),
so the AR head keeps its meaning. Loss: cross entropy on masked (noised) positions only. Template-aware rows keep the
pinned (structural JSON) positions clean and noise only value positions, as the structured canvas decodes.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from ..models.adapter import (
    AdapterConfig,
    adapter_state,
    ensure_mask_token,
    inject_lora,
    save_adapter,
    suppress_mask_logit,
)
from ..models.loader import LoadedModel
from .data import Tokenized


@dataclass
class TrainConfig:
    steps: int = 200
    batch_size: int = 8
    block: int = 32  # canvas length (DecodeConfig.canvas_length default)
    max_prefix: int = 512  # prefix tokens kept (the left end is cut beyond this)
    lr: float = 2e-3
    warmup: int = 10
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    rank: int = 16
    alpha: float = 32.0
    targets: tuple[str, ...] = ("q_proj", "v_proj")
    mask_lr_mult: float = 5.0  # the new mask embedding row learns faster than the LoRA
    template_frac: float = 0.5  # rows whose pinned positions stay clean
    value_start_frac: float = 0.5  # rows whose block starts at the first value (as after prefill's forced text)
    uniform_frac: float = 0.0  # of the noised positions, this fraction gets a random token instead of the mask
    # a block that runs past the answer's end is filled up with its final EOS (noised and learned like any
    # position, as LLaDA and Fast-dLLM v2 pad): decoding canvases are full-length, so the model must learn what
    # comes after the end of an output, or it fills the tail with more content (e.g. arrays that never close)
    eos_pad: bool = True
    seed: int = 0
    device: str = "auto"  # auto: cuda if available
    bf16: bool = True  # autocast to bfloat16 on CUDA (fp32 master weights)
    cpu_bf16: bool = False  # ... and on CPU too (avx512_bf16 / AMX; see evals/bench_train_bf16.py)
    # rows made from the sampler's own canvas states (distill.py records with ``states``): the state is the block
    # input and the ar-constrained answer its target, loss wherever the state differs (CLLM consistency)
    consistency_frac: float = 0.0
    # False: the LoRA is applied only at block positions, so the prefix is encoded by the base weights exactly as
    # at decode time with a shared cache (AdapterConfig.prefix = "base"; self-speculative drafts then cost only
    # canvas passes). True: the LoRA runs over the prefix too (the shipped adapter's runs up to step 350)
    lora_prefix: bool = True
    log_every: int = 1
    ckpt_every: int = 25
    snapshot_every: int = 0  # also keep the adapter every N steps as out/snapshots/step-NNNNN/ (the training curve)
    max_minutes: float | None = None  # stop (and save) after this much wall time


# -- batches ------------------------------------------------------------------------------------------------------

def block_diffusion_mask(prefix_lens: list[int], block_lens: list[int], total: int) -> torch.Tensor:
    """``[N, 1, T, T]`` bool (True = attend): causal over the prefix, bidirectional in the block, which sees the
    whole prefix; padding rows attend only to themselves (no NaN), padding keys are never attended."""
    n = len(prefix_lens)
    q = torch.arange(total)[:, None]
    k = torch.arange(total)[None, :]
    m = torch.zeros(n, 1, total, total, dtype=torch.bool)
    for i, (p, b) in enumerate(zip(prefix_lens, block_lens)):
        causal = (k <= q) & (q < p)
        block = (q >= p) & (q < p + b) & (k < p + b)
        pad = (q >= p + b) & (k == q)
        m[i, 0] = causal | block | pad
    return m


@dataclass
class Batch:
    input_ids: torch.Tensor  # [N, T]
    attention_mask: torch.Tensor  # [N, 1, T, T] bool
    rows: torch.Tensor  # [M] flat indices (n * T + t) of the outputs that predict a noised token
    labels: torch.Tensor  # [M]
    tokens: int  # real (non-pad) positions
    prefix_lens: list[int] = field(default_factory=list)
    block_lens: list[int] = field(default_factory=list)


def make_row(ex: Tokenized, cfg: TrainConfig, mask_id: int, vocab: int, r: random.Random
             ) -> tuple[list[int], list[int], list[int], int]:
    """One row: (input ids, shifted output positions, labels, prefix length). ``ex.answer`` ends with EOS."""
    if ex.states and r.random() < cfg.consistency_frac:
        row = consistency_row(ex, cfg, mask_id, r)
        if row is not None:
            return row
    n = len(ex.answer)
    template = r.random() < cfg.template_frac and any(ex.pinned)
    first_value = next((i for i, p in enumerate(ex.pinned) if not p), 0)
    s = first_value if r.random() < cfg.value_start_frac else r.randrange(n)
    block = ex.answer[s: s + cfg.block]
    pinned = ex.pinned[s: s + cfg.block] if template else [False] * len(block)
    if cfg.eos_pad and len(block) < cfg.block:  # the answer ends inside the block: EOS up to its end
        pad = cfg.block - len(block)
        block, pinned = block + [ex.answer[-1]] * pad, pinned + [False] * pad
    prefix = (ex.prompt + ex.answer[:s])[-cfg.max_prefix:]
    open_ = [j for j, p in enumerate(pinned) if not p]
    if not open_:  # all pinned: noise one position anyway (never happens at value starts)
        open_ = [r.randrange(len(block))]
    ratio = r.random()
    noised = [j for j in open_ if r.random() < ratio] or [r.choice(open_)]
    inp = list(block)
    for j in noised:
        inp[j] = r.randrange(vocab) if r.random() < cfg.uniform_frac else mask_id
    p = len(prefix)
    return prefix + inp, [p + j - 1 for j in noised], [block[j] for j in noised], p


def consistency_row(ex: Tokenized, cfg: TrainConfig, mask_id: int, r: random.Random
                    ) -> tuple[list[int], list[int], list[int], int] | None:
    """A row whose block input is one of the sampler's canvas states (masks and provisional tokens; pinned
    positions clean) and whose targets are the answer's tokens wherever the state differs. None if none does."""
    s, state = ex.state_start, r.choice(ex.states)
    block, pinned = ex.answer[s: s + cfg.block], ex.pinned[s: s + cfg.block]
    pad = cfg.block - len(block)
    block, pinned = block + [ex.answer[-1]] * pad, pinned + [False] * pad
    inp = [b if p else (state[j] if j < len(state) else mask_id) for j, (b, p) in enumerate(zip(block, pinned))]
    wrong = [j for j in range(len(block)) if inp[j] != block[j]]
    if not wrong:
        return None
    prefix = (ex.prompt + ex.answer[:s])[-cfg.max_prefix:]
    p = len(prefix)
    return prefix + inp, [p + j - 1 for j in wrong], [block[j] for j in wrong], p


def make_batch(examples: list[Tokenized], cfg: TrainConfig, mask_id: int, vocab: int, pad_id: int,
               r: random.Random) -> Batch:
    rows = [make_row(ex, cfg, mask_id, vocab, r) for ex in examples]
    total = max(len(ids) for ids, *_ in rows)
    ids = torch.full((len(rows), total), pad_id, dtype=torch.long)
    flat, labels, plens, blens = [], [], [], []
    for i, (x, pos, lab, p) in enumerate(rows):
        ids[i, : len(x)] = torch.tensor(x)
        flat += [i * total + q for q in pos]
        labels += lab
        plens.append(p)
        blens.append(len(x) - p)
    return Batch(ids, block_diffusion_mask(plens, blens, total), torch.tensor(flat), torch.tensor(labels),
                 sum(len(x) for x, *_ in rows), plens, blens)


# -- the trainer ----------------------------------------------------------------------------------------------------

class Trainer:
    """LoRA + mask-embedding training of ``lm.model`` in place (the caller keeps a copy if it needs the base)."""

    def __init__(self, lm: LoadedModel, cfg: TrainConfig) -> None:
        self.lm, self.cfg = lm, cfg
        dev = cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        self.device = torch.device(dev)
        self.model = lm.model
        if any(p.dtype != torch.float32 for p in self.model.parameters()):
            self.model = self.model.to(torch.float32)  # fp32 master weights (bf16 only inside autocast)
        self.model.to(self.device)
        self.mask_id = ensure_mask_token(self.model, lm.tokenizer)
        suppress_mask_logit(self.model, self.mask_id)  # as at decode time (apply_adapter)
        self.acfg = AdapterConfig(rank=cfg.rank, alpha=cfg.alpha, targets=tuple(cfg.targets),
                                  mask_token_id=self.mask_id, base=lm.name,
                                  prefix="adapted" if cfg.lora_prefix else "base",
                                  vocab_size=self.model.get_input_embeddings().weight.shape[0])
        self.loras = inject_lora(self.model, self.acfg)
        emb = self.model.get_input_embeddings().weight
        self.mask_row = torch.nn.Parameter(emb[self.mask_id].detach().clone().float())
        self.body = getattr(self.model, self.model.base_model_prefix)
        self.head = self.model.get_output_embeddings()
        lora_params = [p for m in self.loras.values() for p in (m.lora_a, m.lora_b)]
        self.opt = torch.optim.AdamW([
            {"params": lora_params, "lr": cfg.lr, "weight_decay": cfg.weight_decay},
            {"params": [self.mask_row], "lr": cfg.lr * cfg.mask_lr_mult, "weight_decay": 0.0},
        ])
        self.step_no = 0
        self.losses: list[float] = []
        self.tokens = 0
        self.seconds = 0.0
        self.start_step, self.start_tokens, self.start_seconds = 0, 0, 0.0  # where this invocation began
        self.model.train()

    @property
    def autocast(self):
        on = self.cfg.bf16 and (self.device.type == "cuda" or self.cfg.cpu_bf16)
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=on)

    def loss(self, batch: Batch) -> torch.Tensor:
        ids = batch.input_ids.to(self.device)
        emb = self.body.get_input_embeddings()(ids)
        emb = torch.where((ids == self.mask_id)[..., None], self.mask_row.to(emb.dtype), emb)
        pos = torch.arange(ids.shape[1], device=self.device)[None].expand_as(ids)
        rows = None if self.cfg.lora_prefix else \
            (pos >= torch.tensor(batch.prefix_lens, device=self.device)[:, None])[..., None]  # [N, T, 1]
        for m in self.loras.values():
            m.rows = rows
        with self.autocast:
            out = self.body(inputs_embeds=emb, attention_mask=batch.attention_mask.to(self.device),
                            position_ids=pos, use_cache=False)
            hidden = out.last_hidden_state.reshape(-1, out.last_hidden_state.shape[-1])[batch.rows.to(self.device)]
            logits = self.head(hidden).float()
        return F.cross_entropy(logits, batch.labels.to(self.device))

    def lr_at(self, step: int) -> float:
        warm = min(1.0, (step + 1) / max(1, self.cfg.warmup))
        return warm * 0.5 * (1 + math.cos(math.pi * min(1.0, step / max(1, self.cfg.steps))))

    def step(self, batch: Batch) -> float:
        t0 = time.perf_counter()
        mult = self.lr_at(self.step_no)
        for g, base in zip(self.opt.param_groups, (self.cfg.lr, self.cfg.lr * self.cfg.mask_lr_mult)):
            g["lr"] = base * mult
        loss = self.loss(batch)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in self.opt.param_groups for p in g["params"]], self.cfg.grad_clip)
        self.opt.step()
        self.step_no += 1
        self.losses.append(loss.item())
        self.tokens += batch.tokens
        self.seconds += time.perf_counter() - t0
        return self.losses[-1]

    # -- state --------------------------------------------------------------------------------------------------
    def adapter_state(self) -> dict[str, torch.Tensor]:
        return adapter_state(self.loras, self.mask_row)

    def save(self, out: Path) -> Path:
        return save_adapter(out, self.adapter_state(), self.acfg)

    def snapshot(self, out: Path) -> Path:
        """Keep this step's adapter as ``out/snapshots/step-NNNNN/`` (loadable like the final one) with its
        step, tokens seen and compute time, so the curve of quality against tokens trained can be measured."""
        d = out / "snapshots" / f"step-{self.step_no:05d}"
        self.save(d)
        (d / "snapshot.json").write_text(json.dumps({"step": self.step_no, "tokens": self.tokens,
                                                     "seconds": round(self.seconds, 1)}) + "\n")
        return d

    def checkpoint(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / "ckpt.pt.tmp"
        torch.save({"adapter": self.adapter_state(), "opt": self.opt.state_dict(), "step": self.step_no,
                    "losses": self.losses, "tokens": self.tokens, "seconds": self.seconds,
                    "config": asdict(self.cfg)}, tmp)
        tmp.replace(out / "ckpt.pt")

    def resume(self, out: Path) -> bool:
        """Continue from ``out/ckpt.pt`` (weights, optimizer, counters), or else from a finished adapter in ``out``
        (``adapter.safetensors`` + ``summary.json``, e.g. a copy of the shipped one): its weights and counters,
        a fresh optimizer."""
        f = out / "ckpt.pt"
        if not f.is_file():
            return self._resume_adapter(out)
        ck = torch.load(f, map_location=self.device, weights_only=False)
        with torch.no_grad():
            for name, m in self.loras.items():
                m.lora_a.copy_(ck["adapter"][f"{name}.lora_a"])
                m.lora_b.copy_(ck["adapter"][f"{name}.lora_b"])
            self.mask_row.copy_(ck["adapter"]["mask_embedding"])
        self.opt.load_state_dict(ck["opt"])
        self.step_no, self.losses, self.tokens, self.seconds = ck["step"], ck["losses"], ck["tokens"], ck["seconds"]
        self.start_step, self.start_tokens, self.start_seconds = self.step_no, self.tokens, self.seconds
        return True


    def _resume_adapter(self, out: Path) -> bool:
        from ..models.adapter import FILE, load_adapter

        if not (out / FILE).is_file() or not (out / "summary.json").is_file():
            return False
        state, acfg = load_adapter(out)
        if (acfg.rank, tuple(acfg.targets)) != (self.acfg.rank, tuple(self.acfg.targets)):
            raise ValueError(f"adapter in {out} has rank {acfg.rank} on {acfg.targets}; this run asks for rank "
                             f"{self.acfg.rank} on {self.acfg.targets}")
        with torch.no_grad():
            for name, m in self.loras.items():
                m.lora_a.copy_(state[f"{name}.lora_a"])
                m.lora_b.copy_(state[f"{name}.lora_b"])
            self.mask_row.copy_(state["mask_embedding"])
        info = json.loads((out / "summary.json").read_text())
        self.step_no, self.tokens, self.seconds = int(info["steps"]), int(info["tokens"]), float(info["seconds"])
        self.start_step, self.start_tokens, self.start_seconds = self.step_no, self.tokens, self.seconds
        return True


def train(lm: LoadedModel, examples: list[Tokenized], cfg: TrainConfig, out: str | Path | None = None,
          *, resume: bool = True, log=print) -> Trainer:
    """Run ``cfg.steps`` steps over ``examples`` (sampled with replacement; batch ``k`` depends only on the seed
    and ``k``, so a resumed run sees the same batches). Checkpoints to ``out/ckpt.pt``; saves the adapter at the end."""
    out = Path(out) if out is not None else None
    tr = Trainer(lm, cfg)
    if out is not None and resume and tr.resume(out):
        log(f"resumed at step {tr.step_no} ({tr.tokens} tokens)")
    vocab = tr.acfg.vocab_size
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else lm.eos_ids[0]
    t_start = time.perf_counter()
    logf = (out / "log.jsonl").open("a") if out is not None else None
    while tr.step_no < cfg.steps:
        if cfg.max_minutes is not None and (time.perf_counter() - t_start) / 60 > cfg.max_minutes:
            log(f"time budget reached at step {tr.step_no}")
            break
        r = random.Random(cfg.seed * 1_000_003 + tr.step_no)
        batch = make_batch([r.choice(examples) for _ in range(cfg.batch_size)], cfg, tr.mask_id, vocab, pad, r)
        loss = tr.step(batch)
        if logf is not None:
            logf.write(json.dumps({"step": tr.step_no, "loss": round(loss, 4), "tokens": tr.tokens,
                                   "seconds": round(tr.seconds, 2)}) + "\n")
            logf.flush()
        if cfg.log_every and tr.step_no % cfg.log_every == 0:
            log(f"step {tr.step_no} loss {loss:.4f} tokens {tr.tokens} tok/s {tr.tokens / max(tr.seconds, 1e-9):.0f}")
        if out is not None and cfg.ckpt_every and tr.step_no % cfg.ckpt_every == 0:
            tr.checkpoint(out)
        if out is not None and cfg.snapshot_every and tr.step_no % cfg.snapshot_every == 0:
            tr.snapshot(out)
    if logf is not None:
        logf.close()
    if out is not None:
        tr.checkpoint(out)
        tr.save(out)
    return tr
