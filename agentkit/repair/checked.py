"""Whole-file edits checked on a scratch copy before they reach the repository: the refactorings' (rename, add a
docstring) way of never leaving it worse.

:func:`check_and_apply` takes the new text of each file to change. It refuses an edit that leaves a Python file
unparsable; otherwise it runs the suite on a scratch copy as the repository is, applies the edits to a second
scratch copy through ``Workspace.apply_edit_list`` under an ``EditGuard`` (test files and the data the tests read
are read-only; merge markers and runaway repeats are refused), and runs the suite there. The edit is accepted when
no test that passed before fails after (a suite that did not run, or ran out of time, is a failure); only then do
the same edits go to the repository, through the same guard. The result holds the unified diff and why.
"""

from __future__ import annotations

import ast
import difflib
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentkit.constrain.edits import Edit
from agentkit.errors import EditError, WorkspaceError
from agentkit.tools.edit_guard import EditGuard, files_named_by_tests
from agentkit.tools.workspace import Workspace

from .failures import TestReport, run_tests
from .validate import copy_repo

NO_TESTS = 5  # pytest's exit status when it collected no test


@dataclass
class EditOutcome:
    """What a checked edit did: ``applied`` or not and ``reason``; the diff; the failing tests before and after
    (on the scratch copies); the traced steps with their seconds."""

    kind: str
    applied: bool
    reason: str
    diff: str = ""
    files: list[str] = field(default_factory=list)
    failing_before: list[str] = field(default_factory=list)
    failing_after: list[str] = field(default_factory=list)
    steps: list[tuple[str, float, str]] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        head = (f"{self.kind}: applied to {', '.join(self.files)}" if self.applied
                else f"{self.kind}: nothing was changed ({self.reason}); the repository is unchanged")
        tests = (f"failing tests before: {', '.join(self.failing_before) or 'none'}; after: "
                 f"{', '.join(self.failing_after) or 'none'}") if self.steps else ""
        return ". ".join(p for p in (head, tests, f"total {self.seconds:.1f} s") if p) + "."


def unified_diff(old: dict[str, str], new: dict[str, str]) -> str:
    """The unified diff of every file whose text changes from ``old`` to ``new``."""
    return "".join("".join(difflib.unified_diff(old[p].splitlines(keepends=True), new[p].splitlines(keepends=True),
                                                f"a/{p}", f"b/{p}"))
                   for p in sorted(new) if new[p] != old[p])


def syntax_errors(new: dict[str, str]) -> list[str]:
    """``path: message`` for each Python file of ``new`` that does not parse."""
    out = []
    for rel, text in sorted(new.items()):
        if rel.endswith(".py"):
            try:
                ast.parse(text)
            except SyntaxError as err:
                out.append(f"{rel}: {err.msg} (line {err.lineno})")
    return out


def verdict(before: TestReport, after: TestReport) -> str:
    """Why the suite after the edit is worse than before ("" when it is not)."""
    if after.timed_out:
        return "the tests ran out of time after the edit"
    if after.ok or after.exit_code == NO_TESTS == before.exit_code:
        return ""
    if not after.failures:
        return f"the tests could not run after the edit (exit {after.exit_code})"
    was = {f.test_id for f in before.failures}
    broken = [f.test_id for f in after.failures if f.test_id not in was]
    if broken:
        return f"tests that passed before fail after the edit: {', '.join(broken)}"
    return "" if after.passed >= before.passed else "fewer tests pass after the edit"


def check_and_apply(root: str | Path, new: dict[str, str], kind: str, *, guard: EditGuard | None = None,
                    time_limit_s: float = 60.0, apply: bool = True) -> EditOutcome:
    """Check the edits ``new`` (path -> the file's new text) on scratch copies of ``root`` and, when accepted and
    ``apply``, write them to ``root`` (see the module docstring)."""
    t0 = time.perf_counter()
    root = Path(root).resolve()
    old = {rel: (root / rel).read_text(encoding="utf-8") for rel in new}
    changed = {rel: text for rel, text in new.items() if text != old[rel]}
    out = EditOutcome(kind, False, "", unified_diff(old, changed), sorted(changed))
    guard = guard or EditGuard(protect_tests=True)
    guard.protect(files_named_by_tests(texts_of(root)))
    edits = [Edit(rel, old[rel], text) for rel, text in sorted(changed.items())]
    bad = syntax_errors(changed)
    if not changed:
        out.reason = "the edit changes nothing"
    elif bad:
        out.reason = "the edited file does not parse: " + "; ".join(bad)
    else:
        out.reason = scratch_check(root, edits, guard, time_limit_s, out)
    if not out.reason and apply:
        Workspace(root, guard=guard).apply_edit_list(edits)
        out.applied, out.reason = True, "applied"
    elif not out.reason:
        out.reason = "accepted, not applied"
    out.seconds = time.perf_counter() - t0
    return out


def scratch_check(root: Path, edits: list[Edit], guard: EditGuard, time_limit_s: float, out: EditOutcome) -> str:
    """The suite before and after ``edits`` on scratch copies; "" when the edit is accepted, else why not."""
    with tempfile.TemporaryDirectory(prefix="agentkit-edit-") as tmp:
        t0 = time.perf_counter()
        before = run_tests(Workspace(copy_repo(root, Path(tmp) / "before"), command_timeout_s=time_limit_s))
        out.steps.append(("tests before", time.perf_counter() - t0, f"exit {before.exit_code}"))
        ws = Workspace(copy_repo(root, Path(tmp) / "after"), command_timeout_s=time_limit_s, guard=guard)
        t0 = time.perf_counter()
        try:
            ws.apply_edit_list(edits)
        except (EditError, WorkspaceError) as err:
            return f"the edit tool refused the edit: {err}"
        after = run_tests(ws)
        out.steps.append(("tests after", time.perf_counter() - t0, f"exit {after.exit_code}"))
    out.failing_before = [f.test_id for f in before.failures]
    out.failing_after = [f.test_id for f in after.failures]
    return verdict(before, after)


def texts_of(root: Path) -> dict[str, str]:
    """The repository's text files (workspace-relative path -> text); unreadable or non-UTF-8 files left out."""
    out = {}
    for rel in Workspace(root).list_files():
        try:
            out[rel] = (root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return out
