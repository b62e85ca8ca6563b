"""The repair benchmark (``agentkit eval repair``): the repair loop on one-line bugs, per drafting row.

Tasks: ``evals/repair_tasks/tasks.json`` (built by ``agentkit.evals.repair_tasks``: verified, kind-balanced bugs
in small programs written for this benchmark, with a held-out split by program) plus the six toy repositories of
``evals/coding_tasks``. Each task runs on a fresh temp copy; after the loop the repository's own tests run again,
and its test files are compared byte for byte with the originals. A model row runs each toy through the coding
assistant's routing (``agentkit.evals.repair_toys``: the request planned, then renamed, documented or repaired, the
repair loop with the row's drafter); the model-free baseline runs the repair loop alone on them.

Rows (``--modes``): ``operators`` is the model-free baseline (the same localisation, the mutation operators'
candidates in a seeded random order); ``hybrid``, ``sample``, ``rank``, ``diffusion`` are the model drafter's modes
(``agentkit.repair.draft``); ``sample-sequential`` is ``sample`` decoding its rows one at a time; ``hybrid-repair``
and ``rank-repair`` are ``hybrid`` and ``rank`` on an engine with the repair adapter (``--repair-adapter``, default
the shipped ``adapters/smollm2-135m-repair``; ``agentkit.repair.adapter``), the others on the default engine. Every row gets
the same ``RepairBudget``. Reported per row and split: fix rate (overall and by mutation kind), fixes equal to the
reference line, test files touched, candidates drafted and validated per task, p50/p95 seconds per task and the
time split into localise / draft / validate.

    agentkit eval repair --modes operators,hybrid --out repair.json
    python -m agentkit.evals.repair --modes operators,hybrid --split heldout --out repair.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..repair import ModelDrafter, OperatorDrafter, RepairBudget, repair
from .repair_tasks import DATA, TASKS_FILE, load_programs, load_tasks, task_files, write_files
from .report import write_json_atomic
from .runner import register_suite

TASKS_DIR = DATA
ROWS = ("operators", "hybrid", "sample", "rank", "diffusion", "sample-sequential", "hybrid-repair", "rank-repair")
#: rows drafted on the repair adapter's engine, and the mode each runs
ADAPTER_ROWS = {"hybrid-repair": "hybrid", "rank-repair": "rank"}
#: The benchmark's budget, the same for every row: the default one, with the first run of a task's (tiny) suite
#: bounded at 20 s.
BENCH_BUDGET = RepairBudget(suite_time_limit_s=20)


def drafter_for(row: str, engine: Any, seed: int = 0, adapted: Any = None) -> Any:
    """The drafter of ``row``; ``adapted``: the repair adapter's engine (the ``*-repair`` rows)."""
    if row == "operators":
        return OperatorDrafter(seed)
    if row in ADAPTER_ROWS:
        if adapted is None:
            raise ValueError(f"row {row!r} needs the repair adapter's engine")
        return ModelDrafter(adapted, ADAPTER_ROWS[row], seed=seed, name=row)
    if row == "sample-sequential":
        return ModelDrafter(engine, "sample", batched=False, seed=seed, name=row)
    if row in ("hybrid", "sample", "rank", "diffusion"):
        return ModelDrafter(engine, row, seed=seed, name=row)
    raise ValueError(f"unknown repair row {row!r}; expected one of {ROWS}")


def _tests_of(files: dict[str, str]) -> dict[str, str]:
    from agentkit.tools.edit_guard import is_test_path

    return {rel: text for rel, text in files.items() if is_test_path(rel)}


def run_one(files: dict[str, str], drafter: Any, budget: RepairBudget) -> dict[str, Any]:
    """One repair on a temp copy of ``files``: the loop's result plus what the repository looks like after."""
    from .repair_tasks import outcome

    with tempfile.TemporaryDirectory(prefix="repair-eval-") as tmp:
        root = Path(tmp)
        write_files(files, root)
        res = repair(root, drafter, budget)
        after = {rel: (root / rel).read_text(encoding="utf-8") for rel in files}
    passes = outcome(after, budget.suite_time_limit_s)[0] if res.fixed else False
    touched = sorted(rel for rel, text in _tests_of(files).items() if after[rel] != text)
    return {"fixed": bool(res.fixed and passes), "loop_says_fixed": res.fixed, "reason": res.reason,
            "tests_touched": touched, "drafted": res.drafted, "validated": res.validated,
            "seconds": round(res.seconds, 3), "split_s": res.time_split(), "diff": res.diff,
            "suspects": len(res.suspects), "after": after}


