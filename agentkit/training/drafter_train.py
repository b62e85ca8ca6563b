"""Train the block drafter (``agentkit/engine/drafter.py``) by self-distillation on this CPU, as one pipeline.

The loop alternates: distil a chunk of jobs (``drafter_data``: the engine's greedy outputs and the base's cached
features), then train ``--steps-per-record`` steps per new record on everything distilled so far. Each step takes
``--seqs`` sequences and ``--anchors`` block anchors sampled in each (new anchors every step: DFlash's per-epoch
sampling), every block drafted in one pass, and DFlash's position-weighted cross-entropy (weight
``exp(-(k - 1) / gamma)`` for the k-th drafted position). Every ``--eval-every`` steps the drafter is measured on
held-out jobs (another seed range, never trained on) by :func:`acceptance`, and a snapshot is written: the drafter
(bf16, ``drafter.safetensors``) and ``ckpt.pt`` (float32 weights, optimizer, counters) that ``--resume`` reads. ::

    python -m agentkit.training.drafter_train --out out/drafter-run --data out/drafter-data --hours 2
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from ..engine.draft import lookup
from ..engine.drafter import BlockDrafter, DrafterConfig, DraftHead, FeatureTap, draft_mask
from ..errors import UserError
from .drafter_data import DraftRecord, Store, job_chunk, record

HELD_OUT_SEED = 9_000_000  # held-out job chunks: seeds from here (training chunks start at TRAIN_SEED)
TRAIN_SEED = 100_000


def canvas(rec: DraftRecord, p: int, block: int) -> tuple[list[int | None], int]:
    """The canvas of the block anchored at ``p`` (position ``p`` of ``rec.ids`` is the last committed token): the
    anchor, the template's pinned run right after it, masks (None) after -> (canvas, pinned run length)."""
    ids, pinned = rec.ids, rec.pinned
    out: list[int | None] = [ids[p]]
    run = 0
    for j in range(1, block):
        q = p + j
        if q < len(ids) and pinned[q] and run == j - 1:
            out.append(ids[q])
            run = j
        else:
            out.append(None)
    return out, run


def embed(model: torch.nn.Module, drafter: BlockDrafter, toks: list[int | None]) -> torch.Tensor:
    emb = model.get_input_embeddings().weight
    ids = torch.tensor([t if t is not None else 0 for t in toks])
    x = emb[ids].float()
    masked = torch.tensor([t is None for t in toks])
    return torch.where(masked[:, None], drafter.mask_embedding[None].expand_as(x), x)


def block_hidden(model, drafter: BlockDrafter, rec: DraftRecord, anchors: list[int], whole=None) -> torch.Tensor:
    """The drafter's hidden states for blocks at ``anchors`` of ``rec`` in one pass -> [len(anchors) * B, H].
    ``whole``: (fused context, keys/values) over all of ``rec`` computed once (evaluation), cut here."""
    B = drafter.c.block
    t = max(anchors)
    if whole is None:
        ctx = drafter.fuse(rec.feats[:t])
        kv = drafter.context_kv(ctx, torch.arange(t))
    else:
        ctx, kv = whole[0][:t], [(k[:t], v[:t]) for k, v in whole[1]]
    toks: list[int | None] = []
    for a in anchors:
        toks += canvas(rec, a, B)[0]
    pos = torch.cat([torch.arange(a, a + B) for a in anchors])
    last = ctx[torch.tensor(anchors) - 1].repeat_interleave(B, 0)  # each block's last context position
    return drafter(embed(model, drafter, toks) + last, pos, kv, draft_mask(anchors, B, t))


def step_loss(model, drafter: BlockDrafter, rec: DraftRecord, anchors: list[int], gamma: float
              ) -> tuple[torch.Tensor, int]:
    """DFlash's position-weighted cross-entropy over the drafted positions of blocks at ``anchors`` -> (loss sum
    over weights, targets). Output ``j`` of a block predicts token ``p + j + 1``; targets the canvas already holds
    (the pinned run) carry no loss."""
    B = drafter.c.block
    rows, targets, weights = [], [], []
    for i, a in enumerate(anchors):
        _, run = canvas(rec, a, B)
        for j in range(run, B):
            if a + j + 1 < len(rec.ids):
                rows.append(i * B + j)
                targets.append(rec.ids[a + j + 1])
                weights.append(math.exp(-(j - run) / gamma))
    if not rows:
        return torch.zeros(()), 0
    head = DraftHead(model.get_output_embeddings().weight, drafter.c.head_top)
    head.add(rec.ids)  # the drafter's vocabulary for this sequence, as the engine's for its request
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = block_hidden(model, drafter, rec, anchors)[torch.tensor(rows)]
        logits = head(h).float()
    ce = F.cross_entropy(logits, torch.tensor([head.column(t) for t in targets]), reduction="none")
    w = torch.tensor(weights)
    return (ce * w).sum() / w.sum(), len(rows)


