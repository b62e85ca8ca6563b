"""The first tool call's prompt pass run beside the decision's (``Agent(prefetch=...)``, ``agentkit/sdk/_prefetch.py``)
against one after the other, in the real loop: the agent-loop benchmark's tasks, each run once per MODE/PREFETCH
pair (an agent-loop mode, ``on`` or ``off``; default ``default/off`` and ``default/on``), interleaved task by task
(the order rotates), on one engine whose prefix cache is emptied before each run. Run it alone on the machine: the
pass ahead uses a second core. The result is an agent-loop result whose rows' ``mode`` is their pair, so ``python
evals/agent_loop_steps.py OUT --base default/off`` compares them by step and ``python evals/paired_agent_loop.py OUT
OUT --mode default/off --second-mode default/on`` pairs the tasks.

    python evals/prefetch_call.py --data evals/agent_loop/tasks.jsonl --out out/prefetch.json
    python evals/prefetch_call.py --runs ar/off,default/on --out out/prefetch_ar.json
"""

from __future__ import annotations

import argparse
import os
import sys
from unittest import mock

from agentkit.engine import backbone, default_engine
from agentkit.evals.agent_loop import MAX_ITERATIONS, run_agentkit, run_interleaved
from agentkit.evals.agent_tasks import load
from agentkit.evals.report import environment
from agentkit.sdk import _messages as messages
from agentkit.sdk import _prefetch as prefetch_

PREFETCH = {"off": False, "on": True, "answer": True}  # answer: the call's pass, then the answer's opening
NAMES = {"one_pass": True, "each": False}  # agentkit.engine.backbone.ONE_PASS_CONTINUATIONS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="evals/agent_loop/tasks.jsonl", help="an agent-loop task file")
    ap.add_argument("--kinds", default=None, help="comma-separated task kinds (default all)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--runs", default="default/off,default/on",
                    help="MODE/PREFETCH[/LAYOUT[/NAMES]] each, comma-separated (MODE: an agent-loop mode; PREFETCH: "
                    "off, on (the call's pass) or answer (the call's, then the answer's opening); LAYOUT: the answer "
                    f"step's, {' or '.join(messages.ANSWER_LAYOUTS)}, default {messages.ANSWER_LAYOUT}; NAMES: how "
                    "the decision reads the names (and an extraction its candidates), one_pass or each (a pass per "
                    "name), default one_pass)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    modes = args.runs.split(",")
    bad = [m for m in modes if not 1 <= m.count("/") <= 3 or m.split("/")[1] not in PREFETCH
           or m.split("/")[2:3] not in ([], *([x] for x in messages.ANSWER_LAYOUTS))
           or m.split("/")[3:] not in ([], *([x] for x in NAMES))]
    if bad:
        ap.error(f"--runs: {bad} are not MODE/PREFETCH[/LAYOUT[/NAMES]] (PREFETCH: {', '.join(PREFETCH)}; LAYOUT: "
                 f"{', '.join(messages.ANSWER_LAYOUTS)}; NAMES: {', '.join(NAMES)})")
    kinds = args.kinds.split(",") if args.kinds else None
    tasks = load(args.data, kinds=kinds, limit=args.limit)
    engine = default_engine()
    command = "python evals/prefetch_call.py " + " ".join(sys.argv[1:] if argv is None else argv)
    header = {"suite": "agent-loop", "model": engine.name, "data": args.data, "kinds": kinds,
              "max_iterations": MAX_ITERATIONS, "modes": modes, "cores": os.cpu_count(), "tasks": len(tasks),
              "command": command, "env": environment(command)}

    def run_one(task, run: str) -> dict:
        mode, prefetch, layout, names = (run.split("/") + [messages.ANSWER_LAYOUT, "one_pass"][run.count("/") - 1:])
        with mock.patch.object(messages, "ANSWER_LAYOUT", layout), \
                mock.patch.object(prefetch_, "ANSWER_AHEAD", prefetch == "answer"), \
                mock.patch.object(backbone, "ONE_PASS_CONTINUATIONS", NAMES[names]):
            return run_agentkit(task, engine, mode, agent_options={"prefetch": PREFETCH[prefetch]})

    run_interleaved(tasks, engine, modes, run_one, args.out, header)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
