"""The first tool decision of the user-tool benchmark under several rules, from one scoring of each task's decision
(the model's scores of the options' names on the decision's messages, and on the content-free question's):

- ``raw``: call when log P(no call) <= log P(any tool); the tool the request scores highest;
- ``calibrated``: call when that margin is at most the content-free question's (``Agent(calibrate=True)``);
- ``+tool`` variants: the tool chosen by its score minus its score on the content-free question (contextual
  calibration of the choice between tools too, not only of call or not);
- ``margin=M``: raw, with the call threshold moved to M;
- ``+covered`` variants: where the rule answers, a call even so when the request fills a tool's arguments with typed
  values (``covered``, :func:`agentkit.steps.unserved.covering`), of the covered tool scored highest (calibrated);
- ``+lookup``: else, where the request asks for the present or a look-up in words
  (:func:`agentkit.steps.lookup.asks_lookup`) and the calibrated margin calls, a call; a call where the margin calls
  goes to a covered tool when there is one, and where the request asks to search, to a search tool (the default's
  rule, decided by :func:`agentkit.steps.decision.decide` itself on the saved scores).

The options are those the agent offers: the tools whose required values the request gives
(:func:`agentkit.steps.arguments.groundable`), and the no-call option.

    nice -n 5 python evals/user_tools_decide.py --split dev --out evals/results/user_tools/decide_dev.json
    nice -n 5 python evals/user_tools_decide.py --split dev,held_out,fresh --out evals/results/user_tools/decide_seen.json

Only the first decision (the first call's tool, or no call) is scored: a right first tool on ``one`` and ``two``
tasks, no call on ``none`` tasks. The full runs are ``evals/user_tools.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from agentkit.evals.user_tools import TOOLS, load_tasks

DATA = Path(__file__).resolve().parent / "user_tools" / "tasks.jsonl"


def scores_of(engine, tools, task: str) -> tuple[dict, dict, str, list[str]]:
    from agentkit import decide
    from agentkit.sdk import EngineGenerator
    from agentkit.sdk import _decide as decide_
    from agentkit.sdk._messages import ModelRequest, UserPromptPart, to_chat
    from agentkit.steps import kinds as steps
    from agentkit.steps.arguments import groundable

    system = steps.system_prompt(None, tools)
    chat = to_chat([ModelRequest(parts=[UserPromptPart(content=task)], instructions=system)])
    chat, no_call = decide_.decision_chat(chat, None, tools)
    gen = EngineGenerator(engine)
    head = steps.call_head(steps.STYLE)
    options = [t.name for t in groundable(tools, task)] + [no_call]
    got = asyncio.run(gen.name_scores(chat, options, head))
    null = asyncio.run(gen.name_scores(decide.null_messages(chat), options, head))
    return got, null, no_call, covered_of(tools, task)


def covered_of(tools, task: str) -> list[str]:
    """The tools ``task`` covers with typed values, among those it offers, by the code as it is now."""
    from agentkit.steps.arguments import argument_sources, groundable

    offered = groundable(tools, task)
    return list(argument_sources([(t.name, t.parameters_schema) for t in offered],
                                 [{"role": "user", "content": task}]).covered)


def decide_with(got: dict, null: dict, no_call: str, rule: str, covered: list[str] = ()) -> str | None:
    from agentkit.decide import calibrated_pick, no_call_margin

    names = [n for n in got if n != no_call]
    if not names:
        return None
    rule, covering = rule.removesuffix("+covered"), rule.endswith("+covered")
    margin = no_call_margin(got, no_call)
    base = no_call_margin(null, no_call)
    threshold = float(rule.removesuffix("+tool").split("=")[1]) if rule.startswith("margin=") else 0.0
    call = margin - base <= 0 if rule.startswith("calibrated") else margin <= threshold
    if not call and covering and covered:
        return calibrated_pick(got, null, covered)
    return calibrated_pick(got, null if rule.endswith("+tool") else None, names) if call else None


def default_pick(row: dict) -> str | None:
    """The first decision of the default's rule (:func:`agentkit.steps.decision.decide` on a raw margin), its
    scores answered from ``row``'s saved ones: the request's, and the content-free question's for the baseline."""
    from agentkit.steps.decision import DecisionAsk, decide

    chat = [{"role": "user", "content": row["prompt"]}]
    names = [n for n in row["scores"] if n != row["no_call"]]
    steps = decide(DecisionAsk("auto", chat, names, row["no_call"], "", calibrate=False,
                               covered=tuple(row.get("covered", ()))))
    request = next(steps)
    try:
        while True:
            request = steps.send(row["scores"] if request.messages is chat else row["null"])
    except StopIteration as stop:
        decision = stop.value
    return decision.tool if decision.call else None


