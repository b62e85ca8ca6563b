"""What an edit may never write: merge-marker lines, runaway repeats and, when asked, test files and test data.

``EditGuard.check(rel, before, after)`` runs on every file the workspace's edit and write tools change, before
anything is written, and raises a ``WorkspaceError`` naming the file and the reason. It judges what the edit *adds*:
a file that already holds a ``=======`` heading keeps it, but an edit cannot add a line that starts with
``<<<<<<<``, ``=======`` or ``>>>>>>>``, nor the same line many more times than the file had it (a small model's
loop, e.g. a docstring repeated 14 times), nor leave a Python module that parsed unparsable (a short marker such as
``>>>>>>`` or a half-written line).

Test files are recognised by name (:func:`is_test_path`: ``test_*.py``, ``*_test.py``, ``conftest.py``, anything
under ``tests/``, ``test/``, ``fixtures/``, ``testdata/``); files the tests read are named by the caller
(``extra_protected``, e.g. from :func:`files_named_by_tests`). With ``protect_tests`` the guard refuses any edit to
them, so a repair cannot pass by changing what the tests check.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from agentkit.errors import WorkspaceError

MARKERS = ("<<<<<<<", "=======", ">>>>>>>")
TEST_DIRS = frozenset({"tests", "test", "testing", "fixtures", "testdata", "test_data"})
#: A line at least ``REPEAT_MIN_CHARS`` long (stripped) added ``REPEAT_LIMIT`` or more times is a runaway repeat.
REPEAT_LIMIT = 4
REPEAT_MIN_CHARS = 8
#: Any line with a letter or digit added this many times or more, however short, is one too.
REPEAT_LIMIT_SHORT = 32

_QUOTED = re.compile(r"""["']([\w./-]+\.[A-Za-z0-9]{1,8})["']""")


def is_test_path(rel: str) -> bool:
    """Whether workspace-relative ``rel`` is a test file by its name or folder."""
    p = PurePosixPath(rel)
    name = p.name
    if name == "conftest.py" or (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py"):
        return True
    return any(part in TEST_DIRS for part in p.parts[:-1])


def files_named_by_tests(files: Mapping[str, str]) -> set[str]:
    """The workspace files (keys of ``files``: path -> text) whose name is quoted in a test file's text: the data
    the tests read (``open("expected.txt")``, ``Path("data/cases.json")``), matched by path or by base name."""
    tests = [text for rel, text in files.items() if is_test_path(rel) and rel.endswith(".py")]
    quoted = {m.group(1) for text in tests for m in _QUOTED.finditer(text)}
    names = {PurePosixPath(q).name for q in quoted}
    return {rel for rel in files if not is_test_path(rel)
            and (rel in quoted or (PurePosixPath(rel).name in names and not rel.endswith(".py")))}


def added_markers(before: str, after: str) -> list[str]:
    """The merge-marker prefixes ``after`` has on more lines than ``before``."""
    def count(text: str, mark: str) -> int:
        return sum(1 for line in text.splitlines() if line.lstrip().startswith(mark))

    return [m for m in MARKERS if count(after, m) > count(before, m)]


def breaks_python(rel: str, before: str, after: str) -> str | None:
    """The syntax error a ``.py`` file that parsed before the edit has after it (None: it parses, or it did not
    parse before, or it is not Python): a stray marker or a half-written line never reaches a module that ran."""
    if not rel.endswith(".py"):
        return None
    try:
        ast.parse(before)
    except (SyntaxError, ValueError):
        return None
    try:
        ast.parse(after)
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None)
        return f"{type(e).__name__} at line {line}: {getattr(e, 'msg', e)}" if line else f"{type(e).__name__}: {e}"
    return None


def runaway_lines(before: str, after: str) -> list[str]:
    """Lines ``after`` repeats many more times than ``before`` did (see ``REPEAT_LIMIT``)."""
    old = Counter(line.strip() for line in before.splitlines())
    new = Counter(line.strip() for line in after.splitlines())
    out = []
    for line, n in new.items():
        added = n - old.get(line, 0)
        if not any(c.isalnum() for c in line):
            continue  # brackets, separators: data and code close blocks this way
        if added >= REPEAT_LIMIT_SHORT or (added >= REPEAT_LIMIT and len(line) >= REPEAT_MIN_CHARS):
            out.append(line)
    return out


@dataclass
class EditGuard:
    """The checks every write of the workspace goes through (see the module docstring)."""

    protect_tests: bool = False
    extra_protected: set[str] = field(default_factory=set)

    def protects(self, rel: str) -> bool:
        return self.protect_tests and (is_test_path(rel) or rel in self.extra_protected)

    def protect(self, rels: Iterable[str]) -> None:
        """Add files the tests read to the protected set."""
        self.extra_protected.update(rels)

    def check(self, rel: str, before: str, after: str) -> None:
        """Raise ``WorkspaceError`` when changing ``rel`` from ``before`` to ``after`` is refused."""
        if self.protects(rel):
            raise WorkspaceError(f"{rel!r} is a test file or test data: read-only for this task (fix the code "
                                 "under test instead)", rel)
        marks = added_markers(before, after)
        if marks:
            raise WorkspaceError(f"{rel!r}: the edit adds merge-marker lines ({', '.join(marks)}); write only the "
                                 "code itself", rel)
        repeats = runaway_lines(before, after)
        if repeats:
            raise WorkspaceError(f"{rel!r}: the edit repeats a line many times ({repeats[0][:60]!r}): a runaway "
                                 "repeat, refused", rel)
        broken = breaks_python(rel, before, after)
        if broken:
            raise WorkspaceError(f"{rel!r}: the edit leaves the module unparsable ({broken}); the file parsed "
                                 "before it, so the edit is refused", rel)
