"""What the chunked prompt pass costs against one pass (the price of exact prefix reuse, docs/prefix_cache.md).

Encodes the first ``--tokens`` tokens of ARCHITECTURE.md on the default model in one pass and in chunks of each
width, ``--reps`` times interleaved, and reports the minimum CPU time (``time.process_time``: a loaded shared
machine inflates wall time far more) of each, and its ratio to one pass.

    python evals/bench_prefix_chunk.py --tokens 900 --out evals/results/prefix_cache/prefix_chunk.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from agentkit.config import EngineConfig
from agentkit.engine.engine import Engine
from agentkit.engine.prefix import chunks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=900)
    ap.add_argument("--widths", default="32,64,128,256")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("evals/results/prefix_cache/prefix_chunk.json"))
    a = ap.parse_args()
    import torch  # after agentkit: its OpenMP default (docs/threads.md) applies when torch loads

    torch.set_num_threads(1)
    eng = Engine(EngineConfig(threads=1, backend="torch"))
    bb = eng.backbone
    ids = eng.tokenizer.encode((Path(__file__).parents[1] / "ARCHITECTURE.md").read_text())[: a.tokens]

    def run(width: int) -> float:
        cache, t = bb.new_cache(), time.process_time()
        pieces = chunks(0, len(ids), width)
        for i, (lo, hi) in enumerate(pieces):
            bb.encode(ids[lo:hi], cache, rows=[-1] if i == len(pieces) - 1 else [], whole=True)
        return 1000 * (time.process_time() - t)

    widths = [0] + [int(w) for w in a.widths.split(",")]
    for w in widths:
        run(w)  # warm-up
    ms = {w: min(run(w) for _ in range(1)) for w in widths}
    for _ in range(a.reps - 1):
        for w in widths:
            ms[w] = min(ms[w], run(w))
    res = {"command": "python evals/bench_prefix_chunk.py " + " ".join(f"--{k} {v}" for k, v in vars(a).items()),
           "tokens": len(ids), "cpu_ms": {str(w or "one pass"): round(v) for w, v in ms.items()},
           "over_one_pass": {str(w): round(ms[w] / ms[0], 2) for w in widths[1:]}}
    print(json.dumps(res))
    a.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
