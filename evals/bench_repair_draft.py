"""Drafting repair candidates: k lines in one batched decode against the same k lines drawn one row at a time.

For each of the first ``--n`` dev tasks of the repair benchmark (the buggy line is the site; the failing tests'
report is the message) the model drafter samples ``--k`` lines under the code-edit template twice with the same
seeds: all rows in one batched decode (one forward per token for every row, the prompt's cache shared), then one
row at a time. Both give the same lines (each row has its own seeded generator) unless float rounding differs in
a batch. Also timed: the block-diffusion drafting mode (``k`` canvases, batched by a ``Batcher``). Reported: wall
seconds per candidate, forwards, rows, and how many lines the two sampling runs share.

    python evals/bench_repair_draft.py --n 12 --k 8 --out evals/results/repair/draft_batched.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def sites(n: int):
    from agentkit.tools.workspace import Workspace

    from agentkit.evals.repair_tasks import load_programs, load_tasks, task_files, write_files
    from agentkit.repair import Site
    from agentkit.repair.failures import run_tests
    from agentkit.repair.loop import failure_text

    programs = {p["name"]: p for p in load_programs()}
    for task in [t for t in load_tasks() if t["split"] == "dev"][:n]:
        files = task_files(task, programs)
        with tempfile.TemporaryDirectory() as tmp:
            write_files(files, Path(tmp))
            rep = run_tests(Workspace(tmp, command_timeout_s=20))
        yield task, Site(task["path"], files[task["path"]], task["line"], failure_text(rep.failures))


def timed(drafter, site, k, stats_cls):
    stats = stats_cls()
    with drafter.engine.lock:
        import torch

        with torch.inference_mode():
            cache, first = drafter.prompt_cache(site, stats)
            t0 = time.perf_counter()
            lines = drafter.sample(cache, first, site, k, stats)
    return lines, time.perf_counter() - t0, stats


def summarize(rows: list[dict], k: int) -> dict:
    """Medians per candidate (a machine shared with other jobs stalls a run now and then; the means are kept too)."""
    med = statistics.median
    return {"n": len(rows), "k": k,
            "median_s_per_candidate": {m: round(med(r[f"{m}_s"] for r in rows) / k, 3)
                                       for m in ("batched", "one_at_a_time", "diffusion")},
            "mean_s_per_candidate": {m: round(statistics.mean(r[f"{m}_s"] for r in rows) / k, 3)
                                     for m in ("batched", "one_at_a_time", "diffusion")},
            "median_speedup_batched": round(med(r["one_at_a_time_s"] / r["batched_s"] for r in rows), 2),
            "forwards": {"batched": sum(r["batched_forwards"] for r in rows),
                         "one_at_a_time": sum(r["one_at_a_time_forwards"] for r in rows)},
            "same_lines": f"{sum(r['same_lines'] for r in rows)}/{k * len(rows)}",
            "tasks_with_the_fix_sampled": sum(r["fix_sampled"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--out", default="draft_batched.json")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from agentkit.engine import default_engine
    from agentkit.repair import ModelDrafter
    from agentkit.repair.draft import DraftStats

    engine = default_engine()
    batched = ModelDrafter(engine, "sample", batched=True)
    single = ModelDrafter(engine, "sample", batched=False)
    canvas = ModelDrafter(engine, "diffusion")
    rows = []
    for task, site in sites(args.n):
        a, ta, sa = timed(batched, site, args.k, DraftStats)
        b, tb, sb = timed(single, site, args.k, DraftStats)
        t0 = time.perf_counter()
        dstats = DraftStats()
        canvas.canvases(site, args.k, dstats)
        td = time.perf_counter() - t0
        rows.append({"id": task["id"], "batched_s": round(ta, 3), "one_at_a_time_s": round(tb, 3), "diffusion_s": round(td, 3),
                     "batched_forwards": sa.forwards, "one_at_a_time_forwards": sb.forwards, "rows": sa.rows,
                     "same_lines": sum(x == y for x, y in zip(a, b)), "fix_sampled": any(x.strip() == task["fixed"].strip() for x in a),
                     "k": args.k})
        print(json.dumps(rows[-1]), flush=True)
    summary = summarize(rows, args.k)
    summary["command"] = "python evals/bench_repair_draft.py " + " ".join(argv or sys.argv[1:])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
