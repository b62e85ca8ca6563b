"""The escapes a probe found in the sandbox's fallback and the file tools, one test each: in every isolation mode but
an explicit ``none``, no test run and no file-tool call changes ``.git/config``, a host file, a virtualenv or a
nested repository; with no sandbox that holds, ``run_tests`` refuses with a typed error naming bubblewrap."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from agentkit.tools import sandbox
from agentkit.tools.sandbox import bwrap_ok, unshare_ok
from agentkit.tools.workspace import Workspace
from sandbox_nonroot import NEEDS_ROOT, run_as_nobody

from agentkit.errors import SandboxUnavailableError, WorkspaceError

AVAILABLE = {"bwrap": bwrap_ok(), "unshare": unshare_ok(), "none": True}
Q = ["-q", "-p", "no:cacheprovider", "-s"]
NEEDS_GIT = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def _modes(*modes: str) -> list:
    return [pytest.param(m, marks=pytest.mark.skipif(not AVAILABLE[m], reason=f"{m} unavailable here")) for m in modes]


def _git(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], check=check, capture_output=True, text=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    return root


def _write_test(root: Path, body: str) -> None:
    lines = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    (root / "tests" / "test_probe.py").write_text(f"import os, subprocess, sys\n\n\ndef test_probe():\n{lines}")


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# the probe's critical case: umount the read-only .git, plant fsmonitor, remount / read-write, write a host file
ESCAPE = """
def sh(*argv):
    r = subprocess.run(list(argv), capture_output=True, text=True)
    print("RAN", argv, r.returncode, r.stderr.strip()[:120])
sh("umount", os.getcwd() + "/.git")
try:
    with open(".git/config", "a") as f:
        f.write('[core]\\n\\tfsmonitor = "id > {marker}; false"\\n')
    print("PLANTED .git/config")
except OSError as err:
    print("REFUSED .git/config", err)
sh("mount", "-o", "remount,bind,rw", "/")
sh("unshare", "-Urm", "sh", "-c", "umount {ws}/.git; echo x >> {ws}/.git/config")
for target in ({host!r}, {outside!r}):
    try:
        open(target, "w").write("escaped")
        print("WROTE", target)
    except OSError as err:
        print("REFUSED", target, err)
"""


@NEEDS_GIT
@pytest.mark.parametrize("mode", _modes("bwrap", "unshare"))
def test_umount_git_plant_fsmonitor_and_remount_root_are_refused(repo, tmp_path, mode):
    _git("init", "-q", str(repo))
    marker, outside = tmp_path / "pwned.txt", tmp_path / "outside.txt"
    host = Path.home() / f".agentkit-escape-probe-{os.getpid()}"
    _write_test(repo, ESCAPE.format(marker=marker, ws=repo, host=str(host), outside=str(outside)))
    before = _tree(repo / ".git")
    try:
        res = Workspace(repo, isolation=mode).run_tests(Q)
        assert not host.exists() and not outside.exists()
    finally:
        host.unlink(missing_ok=True)
    assert res["exit_code"] == 0, res["output"]
    assert "PLANTED" not in res["output"], res["output"]  # (bwrap's writes outside land in its private tmpfs)
    assert _tree(repo / ".git") == before and res["control_paths"] == []
    _git("-C", str(repo), "status", check=False)
    assert not marker.exists()


@pytest.mark.parametrize("mode", _modes("bwrap", "unshare"))
def test_the_test_process_holds_no_privilege(repo, mode):
    _write_test(repo, """
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
    assert int(status[key], 16) == 0, (key, status[key])
assert status["NoNewPrivs"].strip() == "1" and status["Seccomp"].strip() == "2", status
assert subprocess.run(["unshare", "-Ur", "true"], capture_output=True).returncode != 0
""")
    res = Workspace(repo, isolation=mode).run_tests(Q)
    assert res["exit_code"] == 0, res["output"]


@NEEDS_GIT
@pytest.mark.parametrize("mode", _modes("bwrap", "unshare", "none"))
def test_a_nested_repository_planted_by_a_test_is_removed(repo, tmp_path, mode):
    marker = tmp_path / "pwned.txt"
    _write_test(repo, f"""
subprocess.run(["git", "init", "-q", "sub"], check=True)
with open("sub/.git/config", "a") as f:
    f.write('[core]\\n\\tfsmonitor = "id > {marker}; false"\\n')
