"""The file tools under a symlink-swap race (issue 36): a directory swapped for a symlink to an outside directory in
a tight loop by another process is never followed (0 outside reads, listings or writes), and every failure is typed;
plus the typed errors for a symlink loop and for arguments of the wrong type."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from agentkit.tools.workspace import Workspace

from agentkit.errors import WorkspaceError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "evals"))
import race_workspace


def test_symlink_swap_race_never_reaches_outside():
    result = race_workspace.race(seconds=3)
    assert result["swaps"] > 100 and result["calls"] > 50, result  # the race did run
    leaks = {k: v for k, v in result.items() if k.startswith("outside_")}
    assert leaks and not any(leaks.values()), result
    assert result["untyped_errors"] == 0, result
    assert result["typed_errors"] > 0 and result["ok"] > 0, result  # both sides of the swap were seen


def test_the_race_harness_catches_a_leak(tmp_path):
    """The harness counts what an unsafe implementation leaks (so the test above can fail): a Workspace whose
    read_file follows the swapped symlink by path."""
    impl = tmp_path / "unsafe_workspace.py"
    impl.write_text(
        "from pathlib import Path\n\n\nclass Workspace:\n"
        "    def __init__(self, root):\n        self.root = Path(root)\n"
        "    def read_file(self, path):\n        return (self.root / path).read_text()\n"
        "    def write_file(self, path, content):\n        (self.root / path).write_text(content)\n"
        "    def list_files(self, subdir):\n        return [p.name for p in (self.root / subdir).iterdir()]\n"
        "    def search_text(self, regex, glob):\n        return []\n"
        "    def apply_edits(self, text):\n        return ''\n")
    result = race_workspace.race(seconds=1.5, impl=str(impl))
    assert result["outside_reads"] + result["outside_writes"] + result["outside_lists"] > 0, result


def test_symlink_loop_is_a_typed_error(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "self").symlink_to("self/x")
    ws = Workspace(tmp_path)
    for call in (lambda: ws.read_file("a"), lambda: ws.read_file("self"), lambda: ws.write_file("a/new.txt", "x"),
                 lambda: ws.list_files("b"), lambda: ws.resolve("a")):
        with pytest.raises(WorkspaceError, match="symlink loop"):
            call()
    assert ws.list_files() == []  # the loops are skipped, not an error, in a listing


def test_symlinks_inside_still_followed(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f.txt").write_text("hi\n")
    (tmp_path / "alias").symlink_to("real")
    (tmp_path / "abs").symlink_to(tmp_path / "real", target_is_directory=True)
    (tmp_path / "real" / "up").symlink_to("../real/f.txt")
    ws = Workspace(tmp_path)
    assert ws.read_file("alias/f.txt") == ws.read_file("abs/f.txt") == ws.read_file("real/up") == "hi\n"
    assert ws.write_file("alias/new.txt", "x\n").startswith("wrote real/new.txt")
    (tmp_path / "real" / "esc").symlink_to("../../")
    with pytest.raises(WorkspaceError, match="outside the workspace root"):
        ws.read_file("real/esc/etc/passwd")


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", ("a.txt", "1")),
        ("read_file", ("a.txt", 1, "2")),
        ("read_file", ("a.txt", True)),
        ("read_file", ("a.txt", None, None, "yes")),
        ("read_file", (["a.txt"],)),
        ("write_file", ("b.txt", 42)),
        ("list_files", (".", 3)),
        ("search_text", ("x", "**/*", "5")),
        ("search_text", (None,)),
        ("apply_edits", ({"path": "a.txt"},)),
        ("run_tests", ("-q",)),
    ],
)
def test_bad_argument_types_are_typed_errors(tmp_path, tool, args):
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    with pytest.raises(WorkspaceError, match="must be|invalid"):
        getattr(Workspace(tmp_path), tool)(*args)
