"""The first step's call / no-call decision as a threshold: how often is it right for each shift of the threshold?

The agent's first step calls a tool when the request's margin of "no call" over the tools is at most the null
question's (contextual calibration, :func:`agentkit.decide.calibrated`: ``asked - base <= 0``). This script scores
that margin once per task (the decision messages as the SDK builds them, ``evals/tool_pick.py``'s way) and reports,
for thresholds ``t`` (call when ``asked - base <= t``; ``thresholds_raw``: when ``asked <= t``, no null question;
``--lora`` for an adapted model), the share of tasks whose decision is right: a call for the
kinds that need one, none for ``no_tool``. ``--exclude`` leaves out tasks whose BFCL item is in another task file,
so a threshold can be chosen on items the benchmark does not use and then read off the benchmark's own tasks.

    python -m agentkit.evals.agent_tasks --data evals/data/bfcl --seed 7 \\
        --counts one_tool=120,no_tool=120,two_tool=0,fail_once=0 --out /tmp/held_out.jsonl
    python evals/decision_margin.py --data /tmp/held_out.jsonl --exclude evals/agent_loop/tasks.jsonl \\
        --out evals/results/agent_loop/decision_margin_held_out.json
    python evals/decision_margin.py --data evals/agent_loop/tasks.jsonl --out evals/results/agent_loop/decision_margin_160.json
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

THRESHOLDS = (-2.0, -1.0, -0.5, 0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def margin(engine, task) -> dict:
    """The first decision's calibrated margin (``asked - base``; the call is made at <= 0 today) and its pick."""
    tools = agentkit_tools(task, TaskEnv(task))
    chat = [{"role": "system", "content": system_prompt(INSTRUCTIONS, tools)}, {"role": "user", "content": task.prompt}]
    dchat, no_call = decision_chat(chat, INSTRUCTIONS, tools)
    names = [t.name for t in tools]
    head = call_head(None)
    scores = decide.name_scores(engine, dchat, [*names, no_call], head)
    null = decide.name_scores(engine, decide.null_messages(dchat), [*names, no_call], head)
    _, info = decide.calibrated(scores, null, names, no_call)
    return {"id": task.id, "kind": task.kind, "needs_call": task.kind != "no_tool", "tool": info["tool"],
            "margin": round(info["no_call_margin"] - info["no_call_margin_null"], 4),
            "raw": round(info["no_call_margin"], 4)}


def table(rows: list[dict], key: str = "margin") -> dict:
    """Per threshold: decisions right overall, calls made where one is needed, no call where none is (``key``:
    ``margin``, calibrated against the null question, or ``raw``, the request's own margin)."""
    need = [r for r in rows if r["needs_call"]]
    none = [r for r in rows if not r["needs_call"]]
    out = {}
    for t in THRESHOLDS:
        called = sum(r[key] <= t for r in need)
        quiet = sum(r[key] > t for r in none)
        out[str(t)] = {"right": round((called + quiet) / len(rows), 4),
                       "call_rate_needed": round(called / max(1, len(need)), 4),
                       "no_tool_rate": round(quiet / max(1, len(none)), 4)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a task file (JSON lines) or folder")
    ap.add_argument("--exclude", default=None, help="a task file whose BFCL items are left out")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--lora", default=None, help="a LoRA merged into the weights (EngineConfig.lora)")
    a = ap.parse_args()
    tasks = load(a.data)
    if a.exclude:
        used = {t.source for t in load(a.exclude)}
        tasks = [t for t in tasks if t.source not in used]
    engine = default_engine(lora=a.lora)
    rows, t0 = [], time.time()
    for task in tasks:
        rows.append(margin(engine, task))
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"partial": True, "rows": rows}, indent=1))
    out = {"command": "python evals/decision_margin.py " + " ".join(f"--{k} {v}" for k, v in vars(a).items() if v),
           "n": len(rows), "n_by_kind": {k: sum(r["kind"] == k for r in rows) for k in sorted({r["kind"] for r in rows})},
           "wall_s": round(time.time() - t0, 1), "thresholds": table(rows),
           "thresholds_raw": table(rows, "raw"), "rows": rows}
    a.out.write_text(json.dumps(out, indent=1))
    for key in ("thresholds", "thresholds_raw"):
        print(key, json.dumps({t: v["right"] for t, v in out[key].items()}))


if __name__ == "__main__":
    main()
