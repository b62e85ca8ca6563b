"""16 requests sharing a ~400-token system prompt and tools, through the server: cached tokens and time to first
token, with the prefix cache (the default) and without (``--compare``: the one-pass prompt of before issue 33).

Serves the app ``agentkit serve`` builds on a loopback port (uvicorn in a thread) and sends the requests one after
another, streaming; per request it records the time from sending to the first content chunk (TTFT) and
``usage.prompt_tokens_details.cached_tokens`` from the last chunk. Reports the cached share of the 2nd..16th
prompts, their TTFT p50 against the first's, and the cache's peak bytes.

    python evals/bench_prefix_server.py --n 16 --threads 1 --out evals/results/prefix_cache/prefix_server.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from ttfb_server import _serve  # evals/ttfb_server.py

SYSTEM = (
    "You are the support agent of Northwind Outfitters, an online shop for hiking, climbing and camping gear. "
    "Answer the customer's message in at most two short sentences, or call one of the tools when the answer needs "
    "data you do not have. Rules: never invent an order number, a price, a delivery date or a stock level; look "
    "them up. Orders can be returned within 30 days of delivery if unused, with the original tags; sale items "
    "within 14 days. Refunds go to the original payment method within 5 business days after the return arrives. "
    "Shipping is free above 75 euros in the EU, 6.90 euros below; express costs 14.90 euros and arrives in 1-2 "
    "business days. We ship to the EU, the UK, Norway and Switzerland; customs for the UK, Norway and Switzerland "
    "are paid by the customer. Warranty: two years on all products, five years on tents and backpacks of our own "
    "brand. Sizes: our boots run half a size small; jackets are true to size. Be polite and concrete; do not "
    "promise anything the rules above do not allow; if the customer is angry, apologise once and then solve the "
    "problem. When you call a tool, use exactly the parameters it declares. If a message is not about the shop, "
    "say politely that you can only help with orders, products, returns and shipping. Keep personal data out of "
    "the answer except what the customer already wrote. Today is a weekday; the warehouse ships orders placed "
    "before 14:00 the same day. Gift cards cannot be returned or exchanged for cash. Rental gear (tents, "
    "crampons, ice axes) is rented per weekend, from Friday noon to Monday noon, and must come back clean; a "
    "cleaning fee of 25 euros applies otherwise. Members of the Northwind club get 10 percent off full-price items "
    "and free express shipping; membership is free and can be joined at checkout.")
TOOLS = [{"type": "function", "function": {"name": n, "description": d, "parameters": {
    "type": "object", "properties": p, "required": list(p), "additionalProperties": False}}}
    for n, d, p in [
        ("order_status", "Status, items and delivery date of an order", {"order_id": {"type": "string"}}),
        ("product_stock", "Stock level of a product in a size", {"sku": {"type": "string"},
                                                                  "size": {"type": "string"}}),
        ("start_return", "Open a return for items of an order", {"order_id": {"type": "string"},
                                                                 "reason": {"type": "string"}}),
    ]]
QUESTIONS = ["Where is my order 4411?", "Do you ship to Norway?", "Can I return boots I wore once?",
             "How much is express shipping?", "Is the Alpine 40 backpack in stock in size M?",
             "My jacket is too big, what can I do?", "When will my refund arrive?", "Do boots run small?",
             "What is the warranty on your tents?", "I want to return order 5120, the tent leaks.",
             "Is shipping free for a 60 euro order?", "Do I pay customs in Switzerland?",
             "Can I change my delivery address?", "What is the return window for sale items?",
             "Do you sell climbing ropes?", "When does the warehouse ship today's orders?"]


async def _one(c, body: dict) -> tuple[float, float, dict]:
    t0 = time.perf_counter()
    first, usage = None, {}
    async with c.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            d = json.loads(line[6:])
            if first is None and d.get("choices") and d["choices"][0].get("delta", {}).get("content"):
                first = time.perf_counter() - t0
            usage = d.get("usage") or usage
    total = time.perf_counter() - t0
    return first if first is not None else total, total, usage


async def run(engine, n: int, max_tokens: int) -> dict:
    import httpx
    from agentkit.serving.app import create_app

    app = create_app(engine)
    base, stop = _serve(app)
    rows = []
    try:
        async with httpx.AsyncClient(base_url=base, timeout=600) as c:
            for i in range(n):
                body = {"model": "agentkit", "messages": [{"role": "system", "content": SYSTEM},
                                     {"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                        "tools": TOOLS, "tool_choice": "none", "max_tokens": max_tokens, "stream": True,
                        "stream_options": {"include_usage": True}, "agentkit": {"mode": "ar"}}
                ttft, total, usage = await _one(c, body)
                cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                rows.append({"ttft_s": round(ttft, 4), "total_s": round(total, 4),
                             "prompt_tokens": usage.get("prompt_tokens"), "cached_tokens": cached})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        stop()
        app.state.scheduler.close()
    rest = rows[1:]
    out = {"requests": rows, "first_ttft_s": rows[0]["ttft_s"],
           "rest_ttft_p50_s": round(statistics.median(r["ttft_s"] for r in rest), 4),
           "cached_ratio_rest_min": round(min(r["cached_tokens"] / r["prompt_tokens"] for r in rest), 3),
           "cached_ratio_rest_mean": round(statistics.mean(r["cached_tokens"] / r["prompt_tokens"] for r in rest), 3)}
    out["rest_ttft_p50_over_first"] = round(out["rest_ttft_p50_s"] / out["first_ttft_s"], 3)
    if getattr(engine, "prefixes", None) is not None:
        out["prefix_cache"] = engine.prefixes.stats()
    return out


def main() -> None:
    import torch

    from agentkit.config import EngineConfig
    from agentkit.engine.engine import Engine

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--compare", action="store_true", help="also a server with prefix_cache=False, prompt_chunk=0")
    ap.add_argument("--out", type=Path, default=Path("evals/results/prefix_cache/prefix_server.json"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    res = {"command": "python evals/bench_prefix_server.py " + " ".join(f"--{k.replace('_', '-')} {v}"
                                                                        for k, v in vars(a).items()),
           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    configs = {"cache": {}, **({"today": {"prefix_cache": False, "prompt_chunk": 0}} if a.compare else {})}
    for name, kw in configs.items():
        engine = Engine(EngineConfig(threads=a.threads, backend="torch", **kw))
        res[name] = asyncio.run(run(engine, a.n, a.max_tokens))
        print(name, json.dumps({k: v for k, v in res[name].items() if k != "requests"}), flush=True)
        a.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
