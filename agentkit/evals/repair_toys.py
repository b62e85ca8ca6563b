"""The repair benchmark's toy repositories run through the coding assistant's routing (``agentkit.repair.assistant``):
the request is planned, then renamed, documented or repaired; one row per toy, in the shape of the benchmark's rows.

A toy the planner sends to the general agent is run without one here (nothing changes, it counts as not done); the
general agent is the example's (``examples/coding_assistant.py``) and is measured by ``agentkit.evals.coding``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..repair import LineDrafter, RepairBudget
from ..repair.assistant import handle
from ..repair.loop import RepairResult
from ..tools.edit_guard import is_test_path
from .repair_tasks import write_files


def run_assistant(files: dict[str, str], request: str, model: Any, drafter: LineDrafter,
                  budget: RepairBudget) -> dict[str, Any]:
    """``request`` handled by the assistant on a temp copy of ``files`` (the repair loop with ``drafter`` and
    ``budget``); the row's fields plus ``after`` (the files as the run left them)."""
    with tempfile.TemporaryDirectory(prefix="repair-toy-") as tmp:
        root = Path(tmp)
        write_files(files, root)
        done = handle(root, request, model, drafter=drafter, budget=budget, time_limit_s=budget.suite_time_limit_s)
        after = {rel: (root / rel).read_text(encoding="utf-8") for rel in files}
    result = done.outcome if isinstance(done.outcome, RepairResult) else None
    split = result.time_split() if result else {"localise": 0.0, "draft": 0.0, "validate": 0.0}
    return {"fixed": done.done, "loop_says_fixed": done.done, "reason": done.reason,
            "route": done.plan.route, "plan": done.plan.raw, "plan_s": round(done.plan.seconds, 3),
            "tests_touched": sorted(rel for rel in files if is_test_path(rel) and after[rel] != files[rel]),
            "drafted": result.drafted if result else 0, "validated": result.validated if result else 0,
            "seconds": round(done.seconds, 3), "split_s": split, "diff": done.diff,
            "suspects": len(result.suspects) if result else 0, "after": after}
