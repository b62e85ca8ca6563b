"""An agent loop with and without prompt-prefix reuse (``EngineConfig.prefix_cache``), on the default model.

Each conversation is a BFCL "multiple" question: the system prompt lists its functions, the user asks, and the
agent iterates ``--turns`` times: a constrained tool call (ar-constrained, the call template), then the tool's
result as the next user message ("Result: ... Call a function again."). Every iteration resends the whole
conversation, as an agent does. Two engines, one with ``prefix_cache=8`` and one without, get the same prompts
(the conversation is continued with the caching engine's calls), interleaved per iteration, the order alternating.

Prints, per turn: prompt tokens, tokens reused, prefill ms and request ms of each engine (means over the
conversations), and how many calls the two engines wrote alike.

    python evals/bench_prefix.py --data ../shared/data/bfcl --conversations 6 --turns 4 --threads 1
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.evals import bfcl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data/bfcl"))
    ap.add_argument("--conversations", type=int, default=6)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    items = [it for it in bfcl.load_bfcl(a.data) if it.category == "multiple"][: a.conversations]
    engines = {"reuse": Engine(EngineConfig(threads=a.threads, prefix_cache=8, backend="torch")),
               "fresh": Engine(EngineConfig(threads=a.threads, backend="torch"))}
    cfg = DecodeConfig(mode="ar", max_new_tokens=128)
    rows: list[dict] = []
    for c, item in enumerate(items):
        template = bfcl.compile_call(item).template()
        msgs = bfcl.build_prompt(item)
        for turn in range(a.turns):
            order = list(engines) if (c + turn) % 2 == 0 else list(engines)[::-1]
            res = {k: engines[k].generate(msgs, cfg, template=template) for k in order}
            rows.append({"conversation": c, "turn": turn, "same": res["reuse"].text == res["fresh"].text,
                         **{f"{k}_{f}": getattr(r.stats, f) for k, r in res.items()
                            for f in ("prompt_tokens", "reused_prompt_tokens", "prefill_ms", "latency_ms")}})
            call = res["reuse"].text
            msgs = [*msgs, {"role": "assistant", "content": call},
                    {"role": "user", "content": f"Result: {json.dumps({'ok': True, 'turn': turn + 1})}. "
                                                "Call a function again."}]
    print(f"{len(items)} conversations x {a.turns} turns, threads={a.threads}, ar-constrained")
    print("| turn | prompt tokens | reused | prefill ms fresh | prefill ms reuse | request ms fresh | "
          "request ms reuse | reuse / fresh | same call |")
    print("|---|---|---|---|---|---|---|---|---|")
    for turn in range(a.turns):
        rs = [r for r in rows if r["turn"] == turn]

        def m(key: str, rs=rs) -> float:
            return statistics.mean(r[key] for r in rs)

        print(f"| {turn + 1} | {m('fresh_prompt_tokens'):.0f} | {m('reuse_reused_prompt_tokens'):.0f} | "
              f"{m('fresh_prefill_ms'):.0f} | {m('reuse_prefill_ms'):.0f} | {m('fresh_latency_ms'):.0f} | "
              f"{m('reuse_latency_ms'):.0f} | {m('reuse_latency_ms') / m('fresh_latency_ms'):.2f} | "
              f"{sum(r['same'] for r in rs)}/{len(rs)} |")
    total = {k: sum(r[f"{k}_latency_ms"] for r in rows) for k in engines}
    print(f"whole loops: reuse {total['reuse'] / 1000:.1f} s, fresh {total['fresh'] / 1000:.1f} s "
          f"({total['reuse'] / total['fresh']:.2f}x); calls alike {sum(r['same'] for r in rows)}/{len(rows)}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
