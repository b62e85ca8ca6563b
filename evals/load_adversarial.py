"""Adversarial load on a real ``agentkit serve``: do valid small requests keep their latency beside the issue-36
probe's mix, and does every adversarial request end within its bound with a typed 4xx or a valid answer?

The mix (all at once): 3 x ``canvas_length`` 4096 diffusion (steps 4096, max_tokens 4096), 6 x distinct 200-way
``anyOf`` of small objects, 4 x distinct 5,000-string enums (``pfx_`` + ``prefix_shared_`` x 8 + salt + 5 digits),
and 20 slow-header connections (a byte a second). Beside it, 16 valid small AR requests (16 tokens), sent on the
same schedule (one every ``--gap-s``) as a first phase that runs them alone. Measured: the valid requests' p50/p95
alone and under the mix, 5xx and 504 counts, the server's RSS at start and its peak (sampled from /proc every
0.2 s), how each adversarial request ended (status, code, seconds), when each slow-header connection was closed,
and how often ``/health/ready`` said not-ready during the mix.

    python evals/load_adversarial.py --out evals/results/serving/load_adversarial.json

Targets (issue 36): valid p95 under the mix <= 2 x alone; no 5xx or 504; RSS peak <= start + 2 GB; every
adversarial request ends within its bound: a typed 4xx within ``--bound-s`` (30 s: the 10 s compile budget plus
upload and queueing), a valid answer within ``--answer-bound-s`` (120 s: the request timeout, as for any request).
The machine's load average is recorded: on a shared 2-core machine the absolute latencies say more about the
other jobs than about the server; the ratio alone / mixed is the measure.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

KEY = "sk-adversarial"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_server import wait_healthy  # a sibling script: the server start-up wait


def valid_body(i: int) -> dict:
    return {"model": "agentkit", "messages": [{"role": "user", "content": f"Say hello to user number {i}."}], "max_tokens": 16,
            "agentkit": {"mode": "ar"}}


def canvas_body() -> dict:
    return {"model": "agentkit", "messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 4096,
            "agentkit": {"mode": "diffusion", "canvas_length": 4096, "max_denoising_steps": 4096}}


def _schema_body(schema: dict) -> dict:
    return {"model": "agentkit", "messages": [{"role": "user", "content": "Answer in JSON."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}


def anyof_body(salt: str) -> dict:
    return _schema_body({"anyOf": [{"type": "object", "properties": {
        f"k{i}_{salt}": {"type": "integer"}, "v": {"type": "string", "maxLength": 8}}, "required": [f"k{i}_{salt}"]}
        for i in range(200)]})


def enum_body(salt: str) -> dict:
    return _schema_body({"enum": [f"pfx_{'prefix_shared_' * 8}{salt}{j:05d}" for j in range(5000)]})


class RSS:
    """Samples a process's resident memory every ``every_s`` (from /proc)."""

    def __init__(self, pid: int, every_s: float = 0.2) -> None:
        self.pid, self.every_s, self.peak_mb, self.stop = pid, every_s, 0.0, threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def now_mb(self) -> float:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                self.peak_mb = max(self.peak_mb, self.now_mb())
            except OSError:
                return
            self.stop.wait(self.every_s)


