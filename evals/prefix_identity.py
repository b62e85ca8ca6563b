"""Is the prefix cache exact on BFCL? Every item decoded by an engine with the cache on (the default) and one with it
off, in ar-constrained and verify, and the cache engine once more on the same item (its whole prompt but the last
message then comes from the cache): all three outputs must be the same token ids.

The cache engine keeps its cache across items, so an item's prompt is also cut where it shares a prefix with
earlier items (the system prompt's opening). Rows are written as they come (``--out``, resumable with the same
command); ``--shard K/N`` takes every N-th item from the K-th (two processes on two cores, merged by reading both).

    python evals/prefix_identity.py --data evals/data/bfcl --threads 1 --shard 0/2 \
        --out evals/results/prefix_cache/prefix_identity_bfcl.s0.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from agentkit.config import EngineConfig
from agentkit.constrain.limits import CompileLimits
from agentkit.engine.engine import Engine
from agentkit.evals import bfcl
from agentkit.evals.runner import EvalContext

CHECKED_MODES = ("ar-constrained", "verify")


def one(engines: dict[str, Engine], ctx: EvalContext, item: bfcl.BfclItem, mode: str) -> dict:
    template = bfcl.compile_call(item).template()
    for e in engines.values():  # built ahead, without the per-request time limit (a loaded machine is slow)
        e.constraint(template, limits=CompileLimits(max_seconds=600))
    msgs = bfcl.build_prompt(item)
    on = ctx.generate(engines["on"], msgs, mode, template=template)
    off = ctx.generate(engines["off"], msgs, mode, template=template)
    again = ctx.generate(engines["on"], msgs, mode, template=template)
    return {"id": item.id, "mode": mode, "prompt_tokens": on.stats.prompt_tokens,
            "cached_first": on.stats.cached_prompt_tokens, "cached_again": again.stats.cached_prompt_tokens,
            "same_on_off": list(on.token_ids) == list(off.token_ids),
            "same_again": list(again.token_ids) == list(off.token_ids),
            "success": bool(bfcl.evaluate(item, off.text, off.value)["success"]), "text": off.text}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parent / "data" / "bfcl")
    ap.add_argument("--limit", type=int, default=None, help="the first N items of each file")
    ap.add_argument("--shard", default="0/1", help="K/N: every N-th item from the K-th")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    import torch  # after agentkit: its OpenMP default (docs/threads.md) applies when torch loads

    torch.set_num_threads(a.threads)
    k, n = (int(x) for x in a.shard.split("/"))
    items = bfcl.load_bfcl(a.data, a.limit)[k::n]
    rows: list[dict] = json.loads(a.out.read_text())["rows"] if a.out.exists() else []
    done = {(r["id"], r["mode"]) for r in rows}
    engines = {"on": Engine(EngineConfig(threads=a.threads, backend="torch")),
               "off": Engine(EngineConfig(threads=a.threads, backend="torch", prefix_cache=False))}
    ctx = EvalContext()
    t0 = time.time()
    for item in items:
        for mode in CHECKED_MODES:
            if (item.id, mode) in done:
                continue
            rows.append(one(engines, ctx, item, mode))
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(json.dumps(report(a, rows, len(items), engines, time.time() - t0), indent=1) + "\n")
    result = report(a, rows, len(items), engines, time.time() - t0)
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"]))


def report(a: argparse.Namespace, rows: list[dict], n_items: int, engines: dict[str, Engine], wall_s: float) -> dict:
    summary = {}
    for mode in CHECKED_MODES:
        rs = [r for r in rows if r["mode"] == mode]
        summary[mode] = {"n": len(rs), "same_on_off": sum(r["same_on_off"] for r in rs),
                         "same_again": sum(r["same_again"] for r in rs),
                         "cached_again_mean": round(sum(r["cached_again"] for r in rs) / max(1, len(rs)), 1),
                         "prompt_tokens_mean": round(sum(r["prompt_tokens"] for r in rs) / max(1, len(rs)), 1),
                         "success": round(sum(r["success"] for r in rs) / max(1, len(rs)), 4)}
    return {"command": "python evals/prefix_identity.py " + " ".join(f"--{k} {v}" for k, v in vars(a).items()
                                                                     if v is not None),
            "partial": len(rows) < n_items * len(CHECKED_MODES), "items": n_items, "wall_s": round(wall_s, 1),
            "prefix_status": engines["on"].prefix_status, "prefix_cache": engines["on"].prefixes.stats(),
            "summary": summary, "rows": rows}


if __name__ == "__main__":
    main()