os.makedirs("bare/objects"); os.makedirs("bare/refs")
open("bare/HEAD", "w").write("ref: refs/heads/main\\n")
open("bare/config", "w").write('[core]\\n\\tworktree = .\\n\\tfsmonitor = "id > {marker}; false"\\n')
""")
    res = Workspace(repo, isolation=mode).run_tests(Q)
    assert res["exit_code"] == 0, res["output"]
    assert not (repo / "sub" / ".git").exists() and not (repo / "bare").exists()
    assert "removed sub/.git (created by the run)" in res["control_paths"]
    assert "removed bare (created by the run)" in res["control_paths"]
    _git("-C", str(repo / "sub"), "status", check=False)
    assert not marker.exists()


@NEEDS_GIT
@pytest.mark.parametrize("mode", _modes("bwrap", "unshare", "none"))
def test_an_existing_nested_repository_keeps_its_config(repo, mode):
    _git("init", "-q", str(repo / "sub"))
    before = _tree(repo / "sub" / ".git")
    _write_test(repo, """
try:
    open("sub/.git/config", "a").write("[core]\\n\\tfsmonitor = touch /tmp/x\\n")
    print("PLANTED")
except OSError:
    print("REFUSED")
""")
    res = Workspace(repo, isolation=mode).run_tests(Q)
    assert res["exit_code"] == 0, res["output"]
    assert _tree(repo / "sub" / ".git") == before
    if mode == "none":
        assert res["control_paths"] == ["restored sub/.git/config (changed by the run)"]
    else:
        assert "REFUSED" in res["output"] and res["control_paths"] == []


@pytest.mark.parametrize("mode", _modes("bwrap", "unshare", "none"))
def test_start_up_files_written_by_a_test_are_removed_or_refused(repo, mode):
    (repo / ".venv" / "lib" / "site-packages").mkdir(parents=True)
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    _write_test(repo, """
for path in (".venv/lib/site-packages/zz.pth", "sitecustomize.py", "pkg/usercustomize.py", "evil.pth"):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    try:
        open(path, "w").write("import os")
    except OSError:
        print("REFUSED", path)