def spawn(port: int, startup_s: float, extra: list[str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "agentkit.cli", "serve", "--port", str(port), "--log-level", "warning",
           "--max-batch", "8", "--threads", "1", "--api-key", KEY, *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    return wait_healthy(proc, port, startup_s)


async def post(client: httpx.AsyncClient, kind: str, body: dict) -> dict:
    t = time.perf_counter()
    try:
        r = await client.post("/v1/chat/completions", json=body)
        status = r.status_code
        try:
            j = r.json()
        except ValueError:
            j = {}
        code = (j.get("error") or {}).get("code") if isinstance(j, dict) else None
        answer, stats = None, None
        if status == 200:
            answer = j["choices"][0]["message"].get("content")
            st = j.get("agentkit_stats") or {}
            stats = {k: round(st[k], 1) for k in ("queue_ms", "prepare_ms", "constraint_ms") if k in st}
    except httpx.HTTPError as e:
        status, code, answer, stats = None, type(e).__name__, None, None
    return {"kind": kind, "status": status, "code": code, "seconds": round(time.perf_counter() - t, 3),
            "answer": (answer[:80] if isinstance(answer, str) else answer), "stats": stats}


async def valid_schedule(client: httpx.AsyncClient, n: int, gap_s: float) -> list[dict]:
    async def one(i: int) -> dict:
        await asyncio.sleep(i * gap_s)
        return await post(client, "valid", valid_body(i))

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def slow_header(port: int, limit_s: float) -> dict:
    """Send a request head a byte a second; the seconds until the server closed the connection (None: open)."""
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    t = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        for i in range(int(limit_s)):
            try:
                s.sendall(head[i % len(head):i % len(head) + 1])
            except OSError:
                return {"closed_after_s": round(time.monotonic() - t, 2)}
            s.settimeout(1.0)
            try:
                if s.recv(4096) == b"":
                    return {"closed_after_s": round(time.monotonic() - t, 2)}
            except TimeoutError:
                pass
            except OSError:
                return {"closed_after_s": round(time.monotonic() - t, 2)}
        return {"closed_after_s": None}
    finally:
        s.close()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))] if xs else float("nan")


async def ready_sampler(client: httpx.AsyncClient, stop: asyncio.Event, out: list[int]) -> None:
    while not stop.is_set():
        try:
            out.append((await client.get("/health/ready")).status_code)
        except httpx.HTTPError:
            out.append(0)
        await asyncio.sleep(0.5)


async def run(a: argparse.Namespace, port: int, rss: RSS) -> dict:
    headers = {"Authorization": f"Bearer {KEY}"}
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=a.client_timeout_s,
                                 limits=limits) as client:
        for i in range(2):  # warm-up
            await post(client, "warmup", valid_body(100 + i))
        start_mb = rss.now_mb()
        load_start = list(os.getloadavg())
        alone = await valid_schedule(client, a.valid, a.gap_s)
        salt = f"{int(time.time())}"
        adv = ([post(client, "canvas_4096", canvas_body()) for _ in range(3)]
               + [post(client, "anyof_200", anyof_body(f"{salt}a{i}")) for i in range(6)]
               + [post(client, "enum_5000", enum_body(f"{salt}e{i}")) for i in range(4)])
        loop = asyncio.get_running_loop()
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=20)  # all 20 at once (the default pool has fewer)
        slow = [loop.run_in_executor(pool, slow_header, port, 40) for _ in range(20)]
        stop, ready = asyncio.Event(), []
        sampler = asyncio.ensure_future(ready_sampler(client, stop, ready))
        t_mix = time.perf_counter()
        adv_task = asyncio.gather(*adv)
        await asyncio.sleep(a.lead_s)
        mixed = await valid_schedule(client, a.valid, a.gap_s)
        adv_res = await adv_task
        stop.set()
        await sampler
        slow_res = await asyncio.gather(*slow)
        pool.shutdown()
        mix_s = time.perf_counter() - t_mix
    return {"start_mb": start_mb, "alone": alone, "mixed": mixed, "adversarial": adv_res, "slow_headers": slow_res,
            "ready": ready, "mix_s": mix_s, "load_start": load_start}