def run_task(task: dict[str, Any], programs: dict[str, dict[str, str]], drafter: Any,
             budget: RepairBudget) -> dict[str, Any]:
    files = task_files(task, programs)
    row = run_one(files, drafter, budget)
    fixed_line = row.pop("after")[task["path"]].splitlines()[task["line"] - 1]
    row.update({"id": task["id"], "split": task["split"], "kind": task["kind"],
                "reference": row["fixed"] and fixed_line == task["fixed"]})
    return row


def run_toy(task: dict[str, Any], drafter: Any, budget: RepairBudget, planner: Any = None) -> dict[str, Any]:
    """One toy repository; ``planner``: the engine that plans and documents (default: the drafter's). The
    ``*-repair`` rows pass the default engine: the coding assistant uses the repair adapter for drafting only."""
    from .coding import check_task
    from .repair_toys import run_assistant

    model = planner or getattr(drafter, "engine", None)  # the engine that plans and documents; the baseline has none
    row = (run_one(task["files"], drafter, budget) if model is None
           else run_assistant(task["files"], task["task"], model, drafter, budget))
    after = row.pop("after")
    with tempfile.TemporaryDirectory(prefix="repair-toy-") as tmp:
        write_files(after, Path(tmp))
        ok, why = check_task(Path(tmp), task.get("check", {"tests": True}))
    row.update({"id": task["id"], "split": "toy", "kind": "toy", "fixed": ok, "check": why or "ok",
                "reference": False})
    return row


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    if not n:
        return {"n": 0}
    kinds: dict[str, list[bool]] = defaultdict(list)
    for r in rows:
        kinds[r["kind"]].append(r["fixed"])
    secs = [r["seconds"] for r in rows]
    split = {k: round(sum(r["split_s"][k] for r in rows) / n, 2) for k in ("localise", "draft", "validate")}
    return {"n": n, "fixed": sum(r["fixed"] for r in rows), "fix_rate": round(sum(r["fixed"] for r in rows) / n, 3),
            "reference_fixes": sum(r["reference"] for r in rows),
            "by_kind": {k: f"{sum(v)}/{len(v)}" for k, v in sorted(kinds.items())},
            "test_files_touched": sum(len(r["tests_touched"]) for r in rows),
            "drafted_mean": round(sum(r["drafted"] for r in rows) / n, 1),
            "validated_mean": round(sum(r["validated"] for r in rows) / n, 1),
            "p50_s": round(statistics.median(secs), 2), "p95_s": _pct(secs, 0.95), "time_split_mean_s": split}


def table(result: dict[str, Any]) -> str:
    cols = ["n", "fixed", "fix_rate", "reference_fixes", "test_files_touched", "drafted_mean", "validated_mean",
            "p50_s", "p95_s"]
    lines = ["| row | split | " + " | ".join(cols) + " | localise / draft / validate s |",
             "|---" * (len(cols) + 3) + "|"]
    for key, s in result["summary"].items():
        row, split = key.split("/")
        t = s.get("time_split_mean_s", {})
        lines.append(f"| {row} | {split} | " + " | ".join(str(s.get(c, "")) for c in cols)
                     + f" | {t.get('localise', 0)} / {t.get('draft', 0)} / {t.get('validate', 0)} |")
    return "\n".join(lines)


