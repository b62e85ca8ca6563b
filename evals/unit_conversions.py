"""The README's first agent (``examples/unit_converter.py``) on eight conversions: is the answer's number right?

Each conversion runs through the example's own agent (``build_agent``), once per engine dtype (``auto``: bf16 on a
CPU with native bf16 matmuls, what the README's commands get there; ``float32``) and per tool-call mode. A run is
right when a number in its answer is the converted value (within 0.05). Task success only: the example's times are
in the README.

    python evals/unit_conversions.py --out evals/results/examples/unit_converter.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

TASKS = [("How many km is 26.2 miles?", 42.16), ("Convert 100 F to C", 37.78), ("What is 5 kg in lb?", 11.02),
         ("How many feet is 3 m?", 9.84), ("Convert 70 kg to pounds.", 154.32), ("What is 10 inches in cm?", 25.4),
         ("How much is 0 C in F?", 32.0), ("Turn 2 miles into meters.", 3218.69)]


def right(output: str, want: float) -> bool:
    return any(abs(float(n) - want) < 0.05 for n in re.findall(r"-?\d+(?:\.\d+)?", output))


def run(agent, task: str, want: float) -> dict:
    t0 = time.perf_counter()
    try:
        result = agent.run_sync(task)
    except Exception as e:  # noqa: BLE001 (a failed run is a row)
        return {"task": task, "finished": False, "right": False, "error": f"{type(e).__name__}: {e}"[:300],
                "ms": round(1000 * (time.perf_counter() - t0))}
    calls = [{"args": r.tool_args, "result": r.tool_result, "error": r.error} for r in result.trace if r.tool]
    return {"task": task, "finished": True, "right": right(result.output, want), "output": result.output,
            "calls": calls, "ms": round(1000 * (time.perf_counter() - t0))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtypes", default="auto,float32")
    ap.add_argument("--modes", default="diffusion,ar", help="the tool-call step's mode (the example's: the calibrated one, ar on CPU)")
    ap.add_argument("--out", default=None, help="also write the rows and summary to this JSON file")
    ap.add_argument("--lora", default=None, help="EngineConfig.lora (none: the weights as loaded; default: the model's own)")
    args = ap.parse_args(argv)
    from unit_converter import build_agent

    from agentkit import RoutingPolicy
    from agentkit.config import EngineConfig
    from agentkit.engine.engine import Engine

    rows, summary = [], {}
    for dtype in args.dtypes.split(","):
        engine = Engine(EngineConfig(dtype=dtype, lora=args.lora))
        for mode in args.modes.split(","):
            agent = build_agent(engine)
            agent.routing = RoutingPolicy(tool_call=mode)
            got = [dict(run(agent, task, want), dtype=dtype, mode=mode) for task, want in TASKS]
            rows += got
            summary[f"{dtype}/{mode}"] = {"n": len(got), "right": sum(r["right"] for r in got),
                                          "finished": sum(r["finished"] for r in got)}
            print(f"{dtype}/{mode}: {summary[f'{dtype}/{mode}']}", file=sys.stderr)
            if args.out is None:
                continue
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps({"command": "python evals/unit_conversions.py " + " ".join(
                argv if argv is not None else sys.argv[1:]), "summary": summary, "rows": rows}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
