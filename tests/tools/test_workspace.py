"""Workspace tools: confinement (paths, symlinks, sizes, commands, time) and normal use on a toy repository."""

from __future__ import annotations

import inspect
import os
import time
import typing
from pathlib import Path

import pytest
from agentkit.tools.workspace import Workspace, workspace_tools

from agentkit.errors import EditError, UserError, WorkspaceError

APP = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
TESTS = "from src.app import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_sub():\n    assert sub(2, 3) == -1\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / ".git").mkdir()
    (root / "src" / "__init__.py").write_text("")
    (root / "src" / "app.py").write_text(APP)
    (root / "tests" / "test_app.py").write_text(TESTS)
    (root / "README.md").write_text("# Toy\n\nAdds numbers.\n")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "logo.bin").write_bytes(b"\x89PNG\x00\x01\x02")
    (tmp_path / "secret.txt").write_text("top secret\n")
    return root


@pytest.fixture
def ws(repo: Path) -> Workspace:
    return Workspace(repo, command_timeout_s=60)


# ---------------------------------------------------------------- normal use


def test_list_files(ws):
    files = ws.list_files()
    assert files == ["README.md", "logo.bin", "src/__init__.py", "src/app.py", "tests/test_app.py"]  # no .git
    assert ws.list_files(pattern="*.py") == ["src/__init__.py", "src/app.py", "tests/test_app.py"]
    assert ws.list_files("src", "app.*") == ["src/app.py"]
    assert ws.list_files(".", "tests/*.py") == ["tests/test_app.py"]
    assert ws.list_files(".", "**/*.md") == ["README.md"]


def test_list_files_is_bounded(repo):
    for i in range(30):
        (repo / f"f{i:02d}.txt").write_text("x")
    out = Workspace(repo, max_output_chars=100).list_files(pattern="*.txt")
    assert len(out) < 30 and out[-1].startswith("... ") and "more files not shown" in out[-1]


def test_read_file(ws):
    assert ws.read_file("src/app.py") == APP
    assert ws.read_file("src/app.py", start_line=5, end_line=6) == "def sub(a, b):\n    return a - b\n"
    assert ws.read_file("src/app.py", 1, 2, line_numbers=True) == "1\tdef add(a, b):\n2\t    return a + b\n"
    assert ws.read_file("./src/../src/app.py", end_line=1) == "def add(a, b):\n"  # normalised, still inside
    with pytest.raises(WorkspaceError, match="bad line range"):
        ws.read_file("src/app.py", start_line=50)
    with pytest.raises(WorkspaceError, match="no such file"):
        ws.read_file("src/missing.py")
    with pytest.raises(WorkspaceError, match="binary"):
        ws.read_file("logo.bin")


def test_read_file_output_is_bounded(repo):
    (repo / "long.txt").write_text("".join(f"line {i}\n" for i in range(2000)))
    out = Workspace(repo, max_output_chars=300).read_file("long.txt")
    assert len(out) < 500 and "start_line=" in out


def test_search_text(ws):
    assert ws.search_text(r"def \w+\(", "src/**") == ["src/app.py:1: def add(a, b):", "src/app.py:5: def sub(a, b):"]
    assert len(ws.search_text(r"def \w+\(")) == 4
    assert ws.search_text("numbers", path_glob="*.md") == ["README.md:3: Adds numbers."]
    assert ws.search_text("refs/heads") == []  # .git is skipped
    capped = ws.search_text("a", max_matches=2)
    assert len(capped) == 3 and "more matches not shown" in capped[-1]
    with pytest.raises(WorkspaceError, match="invalid regex"):
        ws.search_text("(")


def test_write_file(ws, repo):
    assert ws.write_file("src/new/mod.py", "X = 1\n").startswith("wrote src/new/mod.py")
    assert (repo / "src" / "new" / "mod.py").read_text() == "X = 1\n"
    with pytest.raises(WorkspaceError, match="already exists"):
        ws.write_file("src/app.py", "oops\n")
    assert (repo / "src" / "app.py").read_text() == APP


def test_an_edit_that_changes_nothing_is_an_error(ws, repo):
    same = "src/app.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a - b\n>>>>>>> REPLACE\n"
    with pytest.raises(EditError, match="changes nothing") as e:
        ws.apply_edits(same)
    assert e.value.path == "src/app.py"
    assert (repo / "src" / "app.py").read_text() == APP


