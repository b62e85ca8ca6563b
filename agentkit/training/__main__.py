"""``python -m agentkit.training --out adapters/smollm2-135m-bd --steps N``: adapt a causal LM to block denoising.

Resumes from ``OUT/ckpt.pt`` when present. Writes ``OUT/adapter.safetensors``, ``OUT/log.jsonl``, ``OUT/loss.png``
and ``OUT/MODEL_CARD.md``. ``--eval N`` decodes N held-out synthetic calls (AR-constrained on base weights vs
adapted diffusion under the same template) and adds the numbers to the card.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from dataclasses import fields
from pathlib import Path

import torch

from .curve import plot_loss
from .data import DISTILL_PROMPTS, distill, synthetic, tokenize
from .recipe import TrainConfig, train


def evaluate(base_lm, adapted_lm, n: int, seed: int = 10_000) -> dict:
    """Held-out synthetic calls (seed disjoint from training): exact answer match, decoder forwards, latency."""
    from ..config import DecodeConfig
    from ..engine.engine import Engine

    exs = [e for e in synthetic(n, seed=seed, extract_frac=0.0, max_distractors=1)]
    res = {}
    for label, lm, mode in (("ar-constrained (base)", base_lm, "ar"), ("diffusion (adapted)", adapted_lm, "diffusion")):
        eng = Engine.from_loaded(lm)
        ok = fw = 0
        lat = []
        for e in exs:
            tpl = e.template()
            g = eng.generate(e.messages, DecodeConfig(mode=mode, max_new_tokens=96), template=tpl)
            ok += g.text == e.answer
            fw += g.stats.encoder_forwards - 1 + g.stats.decoder_forwards  # forwards after prefill
            lat.append(g.stats.latency_ms)
        res[label] = {"exact": ok / len(exs), "forwards": fw / len(exs), "latency_ms_p50": statistics.median(lat)}
    return res


def write_card(out: Path, cfg: TrainConfig, info: dict) -> None:
    pts = info["curve"]
    marks = sorted({0, len(pts) // 4, len(pts) // 2, 3 * len(pts) // 4, len(pts) - 1}) if pts else []
    k = max(1, len(pts) // 10)

    def avg(i: int) -> float:
        return statistics.mean(p[1] for p in pts[max(0, i - k + 1): i + 1])

    curve = "\n".join(f"| {pts[i][0]} | {pts[i][2]} | {pts[i][1]:.3f} | {avg(i):.3f} |" for i in marks)
    ev = info.get("eval")
    ev_lines = "\n".join(f"| {m} | {v['exact']:.2f} | {v['forwards']:.1f} | {v['latency_ms_p50']:.0f} |"
                         for m, v in ev.items()) if ev else "(not run)"
    size = (out / "adapter.safetensors").stat().st_size / 1e6 if (out / "adapter.safetensors").is_file() else 0
    runs = "\n".join(f"| {r['date']} | {r['from_step']} → {r['to_step']} | {r['from_tokens']} → {r['to_tokens']} | "
                     f"{r['seconds'] / 60:.1f} | {'yes' if r.get('eos_pad') else 'no'} | {r.get('generated_frac', 0)} | "
                     f"`{r['command']}` |" for r in info.get("runs", []))
    (out / "MODEL_CARD.md").write_text(f"""# Block-diffusion adapter for {info['base']}

{info.get('status') or '**Status: a CPU-budget adaptation, not converged.** See Evaluation for what it reaches.'}

The engine uses this adapter automatically for diffusion mode on the default model (`--no-adapter`, or
`EngineConfig(adapter=False)`, gives the plain causal canvas); AR and verify run on the base weights unless
`weights="adapted"` is asked for.

- Base model: {info['base']} (weights frozen)
- Adapter: LoRA rank {cfg.rank}, alpha {cfg.alpha} on {', '.join(cfg.targets)} of every layer + a new `<|mask|>`
  embedding row (absorbing mask); `adapter.safetensors` {size:.1f} MB (fp32)
- Objective: block diffusion, block {cfg.block}, clean causal prefix, bidirectional block attending to the prefix,
  per-row mask ratio r ~ U(0,1), token shift, loss on masked positions only; template-aware rows
  (pinned JSON kept clean) {cfg.template_frac:.0%}; uniform-token noise {cfg.uniform_frac:.0%}; blocks that run past
  the answer filled with EOS: {'yes' if cfg.eos_pad else 'no'} (see the runs below for when this changed)
- Data: synthetic tool calls and extractions from `agentkit/training/data.py` ({info['n_synthetic']} examples,
  seed {cfg.seed}; calls on procedurally generated functions, `training/specs.py`: {info.get('generated_frac', 0)} of
  the calls in the last run) + {info['n_free']} self-distilled free-text replies of the base model (see
  `agentkit/training/DATA.md`). No benchmark data (`shared/data`) was used.
