"""The plan step (``Agent(plan=True)``) in each mode, in the real loop: the agent-loop benchmark's tasks run with a
plan first, the structured steps in ``ar`` (ar-constrained) and in ``verify`` (lookup's drafts), the reply AR in
both, interleaved task by task (``agentkit.evals.agent_loop.run_agent_loop``). Each row records its iterations'
latency, forwards and modes, so the plan iterations compare by mode:

    python evals/plan_steps.py --data evals/agent_loop/tasks.jsonl --kinds one_tool --out out/plans_one.json
    python evals/agent_loop_steps.py out/plans_one.json --base ar          # plan / tool-call / reply p50 by mode
    agentkit calibrate --step plan --results out/plans_one.json           # the plan step's own measurement
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agentkit.evals.agent_loop import run_agent_loop


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="evals/agent_loop/tasks.jsonl", help="an agent-loop task file")
    ap.add_argument("--kinds", default=None, help="comma-separated task kinds (default all)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--modes", default="ar,verify")
    ap.add_argument("--out", required=True)
    ap.add_argument("--resume", default=None, help="an earlier --out whose rows are kept")
    args = ap.parse_args(argv)
    res = run_agent_loop(args.data, args.modes.split(","), kinds=args.kinds.split(",") if args.kinds else None,
                         limit=args.limit, out=args.out, bfcl=False, resume=args.resume,
                         agent_options={"plan": True})
    res["command"] = "python evals/plan_steps.py " + " ".join(sys.argv[1:] if argv is None else argv)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
