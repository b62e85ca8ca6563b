"""Everyday requests to a small agent with two tools (the weather and addition), in a user's words: which tools
does it call, under each decision and call prompt of the tool step (``agentkit.sdk._decide.DECISION_PROMPT`` /
``CALL_PROMPT``)? Most requests need no tool; "Should I bring an umbrella in London today?" needs the weather and
"What's 7 plus 8?" the addition. A probe of spurious calls, not a benchmark: 12 requests, each run once per prompt
pair on the default engine, its prefix cache emptied before each run.

    python evals/everyday_requests.py --prompts choice/tool_step,shared/choice_example --out out/everyday.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentkit.evals.report import environment, write_json_atomic

REQUESTS = {  # request -> the tool it needs (None: none)
    "Tell me a joke.": None, "What's the capital of France?": None, "Write a haiku about rain.": None,
    "Who wrote Hamlet?": None, "Give me a synonym for happy.": None, "How do I boil an egg?": None,
    "Translate 'hello' to Spanish.": None, "Name three colours.": None, "What day comes after Monday?": None,
    "Say hi.": None, "Should I bring an umbrella in London today?": "get_weather", "What's 7 plus 8?": "add",
}


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C and cloudy in {city}"


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", default="choice/tool_step", help="DECISION/CALL pairs, comma-separated")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    from agentkit import Agent, default_engine
    from agentkit.errors import UserError
    from agentkit.sdk import Tool
    from agentkit.sdk import _decide as decide

    try:
        pairs = {p: decide.prompt_pair(p) for p in args.prompts.split(",")}
    except UserError as e:
        ap.error(str(e))
    engine, out = default_engine(), {}
    for pair, prompts in pairs.items():
        decide.DECISION_PROMPT, decide.CALL_PROMPT = prompts
        agent, rows = Agent(engine, tools=[Tool(get_weather), Tool(add)]), []
        for request, needs in REQUESTS.items():
            engine.prefixes.clear()
            result = agent.run_sync(request)
            calls = [r.tool for r in result.trace if r.step == "tool_call"]
            rows.append({"request": request, "needs": needs, "calls": calls, "output": result.output})
            print(f"[{pair}] {request!r} -> {calls} | {result.output}", flush=True)
        out[pair] = {"spurious": sum(bool(r["calls"]) for r in rows if r["needs"] is None),
                     "no_tool_requests": sum(r["needs"] is None for r in rows),
                     "needed_and_called": sum(r["needs"] in r["calls"] for r in rows if r["needs"]), "rows": rows}
    command = "python evals/everyday_requests.py " + " ".join(sys.argv[1:] if argv is None else argv)
    write_json_atomic(Path(args.out), {"command": command, "env": environment(command), "prompts": out})
    print({p: (v["spurious"], v["needed_and_called"]) for p, v in out.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
