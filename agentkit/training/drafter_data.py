"""Self-distillation data for the block drafter (``agentkit/engine/drafter.py``), with the base's features cached.

A record is what the engine's default model writes, greedy: ar-constrained under the engine's own templates for
the project's generated structured jobs (``distill.jobs``: tool calls, extractions, code edits), AR for free-text
replies (the distillation chat prompts and the agent-loop traces' reply steps, ``loop_traces``). No benchmark item
or function is used. With each record the base's hidden states at the drafter's feature layers over prompt +
answer are computed once (one no-grad forward) and stored (bf16), so training never runs the base again.

Records are written in shards (``shard_00000.pt`` ...) listed in ``manifest.jsonl``; a run that is stopped keeps
every finished shard, and the next run continues from the next job seed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..engine.drafter import FeatureTap
from . import distill as D

FREE_MAX_TOKENS = 96
STRUCTURED_MAX_TOKENS = 160


@dataclass
class DraftRecord:
    kind: str
    prompt_len: int
    ids: list[int]  # prompt + answer (answer ends with EOS when the model ended it)
    pinned: list[bool]  # per position of ids: placed by the template (prompt positions False)
    feats: torch.Tensor  # [T, len(feature_layers) * H] bf16 over ids[:T] (T: len(ids), or a few less)

    @property
    def last_anchor(self) -> int:
        """The last block anchor with a target after it and the features of all the context before it."""
        return min(len(self.ids) - 2, len(self.feats))

    @property
    def answer_len(self) -> int:
        return len(self.ids) - self.prompt_len


def free_jobs(r: random.Random, n: int, seed: int, chat: bool = True) -> list[D.DistillJob]:
    """Free-text chats: one of the distillation prompts (``chat``), and the reply steps of generated agent-loop
    traces."""
    from .loop_traces import generate

    out = [D.DistillJob("free", [{"role": "user", "content": r.choice(D.FREE_PROMPTS)}])] if chat else []
    steps = [s for s in generate(max(1, n), seed=seed) if s.step == "reply"]
    out += [D.DistillJob("free", s.messages) for s in steps[: max(0, n - len(out))]]
    return out


def job_chunk(seed: int, style: str | None, chat: bool = True) -> list[D.DistillJob]:
    """One chunk of jobs, deterministic in ``seed``: 3 tool calls, 2 extractions, 1 edit, 2 free-text chats
    (``chat`` False: no fixed chat prompt among them, for held-out chunks)."""
    r = random.Random(seed)
    jobs = D.jobs(3, 2, 1, 0, seed, style)
    return jobs + free_jobs(r, 2, seed, chat)


def features(model: torch.nn.Module, tap: FeatureTap, ids: Sequence[int]) -> torch.Tensor:
    """The base's feature-layer outputs over ``ids`` in one no-grad pass -> [T, n * H] bf16."""
    tap.begin()
    try:
        with torch.inference_mode():
            model.model(input_ids=torch.tensor([list(ids)]), use_cache=False)
        got = tap.take()
    finally:
        tap.end()
    assert got is not None and got.shape[0] == len(ids)
    return got.to(torch.bfloat16).clone()


def record(engine, tap: FeatureTap, job: D.DistillJob) -> DraftRecord | None:
    """The engine's greedy answer to ``job`` (ar-constrained under its template, AR without) and its features."""
    from ..config import DecodeConfig

    limit = FREE_MAX_TOKENS if job.template is None else STRUCTURED_MAX_TOKENS
    tap.begin()  # the generation's own passes leave the features (the prompt's and every step's)
    try:
        res = engine.generate(job.messages, DecodeConfig(mode="ar", max_new_tokens=limit), template=job.template)
        seen = tap.take()
    finally:
        tap.end()
    if job.template is not None and res.stats.finish_reason == "length":
        return None  # a template left unfinished is no clean target
    answer = list(res.token_ids)
    c = engine.constraint(job.template) if job.template is not None else None
    pinned = D.pinned_flags(c, answer)
    if res.stats.finish_reason != "length":
        answer.append(engine.lm.eos_ids[0])
        pinned.append(False)
    if len(answer) < 2:
        return None
    prompt = engine.encode_prompt(job.messages)
    ids = prompt + answer
    # every position but the last few (never fed back) was encoded, unless a reused prompt prefix skipped some
    feats = seen if seen is not None and seen.numel() and len(seen) >= len(ids) - 3 else None
    feats = feats[: len(ids)].to(torch.bfloat16).clone() if feats is not None else features(engine.lm.model, tap, ids)
    return DraftRecord(job.kind, len(prompt), ids, [False] * len(prompt) + pinned, feats)


class Store:
    """The shards of one data folder: ``manifest.jsonl`` (one line per shard) and the shard files."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.manifest = self.root / "manifest.jsonl"

    def entries(self) -> list[dict]:
        if not self.manifest.is_file():
            return []
        return [json.loads(x) for x in self.manifest.read_text().splitlines() if x.strip()]

    def load(self) -> Iterator[DraftRecord]:
        for e in self.entries():
            for d in torch.load(self.root / e["file"], weights_only=False):
                yield DraftRecord(**d)

    def add(self, recs: list[DraftRecord], seed: int, cpu_s: float = 0.0) -> None:
        """Write ``recs`` as the next shard; ``cpu_s``: the CPU time their distillation took (the manifest's)."""
        i = len(self.entries())
        name = f"shard_{i:05d}.pt"
        torch.save([vars(r) for r in recs], self.root / (name + ".partial"))
        (self.root / (name + ".partial")).replace(self.root / name)
        line = {"file": name, "seed": seed, "records": len(recs), "tokens": sum(r.answer_len for r in recs),
                "kinds": sorted({r.kind for r in recs}), "cpu_s": round(cpu_s, 1)}
        with self.manifest.open("a") as f:
            f.write(json.dumps(line) + "\n")

    def next_seed(self, start: int) -> int:
        seeds = [e["seed"] for e in self.entries()]
        return max(seeds) + 1 if seeds else start
