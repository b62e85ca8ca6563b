"""Which tool does the agent's first step pick? The model's name scores as they are (``raw``, today's pick) against
the same scores less the null question's (``calibrated``: the tool list's own preference taken out, the
contextual calibration the call/no-call decision already uses), on the agent-loop tasks that need a call.

For each task the first step's decision messages are built as the SDK builds them (``agentkit/sdk/_decide.py``:
the ``choice`` system prompt with the tools, the task's question); one scoring pass over the names on them and one
on the null question (:func:`agentkit.decide.null_messages`). Reports the share whose pick is the first expected
tool, per task kind and method.

    python evals/tool_pick.py --out evals/results/agent_loop/tool_pick.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from agentkit import decide
from agentkit.engine import default_engine
from agentkit.evals.agent_env import TaskEnv, agentkit_tools
from agentkit.evals.agent_loop import INSTRUCTIONS
from agentkit.evals.agent_tasks import load
from agentkit.sdk._decide import decision_chat
from agentkit.steps.kinds import call_head, system_prompt

METHODS = ("raw", "calibrated")


def picks(scores: dict[str, float], null: dict[str, float], names: list[str]) -> dict[str, str]:
    return {"raw": max(names, key=lambda n: scores[n]),
            "calibrated": max(names, key=lambda n: scores[n] - null[n])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="evals/agent_loop")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    engine = default_engine()
    tasks = [t for t in load(a.data) if t.expected]
    rows = []
    t0 = time.time()
    for task in tasks:
        tools = agentkit_tools(task, TaskEnv(task))
        chat = [{"role": "system", "content": system_prompt(INSTRUCTIONS, tools)},
                {"role": "user", "content": task.prompt}]
        dchat, no_call = decision_chat(chat, INSTRUCTIONS, tools)
        names = [t.name for t in tools]
        options = [*names, no_call]
        scores = decide.name_scores(engine, dchat, options, call_head(None))
        null = decide.name_scores(engine, decide.null_messages(dchat), options, call_head(None))
        want = next(iter(task.expected[0]))
        got = picks(scores, null, names)
        rows.append({"id": task.id, "kind": task.kind, "tools": len(names), "expected": want, **got,
                     **{f"{m}_right": got[m] == want for m in METHODS}})
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"partial": True, "rows": rows}, indent=1))
    summary = {}
    for kind in sorted({r["kind"] for r in rows}) + ["all"]:
        rs = [r for r in rows if kind in ("all", r["kind"])]
        multi = [r for r in rs if r["tools"] > 1]
        summary[kind] = {"n": len(rs), "n_multi_tool": len(multi),
                         **{f"{m}_right": round(sum(r[f"{m}_right"] for r in rs) / len(rs), 3) for m in METHODS},
                         **{f"{m}_right_multi": round(sum(r[f"{m}_right"] for r in multi) / max(1, len(multi)), 3)
                            for m in METHODS},
                         "won": sum(r["calibrated_right"] and not r["raw_right"] for r in rs),
                         "lost": sum(r["raw_right"] and not r["calibrated_right"] for r in rs)}
    out = {"command": "python evals/tool_pick.py " + " ".join(f"--{k} {v}" for k, v in vars(a).items()),
           "wall_s": round(time.time() - t0, 1), "summary": summary, "rows": rows}
    a.out.write_text(json.dumps(out, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