def _drafted(model, drafter: BlockDrafter, rec: DraftRecord, p: int, width: int, whole) -> list[int]:
    """The drafter's argmax at each output of the block anchored at ``p`` (output ``j`` drafts position p+j+1)."""
    head = DraftHead(model.get_output_embeddings().weight, drafter.c.head_top)
    head.add(rec.ids[:p])  # the context's tokens, as the engine's drafts see them
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = block_hidden(model, drafter, rec, [p], whole)[: width - 1]
        cols = head(h).float().argmax(-1).tolist()
    return [c if c < head.top else head.extra[c - head.top] for c in cols]


def replay(rec: DraftRecord, p: int, width: int, drafted: list[int] | None) -> tuple[int, int]:
    """One verify pass replayed at anchor ``p`` -> (drafted slot tokens accepted, positions kept after the anchor).
    Pinned positions are the template's (kept, not counted). ``drafted`` None: prompt-lookup drafts fill the slot
    positions in order, looked up again when used up, as the engine's lookup drafts do."""
    n, j, got, pool = len(rec.ids), 0, 0, []
    while j < width - 1 and p + j + 1 < n:
        q = p + j + 1
        if rec.pinned[q]:
            j += 1
            continue
        if drafted is not None:
            guess = drafted[j] if j < len(drafted) else None
        else:
            pool = pool or lookup(rec.ids[:q], width)
            guess = pool.pop(0) if pool else None
        if guess != rec.ids[q]:
            break
        got, j = got + 1, j + 1
    return got, j


@torch.no_grad()
def acceptance(model, drafter: BlockDrafter, recs: list[DraftRecord], width: int) -> dict:
    """Verify replayed on recorded greedy outputs: from the first output position, draft a block of ``width``
    positions (one drafter pass), keep the longest prefix the base's greedy output agrees with (pinned positions
    are the template's: kept, not counted), and the base's correction is the next anchor. Returns drafted slot
    tokens accepted per verify pass (``accepted_per_pass``), output tokens per pass, and the same for prompt-lookup
    drafts on the same records. Drafts are unmasked argmaxes (the engine masks them by the template: as good or
    better)."""
    stats = {"drafter": [0, 0, 0], "lookup": [0, 0, 0]}
    drafter.eval()
    for rec in recs:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            ctx = drafter.fuse(rec.feats)
            whole = (ctx, drafter.context_kv(ctx, torch.arange(len(ctx))))
        for name, st in stats.items():
            p = rec.prompt_len
            while p <= rec.last_anchor:
                drafted = _drafted(model, drafter, rec, p, width, whole) if name == "drafter" else None
                got, kept = replay(rec, p, width, drafted)
                st[0], st[1], st[2] = st[0] + got, st[1] + 1, st[2] + kept + 1
                p += kept + 1
    d, lk = stats["drafter"], stats["lookup"]
    return {"accepted_per_pass": round(d[0] / max(d[1], 1), 4), "tokens_per_pass": round(d[2] / max(d[1], 1), 4),
            "passes": d[1], "lookup_accepted_per_pass": round(lk[0] / max(lk[1], 1), 4),
            "lookup_tokens_per_pass": round(lk[2] / max(lk[1], 1), 4), "width": width}


def distil_chunk(engine, tap: FeatureTap, store: Store, start: int, style: str | None) -> list[DraftRecord]:
    t0 = time.process_time()
    seed = store.next_seed(start)
    try:
        jobs = job_chunk(seed, style, chat=start != HELD_OUT_SEED)
    except ValueError as e:  # a draw the generators refuse (e.g. two functions of one name): no jobs from this seed
        print(json.dumps({"seed": seed, "skipped": f"{type(e).__name__}: {e}"}), flush=True)
        jobs = []
    recs = []
    for job in jobs:
        try:
            rec = record(engine, tap, job)
        except UserError as e:  # a job the engine refuses (a template longer than the budget, ...): skipped, said
            print(json.dumps({"seed": seed, "job": job.kind, "skipped": f"{type(e).__name__}: {e}"}), flush=True)
            continue
        if rec is not None:
            recs.append(rec)
    store.add(recs, seed, time.process_time() - t0)
    return recs


