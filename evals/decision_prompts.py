"""The tool step's decision and call prompts (``agentkit.sdk._decide.DECISION_PROMPT``, ``CALL_PROMPT``) compared
in the real loop: the agent-loop benchmark's tasks, each run in the default mode once per prompt pair, interleaved
task by task (the order rotates) on one engine whose prefix cache is emptied before each run. The result is an
agent-loop result whose rows' ``mode`` is their pair, so the agent loop's own tools read it: ``python -m
agentkit.evals.agent_loop merge`` joins runs split by kind, ``python evals/agent_loop_steps.py OUT --base PAIR``
compares the pairs by step (same calls and answers, p50s), ``python evals/paired_agent_loop.py OUT OUT --mode PAIR
--second-mode PAIR`` counts the tasks won and lost.

    python evals/decision_prompts.py --data evals/agent_loop/tasks.jsonl --prompts choice/tool_step,shared --out out/dp.json
"""

from __future__ import annotations

import argparse

from agentkit.errors import UserError
from agentkit.evals.agent_loop import interleaved_options, interleaved_setup, run_agentkit, run_interleaved
from agentkit.sdk import _decide as decide


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    interleaved_options(ap)
    ap.add_argument("--prompts", default="choice/tool_step,choice/choice_example",
                    help=f"DECISION[/CALL] each (DECISION of {', '.join(decide.DECISION_PROMPTS)}, CALL of "
                    f"{', '.join(decide.CALL_PROMPTS)}; default {decide.CALL_PROMPT}); the first is the base")
    args = ap.parse_args(argv)
    prompts = args.prompts.split(",")
    try:
        pairs_ = {p: decide.prompt_pair(p) for p in prompts}
    except UserError as e:
        ap.error(str(e))
    tasks, engine, header = interleaved_setup(args, "evals/decision_prompts.py", argv, prompts=prompts)

    def run_one(task, pair: str) -> dict:
        decide.DECISION_PROMPT, decide.CALL_PROMPT = pairs_[pair]
        return run_agentkit(task, engine, "default")

    run_interleaved(tasks, engine, prompts, run_one, args.out, header)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