""")
    res = Workspace(repo, isolation=mode).run_tests(Q)
    assert res["exit_code"] == 0, res["output"]
    for path in (".venv/lib/site-packages/zz.pth", "sitecustomize.py", "pkg/usercustomize.py", "evil.pth"):
        assert not (repo / path).exists(), path
    assert "removed sitecustomize.py (created by the run)" in res["control_paths"]
    if mode != "none":
        assert "REFUSED .venv/lib/site-packages/zz.pth" in res["output"]


@pytest.mark.parametrize("path", [
    ".venv/lib/python3.11/site-packages/zz.pth", "venv/bin/activate", ".hg/hgrc", ".svn/entries", "a/b/x.pth",
    "sitecustomize.py", "src/usercustomize.py", "env/lib/site.py", "sub/HEAD", "bare/objects/ab", "pyvenv.cfg",
    "sub/.git/config",
])
def test_the_file_tools_refuse_control_paths_and_create_nothing(repo, path):
    (repo / "env").mkdir()
    (repo / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (repo / "bare" / "refs").mkdir(parents=True)
    (repo / "bare" / "HEAD").write_text("ref: refs/heads/main\n")
    before = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*"))
    with pytest.raises(WorkspaceError, match="read-only to the workspace tools"):
        Workspace(repo, isolation="none").write_file(path, "import os\n")
    assert sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*")) == before


def test_a_write_through_a_symlink_into_git_creates_nothing(repo):
    (repo / ".git" / "hooks").mkdir(parents=True)
    (repo / "link").symlink_to(".git")
    with pytest.raises(WorkspaceError, match="read-only"):
        Workspace(repo, isolation="none").write_file("link/hooks/newdir/sub", "x")
    assert sorted(os.listdir(repo / ".git" / "hooks")) == []


def test_deep_paths_are_refused_and_walks_do_not_recurse(repo):
    ws = Workspace(repo, isolation="none")
    with pytest.raises(WorkspaceError, match="too deep"):
        ws.write_file("d/" * 1000 + "x", "x")
    assert not (repo / "d").exists()
    _deep_tree(repo, 1000, make=True)  # made behind the tools' back, as a test run could
    (repo / "top.txt").write_text("needle\n")
    try:
        listed = ws.list_files()
        assert "top.txt" in listed and listed[-1] == "... 1 directories deeper than 64 levels not walked"
        assert ws.search_text("needle") == ["top.txt:1: needle", listed[-1]]
    finally:
        _deep_tree(repo, 1000, make=False)


def _deep_tree(root: Path, depth: int, *, make: bool) -> None:
    """Make (or remove) ``root/d/d/.../d/x.txt`` by directory descriptors: no recursion, no long path strings."""
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
    for _ in range(depth):
        if make:
            os.mkdir("d", dir_fd=fds[-1])
        fd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1])
        if make:
            os.close(fds.pop())
        fds.append(fd)
    if make:
        os.close(os.open("x.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fds[-1]))
        os.close(fds.pop())
        return
    os.unlink("x.txt", dir_fd=fds[-1])
    while len(fds) > 1:
        os.close(fds.pop())
        os.rmdir("d", dir_fd=fds[-1])
    os.close(fds.pop())


def test_reading_a_directory_is_a_workspace_error(repo):
    with pytest.raises(WorkspaceError, match="a directory"):
        Workspace(repo, isolation="none").read_file("tests")


def test_no_sandbox_that_holds_is_a_typed_error_naming_bubblewrap(repo, monkeypatch):
    monkeypatch.setattr(sandbox, "bwrap_ok", lambda: False)
    monkeypatch.setattr(sandbox, "unshare_ok", lambda: False)
    ws = Workspace(repo)
    assert ws.isolation is None
    ws.write_file("notes.txt", "file tools still work\n")
    with pytest.raises(SandboxUnavailableError, match="install bubblewrap"):
        ws.run_tests(Q)
    with pytest.raises(SandboxUnavailableError, match="bwrap"):
        Workspace(repo, isolation="bwrap")
    _write_test(repo, "pass")
    res = Workspace(repo, isolation="none").run_tests(Q)
    assert res["exit_code"] == 0 and res["isolation"].startswith("none: NO isolation")


_AS_NOBODY = """
import json, sys
from agentkit.tools.workspace import Workspace
res = Workspace(sys.argv[1], isolation=sys.argv[2]).run_tests(["-q", "-p", "no:cacheprovider", "-s"])
print(json.dumps({k: res[k] for k in ("exit_code", "output", "control_paths")}))
"""


@NEEDS_ROOT
@NEEDS_GIT
@pytest.mark.parametrize("mode", _modes("bwrap", "unshare"))
def test_the_escape_is_refused_for_a_non_root_user(mode):
    def setup(repo: Path) -> None:
        _git("init", "-q", str(repo))
        work = repo.parent
        _write_test(repo, ESCAPE.format(marker=work / "pwned.txt", ws=repo, host=str(work / "host.txt"),
                                        outside=str(work / "outside.txt")))

    res, work = run_as_nobody(_AS_NOBODY, mode, setup)
    try:
        assert res["exit_code"] == 0, res["output"]
        assert "PLANTED" not in res["output"], res["output"]
        assert "fsmonitor" not in (work / "repo" / ".git" / "config").read_text()
        assert not (work / "host.txt").exists() and not (work / "outside.txt").exists()
    finally:
        shutil.rmtree(work, ignore_errors=True)


@NEEDS_GIT
def test_a_daemon_left_by_an_unisolated_run_is_killed(repo, tmp_path):
    """``isolation="none"``: a double-forked daemon that outlives the test would re-plant ``.git/config`` after the
    restore; the run's pids cgroup kills it (where no cgroup can be made, nothing can: the test skips)."""
    from agentkit.tools.limits import PidsCgroup

    probe = PidsCgroup(8)
    if probe.path is None:
        pytest.skip("no pids cgroup can be made here (not root, or no delegated cgroup v2 tree)")
    probe.remove()
    _git("init", "-q", str(repo))
    before = (repo / ".git" / "config").read_bytes()
    (repo / "daemon.py").write_text(
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        for _ in range(40):\n"
        "            time.sleep(0.1)\n"
        "            open('.git/config', 'a').write('[core]\\n\\tfsmonitor = touch pwned\\n')\n"
        "    os._exit(0)\n"
        "os.wait()\n")  # fmt: skip
    ws = Workspace(repo, allowed_commands=(("python", "daemon.py"),), isolation="none")
    res = ws.run_command(["python", "daemon.py"])
    assert res["exit_code"] == 0, res["output"]
    import time

    time.sleep(1.5)
    assert (repo / ".git" / "config").read_bytes() == before