def test_apply_edits_and_run_tests(ws, repo):
    assert ws.run_tests(["-q", "-p", "no:cacheprovider"])["exit_code"] == 0
    msg = ws.apply_edits(
        "I will break sub:\n\nsrc/app.py\n```python\n<<<<<<< SEARCH\n    return a - b\n=======\n    return b - a\n"
        ">>>>>>> REPLACE\n```\n"
    )
    assert "changed: src/app.py" in msg
    assert (repo / "src" / "app.py").read_text() == APP.replace("a - b", "b - a")
    result = ws.run_tests(["-q", "-p", "no:cacheprovider", "tests/test_app.py"])
    assert result["exit_code"] == 1 and not result["timed_out"]
    assert "test_sub" in result["output"] and "1 failed, 1 passed" in result["output"]


def test_apply_edits_is_all_or_nothing(ws, repo):
    text = (
        "src/app.py\n<<<<<<< SEARCH\n    return a + b\n=======\n    return 0\n>>>>>>> REPLACE\n\n"
        "README.md\n<<<<<<< SEARCH\nNo such line.\n=======\nx\n>>>>>>> REPLACE\n"
    )
    with pytest.raises(EditError, match=r"README\.md: SEARCH text not found[\s\S]*No such line") as info:
        ws.apply_edits(text)
    assert info.value.path == "README.md" and isinstance(info.value, UserError)
    assert (repo / "src" / "app.py").read_text() == APP
    with pytest.raises(EditError, match="no edit block"):
        ws.apply_edits("just prose")
    with pytest.raises(WorkspaceError, match="no such file"):
        ws.apply_edits("src/nope.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n")


def test_apply_edits_keeps_crlf_and_missing_final_newline(ws, repo):
    (repo / "win.txt").write_bytes(b"one\r\ntwo\r\nthree")
    ws.apply_edits("win.txt\n<<<<<<< SEARCH\ntwo\r\n=======\n2\r\n>>>>>>> REPLACE\n")
    ws.apply_edits("win.txt\n<<<<<<< SEARCH\nthree\n=======\n3\n>>>>>>> REPLACE\n")
    assert (repo / "win.txt").read_bytes() == b"one\r\n2\r\n3"


def test_edit_template_round_trip(ws, repo):
    tpl = ws.edit_template(["src/app.py", "./README.md"], max_edits=2)
    assert tpl.meta["paths"] == ["src/app.py", "README.md"]
    text = "README.md\n<<<<<<< SEARCH\nAdds numbers.\n=======\nAdds and subtracts numbers.\n>>>>>>> REPLACE\n"
    assert tpl.matches(text)
    ws.apply_edits(text)
    assert "subtracts" in (repo / "README.md").read_text()


def test_tools_have_simple_schemas(ws):
    simple = {str, int, bool, list[str], int | None, list[str] | None}
    tools = workspace_tools(ws)
    assert [t.__name__ for t in tools] == [
        "list_files", "read_file", "search_text", "write_file", "apply_edits", "run_tests",
    ]  # fmt: skip
    for tool in tools:
        hints = typing.get_type_hints(tool)
        hints.pop("return")
        assert hints and all(h in simple for h in hints.values()), (tool.__name__, hints)
        doc = inspect.getdoc(tool)
        assert "Args:" in doc and all(f"{name}:" in doc for name in inspect.signature(tool).parameters)


# ---------------------------------------------------------------- confinement


@pytest.mark.parametrize("path", ["../secret.txt", "src/../../secret.txt", "..", "a/../../secret.txt"])
def test_parent_escapes_refused(ws, path):
    for call in (ws.read_file, ws.list_files, lambda p: ws.write_file(p, "x")):
        with pytest.raises(WorkspaceError, match="escapes the workspace") as info:
            call(path)
        assert info.value.path == path


def test_absolute_paths_refused(ws, repo):
    for path in ("/etc/passwd", str(repo / "src" / "app.py")):
        with pytest.raises(WorkspaceError, match="absolute paths are not allowed"):
            ws.read_file(path)
    with pytest.raises(WorkspaceError, match="absolute"):
        ws.write_file("/tmp/agentkit-should-not-exist.txt", "x")
    with pytest.raises(WorkspaceError, match="absolute"):
        ws.apply_edits("/etc/hosts\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n")
    with pytest.raises(WorkspaceError):
        ws.read_file("")