- Steps {info['steps']}, batch {cfg.batch_size}, lr {cfg.lr} (cosine over each run's `--steps`); tokens seen
  {info['tokens']} (prefix + block positions); training compute time {info['seconds'] / 60:.1f} min,
  {info['tokens'] / max(info['seconds'], 1e-9):.0f} tokens/s
- Hardware: {info['hardware']}
- Last command: `{info['command']}`

## Runs (each resumed from the previous one's checkpoint)

| date | steps | tokens | minutes | EOS padding | generated-function calls | command |
|---|---|---|---|---|---|---|
{runs or '| (not recorded) | | | | | | |'}

## Loss curve (`loss.png`)

| step | tokens | loss | mean of last {k} |
|---|---|---|---|
{curve}

## Evaluation

{info.get('eval_note') or ''}
""" + (f"""
`--eval`: held-out synthetic tool calls (a seed disjoint from training), decoded under the call's template;
exact = output text equals the reference call; forwards = model forwards after prefill.

| mode | exact | forwards/request | latency p50 ms |
|---|---|---|---|
{ev_lines}
""" if ev else ""))


def self_distilled(lm, out: Path, *, calls: int = 0, extract: int = 0, edits: int = 0, free: int = 0,
                   seed: int = 20_000, style: str | None = None, consistency_every: int = 3, held_out: int = 0,
                   max_new_tokens: int = 160) -> tuple[list, dict]:
    """Self-distillation records (``distill.py``, cached in ``out/self_distilled.jsonl``), minus a held-out set
    written to ``out/held_out.jsonl``. Consistency states come from the adapter already in ``out`` (if any)."""
    from ..config import EngineConfig
    from ..constrain.canonical import json_style
    from ..engine.engine import Engine
    from ..models.adapter import FILE
    from . import distill as D

    style = style or json_style(None).name  # the compiler's default, recorded
    has_adapter = (out / FILE).is_file()
    eng = Engine.from_loaded(lm, EngineConfig(adapter_path=str(out) if has_adapter else None))
    jobs = D.jobs(calls, extract, edits, free, seed, style)
    recs = D.distil(eng, jobs, out / "self_distilled.jsonl", max_new_tokens=max_new_tokens,
                    adapter_engine=eng if has_adapter and consistency_every else None,
                    consistency_every=consistency_every)
    del eng
    train_recs, held = D.split(recs, held_out)
    with (out / "held_out.jsonl").open("w") as f:
        for r in held:
            f.write(json.dumps({"kind": r.kind, "prompt": r.prompt, "answer": r.answer, "text": r.text}) + "\n")
    info = {"jobs": len(jobs), "records": len(recs), "held_out": len(held), "style": style, "seed": seed,
            "with_states": sum(bool(r.states) for r in recs), "digest": D.digest(recs),
            "kinds": {k: sum(r.kind == k for r in train_recs) for k in ("call", "extract", "edit", "free")}}
    print(f"self-distilled: {json.dumps(info)}")
    return [r.tokenized() for r in train_recs], info


def record_interrupted(out: Path, tr) -> None:
    """A run killed before it could list itself (``runs.jsonl`` ends before the checkpoint this invocation resumed
    from): list it now, from its checkpoint and the ``run_current.json`` it left (its command)."""
    f = out / "runs.jsonl"
    runs = [json.loads(x) for x in f.read_text().splitlines() if x.strip()] if f.is_file() else []
    last = runs[-1] if runs else {"to_step": 0, "to_tokens": 0, "seconds_total": 0.0}
    if tr.start_step <= last["to_step"]:
        return
    cur = out / "run_current.json"
    prev = json.loads(cur.read_text()) if cur.is_file() else {}
    seconds = sum(r["seconds"] for r in runs)
    with f.open("a") as fh:
        fh.write(json.dumps({"command": prev.get("command", "(not recorded)") + " (stopped: killed)",
                             "from_step": last["to_step"], "to_step": tr.start_step,
                             "from_tokens": last["to_tokens"], "to_tokens": tr.start_tokens,
                             "generated_frac": 0.0, "eos_pad": tr.cfg.eos_pad,
                             "seconds": round(max(0.0, tr.start_seconds - seconds), 1),
                             "date": prev.get("date", time.strftime("%Y-%m-%d"))}) + "\n")


def train_main(out_dir: str | Path, steps: int, *, n_examples: int = 4000, distill_n: int = 0,
               free_frac: float = 0.1, generated_frac: float = 0.0, threads: int | None = None,
               model: str | None = None, eval_n: int = 0, resume: bool = True, command: str = "",
               card_note: str | Path | None = None, self_distill: dict | None = None,
               **overrides) -> dict:
    """Train (or resume) an adapter on the default model (or ``model``) into ``out_dir``; returns a summary.
    ``self_distill``: keyword arguments of :func:`self_distilled` (targets = the base model's own outputs)."""
    from ..models.loader import load_model

    if threads:
        torch.set_num_threads(threads)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = TrainConfig(steps=steps, **overrides)
    lm = load_model(model)
    base_name = lm.name
    syn = synthetic(n_examples, seed=cfg.seed, max_distractors=1, generated_frac=generated_frac)
    distilled, sd_info = self_distilled(lm, out, **self_distill) if self_distill else ([], {})
    free = distill(lm, DISTILL_PROMPTS[:distill_n], out / "distilled.jsonl", max_new_tokens=48) if distill_n else []
    if free:
        syn = syn + free * max(1, round(free_frac * len(syn) / len(free)))
    examples = [tokenize(e, lm.tokenizer, lm.eos_ids[0], lm.chat) for e in syn] + distilled
    t0 = time.time()
    command = command or f"python -m agentkit.training --out {out_dir} --steps {steps}"
    (out / "run_current.json").write_text(json.dumps({"command": command, "date": time.strftime("%Y-%m-%d"),
                                                      "self_distill": sd_info}) + "\n")
    tr = train(lm, examples, cfg, out, resume=resume)
    record_interrupted(out, tr)
    if tr.step_no > tr.start_step:  # one line per invocation that trained: the card lists them
        with (out / "runs.jsonl").open("a") as f:
            f.write(json.dumps({"command": command, "from_step": tr.start_step, "to_step": tr.step_no,
                                "from_tokens": tr.start_tokens, "to_tokens": tr.tokens,
                                "generated_frac": generated_frac, "eos_pad": cfg.eos_pad,
                                "seconds": round(tr.seconds - tr.start_seconds, 1),
                                "date": time.strftime("%Y-%m-%d")}) + "\n")
    curve = plot_loss(out / "log.jsonl", out / "loss.png")
    info = {"base": base_name, "steps": tr.step_no, "tokens": tr.tokens, "seconds": tr.seconds,
            "n_synthetic": n_examples, "n_free": len(free), "curve": curve, "wall_s": time.time() - t0,
            "hardware": f"{platform.processor() or platform.machine()}, torch threads {torch.get_num_threads()}"
                        + (f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else f", CPU {'bf16 autocast' if cfg.cpu_bf16 else 'fp32'}"),
            "command": command, "generated_frac": generated_frac, "self_distill": sd_info,
            "runs": [json.loads(x) for x in (out / "runs.jsonl").read_text().splitlines() if x.strip()]
            if (out / "runs.jsonl").is_file() else []}
    if eval_n:
        from ..models.adapter import apply_adapter

        base = load_model(model)
        info["eval"] = evaluate(base, apply_adapter(base, out), eval_n)
    if card_note:
        info["eval_note"] = Path(card_note).read_text()
    (out / "summary.json").write_text(json.dumps({k: v for k, v in info.items() if k != "curve"}, indent=2) + "\n")
    write_card(out, cfg, info)
    return info


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m agentkit.training", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--model", default=None, help="local HF model dir (default: the embedded SmolLM2-135M)")
    ap.add_argument("--examples", type=int, default=4000)
    ap.add_argument("--distill", type=int, default=0, help="self-distilled free-text prompts (AR replies, cached)")
    ap.add_argument("--generated-frac", type=float, default=0.0,
                    help="fraction of tool calls made on procedurally generated functions (training/specs.py)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--eval", type=int, default=0, help="held-out synthetic calls to decode after training")
    ap.add_argument("--no-resume", action="store_true")
    ap.add_argument("--card-note", default=None, help="markdown file: the model card's Evaluation section")
    sd = ap.add_argument_group("self-distillation (targets = the base model's greedy ar-constrained outputs)")
    for name, default in (("calls", 0), ("extract", 0), ("edits", 0), ("free", 0), ("consistency-every", 3),
                          ("held-out", 0), ("seed", 20_000)):
        sd.add_argument(f"--sd-{name}", type=int, default=default)
    sd.add_argument("--sd-style", default=None, help="JSON style of the templates (default: the compiler's)")
    names = {f.name for f in fields(TrainConfig)} - {"steps", "targets"}
    for f in fields(TrainConfig):
        if f.name in names:
            t = type(f.default) if f.default is not None else float
            if t is bool:
                t = lambda v: v.lower() in ("1", "true", "yes")
            ap.add_argument("--" + f.name.replace("_", "-"), type=t, default=None)
    a = ap.parse_args(argv)
    over = {n: getattr(a, n) for n in names if getattr(a, n) is not None}
    import sys

    sd_kw = {"calls": a.sd_calls, "extract": a.sd_extract, "edits": a.sd_edits, "free": a.sd_free,
             "consistency_every": a.sd_consistency_every, "held_out": a.sd_held_out, "seed": a.sd_seed,
             "style": a.sd_style}
    over["self_distill"] = sd_kw if a.sd_calls + a.sd_extract + a.sd_edits + a.sd_free else None
    info = train_main(a.out, a.steps, n_examples=a.examples, distill_n=a.distill, threads=a.threads, model=a.model,
                      generated_frac=a.generated_frac, card_note=a.card_note,
                      eval_n=a.eval, resume=not a.no_resume, command="python -m agentkit.training " +
                      " ".join(sys.argv[1:]), **over)
    print(json.dumps({k: v for k, v in info.items() if k != "curve"}, indent=2, default=str))


if __name__ == "__main__":
    main()
