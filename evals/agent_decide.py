"""The agent-loop benchmark under each rule for the tool step's decision (``agentkit/sdk/_decide.py``).

    python evals/agent_decide.py --rule exclude_last --limit 30 --out evals/results/agent_loop/decide_exclude_last.json

``--rule``: ``exclude_last`` | ``moved`` | ``null`` (after a tool result; the first step is calibrated against
the null question in all three), or ``decode`` (no scores: the choice decoded under the call template, the loop
before session 16). Run two side by side on a 2-core machine (each uses one thread).
"""

from __future__ import annotations

import argparse

from agentkit.engine import default_engine
from agentkit.evals.agent_loop import run_agent_loop, table
from agentkit.sdk import EngineGenerator
from agentkit.sdk import _decide as decide


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rule", choices=[*decide.AFTER_RESULT_RULES, "decode"], required=True)
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--data", default="evals/agent_loop")
    ap.add_argument("--out", required=True)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--decision-prompt", choices=decide.DECISION_PROMPTS, default=decide.DECISION_PROMPT)
    args = ap.parse_args()
    engine = default_engine()
    model = engine
    if args.rule == "decode":
        model = EngineGenerator(engine)
        model.can_score = False  # the agent decodes the choice
    else:
        decide.AFTER_RESULT = args.rule
        decide.DECISION_PROMPT = args.decision_prompt
    res = run_agent_loop(args.data, ["default"], limit=args.limit, engine=model, out=args.out, bfcl=False,
                         resume=args.resume)
    res["decide_rule"], res["decision_prompt"] = args.rule, args.decision_prompt
    print(table(res))


if __name__ == "__main__":
    main()
