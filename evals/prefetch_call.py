"""The first tool call's prompt pass run beside the decision's (``Agent(prefetch=...)``, ``agentkit/sdk/_prefetch.py``)
against one after the other, in the real loop: the agent-loop benchmark's tasks, each run once per MODE/PREFETCH
pair (an agent-loop mode, ``on`` or ``off``; default ``default/off`` and ``default/on``), interleaved task by task
(the order rotates), on one engine whose prefix cache is emptied before each run. A third part, ``/each``, scores
the decision's names a pass each, as before they were read side by side in one pass
(``agentkit.engine.backbone.ONE_PASS_CONTINUATIONS``; ``/one_pass``, the default, is that pass). Run it alone on the machine: the
pass ahead uses a second core. The result is an agent-loop result whose rows' ``mode`` is their pair, so ``python
evals/agent_loop_steps.py OUT --base default/off`` compares them by step and ``python evals/paired_agent_loop.py OUT
OUT --mode default/off --second-mode default/on`` pairs the tasks.

    python evals/prefetch_call.py --data evals/agent_loop/tasks.jsonl --out out/prefetch.json
    python evals/prefetch_call.py --runs ar/off,default/on --out out/prefetch_ar.json
    python evals/prefetch_call.py --runs ar/off/each,default/on/each,default/on --out out/names.json
"""

from __future__ import annotations

import argparse

from agentkit.evals.agent_loop import (
    RUN_SPEC,
    interleaved_options,
    interleaved_setup,
    parse_run,
    run_interleaved,
    run_spec,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    interleaved_options(ap)
    ap.add_argument("--runs", default="default/off,default/on",
                    help="MODE/PREFETCH[/NAMES] each, comma-separated (MODE: an agent-loop mode; PREFETCH: on or off; "
                    "NAMES: how the decision reads its names and an extraction its candidates, one_pass or each, "
                    "a pass per name, default one_pass)")
    args = ap.parse_args(argv)
    modes = args.runs.split(",")
    bad = []
    for m in modes:
        try:
            parse_run(m)
        except ValueError:
            bad.append(m)
    if bad:
        ap.error(f"--runs: {bad} are not {RUN_SPEC}")
    tasks, engine, header = interleaved_setup(args, "evals/prefetch_call.py", argv, modes=modes)
    run_interleaved(tasks, engine, modes, lambda task, run: run_spec(task, engine, run), args.out, header)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
