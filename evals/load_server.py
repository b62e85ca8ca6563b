"""Load test for the agentkit server: throughput and latency per decoding mode and concurrency.

Drives ``POST /v1/chat/completions`` on a loopback server at each concurrency level (default 1, 4, 16, 32) in each
mode (default ar, diffusion), with a structured workload (a small JSON Schema, where diffusion is meant to pay off)
or free text. Per (mode, concurrency) it prints output tokens/s, request latency p50/p95/p99, mean tokens per
forward, mean requests per model forward (the server's continuous batching, from ``agentkit_stats.batch_size``),
and error counts: 5xx, 429, other 4xx, and *lost* (no HTTP response: connection error, client timeout,
unparseable body). Then the diffusion/AR throughput ratio at each concurrency and the first concurrency where AR
overtakes diffusion (if any).

Bounded: ``--requests-per-level`` requests per cell, and ``--max-seconds`` for the whole run (a cell stops issuing
requests once the deadline passes; requests in flight finish; cells not started are reported as skipped).

    python evals/load_server.py --spawn                       # start the server (default model) in a subprocess
    python evals/load_server.py --spawn --max-batch 32        # ... decoding up to 32 requests per forward
    python evals/load_server.py --url http://127.0.0.1:8000   # an already running server
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 24},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
    },
    "required": ["city", "unit", "days"],
    "additionalProperties": False,
}
PROMPTS = [
    "Get the weather forecast for Paris for the next 3 days in celsius.",
    "I need a 7 day forecast for Boston, in fahrenheit please.",
    "What will the weather be like in Tokyo over the next 5 days? Use celsius.",
    "Forecast for Berlin, two days, metric units.",
]


@dataclass
class Cell:
    mode: str
    concurrency: int
    latencies: list[float] = field(default_factory=list)
    output_tokens: int = 0
    tpf: list[float] = field(default_factory=list)
    batch: list[float] = field(default_factory=list)  # per request: mean requests per forward it took part in
    ok: int = 0
    e5xx: int = 0
    e429: int = 0
    e4xx: int = 0
    lost: int = 0
    wall_s: float = 0.0
    skipped: bool = False

    @property
    def throughput(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def pct(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, max(0, round(q / 100 * len(xs) + 0.5) - 1))]


def body(i: int, mode: str, workload: str, max_tokens: int) -> dict:
    b = {"model": "agentkit", "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
         "max_tokens": max_tokens, "temperature": 0, "agentkit": {"mode": mode}}
    if workload == "json":
        b["response_format"] = {"type": "json_schema", "json_schema": {"name": "forecast", "schema": SCHEMA}}
    return b


async def run_cell(client: httpx.AsyncClient, url: str, cell: Cell, n: int, deadline: float, workload: str,
                   max_tokens: int) -> None:
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            if time.monotonic() > deadline:
                return
            t0 = time.perf_counter()
            try:
                r = await client.post(url, json=body(i, cell.mode, workload, max_tokens))
            except httpx.HTTPError:
                cell.lost += 1
                continue
            dt = time.perf_counter() - t0
            if r.status_code >= 500:
                cell.e5xx += 1
            elif r.status_code == 429:
                cell.e429 += 1
            elif r.status_code >= 400:
                cell.e4xx += 1
            else:
                try:
                    d = r.json()
                    d["choices"][0]["message"]
                    cell.output_tokens += int(d["usage"]["completion_tokens"])
                    cell.tpf.append(float(d["agentkit_stats"]["tokens_per_forward"]))
                    cell.batch.append(float(d["agentkit_stats"].get("batch_size", 1)))
                except (ValueError, KeyError, IndexError, TypeError):
                    cell.lost += 1
                    continue
                cell.ok += 1
                cell.latencies.append(dt)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(cell.concurrency)))
    cell.wall_s = time.perf_counter() - t0


def spawn(port: int, model: str | None, startup_s: float, max_batch: int | None = None) -> subprocess.Popen:
    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "agentkit.cli", "serve", "--port", str(port), "--log-level", "warning",
           "--max-queue", "64", "--request-timeout-s", "600"]
    if model:
        cmd += ["--model", model]
    if max_batch:
        cmd += ["--max-batch", str(max_batch)]
    proc = subprocess.Popen(cmd, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    return wait_healthy(proc, port, startup_s)


def wait_healthy(proc: subprocess.Popen, port: int, startup_s: float) -> subprocess.Popen:
    """``proc`` once its server answers ``/health`` on ``port`` (SystemExit if it exits or takes over ``startup_s``)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < startup_s:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode} during startup")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"server did not come up within {startup_s:g} s")


