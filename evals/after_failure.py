"""After a failed tool call, retry (``Agent(after_failure="retry")``, the default) or let the scores decide?

Runs the agent-loop benchmark's ``fail_once`` tasks (the right call fails once with a 503, then returns) through the
real loop with each rule, and reports task success, runs that got the result, finished runs and iterations, with
the tasks won and lost against the first rule.

    python evals/after_failure.py --rules decide,retry --out evals/results/agent_loop/after_failure.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agentkit.engine import default_engine
from agentkit.evals.agent_loop import run_agentkit
from agentkit.evals.agent_tasks import load


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="evals/agent_loop/tasks.jsonl")
    ap.add_argument("--rules", default="decide,retry")
    ap.add_argument("--kinds", default="fail_once")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    engine = default_engine()
    tasks = load(args.data, kinds=args.kinds.split(","))
    rules = args.rules.split(",")
    rows: dict[str, list[dict]] = {}
    summary: dict[str, dict] = {}
    for rule in rules:
        rows[rule] = []
        for task in tasks:
            row = run_agentkit(task, engine, agent_options={"after_failure": rule})
            rows[rule].append(row)
            print(rule, task.id, row["success"], row["steps"], file=sys.stderr)
        got = rows[rule]
        summary[rule] = {"n": len(got), "success": sum(bool(r["success"]) for r in got),
                         "got_result": sum(bool(r.get("got_result")) for r in got),
                         "finished": sum(bool(r["finished"]) for r in got),
                         "iterations_mean": round(sum(r["iterations"] for r in got) / max(1, len(got)), 2)}
        if rule != rules[0]:
            base = {r["id"]: r["success"] for r in rows[rules[0]]}
            summary[rule]["won"] = sum(bool(r["success"]) and not base[r["id"]] for r in got)
            summary[rule]["lost"] = sum(base[r["id"]] and not r["success"] for r in got)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"command": "python evals/after_failure.py " + " ".join(
            argv if argv is not None else sys.argv[1:]), "summary": summary, "rows": rows}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
