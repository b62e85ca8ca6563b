"""The coding assistant's planner on the toy tasks' requests and on requests in other words
(``evals/coding_tasks/requests.py``: a dev split and a held-out split), each split reported apart: the route taken
against the route expected, the model's action, and the values a rename or a docstring needs.

    python -m agentkit.evals.coding_plan --out evals/results/repair/planner.json
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

from ..repair.request import plan_request
from .coding import TASKS_DIR, load_tasks
from .report import write_json_atomic

#: The toy tasks' expected routes: their ``check`` says what each asks for.
TOY_ROUTES = {"absent": "rename", "docstring": "docstring"}


def toy_expectation(task: dict[str, Any]) -> dict[str, Any]:
    check = task.get("check", {})
    route = next((r for key, r in TOY_ROUTES.items() if check.get(key)), "repair")
    return {"repo": task["id"], "request": task["task"], "route": route}


def load_requests(path: Path | None = None) -> list[dict[str, Any]]:
    path = path or TASKS_DIR / "requests.py"
    spec = importlib.util.spec_from_file_location("coding_requests", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return list(module.REQUESTS)


def score(item: dict[str, Any], plan: Any) -> dict[str, Any]:
    wanted = {k: item[k] for k in ("old_name", "new_name", "function") if k in item}
    got = {k: getattr(plan, k) for k in wanted}
    return {"route_ok": plan.route == item["route"], "values_ok": got == wanted, "got_values": got}


def run(engine: Any, out: Path | None = None, command: str = "") -> dict[str, Any]:
    toys = {t["id"]: t for t in load_tasks()}
    items = [("toy", toy_expectation(t)) for t in toys.values()] + [(r["split"], r) for r in load_requests()]
    result: dict[str, Any] = {"suite": "coding_plan", "command": command, "items": [], "summary": {}}
    for split, item in items:
        texts = dict(toys[item["repo"]]["files"])
        t0 = time.perf_counter()
        plan = plan_request(item["request"], texts, engine)
        row = {"split": split, **item, "plan": plan.raw, "got_route": plan.route, "why": plan.why,
               "seconds": round(time.perf_counter() - t0, 2), **score(item, plan)}
        result["items"].append(row)
        print(f"[{split}] {row['route_ok']} {plan.route} ({plan.why}) <- {item['request']!r}", file=sys.stderr)
    for split in ("toy", "dev", "heldout"):
        rows = [r for r in result["items"] if r["split"] == split]
        planned = [r for r in rows if r["route"] in ("rename", "docstring")]
        result["summary"][split] = {
            "n": len(rows), "route_ok": sum(r["route_ok"] for r in rows),
            "action_ok": sum(r["plan"].get("action") == {"agent": "other"}.get(r["route"], r["route"])
                             for r in rows),
            "values_ok": f"{sum(r['values_ok'] and r['route_ok'] for r in planned)}/{len(planned)}",
            "mean_s": round(sum(r["seconds"] for r in rows) / max(1, len(rows)), 2)}
    if out is not None:
        write_json_atomic(out, result)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agentkit.evals.coding_plan", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch

    from ..engine import default_engine

    torch.set_num_threads(1)
    res = run(default_engine(), Path(args.out) if args.out else None,
              "python -m agentkit.evals.coding_plan " + " ".join(argv if argv is not None else sys.argv[1:]))
    for split, s in res["summary"].items():
        print(split, s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
