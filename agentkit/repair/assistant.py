"""The coding assistant's request handling: plan the request (``agentkit.repair.request``), then do it.

- ``rename``: :func:`agentkit.repair.rename.rename` (deterministic, checked on scratch copies);
- ``docstring``: :func:`agentkit.repair.docstring.add_docstring` (the model fills one slot under a template, checked
  on scratch copies);
- ``unnamed``: nothing (the request says rename or docstring but names nothing the code defines);
- ``repair``: the repair loop (:func:`agentkit.repair.repair`);
- ``agent``: the caller's general agent (``general``), when it gives one.

Every path writes the repository only through a checked, guarded edit (test files read-only), and leaves it as it
was when nothing passes. :class:`Handled` holds the plan, whether the repository changed, the diff and a summary.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checked import texts_of
from .docstring import EngineWriter, add_docstring
from .draft import LineDrafter, ModelDrafter
from .loop import RepairBudget, repair
from .rename import rename
from .request import CodingPlan, function_file, plan_request

#: ``general(root, request)`` -> (the repository changed and its tests pass, a reply): the general agent.
General = Callable[[Path, str], tuple[bool, str]]


@dataclass
class Handled:
    plan: CodingPlan
    done: bool
    reason: str
    diff: str = ""
    summary: str = ""
    steps: list[tuple[str, float, str]] | None = None
    seconds: float = 0.0
    outcome: Any = None  # the RepairResult, EditOutcome or the agent's reply


def handle(root: str | Path, request: str, model: Any, *, drafter: LineDrafter | None = None,
           budget: RepairBudget | None = None, general: General | None = None, plan: CodingPlan | None = None,
           time_limit_s: float = 60.0) -> Handled:
    """Plan ``request`` over the repository at ``root`` with ``model`` (or take ``plan``), then do it (see the
    module docstring). ``drafter``: the repair loop's (default: the model, ``hybrid``)."""
    t0 = time.perf_counter()
    root = Path(root).resolve()
    texts = texts_of(root)
    plan = plan or plan_request(request, texts, model)
    steps = [("plan", plan.seconds, f"{plan.route}: {plan.why}")]
    if plan.route == "rename":
        out = rename(root, plan.old_name or "", plan.new_name or "", time_limit_s=time_limit_s)
        res = Handled(plan, out.applied, out.reason, out.diff, out.summary(), steps + out.steps, outcome=out)
    elif plan.route == "docstring":
        path = function_file(plan, texts)
        if path is None:
            res = Handled(plan, False, f"no single non-test file defines {plan.function!r}", steps=steps)
        else:
            out = add_docstring(root, path, plan.function or "", request, EngineWriter(model),
                                time_limit_s=time_limit_s)
            res = Handled(plan, out.applied, out.reason, out.diff, out.summary(), steps + out.steps, outcome=out)
    elif plan.route == "unnamed":
        res = Handled(plan, False, plan.why, steps=steps)
    elif plan.route == "repair":
        result = repair(root, drafter or ModelDrafter(model, "hybrid"), budget or RepairBudget())
        steps += [(s.step, s.ms / 1000, str(s.detail)) for s in result.steps]
        res = Handled(plan, result.fixed, result.reason, result.diff, result.summary(), steps, outcome=result)
    elif general is not None:
        done, reply = general(root, request)
        res = Handled(plan, done, "the general agent ran", "", reply, steps, outcome=reply)
    else:
        res = Handled(plan, False, "the request is not a repair, rename or docstring, and no general agent was given",
                      steps=steps)
    res.summary = res.summary or res.reason
    res.seconds = time.perf_counter() - t0
    return res
