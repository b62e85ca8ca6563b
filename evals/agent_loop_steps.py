"""Agent-loop runs compared by step kind: per mode, task success, calls and answers equal to a base mode's, and the
p50 latency and mean forwards of all iterations, plan iterations (runs with ``Agent(plan=True)``), tool-call
iterations and reply iterations, with each mode's ratio to
the base. Several results files (one run split by ``--kinds``, say; plain or ``.json.gz``) are read as one.

    python evals/agent_loop_steps.py evals/results/drafter/agent_loop_sized_160.json --base ar \\
        --out evals/results/drafter/agent_loop_sized_steps.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from agentkit.evals.report import read_json

STEPS = {"all": lambda s: True, "plan": lambda s: s == "plan", "tool_call": lambda s: s.startswith("tool_call"),
         "reply": lambda s: s == "reply"}


def rows_by_mode(paths: list[str]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for p in paths:
        for r in read_json(Path(p))["items"]:  # plain or gzipped
            if r.get("framework") == "agentkit":
                out.setdefault(r["mode"], {})[r["id"]] = r
    return out


def by_step(rows: list[dict]) -> dict[str, dict]:
    out = {}
    for name, keep in STEPS.items():
        ms = [m for r in rows for m, s in zip(r["iter_ms"], r["steps"]) if keep(s)]
        fw = [f for r in rows for f, s in zip(r.get("iter_forwards") or [], r["steps"]) if keep(s)]
        out[name] = {"n": len(ms), "p50_ms": round(statistics.median(ms), 1) if ms else None,
                     "forwards_mean": round(statistics.mean(fw), 2) if fw else None}
    return out


def compare(rows: dict[str, dict[str, dict]], base: str) -> dict:
    if base not in rows:
        raise SystemExit(f"no {base!r} rows; the modes are {sorted(rows)}")
    ids = sorted(set.intersection(*(set(r) for r in rows.values())))
    out: dict = {"tasks": len(ids), "base": base, "modes": {}}
    for mode, by_id in rows.items():
        got = [by_id[i] for i in ids]
        out["modes"][mode] = {
            "task_success": round(statistics.mean(float(r["success"]) for r in got), 4),
            "same_calls_and_answers": sum(1 for i in ids if (by_id[i]["calls"], by_id[i]["output"])
                                          == (rows[base][i]["calls"], rows[base][i]["output"])),
            "run_p50_ms": round(statistics.median(r["run_ms"] for r in got), 1), **by_step(got)}
    b = out["modes"][base]
    for m in out["modes"].values():
        m["p50_ratio"] = {k: round(m[k]["p50_ms"] / b[k]["p50_ms"], 3) for k in STEPS if b[k]["p50_ms"]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="agent-loop results files (agentkit eval agent-loop --out)")
    ap.add_argument("--base", default="ar", help="the mode the ratios are to")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    res = {"command": "python evals/agent_loop_steps.py " + " ".join(argv or __import__("sys").argv[1:]),
           **compare(rows_by_mode(args.results), args.base)}
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