def table(cells: list[Cell], modes: list[str], levels: list[int]) -> str:
    head = (f"{'mode':<10}{'conc':>5}{'ok':>5}{'tok/s':>9}{'p50 s':>8}{'p95 s':>8}{'p99 s':>8}{'tok/fwd':>8}"
            f"{'batch':>6}{'5xx':>5}{'429':>5}{'4xx':>5}{'lost':>5}")
    lines = [head, "-" * len(head)]
    for c in cells:
        if c.skipped:
            lines.append(f"{c.mode:<10}{c.concurrency:>5}  (skipped: time budget spent)")
            continue
        tpf = statistics.mean(c.tpf) if c.tpf else float("nan")
        batch = statistics.mean(c.batch) if c.batch else float("nan")
        lines.append(f"{c.mode:<10}{c.concurrency:>5}{c.ok:>5}{c.throughput:>9.1f}{c.pct(50):>8.2f}{c.pct(95):>8.2f}"
                     f"{c.pct(99):>8.2f}{tpf:>8.2f}{batch:>6.2f}{c.e5xx:>5}{c.e429:>5}{c.e4xx:>5}{c.lost:>5}")
    if "ar" in modes and "diffusion" in modes:
        lines += ["", f"{'conc':>5}{'diffusion/AR throughput':>26}"]
        by = {(c.mode, c.concurrency): c for c in cells if not c.skipped and c.ok}
        crossover, led = None, False
        for n in levels:
            a, d = by.get(("ar", n)), by.get(("diffusion", n))
            if a and d and a.throughput > 0:
                ratio = d.throughput / a.throughput
                lines.append(f"{n:>5}{ratio:>26.2f}")
                led = led or ratio >= 1
                if led and ratio < 1 and crossover is None:
                    crossover = n
            else:
                lines.append(f"{n:>5}{'n/a':>26}")
        if not led:
            lines.append("diffusion never leads AR at the measured concurrencies (no crossover to report)")
        else:
            lines.append("AR overtakes diffusion at concurrency " + (str(crossover) if crossover else
                         f"- (not within {max(levels)})"))
    return "\n".join(lines)


async def main_async(a: argparse.Namespace) -> list[Cell]:
    url = a.url.rstrip("/") + "/v1/chat/completions"
    modes, levels = a.modes.split(","), [int(x) for x in a.concurrency.split(",")]
    headers = {"Authorization": f"Bearer {a.api_key}"} if a.api_key else {}
    limits = httpx.Limits(max_connections=max(levels) + 4, max_keepalive_connections=max(levels) + 4)
    deadline = time.monotonic() + a.max_seconds
    cells: list[Cell] = []
    async with httpx.AsyncClient(timeout=a.request_timeout_s, limits=limits, headers=headers) as client:
        if a.warmup:
            for m in modes:
                await client.post(url, json=body(0, m, a.workload, a.max_tokens))
        for n in levels:
            for m in modes:
                cell = Cell(m, n)
                cells.append(cell)
                if time.monotonic() > deadline:
                    cell.skipped = True
                    continue
                await run_cell(client, url, cell, a.requests_per_level, deadline, a.workload, a.max_tokens)
                print(f"  {m:<10} conc {n:>3}: {cell.ok} ok in {cell.wall_s:.1f} s", file=sys.stderr, flush=True)
    return cells


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default=None, help="server base URL (default: the spawned one)")
    ap.add_argument("--spawn", action="store_true", help="start `agentkit serve` on a loopback port")
    ap.add_argument("--port", type=int, default=8765, help="port for --spawn")
    ap.add_argument("--model", default=None, help="model for --spawn (default: embedded SmolLM2-135M)")
    ap.add_argument("--max-batch", type=int, default=None,
                    help="--spawn: the server's --max-batch (requests decoded concurrently; default: the server's)")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--modes", default="ar,diffusion", help="comma list of ar,diffusion,verify")
    ap.add_argument("--concurrency", default="1,4,16,32")
    ap.add_argument("--requests-per-level", type=int, default=32)
    ap.add_argument("--max-seconds", type=float, default=600, help="budget for the whole run")
    ap.add_argument("--request-timeout-s", type=float, default=600)
    ap.add_argument("--workload", choices=["json", "text"], default="json")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--no-warmup", dest="warmup", action="store_false")
    ap.add_argument("--json", dest="json_out", default=None, help="also write the cells to this JSON file")
    a = ap.parse_args(argv)
    proc = None
    if a.spawn:
        proc = spawn(a.port, a.model, 300, a.max_batch)
        a.url = a.url or f"http://127.0.0.1:{a.port}"
    if not a.url:
        ap.error("give --url or --spawn")
    try:
        cells = asyncio.run(main_async(a))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
    modes, levels = a.modes.split(","), [int(x) for x in a.concurrency.split(",")]
    print(table(cells, modes, levels))
    if a.json_out:
        Path(a.json_out).write_text(json.dumps([{**c.__dict__, "throughput": c.throughput, "p50": c.pct(50),
                                                  "p95": c.pct(95), "p99": c.pct(99)} for c in cells], indent=1))
    bad = sum(c.e5xx + c.lost for c in cells)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
