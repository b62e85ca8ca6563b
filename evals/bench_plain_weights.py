"""What plain replies on the weights as loaded cost beside the merged loop adapter (``DecodeConfig.weights="loaded"``,
the SDK's plain replies): the second copy's load time and resident memory, and the time per reply token on each
set of weights, alternating, same prompts, same token budget.

    nice -n 5 python evals/bench_plain_weights.py --n 6 --out evals/results/replies/plain_weights_cost.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

PROMPTS = ["Name three colours.", "Describe the sea in one sentence.", "Give me a tip for sleeping better.",
           "What is a rainbow?", "Write a short greeting for my neighbour.", "Tell me about apples."]


def rss_mib() -> float:
    return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch

    from agentkit import DecodeConfig, default_engine

    torch.set_num_threads(1)
    engine = default_engine()
    before = rss_mib()
    t0 = time.perf_counter()
    engine.generate("hi", DecodeConfig(mode="ar", max_new_tokens=1, weights="loaded"))
    load_s = time.perf_counter() - t0
    after = rss_mib()
    per_token: dict[str, list[float]] = {"base": [], "loaded": []}
    for i in range(args.n):
        for weights in ("base", "loaded") if i % 2 == 0 else ("loaded", "base"):
            msgs = [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]
            cfg = DecodeConfig(mode="ar", max_new_tokens=args.tokens, weights=weights, stop_loops=0)
            res = engine.generate(msgs, cfg)
            per_token[weights].append(res.stats.latency_ms / max(1, res.stats.output_tokens))
    report = {"command": " ".join(sys.argv), "rss_mib_merged_only": round(before), "rss_mib_both": round(after),
              "second_copy_load_s": round(load_s, 2),
              "ms_per_token_median": {k: round(statistics.median(v), 1) for k, v in per_token.items()},
              "ms_per_token": {k: [round(x, 1) for x in v] for k, v in per_token.items()}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
