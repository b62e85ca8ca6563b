"""Fault localisation: which lines of which non-test files to change, most suspicious first.

1. The failing tests' traceback frames in non-test files, innermost first (cheap, often exact for a crash).
2. Spectrum-based localisation (Ochiai): per-test line coverage, collected with the ``coverage`` library
   (``dynamic_context = test_function``) in the workspace's sandbox; a line's score is
   ``failed(line) / sqrt(total_failed * (failed(line) + passed(line)))``.

Lines already ranked by a frame are not repeated; docstring lines and lines of test files are never suspects.
"""

from __future__ import annotations

import ast
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agentkit.tools.edit_guard import is_test_path
from agentkit.tools.workspace import Workspace

from .failures import BASE_ARGS, Failure, plugin_args
from .mutate import docstring_lines

RCFILE = ".repair_coveragerc"
DATA_FILE = ".repair_coverage"
RC_TEXT = f"[run]\ndynamic_context = test_function\ndata_file = {DATA_FILE}\n"


@dataclass(frozen=True)
class Suspect:
    path: str  # workspace-relative
    line: int
    score: float
    source: str  # "traceback" | "ochiai"


def code_lines(root: Path, rel: str) -> set[int]:
    """Lines of ``rel`` that may be changed: statement lines outside docstrings (empty when it does not parse)."""
    try:
        tree = ast.parse((root / rel).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return set()
    lines = {n.lineno for n in ast.walk(tree) if isinstance(n, ast.stmt)}
    return lines - docstring_lines(tree)


def from_frames(root: Path, failures: Iterable[Failure]) -> list[Suspect]:
    """Frames of the failures in non-test files of ``root``, innermost first, each line once."""
    out: dict[tuple[str, int], Suspect] = {}
    for f in failures:
        for fr in reversed(f.frames):
            rel = fr.path.removeprefix("./")
            if is_test_path(rel) or not (root / rel).is_file() or fr.line not in code_lines(root, rel):
                continue
            out.setdefault((rel, fr.line), Suspect(rel, fr.line, 1.0, "traceback"))
    return list(out.values())


def context_name(test_id: str) -> str:
    """A pytest id (``tests/test_m.py::TestA::test_b[1]``) as coverage's test_function context
    (``tests.test_m.TestA.test_b``)."""
    path, *rest = test_id.split("::")
    module = path.removesuffix(".py").replace("/", ".")
    return ".".join([module, *(r.split("[")[0] for r in rest)])


def spectrum(scratch: Path, timeout_s: float) -> dict[str, dict[int, set[str]]]:
    """Per-test line coverage of the suite run in ``scratch`` (a throwaway copy: the rc and data files are
    written there): ``{relative path: {line: {test context, ...}}}``."""
    from coverage import CoverageData

    (scratch / RCFILE).write_text(RC_TEXT, encoding="utf-8")
    prefix = ("python", "-m", "coverage", "run", f"--rcfile={RCFILE}", "-m", "pytest")
    ws = Workspace(scratch, allowed_commands=(prefix,), command_timeout_s=timeout_s)
    ws.run_tests([*BASE_ARGS, *plugin_args()])
    data_path = scratch / DATA_FILE
    if not data_path.is_file():
        return {}
    data = CoverageData(basename=str(data_path))
    data.read()
    out: dict[str, dict[int, set[str]]] = {}
    base = str(scratch.resolve()) + os.sep
    for name in data.measured_files():
        if not name.startswith(base):
            continue
        rel = name[len(base):].replace(os.sep, "/")
        by_line = data.contexts_by_lineno(name)
        out[rel] = {ln: {c for c in ctxs if c} for ln, ctxs in by_line.items()}
    return out


def ochiai(cov: dict[str, dict[int, set[str]]], failing: set[str], root: Path) -> list[Suspect]:
    """Lines of non-test files ranked by Ochiai (score > 0 only), best first."""
    total_failed = len(failing)
    if not total_failed:
        return []
    out = []
    for rel, by_line in cov.items():
        if is_test_path(rel):
            continue
        allowed = code_lines(root, rel)
        for ln, ctxs in by_line.items():
            ef = len(ctxs & failing)
            if not ef or ln not in allowed:
                continue
            ep = len(ctxs - failing)
            out.append(Suspect(rel, ln, ef / math.sqrt(total_failed * (ef + ep)), "ochiai"))
    out.sort(key=lambda s: (-s.score, s.path, -s.line))  # ties: later lines first (a return after its inputs)
    return out


def rank(root: Path, failures: list[Failure], cov: dict[str, dict[int, set[str]]] | None) -> list[Suspect]:
    """Frames first, then Ochiai's lines not already named by a frame."""
    first = from_frames(root, failures)
    seen = {(s.path, s.line) for s in first}
    rest = ochiai(cov or {}, {context_name(f.test_id) for f in failures}, root)
    return first + [s for s in rest if (s.path, s.line) not in seen]
