"""The tool step's decision and call prompts (``agentkit.sdk._decide.DECISION_PROMPT``, ``CALL_PROMPT``) compared
in the real loop: the
agent-loop benchmark's tasks, each run in the default mode once per prompt, interleaved task by task (the order
rotates) on one engine whose prefix cache is emptied before each run. A row's ``mode`` is its prompt, so
``python evals/agent_loop_steps.py OUT --base choice/tool_step`` compares the iterations by step, and
``python evals/paired_agent_loop.py OUT OUT --mode ...`` cannot (one file): the summary here pairs them.

    python evals/decision_prompts.py --data evals/agent_loop/tasks.jsonl --prompts choice/tool_step,shared --out out/dp.json
    python evals/decision_prompts.py --merge out/dp_one.json out/dp_two.json --out out/dp.json   # runs split by kind
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from agentkit.engine import default_engine
from agentkit.evals.agent_loop import run_agentkit, summarize_all
from agentkit.evals.agent_tasks import load
from agentkit.evals.report import environment, write_json_atomic
from agentkit.sdk import _decide as decide


def first_iteration_p50(rows: list[dict]) -> float | None:
    firsts = [r["iter_ms"][0] for r in rows if r.get("iter_ms")]
    return round(statistics.median(firsts), 1) if firsts else None


def pairs(rows: list[dict], base: str) -> dict[str, dict]:
    """Each prompt against ``base`` on the tasks both ran: same calls and answers, tasks won and lost on success,
    the first iteration's p50 of each."""
    by = {}
    for r in rows:
        by.setdefault(r["mode"], {})[r["id"]] = r
    out = {}
    for p, rs in by.items():
        ids = sorted(set(rs) & set(by.get(base, {})))
        if p == base or not ids:
            continue
        b = by[base]
        out[p] = {"tasks": len(ids),
                  "same_calls_and_answers": sum(rs[i]["calls"] == b[i]["calls"] and rs[i]["output"] == b[i]["output"]
                                                for i in ids),
                  "won": sum(rs[i]["success"] and not b[i]["success"] for i in ids),
                  "lost": sum(b[i]["success"] and not rs[i]["success"] for i in ids),
                  "first_iteration_p50_ms": first_iteration_p50([rs[i] for i in ids]),
                  "base_first_iteration_p50_ms": first_iteration_p50([b[i] for i in ids])}
    return out


def merge(paths: list[str], out: str) -> int:
    """One result from runs of the same prompts split by task kind (their rows together, the summary redone)."""
    runs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in paths]
    prompts = runs[0]["prompts"]
    if any(r["prompts"] != prompts for r in runs):
        raise SystemExit(f"the runs compare different prompts: {[r['prompts'] for r in runs]}")
    items = [row for r in runs for row in r["items"]]
    write_json_atomic(Path(out), {**runs[0], "tasks": sum(r["tasks"] for r in runs), "merged_from": paths,
                                  "partial": any(r["partial"] for r in runs), "items": items,
                                  "summary": summarize_all(items)["agentkit"], "pairs": pairs(items, prompts[0])})
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="evals/agent_loop/tasks.jsonl", help="an agent-loop task file")
    ap.add_argument("--kinds", default=None, help="comma-separated task kinds (default all)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--prompts", default="choice/tool_step,choice/choice_example",
                    help=f"DECISION[/CALL] each (DECISION of {', '.join(decide.DECISION_PROMPTS)}, CALL of "
                    f"{', '.join(decide.CALL_PROMPTS)}; default {decide.CALL_PROMPT}); the first is the base")
    ap.add_argument("--out", required=True)
    ap.add_argument("--merge", nargs="+", default=None, help="result files of runs split by task kind, merged")
    args = ap.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out)
    prompts = args.prompts.split(",")
    pairs_ = {p: (p.split("/") + [decide.CALL_PROMPT])[:2] for p in prompts}
    bad = [p for p, (d, c) in pairs_.items() if d not in decide.DECISION_PROMPTS or c not in decide.CALL_PROMPTS]
    if bad:
        ap.error(f"unknown prompt(s) {bad}: DECISION[/CALL], of {', '.join(decide.DECISION_PROMPTS)} and "
                 f"{', '.join(decide.CALL_PROMPTS)}")
    tasks = load(args.data, kinds=args.kinds.split(",") if args.kinds else None, limit=args.limit)
    engine = default_engine()
    command = "python evals/decision_prompts.py " + " ".join(sys.argv[1:] if argv is None else argv)
    result = {"suite": "agent-loop decision prompts", "data": args.data, "prompts": prompts, "tasks": len(tasks),
              "command": command, "env": environment(command), "partial": True, "items": []}
    t0 = time.perf_counter()
    for i, task in enumerate(tasks):
        for p in prompts[i % len(prompts):] + prompts[: i % len(prompts)]:
            engine.prefixes.clear()  # else a task's second run reuses the first one's prompts
            decide.DECISION_PROMPT, decide.CALL_PROMPT = pairs_[p]
            row = run_agentkit(task, engine, "default")
            result["items"].append({**row, "mode": p})
            print(f"[{p}] {task.id} success={row['success']} iters={row['iterations']} {row['run_ms'] / 1000:.1f}s",
                  flush=True)
        result.update(summary=summarize_all(result["items"])["agentkit"], pairs=pairs(result["items"], prompts[0]),
                      wall_s=round(time.perf_counter() - t0, 1))
        write_json_atomic(Path(args.out), result)
    result["partial"] = False
    write_json_atomic(Path(args.out), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