def test_symlinks_out_refused(ws, repo):
    outside = repo.parent
    (repo / "leak.txt").symlink_to(outside / "secret.txt")
    (repo / "outdir").symlink_to(outside, target_is_directory=True)
    (repo / "alias.py").symlink_to(repo / "src" / "app.py")  # inside: fine
    for call in (
        lambda: ws.read_file("leak.txt"),
        lambda: ws.read_file("outdir/secret.txt"),
        lambda: ws.list_files("outdir"),
        lambda: ws.write_file("outdir/new.txt", "x"),
        lambda: ws.write_file("leak.txt", "x"),
        lambda: ws.apply_edits("leak.txt\n<<<<<<< SEARCH\ntop secret\n=======\npwned\n>>>>>>> REPLACE\n"),
    ):
        with pytest.raises(WorkspaceError, match="outside the workspace root"):
            call()
    assert (outside / "secret.txt").read_text() == "top secret\n" and not (outside / "new.txt").exists()
    assert "leak.txt" not in ws.list_files() and "alias.py" in ws.list_files()
    assert ws.search_text("secret") == []
    assert ws.read_file("alias.py") == APP


def test_huge_file_refused(repo):
    ws = Workspace(repo, max_file_bytes=1_000)
    (repo / "big.txt").write_text("needle\n" * 1_000)
    with pytest.raises(WorkspaceError, match="over the 1000-byte limit"):
        ws.read_file("big.txt")
    with pytest.raises(WorkspaceError, match="over the 1000-byte limit"):
        ws.apply_edits("big.txt\n<<<<<<< SEARCH\nneedle\n=======\nx\n>>>>>>> REPLACE\n")
    with pytest.raises(WorkspaceError, match="over the 1000-byte limit"):
        ws.write_file("new.txt", "x" * 2_000)
    assert ws.search_text("needle") == []  # too big to search
    with pytest.raises(WorkspaceError, match="would exceed"):
        ws.apply_edits("README.md\n<<<<<<< SEARCH\n# Toy\n=======\n" + "y\n" * 600 + ">>>>>>> REPLACE\n")


def test_commands_not_allow_listed_refused(ws, repo):
    for argv in (["rm", "-rf", "."], ["python", "-c", "print(1)"], ["python", "-m"], ["sh", "-c", "python -m pytest"]):
        with pytest.raises(WorkspaceError, match="is not allowed"):
            ws.run_command(argv)
    for args in (["/etc"], ["--rootdir=/"], ["../elsewhere"], ["--basetemp=../x"]):
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            ws.run_tests(args)
    assert (repo / "src" / "app.py").exists()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_hanging_command_is_killed_with_its_children(repo):
    ws = Workspace(repo, allowed_commands=(("python", "-c"),), command_timeout_s=2)
    code = "import subprocess, time; p = subprocess.Popen(['sleep', '60']); open('child.pid', 'w').write(str(p.pid)); print('started', flush=True); time.sleep(60)"
    t0 = time.monotonic()
    result = ws.run_command(["python", "-c", code])
    assert time.monotonic() - t0 < 20
    assert result["timed_out"] and result["exit_code"] < 0
    assert "started" in result["output"] and "timed out after 2 s" in result["output"]
    if result["isolation"].startswith("none"):  # inside a PID namespace the pid means nothing out here
        pid = int((repo / "child.pid").read_text())
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid)


def test_hanging_test_bounded_by_timeout(repo):
    (repo / "tests" / "test_hang.py").write_text("import time\n\n\ndef test_hang():\n    time.sleep(120)\n")
    ws = Workspace(repo, command_timeout_s=8)
    t0 = time.monotonic()
    result = ws.run_tests(["-q", "-p", "no:cacheprovider", "tests/test_hang.py"])
    assert time.monotonic() - t0 < 30
    assert result["timed_out"] and result["exit_code"] != 0


def test_output_truncated(repo):
    ws = Workspace(repo, allowed_commands=(("python", "-c"),), max_output_chars=400)
    result = ws.run_command(["python", "-c", "print('START'); [print('x' * 50) for _ in range(5000)]; print('END')"])
    assert result["exit_code"] == 0 and not result["timed_out"]
    out = result["output"]
    assert len(out) < 600 and out.startswith("START") and out.rstrip().endswith("END") and "truncated" in out


def test_bad_root(tmp_path):
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace(tmp_path / "missing")
    with pytest.raises(WorkspaceError):
        Workspace(tmp_path, allowed_commands=())


def test_cwd_is_root(repo):
    ws = Workspace(repo, allowed_commands=(("python", "-c"),))
    out = ws.run_command(["python", "-c", "import os; print(os.getcwd())"])["output"]
    assert Path(out.strip()).resolve() == repo.resolve()
    assert os.getcwd() != str(repo)