class Run:
    """The drafter, its optimizer and counters; ``ckpt.pt`` in ``out`` resumes it."""

    def __init__(self, model, cfg: DrafterConfig, out: Path, lr: float) -> None:
        self.model, self.out = model, out
        self.drafter = BlockDrafter(cfg)
        self.opt = torch.optim.AdamW(self.drafter.parameters(), lr=lr, weight_decay=0.0)
        self.lr = lr
        self.step = self.tokens = 0
        self.cpu_s = 0.0
        ck = out / "ckpt.pt"
        if ck.is_file():
            state = torch.load(ck, weights_only=False)
            self.drafter.load_state_dict(state["drafter"])
            self.opt.load_state_dict(state["opt"])
            self.step, self.tokens, self.cpu_s = state["step"], state["tokens"], state["cpu_s"]
        else:
            self.drafter.init_from_base(model)

    def train_step(self, recs: list[DraftRecord], r: random.Random, seqs: int, anchors: int, gamma: float) -> float:
        self.drafter.train()
        self.opt.zero_grad(set_to_none=True)
        total, n = 0.0, 0
        for rec in r.sample(recs, min(seqs, len(recs))):
            lo, hi = rec.prompt_len, rec.last_anchor
            picks = sorted(r.sample(range(lo, hi + 1), min(anchors, hi - lo + 1)))
            loss, k = step_loss(self.model, self.drafter, rec, picks, gamma)
            if k:
                (loss / seqs).backward()
                total, n, self.tokens = total + float(loss.detach()), n + 1, self.tokens + k
        warm = min(1.0, (self.step + 1) / 50)
        for g in self.opt.param_groups:
            g["lr"] = self.lr * warm
        torch.nn.utils.clip_grad_norm_(self.drafter.parameters(), 1.0)
        self.opt.step()
        self.step += 1
        return total / max(n, 1)

    def snapshot(self) -> None:
        self.drafter.save(self.out)
        torch.save({"drafter": self.drafter.state_dict(), "opt": self.opt.state_dict(), "step": self.step,
                    "tokens": self.tokens, "cpu_s": self.cpu_s}, self.out / "ckpt.pt.partial")
        (self.out / "ckpt.pt.partial").replace(self.out / "ckpt.pt")


def log_line(out: Path, name: str, d: dict) -> None:
    with (out / name).open("a") as f:
        f.write(json.dumps(d) + "\n")
    print(json.dumps(d), flush=True)


