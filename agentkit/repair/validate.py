"""Validating candidate edits: each on its own scratch copy of the repository, in the workspace's sandbox.

A candidate is applied to a fresh copy through ``Workspace.apply_edit_list`` with an ``EditGuard`` that protects
test files and test data, so an edit the guard refuses (a test file, merge markers, a runaway repeat) never runs.
A line that copies a string literal from the tests (one the code does not hold already) is refused too: it would
pass by hard-coding the expected value (``return "Hello, Ada!"``), the overfitting generate-and-validate is prone to.
Then the failing tests run (stopping at the first failure), and only if they pass, the whole suite. Each run has
``time_limit_s`` (buggy code often loops: the run is killed and the candidate rejected). Up to ``workers``
candidates run at once; the user's repository is never written here.
"""

from __future__ import annotations

import ast
import contextlib
import io
import shutil
import tempfile
import time
import tokenize
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from agentkit.constrain.edits import Edit
from agentkit.errors import EditError, WorkspaceError
from agentkit.tools.edit_guard import EditGuard, is_test_path
from agentkit.tools.workspace import SKIP_DIRS, Workspace

from .failures import run_tests
from .mutate import LineEdit, apply_line


@dataclass(frozen=True)
class Candidate:
    """A line edit of file ``path`` (workspace-relative)."""

    path: str
    edit: LineEdit

    @property
    def kind(self) -> str:
        return self.edit.kind


@dataclass
class Validation:
    candidate: Candidate
    passed: bool
    stage: str  # "refused" | "failing tests" | "suite" | "passed"
    seconds: float
    timed_out: bool = False
    detail: str = ""


def copy_repo(root: Path, dest: Path) -> Path:
    """A copy of ``root`` at ``dest`` without version-control folders, venvs and caches."""
    shutil.copytree(root, dest, symlinks=True, ignore=shutil.ignore_patterns(*SKIP_DIRS))
    return dest


def _strings(text: str) -> set[str]:
    """The string literals of ``text`` (a file or one line) longer than two characters."""
    out: set[str] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text.strip() + "\n").readline):
            if tok.type == tokenize.STRING:
                with contextlib.suppress(ValueError, SyntaxError):
                    value = ast.literal_eval(tok.string)
                    if isinstance(value, str) and len(value) > 2:
                        out.add(value)
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def test_strings(root: Path) -> set[str]:
    """String literals of the repository's test files, less those its other files also hold."""
    tests: set[str] = set()
    code: set[str] = set()
    for p in root.rglob("*.py"):
        rel = p.relative_to(root).as_posix()
        if any(part in SKIP_DIRS for part in p.relative_to(root).parts):
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        (tests if is_test_path(rel) else code).update(_strings(text))
    return tests - code


def copied_test_strings(line: str, strings: set[str]) -> set[str]:
    """The strings of ``line`` copied from the tests (not in the code already): hard-coding an expected value."""
    return _strings(line) & strings


class Validator:
    """Runs candidates against the tests of the repository at ``root`` (see the module docstring)."""

    def __init__(self, root: Path, failing: Sequence[str], guard: EditGuard, *, time_limit_s: float = 5.0,
                 workers: int = 1) -> None:
        self.root = Path(root)
        self.failing = list(failing)
        self.guard = guard
        self.time_limit_s = time_limit_s
        self.workers = max(1, workers)
        self.test_strings = test_strings(self.root)

    def check(self, cand: Candidate) -> Validation:
        t0 = time.perf_counter()
        copied = copied_test_strings(cand.edit.text, self.test_strings)
        if copied:
            return Validation(cand, False, "refused", time.perf_counter() - t0,
                           detail=f"the line copies a test's string {min(copied)!r}: it would pass the test "
                                  "by its expected value, not by fixing the code")
        with tempfile.TemporaryDirectory(prefix="agentkit-repair-") as tmp:
            scratch = copy_repo(self.root, Path(tmp) / "repo")
            ws = Workspace(scratch, command_timeout_s=self.time_limit_s, guard=self.guard)
            try:
                old = (scratch / cand.path).read_text(encoding="utf-8")
                ws.apply_edit_list([Edit(cand.path, old, apply_line(old, cand.edit))])
            except (EditError, WorkspaceError, OSError, IndexError) as err:
                return Validation(cand, False, "refused", time.perf_counter() - t0, detail=str(err))
            if self.failing:
                rep = run_tests(ws, self.failing, stop_first=True)
                if not rep.ok:
                    return Validation(cand, False, "failing tests", time.perf_counter() - t0, rep.timed_out)
            rep = run_tests(ws, stop_first=True)
            stage = "passed" if rep.ok else "suite"
            return Validation(cand, rep.ok, stage, time.perf_counter() - t0, rep.timed_out)

    def run(self, cands: Sequence[Candidate]) -> Iterator[Validation]:
        """Verdicts in candidate order, ``workers`` at a time; the caller stops iterating to stop early (the
        candidates already started finish, the rest never run)."""
        if self.workers == 1:
            for c in cands:
                yield self.check(c)
            return
        with ThreadPoolExecutor(self.workers) as pool:
            for i in range(0, len(cands), self.workers):
                yield from pool.map(self.check, cands[i:i + self.workers])
