"""Generated paths (depth, length, ``..``, NUL, symlinks, case, surrogates, control paths) sent to every file tool:
each call raises ``WorkspaceError`` (``apply_edits``: or ``EditError``, its documented error for an edit text it
cannot parse) or succeeds inside the workspace; no other exception type, nothing written outside the workspace and
nothing written to a control path."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from agentkit.tools.workspace import Workspace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit.errors import EditError, WorkspaceError

COMPONENTS = st.one_of(
    st.sampled_from(["..", ".", "", "a", "b.txt", ".git", ".GIT", "hooks", "config", "x.pth", "sitecustomize.py",
                     ".venv", "venv", "pyvenv.cfg", "HEAD", "objects", "out", "in", "loop", "up", "README.md",
                     "\x00", "\udc80", "ä", "A" * 300, "~", "*", "**"]),
    st.text(min_size=1, max_size=12),
)
PATHS = st.one_of(
    st.lists(COMPONENTS, min_size=1, max_size=8).map("/".join),
    st.builds(lambda k, tail: "d/" * k + tail, st.integers(0, 1100), st.sampled_from(["x", "x.pth", "../x"])),
    st.builds(lambda p: "/" + p, st.text(max_size=20)),
    st.text(max_size=40),
)


def _tree(path: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            full = Path(dirpath) / name
            out[str(full.relative_to(path))] = full.read_bytes() if not full.is_symlink() else b"->"
    return out


def _make_world() -> tuple[Path, Path]:
    base = Path(tempfile.mkdtemp(prefix="agentkit-fuzz-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)  # the module's world, removed when the run ends
    outside, root = base / "outside", base / "ws"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".venv").mkdir()
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / "in").mkdir()
    (root / "README.md").write_text("hello\nneedle\n")
    (root / "out").symlink_to(outside)
    (root / "up").symlink_to("..")
    (root / "loop").symlink_to("loop")
    (root / "in" / "gitlink").symlink_to("../.git")
    return root, outside


ROOT, OUTSIDE = _make_world()
OUTSIDE_BEFORE = _tree(OUTSIDE)
CONTROL_BEFORE = {name: _tree(ROOT / name) for name in (".git", ".venv")}
WS = Workspace(ROOT, isolation="none", max_file_bytes=10_000)


def _calls(path: str) -> list:
    edit = f"{path}\n<<<<<<< SEARCH\nhello\n=======\nhi\n>>>>>>> REPLACE\n"
    return [lambda: WS.write_file(path, "x = 1\n"), lambda: WS.read_file(path), lambda: WS.list_files(path),
            lambda: WS.list_files(".", path), lambda: WS.search_text("needle", path), lambda: WS.apply_edits(edit),
            lambda: WS.resolve(path)]  # fmt: skip


@settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(PATHS)
def test_every_file_tool_raises_workspace_error_or_stays_inside(path):
    calls = _calls(path)
    for call in calls:
        try:
            result = call()
        except (WorkspaceError, EditError) as err:
            assert isinstance(err, WorkspaceError) or call is calls[5], (path, err)
            continue
        if isinstance(result, Path):
            assert result == ROOT or ROOT in result.parents, (path, result)
    assert _tree(OUTSIDE) == OUTSIDE_BEFORE
    assert {name: _tree(ROOT / name) for name in (".git", ".venv")} == CONTROL_BEFORE
