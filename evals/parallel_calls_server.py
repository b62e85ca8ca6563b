"""Parallel tool calls in the server on the default model: what ``parallel_tool_calls`` (true by default, as
OpenAI's) costs on questions that need one call.

For BFCL items (``--data``, default ``evals/data/bfcl``; their functions as the tools, their question) it asks
``tool_choice="required"`` twice through the app in-process, with ``parallel_tool_calls`` false and true, and
records the number of calls, whether the first call is the same in both (it must be: the template is the same up to
the end of the first call), BFCL's checker on the first call, and the latency. Ground truths are read only to score.

    python evals/parallel_calls_server.py --n 20 --out evals/results/serving/parallel_calls.json

The JSON is rewritten after each item (a stopped run keeps its partial results).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def _tools(item: Any) -> list[dict]:
    return [{"type": "function", "function": {"name": f["name"], "description": f.get("description", ""),
                                               "parameters": item.params(f["name"])}} for f in item.functions]


async def _ask(client: Any, item: Any, parallel: bool) -> dict[str, Any]:
    body = {"model": "agentkit", "messages": item.messages, "tools": _tools(item), "tool_choice": "required",
            "parallel_tool_calls": parallel, "max_tokens": 256}
    t0 = time.perf_counter()
    r = await client.post("/v1/chat/completions", json=body)
    ms = 1000 * (time.perf_counter() - t0)
    r.raise_for_status()
    calls = r.json()["choices"][0]["message"].get("tool_calls") or []
    return {"calls": [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
                      for c in calls], "ms": round(ms, 1)}


def _summary(rows: list[dict]) -> dict[str, Any]:
    out: dict[str, Any] = {"items": len(rows)}
    for key in ("single", "parallel"):
        n_calls = [len(r[key]["calls"]) for r in rows]
        out[key] = {"mean_calls": round(statistics.mean(n_calls), 3) if rows else None,
                    "extra_call_rate": round(sum(n > 1 for n in n_calls) / len(rows), 3) if rows else None,
                    "first_call_success": round(sum(r[key]["ok"] for r in rows) / len(rows), 3) if rows else None,
                    "p50_ms": round(statistics.median(r[key]["ms"] for r in rows), 1) if rows else None}
    out["first_call_same"] = sum(r["single"]["calls"][:1] == r["parallel"]["calls"][:1] for r in rows)
    return out


async def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent / "data" / "bfcl"))
    ap.add_argument("--n", type=int, default=20, help="items per BFCL file")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)

    import httpx
    from agentkit.serving.app import create_app

    from agentkit.engine.engine import Engine
    from agentkit.evals.bfcl import check_call, load_bfcl

    app = create_app(Engine())
    items = load_bfcl(Path(a.data), limit=a.n)
    rows: list[dict] = []
    cmd = "python " + " ".join(["evals/parallel_calls_server.py", *(argv if argv is not None else sys.argv[1:])])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=600) as c:
        for item in items:
            row: dict[str, Any] = {"id": item.id}
            for key, parallel in (("single", False), ("parallel", True)):
                got = await _ask(c, item, parallel)
                first = got["calls"][0] if got["calls"] else None
                got["ok"] = bool(check_call(item, (first["name"], first["arguments"]) if first else None).ok)
                row[key] = got
            rows.append(row)
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(json.dumps({"command": cmd, "summary": _summary(rows), "items": rows}, indent=1))
            print(item.id, len(row["single"]["calls"]), len(row["parallel"]["calls"]), flush=True)
    print(json.dumps(_summary(rows), indent=1))


if __name__ == "__main__":
    asyncio.run(main())
