"""What the message cuts cost a fresh prompt: BFCL prompts encoded in one pass, in 128-token blocks, and in 128-token
blocks also cut before each chat message (the default since the message cuts, docs/prefix_cache.md), nothing
reused. CPU time (``time.process_time``, 1 thread: a loaded machine inflates wall time far more), the minimum of
``--reps`` interleaved runs per prompt, summed over the prompts.

    python evals/bench_prompt_pieces.py --items 20 --out evals/results/prefix_cache/prompt_pieces.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from agentkit.config import EngineConfig
from agentkit.engine.engine import Engine
from agentkit.engine.prefix import Chunking, prompt_pass
from agentkit.evals import bfcl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parent / "data" / "bfcl")
    ap.add_argument("--items", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    import torch  # after agentkit: its OpenMP default (docs/threads.md) applies when torch loads

    torch.set_num_threads(1)
    eng = Engine(EngineConfig(threads=1, backend="torch", prefix_cache=False))
    items = bfcl.load_bfcl(a.data)[:: max(1, len(bfcl.load_bfcl(a.data)) // a.items)][: a.items]
    prompts = [eng.encode_prompt(bfcl.build_prompt(it)) for it in items]
    ways = {"one pass": Chunking(0), "blocks": Chunking(eng.chunking.block),
            "blocks + messages": eng.chunking}

    def run(ids: list[int], c: Chunking) -> float:
        t = time.process_time()
        prompt_pass(eng.backbone, eng.backbone.new_cache(), ids, 0, c)
        return 1000 * (time.process_time() - t)

    total = dict.fromkeys(ways, 0.0)
    pieces = dict.fromkeys(ways, 0)
    for ids in prompts:
        best = {k: min(run(ids, c) for _ in range(1)) for k, c in ways.items()}
        for _ in range(a.reps - 1):
            for k, c in ways.items():
                best[k] = min(best[k], run(ids, c))
        for k, c in ways.items():
            total[k] += best[k]
            pieces[k] += len(c.pieces(ids, 0, len(ids)))
    res = {"command": "python evals/bench_prompt_pieces.py " + " ".join(f"--{k} {v}" for k, v in vars(a).items()),
           "prompts": len(prompts), "prompt_tokens_mean": round(sum(map(len, prompts)) / len(prompts), 1),
           "marks": sorted(eng.chunking.marks), "cpu_ms_sum": {k: round(v) for k, v in total.items()},
           "pieces_mean": {k: round(v / len(prompts), 2) for k, v in pieces.items()},
           "over_one_pass": {k: round(total[k] / total["one pass"], 3) for k in ways},
           "messages_over_blocks": round(total["blocks + messages"] / total["blocks"], 3)}
    print(json.dumps(res))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
