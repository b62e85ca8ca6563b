"""Time to the first SSE content chunk vs total latency, on the default model (or --tiny), through the server.

Serves the app ``agentkit serve`` builds on uvicorn (a loopback port, in a thread: httpx's ASGI transport would
buffer the whole response) and, per request, records the time from sending to the first content delta and to
``[DONE]``. Prints one line per request and the medians.

    python evals/ttfb_server.py --n 5 --max-tokens 64 --threads 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

SCHEMA = {"type": "object", "properties": {"topic": {"type": "string", "maxLength": 40},
                                          "points": {"type": "array", "items": {"type": "string", "maxLength": 60},
                                                     "minItems": 2, "maxItems": 3}},
          "required": ["topic", "points"], "additionalProperties": False}
PROMPTS = ["Write a short poem about the sea.", "Explain what a hash map is.", "List three uses of copper.",
           "Describe a cat in two sentences.", "What is the capital of France and why is it famous?"]


async def _one(c, body: dict) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    first, n = None, 0
    async with c.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            d = json.loads(line[6:])
            if d.get("choices") and d["choices"][0]["delta"].get("content"):
                n += 1
                if first is None:
                    first = time.perf_counter() - t0
    return first or float("nan"), time.perf_counter() - t0, n


def _serve(app):
    import socket
    import threading

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    t = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    while not srv.started:
        time.sleep(0.02)

    def stop() -> None:
        srv.should_exit = True
        t.join(10)
        sock.close()

    return f"http://127.0.0.1:{sock.getsockname()[1]}", stop


async def main(a: argparse.Namespace) -> None:
    import httpx
    import torch
    from agentkit.serving.app import create_app

    from agentkit.config import EngineConfig
    from agentkit.engine import tiny_engine
    from agentkit.engine.engine import Engine

    torch.set_num_threads(a.threads)
    engine = tiny_engine(0) if a.tiny else Engine(EngineConfig(threads=a.threads))
    app = create_app(engine)
    base, stop = _serve(app)
    rows = []
    async with httpx.AsyncClient(base_url=base, timeout=600) as c:
        for i in range(a.n):
            body = {"model": "agentkit", "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                    "max_tokens": a.max_tokens, "stream": True, "agentkit": {"mode": a.mode, "canvas": False}}
            if a.schema:  # structured output: a summary object (diffusion commits it block by block)
                body["response_format"] = {"type": "json_schema", "json_schema": {"name": "summary", "schema": SCHEMA}}
            ttfb, total, n = await _one(c, body)
            rows.append((ttfb, total))
            print(f"request {i}: first content chunk {ttfb:.3f} s, total {total:.3f} s, {n} content chunks",
                  flush=True)
    stop()
    f, t = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
    print(f"median: first content chunk {f:.3f} s, total {t:.3f} s, ratio {f / t:.3f} "
          f"({'tiny' if a.tiny else engine.name}, mode {a.mode}, max_tokens {a.max_tokens}"
          f"{', json_schema' if a.schema else ''})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--mode", default="ar", choices=["ar", "diffusion", "verify"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--schema", action="store_true", help="structured output (a small JSON Schema) instead of text")
    ap.add_argument("--tiny", action="store_true", help="the tiny random model (no download, for a smoke run)")
    asyncio.run(main(ap.parse_args()))
