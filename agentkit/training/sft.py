"""Supervised LoRA training of the causal weights on agent-loop traces (the loop adapter, issue 31 item 4).

An example (:mod:`.loop_traces`) is a step's chat messages, an assistant ``prefix`` that is given (the call head
of a decision) and the ``target`` the step should write; the loss is the next-token cross entropy on the target's
tokens only (a tool call and a reply end with the end-of-turn token, a decision's name with its closing quote).
The LoRA (``AdapterConfig(kind="ar")``, no mask row) goes on every attention and MLP projection; the result merges
into the weights every mode decodes with (:func:`agentkit.models.adapter.merge_lora`, ``EngineConfig.lora``).

Resumable: ``OUT/ckpt.pt`` every ``ckpt_every`` steps (LoRA, optimizer, step, log), ``OUT/snapshots/step-N/`` every
``snapshot_every``, ``OUT/log.jsonl`` a line a step; a second run with the same ``OUT`` continues. ::

    python -m agentkit.training.sft --traces adapters/smollm2-135m-loop/traces.jsonl --out adapters/smollm2-135m-loop
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ..models.adapter import AdapterConfig, adapter_sha256, adapter_state, inject_lora, save_adapter

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: steps whose target ends without the end-of-turn token: a decision's name (its closing quote ends it) and a
#: repaired line (``repair_data``: the line and its newline, inside the code the answer pins)
OPEN_STEPS = ("decide", "repair")


@dataclass
class SFTConfig:
    steps: int = 400
    batch_size: int = 8  # examples per optimizer step (run one at a time: no padding on CPU)
    lr: float = 5e-4
    warmup: int = 20
    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = PROJECTIONS
    max_len: int = 1536  # longer examples are skipped (counted in the log), never cut
    seed: int = 0
    cpu_bf16: bool = True  # autocast to bfloat16 on CPU (avx512_bf16); fp32 master weights
    ckpt_every: int = 10
    snapshot_every: int = 100


@dataclass
class Row:
    ids: list[int]
    start: int  # the first target position
    step: str


def tokenize(example: dict, tokenizer, eos_id: int) -> Row:
    prompt = tokenizer.apply_chat_template(example["messages"], add_generation_prompt=True, tokenize=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    prompt += tokenizer.encode(example["prefix"], add_special_tokens=False) if example["prefix"] else []
    target = tokenizer.encode(example["target"], add_special_tokens=False)
    if example["step"] not in OPEN_STEPS:
        target.append(eos_id)
    return Row(prompt + target, len(prompt), example["step"])


class SFTTrainer:
    def __init__(self, lm, cfg: SFTConfig, on: Path | None = None) -> None:
        """``on``: the ``"ar"`` adapter already merged into ``lm`` (:func:`merged_base`); the saved adapter names
        it, and loading stacks the two (:func:`agentkit.models.adapter.load_adapter`)."""
        self.lm, self.cfg = lm, cfg
        self.model = lm.model.to(torch.float32)
        self.acfg = AdapterConfig(rank=cfg.rank, alpha=cfg.alpha, targets=tuple(cfg.targets),
                                  base=lm.meta.get("lora_base_name", lm.name),
                                  vocab_size=self.model.get_input_embeddings().weight.shape[0], kind="ar",
                                  calibrate=False,  # trained on the decisions: read them raw
                                  on=on.name if on else "", on_sha256=adapter_sha256(on) if on else "")
        self.loras = inject_lora(self.model, self.acfg)
        self.body, self.head = getattr(self.model, self.model.base_model_prefix), self.model.get_output_embeddings()
        self.params = [p for m in self.loras.values() for p in (m.lora_a, m.lora_b)]
        self.opt = torch.optim.AdamW(self.params, lr=cfg.lr, weight_decay=0.0)
        self.step_no, self.seconds, self.tokens = 0, 0.0, 0
        self.model.train()

    def lr_at(self, step: int) -> float:
        warm = min(1.0, (step + 1) / max(1, self.cfg.warmup))
        return self.cfg.lr * warm * 0.5 * (1 + math.cos(math.pi * min(1.0, step / max(1, self.cfg.steps))))

    def step(self, rows: list[Row]) -> float:
        t0 = time.perf_counter()
        for g in self.opt.param_groups:
            g["lr"] = self.lr_at(self.step_no)
        self.opt.zero_grad(set_to_none=True)
        n_target = sum(len(r.ids) - r.start for r in rows)
        total = 0.0
        for r in rows:  # one example a pass: no padding
            ids = torch.tensor([r.ids])
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.cfg.cpu_bf16):
                hidden = self.body(input_ids=ids, use_cache=False).last_hidden_state[0, r.start - 1:-1]
                logits = self.head(hidden).float()  # the head on the target positions only (a fifth of the FLOPs)
            loss = F.cross_entropy(logits, ids[0, r.start:], reduction="sum") / n_target
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.step_no += 1
        self.tokens += sum(len(r.ids) for r in rows)
        self.seconds += time.perf_counter() - t0
        return total

    def checkpoint(self, out: Path) -> None:
        tmp = out / "ckpt.pt.tmp"
        torch.save({"adapter": adapter_state(self.loras), "opt": self.opt.state_dict(), "step": self.step_no,
                    "seconds": self.seconds, "tokens": self.tokens, "config": asdict(self.cfg)}, tmp)
        tmp.replace(out / "ckpt.pt")

    def resume(self, out: Path) -> bool:
        f = out / "ckpt.pt"
        if not f.is_file():
            return False
        ck = torch.load(f, map_location="cpu", weights_only=False)
        with torch.no_grad():
            for name, m in self.loras.items():
                m.lora_a.copy_(ck["adapter"][f"{name}.lora_a"])
                m.lora_b.copy_(ck["adapter"][f"{name}.lora_b"])
        self.opt.load_state_dict(ck["opt"])
        self.step_no, self.seconds, self.tokens = ck["step"], ck["seconds"], ck["tokens"]
        return True

    def save(self, out: Path) -> Path:
        return save_adapter(out, adapter_state(self.loras), self.acfg)


def merged_base(lm, path: str | Path):
    """``lm`` (float32) with the ``"ar"`` adapter at ``path`` merged in, to train a second adapter on top; its
    ``meta["lora_base_name"]`` keeps the name of the weights as loaded (the stacked adapter's base)."""
    from ..models.adapter import merge_lora

    lm.model.to(torch.float32)
    merged = merge_lora(lm, path)
    merged.meta["lora_base_name"] = lm.name
    return merged


def train(lm, rows: list[Row], cfg: SFTConfig, out: str | Path, log=print, on: Path | None = None) -> SFTTrainer:
    """``cfg.steps`` steps over ``rows`` (batch ``k`` depends only on the seed and ``k``: a resumed run sees the
    same batches); checkpoints, snapshots and the final adapter in ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tr = SFTTrainer(lm, cfg, on)
    if tr.resume(out):
        log(f"resumed at step {tr.step_no}")
    with (out / "log.jsonl").open("a") as logf:
        while tr.step_no < cfg.steps:
            r = random.Random(cfg.seed * 1_000_003 + tr.step_no)
            batch = [r.choice(rows) for _ in range(cfg.batch_size)]
            loss = tr.step(batch)
            by_step = {s: sum(b.step == s for b in batch) for s in sorted({b.step for b in batch})}
            logf.write(json.dumps({"step": tr.step_no, "loss": round(loss, 4), "tokens": tr.tokens,
                                   "seconds": round(tr.seconds, 1), "rows": by_step}) + "\n")
            logf.flush()
            if tr.step_no % 10 == 0:
                log(f"step {tr.step_no} loss {loss:.4f} {tr.seconds / tr.step_no:.1f} s/step")
            if tr.step_no % cfg.ckpt_every == 0:
                tr.checkpoint(out)
            if cfg.snapshot_every and tr.step_no % cfg.snapshot_every == 0:
                tr.save(out / "snapshots" / f"step-{tr.step_no:05d}")
    tr.checkpoint(out)
    tr.save(out)
    return tr


def main(argv: list[str] | None = None) -> int:
    from ..models.loader import load_model

    ap = argparse.ArgumentParser(prog="python -m agentkit.training.sft", description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", required=True, help="JSONL of loop_traces examples")
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default=None, help="HF model folder (default: the embedded model)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--on", default=None, help="an 'ar' adapter merged into the weights before training (the loop "
                    "adapter: adapters/smollm2-135m-loop); the result is stacked on it when loaded")
    ap.add_argument("--title", default="loop adapter (SFT on agent-loop traces)", help="the loss plot's title")
    ap.add_argument("--fp32", action="store_true", help="float32 arithmetic (default: bf16 autocast on CPU)")
    ap.add_argument("--targets", default=",".join(PROJECTIONS),
                    help="comma-separated names of the linear layers the LoRA adapts (default: every projection)")
    for k, v in asdict(SFTConfig()).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            ap.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    targets = tuple(t.strip() for t in a.targets.split(",") if t.strip())
    if not targets:
        ap.error("--targets names no layer")
    cfg = SFTConfig(**{k: getattr(a, k) for k in asdict(SFTConfig()) if hasattr(a, k) and k != "targets"},
                    cpu_bf16=not a.fp32, targets=targets)
    on = Path(a.on) if a.on else None
    lm = load_model(a.model, dtype="float32") if on is not None else load_model(a.model)
    if on is not None:
        lm = merged_base(lm, on)
    examples = [json.loads(x) for x in Path(a.traces).read_text(encoding="utf-8").splitlines() if x.strip()]
    eos = lm.tokenizer.convert_tokens_to_ids("<|im_end|>") if lm.chat else lm.eos_ids[0]
    rows = [tokenize(e, lm.tokenizer, eos) for e in examples]
    kept = [r for r in rows if len(r.ids) <= cfg.max_len]
    print(f"{len(kept)} of {len(rows)} examples (longer than {cfg.max_len} tokens skipped); "
          f"mean {sum(len(r.ids) for r in kept) / max(1, len(kept)):.0f} tokens")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(json.dumps({"traces": a.traces, "on": a.on, "config": asdict(cfg),
                                              "examples": len(kept), "skipped": len(rows) - len(kept)}, indent=2) + "\n")
    train(lm, kept, cfg, out, on=on)
    from .curve import plot_loss

    plot_loss(out / "log.jsonl", out / "loss.png", a.title, "target-token cross entropy")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
