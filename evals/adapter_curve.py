"""The adapter's training curve: decoder forwards and task success against tokens trained.

Every adapter snapshot that ``python -m agentkit.training --snapshot-every N`` kept (``OUT/snapshots/step-*/``, plus
any adapter directory given with ``--extra``) decodes the same two sets in diffusion mode, and AR-constrained on
the base weights decodes them once as the baseline:

- **held-out synthetic** tool calls and extractions from the project's own generator
  (``agentkit.training.data.synthetic``, a seed the training never used; ``--generated-frac`` of the calls on
  generated functions), each under its own template; right = the output equals the generator's answer;
- **BFCL** (``--bfcl DIR``, the first ``--bfcl-limit`` questions of each file), scored as ``agentkit eval bfcl``
  scores them.

Nothing here picks a snapshot: the shipped adapter is the run's last one whatever this prints. Writes JSON (one
row per snapshot and set) and a PNG of forwards and success against tokens trained; asserts nothing. Run again with
the same ``--out`` to add snapshots: the baseline and the rows already there are kept (same sets and sizes assumed).

    python evals/adapter_curve.py --run /work/adapter-run --extra adapters/smollm2-135m-bd \\
        --bfcl evals/data/bfcl --bfcl-limit 20 --synthetic 20 --threads 1 --out curve.json --plot curve.png
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.evals.report import write_json_atomic
from agentkit.evals.runner import run_eval
from agentkit.evals.synthetic import HELD_OUT_SEED, score_examples
from agentkit.training.data import synthetic


def snapshot_tokens(d: Path) -> tuple[int, int]:
    """(step, tokens seen) of an adapter directory: a snapshot's ``snapshot.json`` or a finished run's
    ``summary.json``."""
    for name in ("snapshot.json", "summary.json"):
        f = d / name
        if f.is_file():
            meta = json.loads(f.read_text())
            return int(meta["step" if "step" in meta else "steps"]), int(meta["tokens"])
    raise SystemExit(f"{d}: no snapshot.json or summary.json, so its tokens trained are unknown")


def synthetic_set(engine: Engine, mode: str, n: int, generated_frac: float) -> dict:
    examples = synthetic(n, seed=HELD_OUT_SEED, generated_frac=generated_frac)
    res = score_examples(engine, examples, DecodeConfig(mode=mode, max_new_tokens=256))
    del res["right"]
    return res


def bfcl_set(engine: Engine, mode: str, data: Path, limit: int, threads: int | None) -> dict:
    mode = "ar-constrained" if mode == "ar" else mode  # the engine's ar is the suite's ar-constrained
    with tempfile.TemporaryDirectory() as tmp:
        res = run_eval("bfcl", data, [mode], limit, out=Path(tmp) / "bfcl.json", engine=engine, threads=threads,
                       progress=False, quiet=True)
    s = res["modes"][mode]
    return {k: s[k] for k in ("n", "task_success", "valid_rate", "forwards_mean", "tokens_per_forward",
                              "latency_ms_p50")}


def plot(rows: list[dict], base: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = sorted({r["set"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for s in sets:
        pts = sorted((r["tokens"], r) for r in rows if r["set"] == s)
        xs = [t / 1000 for t, _ in pts]
        axes[0].plot(xs, [r["forwards_mean"] for _, r in pts], "o-", label=f"diffusion, {s}")
        axes[1].plot(xs, [r["task_success"] for _, r in pts], "o-", label=f"diffusion, {s}")
        if s in base:
            axes[0].axhline(base[s]["forwards_mean"], ls="--", lw=1, color=axes[0].lines[-1].get_color(),
                            label=f"AR-constrained, {s}")
            axes[0].axhline(0.5 * base[s]["forwards_mean"], ls=":", lw=1, color=axes[0].lines[-2].get_color(),
                            label=f"target 0.5x, {s}")
            axes[1].axhline(base[s]["task_success"], ls="--", lw=1, color=axes[1].lines[-1].get_color(),
                            label=f"AR-constrained, {s}")
    axes[0].set_ylabel("forwards per request")
    axes[1].set_ylabel("task success")
    for ax in axes:
        ax.set_xlabel("tokens trained (thousands)")
        ax.legend(fontsize=7)
    fig.suptitle("block-diffusion adapter: quality against tokens trained")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, help="a training output dir with snapshots/step-*/")
    ap.add_argument("--steps", default="", help="only these snapshot steps (comma-separated; default: all)")
    ap.add_argument("--extra", type=Path, action="append", default=[], help="another adapter dir to include")
    ap.add_argument("--synthetic", type=int, default=20, help="held-out synthetic calls (0: skip)")
    ap.add_argument("--generated-frac", type=float, default=0.5,
                    help="of the held-out calls, this fraction on generated functions (training/specs.py)")
    ap.add_argument("--bfcl", type=Path, default=None, help="BFCL data dir (none: skip)")
    ap.add_argument("--bfcl-limit", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path("adapter_curve.json"))
    ap.add_argument("--plot", type=Path, default=None)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    dirs = list(a.extra)
    if a.run is not None:
        want = {int(s) for s in a.steps.split(",") if s.strip()}
        dirs += [d for d in sorted((a.run / "snapshots").glob("step-*"))
                 if not want or snapshot_tokens(d)[0] in want]
    if not dirs:
        raise SystemExit("no adapter snapshots found (train with --snapshot-every N, or pass --extra DIR)")
    t0 = time.perf_counter()
    sets = ([("synthetic", lambda eng, mode: synthetic_set(eng, mode, a.synthetic, a.generated_frac))] if a.synthetic else []) + (
        [("bfcl", lambda eng, mode: bfcl_set(eng, mode, a.bfcl, a.bfcl_limit, a.threads))] if a.bfcl else [])
    command = "python evals/adapter_curve.py " + " ".join(sys.argv[1:])
    result = {"commands": [], "baseline_ar_constrained": {}, "rows": []}
    if a.out.is_file():  # add to an earlier run: its baseline and finished rows are kept
        result = json.loads(a.out.read_text())
    result["commands"].append(command)
    done = {(r["step"], r["tokens"], r["set"]) for r in result["rows"]}
    base_engine = Engine(EngineConfig(adapter=False, backend="torch"))  # shares its torch weights
    for name, fn in sets:
        if name not in result["baseline_ar_constrained"]:
            result["baseline_ar_constrained"][name] = fn(base_engine, "ar")
        print(f"AR-constrained (base) {name}: {result['baseline_ar_constrained'][name]}", flush=True)
    for d in dirs:
        step, tokens = snapshot_tokens(d)
        engine = Engine.from_loaded(base_engine.lm, EngineConfig(adapter_path=str(d)))  # base weights shared
        for name, fn in sets:
            if (step, tokens, name) in done:
                continue
            row = {"adapter": str(d), "step": step, "tokens": tokens, "set": name, **fn(engine, "diffusion")}
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
            write_json_atomic(a.out, result)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    write_json_atomic(a.out, result)
    if a.plot:
        plot(result["rows"], result["baseline_ar_constrained"], a.plot)
    base = result["baseline_ar_constrained"]
    print("\n| set | tokens trained | success | AR-c success | forwards | x AR-c forwards | tok/fwd |")
    print("|---|---|---|---|---|---|---|")
    for r in sorted(result["rows"], key=lambda r: (r["set"], r["tokens"])):
        b = base[r["set"]]
        print(f"| {r['set']} | {r['tokens']} | {r['task_success']:.3f} | {b['task_success']:.3f} | "
              f"{r['forwards_mean']:.2f} | {r['forwards_mean'] / b['forwards_mean']:.2f} | "
              f"{r['tokens_per_forward']:.2f} |")
    print(f"\n({result['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