def summarize(r: dict, peak_mb: float, a: argparse.Namespace) -> dict:
    lat = {k: [x["seconds"] for x in r[k] if x["status"] == 200] for k in ("alone", "mixed")}
    p95 = {k: pct(v, 0.95) for k, v in lat.items()}
    everything = r["alone"] + r["mixed"] + r["adversarial"]
    n5xx = sum(1 for x in everything if x["status"] is not None and x["status"] >= 500)
    n504 = sum(1 for x in everything if x["status"] == 504)
    adv_ok = [x for x in r["adversarial"] if (x["status"] is not None and 400 <= x["status"] < 500 and x["code"]
                                              and x["seconds"] <= a.bound_s)
              or (x["status"] == 200 and x["seconds"] <= a.answer_bound_s)]
    closed = [s["closed_after_s"] for s in r["slow_headers"]]
    targets = {
        "valid_all_ok": all(x["status"] == 200 for x in r["alone"] + r["mixed"]),
        "valid_p95_within_2x": p95["mixed"] <= 2 * p95["alone"],
        "no_5xx_or_504": n5xx == 0 and n504 == 0,
        "rss_peak_within_start_plus_2GB": peak_mb <= r["start_mb"] + 2048,
        "adversarial_typed_within_bound": len(adv_ok) == len(r["adversarial"]),
        "slow_headers_all_closed": all(c is not None for c in closed),
    }
    return {
        "valid_alone": {"n": len(r["alone"]), "ok": len(lat["alone"]), "p50_s": pct(lat["alone"], 0.5),
                        "p95_s": p95["alone"]},
        "valid_mixed": {"n": len(r["mixed"]), "ok": len(lat["mixed"]), "p50_s": pct(lat["mixed"], 0.5),
                        "p95_s": p95["mixed"]},
        "p95_ratio": round(p95["mixed"] / p95["alone"], 3) if p95["alone"] else None,
        "count_5xx": n5xx, "count_504": n504,
        "rss_mb": {"start": round(r["start_mb"], 1), "peak": round(peak_mb, 1),
                   "delta": round(peak_mb - r["start_mb"], 1)},
        "adversarial": r["adversarial"],
        "adversarial_bound_s": {"typed_4xx": a.bound_s, "valid_answer": a.answer_bound_s},
        "load_average": {"start": r["load_start"], "end": list(os.getloadavg())},
        "slow_headers_closed_after_s": closed,
        "ready_samples": {"n": len(r["ready"]), "not_ready": sum(1 for s in r["ready"] if s != 200)},
        "mix_wall_s": round(r["mix_s"], 2),
        "valid_requests": {"alone": r["alone"], "mixed": r["mixed"]},
        "targets": targets,
        "all_targets_met": all(targets.values()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8771)
    ap.add_argument("--valid", type=int, default=16, help="valid small AR requests per phase")
    ap.add_argument("--gap-s", type=float, default=0.25, help="seconds between valid requests' arrivals")
    ap.add_argument("--lead-s", type=float, default=0.5, help="seconds the mix starts before the valid requests")
    ap.add_argument("--bound-s", type=float, default=30.0, help="bound on an adversarial request refused with a "
                    "typed 4xx (the compile budget, 10 s, plus upload and queueing)")
    ap.add_argument("--answer-bound-s", type=float, default=120.0, help="bound on an adversarial request answered "
                    "(a valid answer: the server's request timeout, 120 s, as for any request)")
    ap.add_argument("--client-timeout-s", type=float, default=180.0)
    ap.add_argument("--out", default=None, help="write the results JSON here")
    ap.add_argument("server_args", nargs="*", help="extra `agentkit serve` options (after --)")
    a = ap.parse_args(argv)
    proc = spawn(a.port, 600, a.server_args)
    rss = RSS(proc.pid)
    rss.thread.start()
    try:
        raw = asyncio.run(run(a, a.port, rss))
    finally:
        rss.stop.set()
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
    out = summarize(raw, rss.peak_mb, a)
    out["command"] = "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])])
    out["server"] = "agentkit serve --max-batch 8 --threads 1 --api-key ... (default model, SmolLM2-135M) " + \
        " ".join(a.server_args)
    out["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs (shared with other jobs)"
    text = json.dumps(out, indent=1)
    print(json.dumps({k: out[k] for k in ("valid_alone", "valid_mixed", "p95_ratio", "count_5xx", "count_504",
                                          "rss_mb", "targets", "all_targets_met")}, indent=1))
    for x in out["adversarial"]:
        print(f"  {x['kind']:<12} {x['status']} {x['code']} {x['seconds']} s")
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text + "\n")
    return 0 if out["all_targets_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
