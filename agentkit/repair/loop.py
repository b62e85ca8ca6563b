"""The repair loop: run the tests, localise, draft candidates per suspicious line, validate them, accept the first
that passes every test, and only then write it to the repository.

Every test run happens on a scratch copy, so the repository is byte-identical unless a candidate is accepted; then
the one accepted line goes through ``Workspace.apply_edit_list`` under an ``EditGuard`` (test files and the data
the tests read are read-only unless ``protect_tests=False``). The search ends at the first accepted candidate, or
when the budget (validated candidates, seconds, lines) is spent; the result says which.
"""

from __future__ import annotations

import difflib
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkit._extras import require
from agentkit.constrain.edits import Edit
from agentkit.errors import WorkspaceError
from agentkit.tools.edit_guard import EditGuard, files_named_by_tests, is_test_path
from agentkit.tools.workspace import Workspace

from .draft import LineDrafter, Site
from .failures import Failure, TestReport, run_tests
from .localise import Suspect, rank, spectrum
from .mutate import LineEdit, apply_line
from .validate import Candidate, Validation, Validator, copy_repo


@dataclass(frozen=True)
class RepairBudget:
    """Bounds of one repair: validated candidates, wall seconds, suspicious lines tried, lines whose scored
    candidates are ranked together (``pool_lines``), lines sampled per site (``samples``), seconds per test run
    (``time_limit_s``; the first run of the whole suite: ``suite_time_limit_s``), parallel validations
    (``workers``)."""

    max_candidates: int = 24
    max_seconds: float = 120.0
    max_lines: int = 8
    pool_lines: int = 3
    samples: int = 4
    time_limit_s: float = 5.0
    suite_time_limit_s: float = 60.0
    workers: int = field(default_factory=lambda: max(1, (os.cpu_count() or 2) - 1))  # the cores less one

    def __post_init__(self) -> None:
        for name in ("max_candidates", "max_lines", "pool_lines", "samples", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"RepairBudget.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_seconds <= 0 or self.time_limit_s <= 0:
            raise ValueError("RepairBudget.max_seconds and time_limit_s must be > 0")


@dataclass
class Step:
    """One traced step: ``localise``, ``draft`` or ``validate``, with its latency."""

    step: str
    ms: float
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class RepairResult:
    fixed: bool
    reason: str
    failing: list[str] = field(default_factory=list)
    suspects: list[Suspect] = field(default_factory=list)
    tried: list[Validation] = field(default_factory=list)
    accepted: Candidate | None = None
    diff: str = ""
    drafted: int = 0
    steps: list[Step] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def validated(self) -> int:
        return len(self.tried)

    def time_split(self) -> dict[str, float]:
        out = {"localise": 0.0, "draft": 0.0, "validate": 0.0}
        for s in self.steps:
            out[s.step] = out.get(s.step, 0.0) + s.ms / 1000
        return {k: round(v, 3) for k, v in out.items()}

    def summary(self) -> str:
        head = (f"fixed {self.accepted.path}:{self.accepted.edit.line}" if self.fixed and self.accepted
                else f"nothing was fixed ({self.reason}); the repository is unchanged")
        split = ", ".join(f"{k} {v:.1f} s" for k, v in self.time_split().items())
        return (f"{head}. Failing tests: {', '.join(self.failing) or 'none'}. Suspect lines: {len(self.suspects)}; "
                f"candidates drafted {self.drafted}, validated {self.validated}; {split}; total {self.seconds:.1f} s.")


class _Clock:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def lap(self) -> float:
        return time.perf_counter() - self.t0


def _texts(root: Path) -> dict[str, str]:
    ws = Workspace(root)
    out = {}
    for rel in ws.list_files():
        try:
            out[rel] = (root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return out


def _localise(root: Path, budget: RepairBudget, steps: list[Step]) -> tuple[TestReport, list[Suspect]]:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="agentkit-repair-") as tmp:
        scratch = copy_repo(root, Path(tmp) / "repo")
        report = run_tests(Workspace(scratch, command_timeout_s=budget.suite_time_limit_s))
        cov = {}
        if not report.ok and report.failures:
            cov = spectrum(copy_repo(root, Path(tmp) / "cov"), budget.suite_time_limit_s)
        suspects = rank(root, report.failures, cov)
    steps.append(Step("localise", (time.perf_counter() - t0) * 1000,
                      {"failing": [f.test_id for f in report.failures], "suspects": len(suspects),
                       "covered_files": len(cov)}))
    return report, suspects


def failure_text(failures: list[Failure]) -> str:
    return "\n".join(f"{f.test_id}\n{f.message}" for f in failures[:3])


def repair(root: str | Path, drafter: LineDrafter, budget: RepairBudget | None = None, *, protect_tests: bool = True,
           apply: bool = True) -> RepairResult:
    """Make the failing tests of the repository at ``root`` pass with one line edit (see the module docstring)."""
    require("repair", "the repair loop")
    budget = budget or RepairBudget()
    root = Path(root).resolve()
    clock, steps = _Clock(), []
    texts = _texts(root)
    guard = EditGuard(protect_tests=protect_tests)
    guard.protect(files_named_by_tests(texts))
    report, suspects = _localise(root, budget, steps)
    failing = [f.test_id for f in report.failures]
    result = RepairResult(False, "", failing, suspects, steps=steps)
    if report.ok:
        result.reason = "the tests already pass"
    elif not report.failures:
        result.reason = f"the tests could not run (exit {report.exit_code}, no failing test reported)"
    elif not suspects:
        result.reason = "no suspect line in a non-test file"
    else:
        _search(root, drafter, budget, guard, texts, failure_text(report.failures), result, clock)
    if result.accepted is not None and apply:
        _apply(root, result.accepted, texts, guard, result)
    result.seconds = clock.lap()
    return result


def _search(root: Path, drafter: LineDrafter, budget: RepairBudget, guard: EditGuard, texts: dict[str, str],
            message: str, result: RepairResult, clock: _Clock) -> None:
    """Suspects in groups of ``budget.pool_lines``. A drafter that scores its candidates (the model) has the
    group's candidates validated best score first, across lines; one without scores (the operators) has each
    line's candidates validated in its own order, line by line."""
    validator = Validator(root, result.failing, guard, time_limit_s=budget.time_limit_s, workers=budget.workers)
    sites = [s for s in result.suspects[: budget.max_lines] if s.path in texts and not guard.protects(s.path)]
    for start in range(0, len(sites), budget.pool_lines):
        pending: list[tuple[float, Candidate]] = []
        for sus in sites[start:start + budget.pool_lines]:
            if clock.lap() >= budget.max_seconds:
                result.reason = f"time budget spent ({budget.max_seconds:.0f} s)"
                return
            cands, scores = _draft(drafter, Site(sus.path, texts[sus.path], sus.line, message), budget, result)
            if scores is not None:
                pending += zip(scores, cands)
            elif _validate(validator, cands, result, clock, budget):
                return
        pending.sort(key=lambda p: -p[0])
        if pending and _validate(validator, [c for _, c in pending], result, clock, budget):
            return
    result.reason = result.reason or "no candidate passed the tests"


def _draft(drafter: LineDrafter, site: Site, budget: RepairBudget, result: RepairResult
           ) -> tuple[list[Candidate], list[float] | None]:
    t0 = time.perf_counter()
    edits, stats = drafter.draft(site, budget.samples)
    result.drafted += len(edits)
    result.steps.append(Step("draft", (time.perf_counter() - t0) * 1000,
                             {"path": site.path, "line": site.line, "candidates": len(edits),
                              "forwards": stats.forwards, "rows": stats.rows, "sampled": stats.sampled}))
    return [Candidate(site.path, e) for e in edits], stats.scores


def _validate(validator: Validator, cands: list[Candidate], result: RepairResult, clock: _Clock,
              budget: RepairBudget) -> bool:
    """Validate ``cands`` in order within the budget; True when the search is over (accepted or budget spent)."""
    t0, n0 = time.perf_counter(), result.validated
    cands = cands[: budget.max_candidates - result.validated]
    try:
        for v in validator.run(cands):
            result.tried.append(v)
            if v.passed:
                result.accepted = v.candidate
                result.fixed, result.reason = True, "fixed"
                return True
            if clock.lap() >= budget.max_seconds:
                result.reason = f"time budget spent ({budget.max_seconds:.0f} s)"
                return True
        if result.validated >= budget.max_candidates:
            result.reason = f"candidate budget spent ({budget.max_candidates} validated)"
            return True
        return False
    finally:
        stages: dict[str, int] = {}
        for v in result.tried[n0:]:
            stages[v.stage] = stages.get(v.stage, 0) + 1
        result.steps.append(Step("validate", (time.perf_counter() - t0) * 1000,
                                 {"candidates": len(cands), "stages": stages}))


def _apply(root: Path, cand: Candidate, texts: dict[str, str], guard: EditGuard, result: RepairResult) -> None:
    """Write the accepted line to the repository (the file must still be as it was read)."""
    old = texts[cand.path]
    if is_test_path(cand.path) and guard.protect_tests:
        raise WorkspaceError(f"{cand.path!r}: a test file; refused", cand.path)
    new = apply_line(old, cand.edit)
    Workspace(root, guard=guard).apply_edit_list([Edit(cand.path, old, new)])
    result.diff = diff_of(old, cand.edit, cand.path)


def diff_of(source: str, edit: LineEdit, path: str) -> str:
    """The unified diff of ``edit`` on ``source`` (file ``path``)."""
    new = apply_line(source, edit)
    return "".join(difflib.unified_diff(source.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{path}", f"b/{path}"))
