"""Self-speculative verify (the adapter drafts, the base weights check) against ar-constrained, on BFCL.

For the first ``--limit`` questions of each BFCL file, decodes the call under its template with greedy
ar-constrained (base weights) and with each verify setting, and prints: outputs identical to ar-constrained,
forwards (encoder + decoder after prefill; of them draft and verify passes) and p50 latency, each as a ratio to
ar-constrained on the same questions in the same run. Writes one JSON line per request to ``--out`` as it goes
(partial results survive a kill). Asserts nothing.

    python evals/bench_selfspec.py --data evals/data/bfcl --limit 10 --threads 1 \
        [--settings lookup,adapter:1,adapter:2,diffusion] [--adapter DIR] [--backend torch] [--out evals/results/selfspec.jsonl]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from pathlib import Path

import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.evals import bfcl


def settings(spec: str) -> list[tuple[str, DecodeConfig]]:
    out = [("ar-constrained", DecodeConfig(mode="ar", max_new_tokens=256))]
    for s in spec.split(","):
        if s == "diffusion":  # the adapter's own canvas, for comparison (not lossless)
            out.append(("diffusion", DecodeConfig(mode="diffusion", max_new_tokens=256)))
            continue
        draft, _, steps = s.partition(":")
        out.append((f"verify/{s}", DecodeConfig(mode="verify", draft=draft, draft_steps=int(steps or 1),
                                                max_new_tokens=256)))
    return out


def summarize(rows: list[dict], names: list[str]) -> None:
    base = {r["id"]: r for r in rows if r["setting"] == "ar-constrained"}
    print(f"{'setting':<20} {'n':>4} {'same as AR-c':>12} {'success':>8} {'fwd/req':>8} {'x AR-c':>7} "
          f"{'draft':>6} {'verify':>6} {'p50 ms':>8} {'x AR-c':>7}")
    for name in names:
        rs = [r for r in rows if r["setting"] == name and r["id"] in base]
        if not rs:
            continue
        b = [base[r["id"]] for r in rs]
        fwd, bfwd = statistics.mean(r["forwards"] for r in rs), statistics.mean(r["forwards"] for r in b)
        p50, bp50 = statistics.median(r["ms"] for r in rs), statistics.median(r["ms"] for r in b)
        same = sum(r["text"] == x["text"] for r, x in zip(rs, b))
        print(f"{name:<20} {len(rs):>4} {same:>8}/{len(rs):<3} {statistics.mean(r['success'] for r in rs):>8.3f} "
              f"{fwd:>8.2f} {fwd / bfwd:>7.2f} {statistics.mean(r['draft'] for r in rs):>6.2f} "
              f"{statistics.mean(r['verify'] for r in rs):>6.2f} {p50:>8.0f} {p50 / bp50:>7.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--limit", type=int, default=10, help="questions per BFCL file")
    ap.add_argument("--settings", default="lookup,adapter:1,adapter:2")
    ap.add_argument("--adapter", default=None, help="adapter directory (default: the shipped one)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--backend", default="torch", help="EngineConfig.backend (torch: the drafter can share the cache)")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    engine = Engine(EngineConfig(adapter_path=a.adapter, threads=a.threads, backend=a.backend, dtype=a.dtype))
    sets = settings(a.settings)
    items = bfcl.load_bfcl(Path(a.data), limit=a.limit)
    rows: list[dict] = []
    warm = bfcl.compile_call(items[0], cached=True).template()
    for _, cfg in sets:  # warm-up: adapter copy, constraint tables
        engine.generate(bfcl.build_prompt(items[0]), cfg, template=warm)
    t0 = time.perf_counter()
    with Path(a.out).open("a") if a.out else contextlib.nullcontext() as out:
        for item in items:
            calls = bfcl.compile_call(item, cached=True)
            for name, cfg in sets:
                res = engine.generate(bfcl.build_prompt(item), cfg, template=calls.template())
                s = res.stats
                row = {"id": item.id, "setting": name, "text": res.text, "forwards": s.forwards,
                       "draft": s.draft_forwards, "verify": s.verify_forwards, "ms": round(s.latency_ms, 1),
                       "success": bool(bfcl.evaluate(item, res.text, res.value).get("success"))}
                rows.append(row)
                if out:
                    out.write(json.dumps(row) + "\n")
                    out.flush()
    print(f"{len(items)} BFCL questions ({a.limit} per file), adapter {engine.adapter_path}, "
          f"{time.perf_counter() - t0:.0f} s\n")
    summarize(rows, [n for n, _ in sets])


if __name__ == "__main__":
    main()
