"""The adapter's mask sampler against its confidence threshold, on held-out synthetic tool calls (not BFCL).

How many forwards would the shipped adapter need, and how often would it be right, if the absorbing-mask sampler
accepted less confident positions per step? Tuning this on BFCL would leak the evaluation set into a setting, so the
examples here come from the project's own generator (``agentkit.training.data.synthetic``) with a seed the training
run never used. Each example decodes under its own template (pinned keys, typed value slots); an output is *right*
when it equals the generator's answer exactly. AR-constrained on the base weights is the baseline. Prints figures;
asserts nothing.

    python evals/bench_adapter_sampler.py [--n 20] [--thresholds 0.9,0.7,0.5,0.3] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.evals.synthetic import HELD_OUT_SEED, score_examples
from agentkit.training.data import synthetic


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--thresholds", default="0.99,0.95,0.9,0.7,0.5")
    ap.add_argument("--canvas-length", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    engine = Engine(EngineConfig())
    if engine.adapter_path is None:
        raise SystemExit("the engine has no block-diffusion adapter (default model + adapters/smollm2-135m-bd)")
    examples = synthetic(a.n, seed=HELD_OUT_SEED)
    settings = [("ar-constrained", None)] + [("diffusion", float(t)) for t in a.thresholds.split(",")]
    print(f"{len(examples)} held-out synthetic examples (seed {HELD_OUT_SEED}); adapter {engine.adapter_path}\n")
    print(f"{'setting':<24} {'right':>6} {'fwd/request':>12} {'tok/fwd':>8} {'p50 ms':>8}")
    t0 = time.perf_counter()
    for mode, threshold in settings:
        cfg = DecodeConfig(mode="ar" if mode == "ar-constrained" else mode, max_new_tokens=256,
                           canvas_length=a.canvas_length, confidence_threshold=threshold or 0.99)
        r = score_examples(engine, examples, cfg)
        name = mode if threshold is None else f"diffusion, conf >= {threshold}"
        print(f"{name:<24} {r['right']:>3}/{len(examples):<2} {r['forwards_mean']:>12.2f} "
              f"{r['tokens_per_forward']:>8.2f} {r['latency_ms_p50']:>8.0f}")
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