def run_repair_eval(*, rows: list[str], engine: Any = None, split: str = "all", limit: int | None = None,
                    toys: bool = True, seed: int = 0, budget: RepairBudget = BENCH_BUDGET,
                    out: str | Path | None = None, tasks_file: Path = TASKS_FILE, verbose: bool = True,
                    command: str = "", adapted: Any = None, adapter: str | Path | None = None) -> dict:
    """Every task (of ``split``: dev, heldout or all; up to ``limit``) and the toy repositories, per row.
    ``adapted``: the repair adapter's engine for the ``*-repair`` rows (default: one built with ``adapter``, the
    shipped repair adapter when None)."""
    for r in rows:
        if r not in ROWS:
            raise ValueError(f"unknown repair row {r!r}; expected some of {ROWS}")
    if engine is None and any(r != "operators" and (r not in ADAPTER_ROWS or toys) for r in rows):
        from ..engine import default_engine

        engine = default_engine()
    if adapted is None and any(r in ADAPTER_ROWS for r in rows):
        from ..repair.adapter import REPAIR_DIR, repair_engine

        adapted = repair_engine(adapter or REPAIR_DIR)
    programs = {p["name"]: p for p in load_programs(Path(tasks_file).parent)}
    tasks = [t for t in load_tasks(Path(tasks_file)) if split == "all" or t["split"] == split][:limit]
    from .coding import load_tasks as load_toys

    toy_tasks = load_toys() if toys else []
    result: dict[str, Any] = {"suite": "repair", "command": command, "rows": rows, "split": split, "limit": limit, "seed": seed,
                              "budget": budget.__dict__, "items": [], "summary": {}}
    if adapted is not None:
        result["repair_adapter"] = adapted.lm.meta.get("lora")
    t0 = time.perf_counter()
    drafters = {row: drafter_for(row, engine, seed, adapted) for row in rows}
    for task in [*tasks, *toy_tasks]:  # task-major: a run cut short still compares the rows on the same tasks
        for row, drafter in drafters.items():
            planner = engine if row in ADAPTER_ROWS else None
            item = (run_toy(task, drafter, budget, planner) if "files" in task
                    else run_task(task, programs, drafter, budget))
            item["row"] = row
            result["items"].append(item)
            if verbose:
                print(f"[{row} {item['id']}] fixed={item['fixed']} ({item['reason']}) drafted={item['drafted']} "
                      f"validated={item['validated']} {item['seconds']:.1f}s", file=sys.stderr, flush=True)
            _summaries(result)
            result["wall_s"] = round(time.perf_counter() - t0, 1)
            if out is not None:
                write_json_atomic(Path(out), result)
    return result


def _summaries(result: dict[str, Any]) -> None:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for it in result["items"]:
        groups[f"{it['row']}/{it['split']}"].append(it)
        if it["split"] != "toy":
            groups[f"{it['row']}/all"].append(it)
    result["summary"] = {k: summarize(v) for k, v in sorted(groups.items())}


def _suite(*, data, modes, limit, engine, seed, out) -> dict[str, Any]:
    """``agentkit eval repair``: rows from ``--modes`` (default operators,hybrid)."""
    tasks_file = Path(data) / "tasks.json" if Path(data).is_dir() else Path(data)
    res = run_repair_eval(rows=list(modes) or ["operators", "hybrid"], engine=engine, limit=limit, seed=seed,
                          out=out, tasks_file=tasks_file, command="agentkit " + " ".join(sys.argv[1:]))
    print(table(res))
    return res


register_suite("repair", _suite)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agentkit.evals.repair", description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default="operators,hybrid", help=f"comma-separated rows: {', '.join(ROWS)}")
    ap.add_argument("--split", default="all", choices=["all", "dev", "heldout"])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--no-toys", action="store_true", help="leave out the six toy repositories")
    ap.add_argument("--lora", default=None, help="EngineConfig.lora ('none': the weights as loaded)")
    ap.add_argument("--repair-adapter", default=None,
                    help="the repair adapter of the *-repair rows (default: adapters/smollm2-135m-repair)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="repair_eval.json")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    rows = [m.strip() for m in args.modes.split(",") if m.strip()]
    engine = None
    if any(r != "operators" and (r not in ADAPTER_ROWS or not args.no_toys) for r in rows):
        from ..engine import default_engine

        engine = default_engine(lora=args.lora)
    res = run_repair_eval(rows=rows, engine=engine, split=args.split, limit=args.limit, toys=not args.no_toys,
                          seed=args.seed, out=args.out, adapter=args.repair_adapter,
                          command="python -m agentkit.evals.repair " + " ".join(argv if argv is not None else sys.argv[1:]))
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
