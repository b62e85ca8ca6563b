"""Continuations of one cached prompt read side by side in one pass (a tree mask, ``Backbone.branches``) against a
pass each, cropped back (``agentkit.engine.backbone.continuation_logits``): how the tool step's decision reads its
names and a grounded extraction its candidates. Default model, a cached 300-token prompt, medians of ``--reps``.

    python evals/bench_continuations.py --reps 9
"""

from __future__ import annotations

import argparse
import statistics
import time

import agentkit  # noqa: F401  (sets OpenMP's wait policy before torch loads)
from agentkit.engine import backbone, default_engine

SHAPES = ((3, 4), (5, 4), (10, 5), (20, 5), (10, 10))  # (continuations, tokens each)


def _median_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args(argv)
    engine = default_engine()
    bb = engine.backbone
    ids = engine.tokenizer.encode("Hello there, how are you doing today? " * 20)[:300]
    cache = bb.new_cache()
    bb.encode(ids, cache, whole=True)
    print("| continuations x tokens | one pass (ms) | a pass each (ms) | ratio |\n|---|---|---|---|")
    for k, n in SHAPES:
        heads = [ids[i * 7:i * 7 + n] for i in range(k)]
        ms = {}
        for one in (True, False):
            backbone.ONE_PASS_CONTINUATIONS = one
            ms[one] = _median_ms(lambda h=heads: backbone.continuation_logits(bb, cache, h), args.reps)
        backbone.ONE_PASS_CONTINUATIONS = True
        print(f"| {k} x {n} | {ms[True]:.1f} | {ms[False]:.1f} | {ms[True] / ms[False]:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
