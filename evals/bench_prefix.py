"""An agent loop with exact prefix reuse (the default) against today's one-pass prompts, on the default model.

Each conversation is a BFCL "multiple" question: the system prompt lists its functions, the user asks, and the
agent iterates ``--turns`` times: a constrained tool call (ar-constrained, the call template), then the tool's
result as the next user message ("Result: ... Call a function again."). Every iteration resends the whole
conversation, as an agent does. Three engines get the same prompts (the conversation continues with the caching
engine's calls), interleaved per iteration, the order rotating:

- ``today``: ``prefix_cache=False, prompt_chunk=0``: the prompt in one pass, nothing reused (before issue 33);
- ``off``: ``prefix_cache=False``: the chunked prompt pass, nothing reused (the cache-off reference);
- ``cache``: the default, ``EngineConfig()``: chunked prompt pass and the prefix cache.

Reports, per iteration: prompt tokens, tokens encoded (prompt minus cached) and p50 prefill / request ms of each
engine, and whether ``cache`` wrote the same calls as ``off`` (it must: bit-identical) and as ``today``; the
cache's peak bytes. Writes everything to ``--out``.

    python evals/bench_prefix.py --data evals/data/bfcl --conversations 8 --turns 3 --threads 1 \
        --out evals/results/prefix_cache/prefix_agent.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.constrain.limits import CompileLimits
from agentkit.engine.engine import Engine
from agentkit.evals import bfcl

ENGINES = {"today": {"prefix_cache": False, "prompt_chunk": 0}, "off": {"prefix_cache": False}, "cache": {}}


def _p50(rows: list[dict], key: str) -> float:
    return round(statistics.median(r[key] for r in rows), 1)


def summary(rows: list[dict], turns: int) -> list[dict]:
    out = []
    for turn in range(turns):
        rs = [r for r in rows if r["turn"] == turn]
        s = {"iteration": turn + 1, "n": len(rs), "prompt_tokens_mean": round(statistics.mean(
            r["today_prompt_tokens"] for r in rs), 1)}
        for k in ENGINES:
            s[f"{k}_encoded_mean"] = round(statistics.mean(r[f"{k}_prompt_tokens"] - r[f"{k}_cached_prompt_tokens"]
                                                           for r in rs), 1)
            s[f"{k}_prefill_p50_ms"] = _p50(rs, f"{k}_prefill_ms")
            s[f"{k}_latency_p50_ms"] = _p50(rs, f"{k}_latency_ms")
        s["encoded_cache_over_today"] = round(s["cache_encoded_mean"] / s["today_encoded_mean"], 3)
        s["latency_p50_cache_over_today"] = round(s["cache_latency_p50_ms"] / s["today_latency_p50_ms"], 3)
        s["same_as_off"] = sum(r["cache_text"] == r["off_text"] for r in rs)
        s["same_as_today"] = sum(r["cache_text"] == r["today_text"] for r in rs)
        out.append(s)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parent / "data" / "bfcl")
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("evals/results/prefix_cache/prefix_agent.json"))
    a = ap.parse_args()
    import torch  # after agentkit: its OpenMP default (docs/threads.md) applies when torch loads

    torch.set_num_threads(a.threads)
    items = [it for it in bfcl.load_bfcl(a.data) if it.category == "multiple"][: a.conversations]
    engines = {k: Engine(EngineConfig(threads=a.threads, backend="torch", **kw)) for k, kw in ENGINES.items()}
    cfg = DecodeConfig(mode="ar", max_new_tokens=128)
    rows: list[dict] = []
    for c, item in enumerate(items):
        template = bfcl.compile_call(item).template()
        for e in engines.values():  # built ahead, without the per-request time limit (a loaded machine is slow)
            e.constraint(template, limits=CompileLimits(max_seconds=600))
        msgs = bfcl.build_prompt(item)
        for turn in range(a.turns):
            names = list(engines)
            order = names[(c + turn) % 3:] + names[:(c + turn) % 3]
            res = {k: engines[k].generate(msgs, cfg, template=template) for k in order}
            rows.append({"conversation": c, "turn": turn, **{f"{k}_text": r.text for k, r in res.items()},
                         **{f"{k}_{f}": getattr(r.stats, f) for k, r in res.items()
                            for f in ("prompt_tokens", "cached_prompt_tokens", "prefill_ms", "latency_ms")}})
            msgs = [*msgs, {"role": "assistant", "content": res["cache"].text},
                    {"role": "user", "content": f"Result: {json.dumps({'ok': True, 'turn': turn + 1})}. "
                                                "Call a function again."}]
        a.out.write_text(json.dumps({"partial": True, "rows": rows}, indent=1) + "\n")
    table = summary(rows, a.turns)
    for s in table:
        print(json.dumps(s))
    cache = engines["cache"].prefixes.stats()
    print("prefix cache:", json.dumps(cache))
    a.out.write_text(json.dumps({
        "command": "python evals/bench_prefix.py " + " ".join(f"--{k} {v}" for k, v in vars(a).items()),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "threads": a.threads,
        "prompt_chunk": engines["cache"].prompt_chunk, "prefix_status": engines["cache"].prefix_status,
        "summary": table, "prefix_cache": cache,
        "identical_to_off": sum(r["cache_text"] == r["off_text"] for r in rows), "rows_n": len(rows),
        "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
