"""Passes of up to 8 or up to 16 positions on the 4-bit weights (``agentkit/models/q4.py``'s ``MAX_ROWS``; with
row-exact passes, the width of the pieces a verify block or an AR step's pinned run is cut into), in the real loop:
the agent-loop benchmark's tasks, each run once per MODE/PREFETCH[/NAMES]@ROWS (as ``evals/prefetch_call.py``'s
runs, plus the width), interleaved task by task (the order rotates) on one engine whose prefix cache is emptied
before each run and whose width is set before it (``Backbone.short_rows``; at 16, with the cost curve measured
at 16, ``CURVE_16``). Verify equals AR at either width (the pieces are row-exact); a prompt piece of 9-16 tokens
reads the 4-bit weights at 16 and the dense ones at 8, so outputs may part between widths. Run it alone on the
machine. The result is an agent-loop result whose rows' ``mode`` is their run, for ``python
evals/agent_loop_steps.py OUT --base ar/off/each@8``. ``--bench`` instead times one pass of R positions after a
200-token prefix at each width, as a prompt piece (one pass) and as a decoding pass (row-exact pieces), median of 9
interleaved rounds.

    python evals/row_pieces.py --data evals/agent_loop/tasks.jsonl --runs ar/off/each@8,ar/off/each@16,default/on@8,default/on@16 --out out/rows.json
    python evals/row_pieces.py --bench --out out/row_pieces_bench.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from agentkit.evals.agent_loop import (
    RUN_SPEC,
    interleaved_options,
    interleaved_setup,
    parse_run,
    run_interleaved,
    run_spec,
)

# the default engine's unpieced cost curve with passes of up to 16 positions on the 4-bit weights, on the Zen 5 EPYC
# (evals/results/engine/bench_forward_s17.json, its default row)
CURVE_16 = {1: 17.24, 2: 17.6, 4: 22.2, 8: 34.0, 16: 58.7, 32: 118.6, 64: 225.9}
WIDTHS = (8, 16)


def set_width(bb, rows: int) -> None:
    bb.short_rows(rows, CURVE_16 if rows == 16 else None)


def bench(out: str, positions=(4, 8, 10, 12, 16, 20), rounds: int = 9) -> dict:
    """ms of one pass of R positions after a 200-token prefix, per width, as a prompt piece and as a decoding pass."""
    import torch

    from agentkit.engine import default_engine

    torch.set_num_threads(1)
    engine = default_engine()
    bb = engine.backbone
    prefix = engine.encode_prompt("word " * 200, raw=True)[:200]
    ms: dict[str, list[float]] = {}
    for _ in range(rounds):
        for r in positions:
            for w in WIDTHS:
                set_width(bb, w)
                for whole in (True, False):
                    cache = bb.new_cache()
                    bb.encode(prefix, cache, whole=True)
                    t0 = time.perf_counter()
                    bb.encode(list(range(100, 100 + r)), cache, rows=[-1], whole=whole)
                    ms.setdefault(f"{'prompt_piece' if whole else 'decoding_pass'}/{w}/{r}", []).append(
                        1000 * (time.perf_counter() - t0))
    set_width(bb, WIDTHS[0])
    result = {"command": "python evals/row_pieces.py --bench --out " + out, "rounds": rounds,
              "ms": {k: round(statistics.median(v), 1) for k, v in ms.items()}}
    Path(out).write_text(json.dumps(result, indent=1) + "\n")
    for kind in ("prompt_piece", "decoding_pass"):
        for r in positions:
            print(kind, r, {w: result["ms"][f"{kind}/{w}/{r}"] for w in WIDTHS})
    return result


def parse(run: str) -> tuple[str, int]:
    """``MODE/PREFETCH[/NAMES]@ROWS`` as (the run without its width, rows); a ValueError if it is not one."""
    head, _, rows = run.partition("@")
    try:
        parse_run(head)
    except ValueError:
        raise ValueError(run) from None
    if not rows.isdigit():
        raise ValueError(run)
    return head, int(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    interleaved_options(ap)
    ap.add_argument("--bench", action="store_true", help="time passes at each width instead (no tasks)")
    ap.add_argument("--runs", default="default/on@8,default/on@16",
                    help="MODE/PREFETCH[/NAMES]@ROWS each, comma-separated (as evals/prefetch_call.py's, plus the "
                    "4-bit pass width)")
    args = ap.parse_args(argv)
    if args.bench:
        bench(args.out)
        return 0
    runs = args.runs.split(",")
    try:
        parsed = {r: parse(r) for r in runs}
    except ValueError as e:
        ap.error(f"--runs: {e} is not RUN@ROWS, a RUN being {RUN_SPEC}")
    tasks, engine, header = interleaved_setup(args, "evals/row_pieces.py", argv, modes=runs)

    def run_one(task, run: str) -> dict:
        head, rows = parsed[run]
        set_width(engine.backbone, rows)
        return run_spec(task, engine, head)

    run_interleaved(tasks, engine, runs, run_one, args.out, header)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
