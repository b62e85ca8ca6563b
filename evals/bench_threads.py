"""``Engine.generate`` on the main thread against the same call in a worker thread, beside a busy process.

Each setting runs in a fresh child process (OpenMP reads ``OMP_WAIT_POLICY`` when torch loads), beside one
2-thread torch process doing matmuls (the "busy machine"); the child times a ``max_new_tokens`` AR generation on
the main thread and in a ``threading.Thread``, alternating, ``--reps`` times each, and reports medians.

Settings: ``default`` (agentkit's defaults: OMP_WAIT_POLICY=PASSIVE set before torch loads, ``threads=None``, which
is 1 on a machine of at most 4 cores), ``passive2`` (the passive policy with ``threads=2``), ``before`` (what ran
before issue 33: libgomp's default wait policy -- an empty OMP_WAIT_POLICY, which agentkit leaves alone and libgomp
ignores -- and 2 threads).

    python evals/bench_threads.py --out evals/results/engine/prefix_threads.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SETTINGS = {"default": {}, "passive2": {"AGENTKIT_BENCH_THREADS": "2"},
            "before": {"OMP_WAIT_POLICY": "", "AGENTKIT_BENCH_THREADS": "2"}}
BUSY = ("import torch, time\ntorch.set_num_threads(2)\na = torch.randn(1024, 1024)\n"
        "while True:\n    a @ a\n")


def child(tokens: int, reps: int) -> dict:
    import threading

    from agentkit.config import DecodeConfig, EngineConfig  # first: agentkit's OpenMP default before torch loads
    from agentkit.engine.engine import Engine

    torch = sys.modules["torch"]  # loaded by agentkit.engine, after agentkit set its default

    n = os.environ.get("AGENTKIT_BENCH_THREADS")
    eng = Engine(EngineConfig(backend="torch", threads=int(n) if n else None, prefix_cache=False))
    cfg = DecodeConfig(mode="ar", max_new_tokens=tokens)
    prompt = "Write a short poem about the sea."
    t0 = time.perf_counter()
    eng.generate(prompt, cfg)
    print(json.dumps({"warm_s": round(time.perf_counter() - t0, 3)}), flush=True)

    def timed(out: list[float]) -> None:
        t = time.perf_counter()
        eng.generate(prompt, cfg)
        out.append(time.perf_counter() - t)
        print(json.dumps({"thread": threading.current_thread().name, "s": round(out[-1], 3)}), flush=True)

    main: list[float] = []
    worker: list[float] = []
    for _ in range(reps):
        timed(main)
        th = threading.Thread(target=timed, args=(worker,))
        th.start()
        th.join()
    return {"threads": torch.get_num_threads(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "main_s": [round(x, 3) for x in main], "worker_s": [round(x, 3) for x in worker],
            "main_p50_s": round(statistics.median(main), 3), "worker_p50_s": round(statistics.median(worker), 3),
            "main_over_worker": round(statistics.median(main) / statistics.median(worker), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--no-busy", action="store_true", help="no busy process beside")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per setting (then reported as timed out)")
    ap.add_argument("--out", default="evals/results/engine/prefix_threads.json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.tokens, a.reps)))
        return
    results = {"command": "python " + " ".join(sys.argv), "cpus": os.cpu_count(), "busy": not a.no_busy,
               "tokens": a.tokens, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "settings": {}}
    for name in a.settings.split(","):
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
        env.update(SETTINGS[name])
        busy = None if a.no_busy else subprocess.Popen([sys.executable, "-c", BUSY])
        try:
            argv = [sys.executable, __file__, "--child", "--tokens", str(a.tokens), "--reps", str(a.reps)]
            p = subprocess.run(argv, env=env, check=False, capture_output=True, text=True, timeout=a.timeout)
            res = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {"error": p.stderr[-500:]}
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            res = {"error": f"timed out after {a.timeout:.0f} s", "done": [json.loads(x) for x in out.splitlines()]}
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
        results["settings"][name] = res
        print(name, json.dumps(res), flush=True)
    with open(a.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