def plot_acceptance(evals: list[dict], png: Path) -> None:
    """Accepted drafted slot tokens per verify pass on the held-out jobs, against target tokens trained, with
    prompt-lookup drafts on the same jobs for reference."""
    from .._extras import require

    require("evals", "the acceptance plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    x = [e["tokens"] for e in evals]
    ax.plot(x, [e["accepted_per_pass"] for e in evals], marker="o", label="block drafter")
    ax.plot(x, [e["lookup_accepted_per_pass"] for e in evals], ls="--", label="prompt lookup (reference)")
    ax.set_xlabel("target tokens trained")
    ax.set_ylabel("accepted slot tokens / verify pass")
    ax.set_title("block drafter on held-out jobs (replayed verify, width 16)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def publish(run: Path, data: Path, dest: Path) -> dict:
    """Copy the run's latest snapshot (the drafter's own weights, bf16) and its curves into ``dest`` (the folder
    the engine reads), with the loss plot; returns the figures a model card states."""
    import shutil

    from ..engine.drafter import CONFIG, WEIGHTS
    from .curve import plot_loss

    dest.mkdir(parents=True, exist_ok=True)
    for name in (WEIGHTS, CONFIG, "eval.jsonl", "log.jsonl"):
        shutil.copyfile(run / name, dest / name)
    plot_loss(dest / "log.jsonl", dest / "loss.png", title="block drafter (self-distilled)",
              ylabel="position-weighted cross entropy")
    shards = [json.loads(x) for x in (data / "train" / "manifest.jsonl").read_text().splitlines() if x.strip()]
    evals = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines() if x.strip()]
    plot_acceptance(evals, dest / "acceptance.png")
    info = {"records": sum(e["records"] for e in shards), "answer_tokens": sum(e["tokens"] for e in shards),
            "distil_cpu_s_logged": sum(e.get("cpu_s", 0.0) for e in shards),
            "last_eval": evals[-1] if evals else None, "weights_mb": round((dest / WEIGHTS).stat().st_size / 2**20, 2)}
    (dest / "summary.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/drafter-run")
    ap.add_argument("--data", default="out/drafter-data")
    ap.add_argument("--hours", type=float, default=2.0, help="stop after this much CPU time (this invocation)")
    ap.add_argument("--train-share", type=float, default=0.5, help="share of CPU time spent training, not distilling")
    ap.add_argument("--max-records", type=int, default=100_000, help="stop distilling after this many records")
    ap.add_argument("--held-out-chunks", type=int, default=3)
    ap.add_argument("--initial-chunks", type=int, default=4)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--seqs", type=int, default=2)
    ap.add_argument("--anchors", type=int, default=4)
    ap.add_argument("--gamma", type=float, default=7.0)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--eval-every", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--publish", default=None, help="no training: copy the latest snapshot and curves here")
    a = ap.parse_args(argv)
    if a.publish:
        print(json.dumps(publish(Path(a.out), Path(a.data), Path(a.publish)), indent=1))
        return 0
    torch.set_num_threads(a.threads)
    from ..config import EngineConfig
    from ..engine.engine import Engine

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    engine = Engine(EngineConfig(threads=a.threads, prefix_cache=False))  # every prompt position encoded: its features
    model = engine.lm.model
    for p in model.parameters():
        p.requires_grad_(False)
    cfg = DrafterConfig.for_base(model, a.layers, a.block, name="SmolLM2-135M-Instruct (embedded) + loop adapter")
    cfg.meta = {"data": "self-distilled: agentkit.training.drafter_data", "gamma": a.gamma}
    tap = FeatureTap(model, cfg.feature_layers)
    train_store, held_store = Store(Path(a.data) / "train"), Store(Path(a.data) / "held_out")
    t0 = time.process_time()
    while len(held_store.entries()) < a.held_out_chunks:
        distil_chunk(engine, tap, held_store, HELD_OUT_SEED, None)
    held, recs = list(held_store.load()), list(train_store.load())
    while len(train_store.entries()) < a.initial_chunks:
        recs += distil_chunk(engine, tap, train_store, TRAIN_SEED, None)
    run = Run(model, cfg, out, a.lr)
    r = random.Random(run.step)

    def measure(run: Run, recs: list[DraftRecord]) -> None:
        log_line(out, "eval.jsonl", {"step": run.step, "tokens": run.tokens, "records": len(recs),
                                      "cpu_h": round(run.cpu_s / 3600, 4),
                                      **acceptance(model, run.drafter, held, a.block)})

    base_cpu, train_cpu, data_cpu = run.cpu_s, 0.0, time.process_time() - t0
    if run.step == 0:
        measure(run, recs)
    while run.cpu_s - base_cpu < a.hours * 3600:
        if train_cpu < a.train_share * (train_cpu + data_cpu) or len(recs) >= a.max_records:
            t = time.process_time()
            loss = run.train_step(recs, r, a.seqs, a.anchors, a.gamma)
            train_cpu += time.process_time() - t
            run.cpu_s = base_cpu + train_cpu + data_cpu
            if run.step % 10 == 0:
                log_line(out, "log.jsonl", {"step": run.step, "loss": round(loss, 4), "tokens": run.tokens,
                                             "records": len(recs), "cpu_h": round(run.cpu_s / 3600, 4)})
            if run.step % a.eval_every == 0:
                run.snapshot()
                measure(run, recs)
        else:
            t = time.process_time()
            recs += distil_chunk(engine, tap, train_store, TRAIN_SEED, None)
            data_cpu += time.process_time() - t
            run.cpu_s = base_cpu + train_cpu + data_cpu
    run.snapshot()
    if run.step % a.eval_every:  # the last snapshot is measured too: it is the one ``--publish`` ships
        measure(run, recs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
