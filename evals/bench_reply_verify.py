"""Plain replies in verify against AR: an ``Agent`` with no tools on the reply benchmark's instructions
(``evals/replies/instructions.jsonl``), each item in both modes in turn (``RoutingPolicy(reply=...)``), one thread.
Reported apart: replies equal to AR's, the reply step's forwards and output tokens, and each mode's p50 run latency.
A plain reply is written by the weights as loaded (the SDK's default), which the block drafter was not trained for,
so verify drafts it by prompt lookup alone. ::

    python evals/bench_reply_verify.py --every 5 --limit 22 --out evals/results/drafter/plain_replies_verify.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / "replies" / "instructions.jsonl"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=int, default=5, help="every k-th instruction")
    ap.add_argument("--limit", type=int, default=22)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    import torch

    from agentkit import Agent, default_engine
    from agentkit.evals.replies import load_items
    from agentkit.sdk import RoutingPolicy

    torch.set_num_threads(1)
    items = load_items(DATA)[:: args.every][: args.limit]
    engine = default_engine()
    rows = []
    for it in items:
        row: dict = {"id": it["id"]}
        for mode in ("ar", "verify"):
            t0 = time.perf_counter()
            res = Agent(engine, routing=RoutingPolicy(reply=mode)).run_sync(it["prompt"])
            rec = res.trace[-1]
            row[mode] = {"ms": round(1000 * (time.perf_counter() - t0), 1), "output": res.output,
                         "forwards": rec.encoder_forwards + rec.decoder_forwards, "tokens": rec.output_tokens}
        rows.append(row)
    summary = {m: {"p50_ms": statistics.median(r[m]["ms"] for r in rows),
                   "forwards_mean": statistics.mean(r[m]["forwards"] for r in rows),
                   "tokens_mean": statistics.mean(r[m]["tokens"] for r in rows)} for m in ("ar", "verify")}
    summary["equal"] = sum(r["ar"]["output"] == r["verify"]["output"] for r in rows)
    summary["p50_ratio"] = round(summary["verify"]["p50_ms"] / summary["ar"]["p50_ms"], 4)
    out = {"command": "python evals/bench_reply_verify.py " + " ".join(argv or __import__("sys").argv[1:]),
           "n": len(rows), "summary": summary, "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
