"""Running a repository's tests and reading pytest's report: which tests failed, their assertion (``E`` lines,
with the expected and actual values pytest prints) and their traceback frames.

The tests run through ``Workspace.run_tests`` (the workspace's sandbox and time limit) with
``--tb=short -rfE``: each failure's section lists its frames as ``path:line: in function`` and the summary lists
``FAILED id - message`` lines.
"""

from __future__ import annotations

import ast
import contextlib
import re
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Protocol

_SECTION = re.compile(r"^_{3,} (?:ERROR collecting )?(.+?) _{3,}$")
_FRAME = re.compile(r"^(?P<path>[^\s:][^:]*\.py):(?P<line>\d+): (?:in (?P<func>\S+)|(?P<exc>.*))$")
_SUMMARY = re.compile(r"^(?P<what>FAILED|ERROR) (?P<id>\S+)(?: - (?P<msg>.*))?$")
_COUNTS = re.compile(r"(\d+) (passed|failed|errors?)")
_ASSERT = re.compile(r"^(?:AssertionError: )?assert (?P<expr>.+)$")
_WHERE = re.compile(r"^\+\s+where (?P<value>.+?) = ")


class TestRunner(Protocol):
    """What the repair loop needs of a workspace: run pytest with extra arguments (``Workspace.run_tests``)."""

    def run_tests(self, args: list[str] | None = None) -> dict[str, object]: ...


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    func: str


@dataclass
class Failure:
    """One failing (or erroring) test: its pytest id, the ``E`` lines of its report and its traceback frames,
    outermost first."""

    test_id: str
    message: str = ""
    frames: list[Frame] = field(default_factory=list)


@dataclass
class TestReport:
    exit_code: int
    failures: list[Failure]
    passed: int
    timed_out: bool
    output: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def plugin_args() -> list[str]:
    """``-p no:NAME`` for every pytest plugin installed as an entry point. Autoloaded plugins (hypothesis,
    schemathesis, anyio, asyncio in agentkit's own venv) took pytest's start from 0.16 s to 1.4 s per run here;
    the repair loop runs pytest once per candidate."""
    names = sorted({ep.name for ep in entry_points(group="pytest11")})
    return [a for n in names for a in ("-p", f"no:{n}")]


BASE_ARGS = ["-q", "--tb=short", "-rfE", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"]


def run_tests(ws: TestRunner, test_ids: list[str] | None = None, *, plugins: bool = False,
              stop_first: bool = False) -> TestReport:
    """Run ``test_ids`` (all tests when None) in ``ws`` and parse the report."""
    args = [*BASE_ARGS, *([] if plugins else plugin_args()), *(["-x"] if stop_first else []), *(test_ids or [])]
    res = ws.run_tests(args)
    output = str(res["output"])
    return TestReport(int(res["exit_code"]), parse_failures(output), _count(output, "passed"),
                      bool(res.get("timed_out")), output)


def _count(output: str, what: str) -> int:
    tail = output.strip().splitlines()[-1:] or [""]
    return sum(int(n) for n, w in _COUNTS.findall(tail[0]) if w.startswith(what))


def parse_failures(output: str) -> list[Failure]:
    """The failures of a ``--tb=short -rfE`` pytest report, in report order."""
    sections: list[tuple[str, list[str]]] = []
    for line in output.splitlines():
        m = _SECTION.match(line)
        if m:
            sections.append((m.group(1), []))
        elif sections:
            sections[-1][1].append(line)
    ids = [m.group("id") for m in map(_SUMMARY.match, output.splitlines()) if m]
    msgs = {m.group("id"): m.group("msg") or "" for m in map(_SUMMARY.match, output.splitlines()) if m}
    out: list[Failure] = []
    for i, test_id in enumerate(ids):
        body = _section_for(test_id, sections, i)
        frames = [Frame(m.group("path"), int(m.group("line")), m.group("func") or "")
                  for m in map(_FRAME.match, body) if m]
        e_lines = [ln[1:].strip() for ln in body if ln.startswith("E ")]
        out.append(Failure(test_id, "\n".join(e_lines[:12]) or msgs[test_id], frames))
    return out


def _section_for(test_id: str, sections: list[tuple[str, list[str]]], i: int) -> list[str]:
    """The report section of ``test_id``: by name (``Class.test`` / ``test[param]`` / the file for a collection
    error), else the ``i``-th."""
    tail = test_id.split("::")[1:]
    name = ".".join(tail) if tail else test_id
    for title, body in sections:
        if title == name or title == test_id:
            return body
    return sections[i][1] if i < len(sections) else []


def assertion_values(message: str) -> list[tuple[object, object]]:
    """(actual, expected) pairs from the ``assert left == right`` lines of a failure's ``E`` lines, where both
    sides are Python literals pytest printed in full. A ``+  where VALUE = call(...)`` line says which side was
    computed (the actual one); without it both orders are given, left as the actual first."""
    out: list[tuple[object, object]] = []
    lines = message.splitlines()
    wheres = {m.group("value").strip() for m in map(_WHERE.match, (ln.strip() for ln in lines)) if m}
    for line in lines:
        m = _ASSERT.match(line.strip())
        if m is None:
            continue
        sides = _literal_sides(m.group("expr"))
        if sides is None:
            continue
        (left, left_src), (right, right_src) = sides
        if right_src in wheres and left_src not in wheres:
            out.append((right, left))
        elif left_src in wheres:
            out.append((left, right))
        else:
            out += [(left, right), (right, left)]
    return list({repr(pair): pair for pair in out}.values())


def _literal_sides(expr: str) -> tuple[tuple[object, str], tuple[object, str]] | None:
    """The two literal sides of ``expr`` when it is ``left == right``, each with its source text."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)):
        return None
    sides = []
    for side in (node.left, node.comparators[0]):
        with contextlib.suppress(ValueError, SyntaxError, TypeError):
            sides.append((ast.literal_eval(side), ast.get_source_segment(expr, side) or ""))
    return (sides[0], sides[1]) if len(sides) == 2 else None
