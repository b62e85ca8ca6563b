"""The agent loop with grounded tool arguments on and off (``model_settings={"grounded_arguments": ...}``), the
settings interleaved task by task on one engine, and the rows paired.

    nice -n 5 python evals/agent_loop_grounding.py --data evals/agent_loop/tasks.jsonl --grounded true,false \\
        --out evals/results/agent_loop/grounded_arguments_dev.json
    nice -n 5 python evals/agent_loop_grounding.py --data evals/agent_loop/tasks.jsonl --grounded true \\
        --calibrate false --out raw.json

Rows are written after each task (``run_agentkit``'s, with ``grounded_arguments`` added); the summary per setting
is ``agentkit.evals.agent_loop.summarize``'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="evals/agent_loop/tasks.jsonl")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--grounded", default="true,false", help="the settings to run, in order: true, false or both")
    ap.add_argument("--calibrate", choices=["default", "true", "false"], default="default")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import torch

    from agentkit import default_engine
    from agentkit.evals.agent_loop import run_agentkit, summarize
    from agentkit.evals.agent_tasks import load

    torch.set_num_threads(1)
    engine = default_engine()
    settings = [x.strip() == "true" for x in args.grounded.split(",")]
    rows: list[dict] = []
    for task in load(args.data, limit=args.limit):
        for grounded in settings:
            opts: dict = {"model_settings": {"grounded_arguments": grounded}}
            if args.calibrate != "default":
                opts["calibrate"] = args.calibrate == "true"
            row = run_agentkit(task, engine, agent_options=opts)
            rows.append({**row, "id": task.id, "grounded_arguments": grounded})
        summary = {str(g): summarize([r for r in rows if r["grounded_arguments"] is g]) for g in settings}
        report = {"command": " ".join(sys.argv), "calibrate": args.calibrate, "summary": summary, "rows": rows}
        Path(args.out).write_text(json.dumps(report))
        print(json.dumps({k: rows[-1].get(k) for k in ("id", "grounded_arguments", "success")}), flush=True)


if __name__ == "__main__":
    main()