RULES = ["raw", "raw+tool", "calibrated", "calibrated+tool", "margin=1", "margin=2", "margin=1+tool",
         "margin=2+tool", "margin=3+tool", "raw+tool+covered", "calibrated+tool+covered", "margin=1+tool+covered",
         "margin=2+tool+covered", "raw+tool+covered+lookup"]
DEFAULT = "raw+tool+covered+lookup"  # the default's rule, decided by agentkit.steps.decision itself


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="dev", help="a split or several, comma-separated (dev,held_out,fresh)")
    ap.add_argument("--lora", default=None)
    ap.add_argument("--decision-prompt", default=None, help="the decision's system prompt "
                    "(agentkit.sdk._decide.DECISION_PROMPTS; default: the SDK's DECISION_PROMPT)")
    ap.add_argument("--out", required=True, help="the scores and the table (an existing file: its scores rescored)")
    args = ap.parse_args()
    import torch

    from agentkit import default_engine
    from agentkit.sdk import Tool

    torch.set_num_threads(1)
    if args.decision_prompt is not None:
        from agentkit.sdk import _decide as decide_

        if args.decision_prompt not in decide_.DECISION_PROMPTS:
            ap.error(f"--decision-prompt must be one of {decide_.DECISION_PROMPTS}")
        decide_.DECISION_PROMPT = args.decision_prompt
    out = Path(args.out)
    rows = json.loads(out.read_text())["rows"] if out.is_file() else []  # a rerun rescores the saved scores
    tools = [Tool(f) for f in TOOLS]
    tasks = {(t["split"], t["id"]): t for t in load_tasks(DATA)}
    for r in rows:  # what the request covers and asks, read by the code as it is now
        r["prompt"] = tasks[(r["split"], r["id"])]["prompt"]
        r["covered"] = [t for t in covered_of(tools, r["prompt"]) if t in r["scores"]]  # among those scored then
    if not rows:
        engine = default_engine(lora=args.lora) if args.lora else default_engine()
        for t in [t for s in args.split.split(",") for t in load_tasks(DATA, s)]:
            got, null, no_call, covered = scores_of(engine, tools, t["prompt"])
            rows.append({"id": t["id"], "split": t["split"], "kind": t["kind"], "prompt": t["prompt"],
                         "covered": covered,
                         "want": t["expected"][0]["tool"] if t["expected"] else None,
                         "scores": got, "null": null, "no_call": no_call})
            print(t["id"], {r: decide_with(got, null, no_call, r) for r in ("raw", "calibrated+tool")}, flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1))
    table = {split: table_of([r for r in rows if r.get("split", "dev") == split])
             for split in dict.fromkeys(r.get("split", "dev") for r in rows)}
    if len(table) > 1:
        table["all"] = table_of(rows)
    for split, by_rule in table.items():
        for rule, figures in by_rule.items():
            print(split, rule, figures)
    out.write_text(json.dumps({"command": " ".join(sys.argv), "table": table, "rows": rows}, indent=1))


def table_of(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Each rule's first decisions on ``rows``: calls where one is needed, the first tool right, no call where none
    is needed."""
    table = {}
    for rule in RULES:
        picks = [(r, default_pick(r) if rule == DEFAULT else decide_with(r["scores"], r["null"], r["no_call"], rule,
                                                                         r.get("covered", []))) for r in rows]
        need = [(r, p) for r, p in picks if r["kind"] != "none"]
        none = [(r, p) for r, p in picks if r["kind"] == "none"]
        table[rule] = {"call_when_needed": round(sum(p is not None for _, p in need) / len(need), 3),
                       "right_first_tool": round(sum(p == r["want"] for r, p in need) / len(need), 3),
                       "no_call_when_none": round(sum(p is None for _, p in none) / len(none), 3)}
    return table

if __name__ == "__main__":
    main()
