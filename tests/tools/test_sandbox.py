"""run_tests' sandbox (issue 36): the probe's reproducers as tests. A test planted by the agent cannot change
``.git/`` (config fsmonitor, hooks) so that a host ``git`` runs its code, cannot reach a host Unix socket or read an
outside file, and is stopped with a clear result by the memory, process, file-size, /tmp and CPU limits."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from agentkit.tools.limits import MiB, SandboxLimits
from agentkit.tools.sandbox import bwrap_ok, unshare_ok
from agentkit.tools.seccomp import sandbox_filter
from agentkit.tools.workspace import Workspace
from sandbox_nonroot import NEEDS_ROOT, run_as_nobody

from agentkit.errors import WorkspaceError

AVAILABLE = {"bwrap": bwrap_ok(), "unshare": unshare_ok(), "none": True}
NEEDS_BWRAP = pytest.mark.skipif(not AVAILABLE["bwrap"], reason="bubblewrap (bwrap) not installed or cannot run here")
Q = ["-q", "-p", "no:cacheprovider"]


def _modes(*modes: str) -> list:
    return [pytest.param(m, marks=pytest.mark.skipif(not AVAILABLE[m], reason=f"{m} unavailable here")) for m in modes]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    return root


def _git_repo(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "config", "user.email", "t@example.com"], check=True)


def _write_test(root: Path, body: str, name: str = "test_probe.py") -> None:
    lines = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    (root / "tests" / name).write_text(f"import os, socket, subprocess, sys\n\n\ndef test_probe():\n{lines}")


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
@pytest.mark.parametrize("mode", _modes("bwrap", "unshare", "none"))
def test_git_config_and_hook_plants_leave_git_unchanged(repo, tmp_path, mode):
    _git_repo(repo)
    marker = tmp_path / "pwned.txt"
    _write_test(repo, f"""
for path, text in ((".git/config", "[core]\\n\\tfsmonitor = echo PWNED > {marker}; false\\n"),
                   (".git/hooks/pre-commit", "#!/bin/sh\\necho PWNED > {marker}\\n")):
    try:
        with open(path, "a") as f:
            f.write(text)
        print("planted", path)
    except OSError as err:
        print("refused", path, err)
""")
    before = _tree(repo / ".git")
    res = Workspace(repo, isolation=mode).run_tests([*Q, "-s"])
    assert res["exit_code"] == 0, res["output"]
    assert _tree(repo / ".git") == before
    if mode == "none":  # nothing stopped the writes: they were undone after the run, and said so
        assert "restored .git/config (changed by the run)" in res["control_paths"], res["control_paths"]
    else:
        assert "refused .git/config" in res["output"] and "refused .git/hooks/pre-commit" in res["output"]
        assert res["control_paths"] == []
    subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, check=False)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], capture_output=True,
                   check=False)  # fmt: skip
    assert not marker.exists()


def test_a_git_dir_created_by_the_run_is_removed(repo):
    _write_test(repo, """
os.makedirs(".git/hooks")
open(".git/config", "w").write("[core]\\n\\tfsmonitor = touch /tmp/x\\n")
""")
    res = Workspace(repo).run_tests(Q)
    assert res["exit_code"] == 0, res["output"]
    assert not (repo / ".git").exists() and res["control_paths"] == ["removed .git (created by the run)"]


@pytest.mark.parametrize("mode", _modes("bwrap", "unshare"))
def test_venv_inside_the_workspace_is_read_only(repo, mode):
    (repo / ".venv" / "lib").mkdir(parents=True)
    _write_test(repo, """
try:
    open(".venv/lib/evil.pth", "w").write("import os")
    wrote = True
except OSError:
    wrote = False
assert not wrote
""")
    res = Workspace(repo, isolation=mode).run_tests(Q)
    assert res["exit_code"] == 0, res["output"]
    assert not (repo / ".venv" / "lib" / "evil.pth").exists()


@NEEDS_BWRAP
def test_host_unix_socket_and_outside_files_unreachable(repo, tmp_path):
    sock_path = tmp_path / "probe.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock_path))
    listener.listen(8)
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    _write_test(repo, f"""
try:  # refused twice over: no socket file is mounted, and (seccomp) no AF_UNIX socket can be made
    socket.socket(socket.AF_UNIX).connect({str(sock_path)!r})
    reached = True
except OSError:
    reached = False
assert not reached, "host socket reached"
try:
    data = open({str(secret)!r}).read()
except OSError:
    data = None
assert data is None, "outside file read"
assert not any(os.path.exists(p) for p in ("/run", "/var/run", "/home")), os.listdir("/")
assert os.listdir({str(tmp_path)!r}) == ["repo"], os.listdir({str(tmp_path)!r})  # the host's /tmp is not there
open("inside.txt", "w").write("ok")
""")
    try:
        res = Workspace(repo, isolation="bwrap").run_tests(Q)
    finally:
        listener.close()
    assert res["exit_code"] == 0, res["output"]
    assert (repo / "inside.txt").read_text() == "ok"


def test_memory_limit_stops_a_test(repo):  # rlimits and the cgroup are the same in every mode
    _write_test(repo, "block = bytearray(3 << 30)")
    res = Workspace(repo, limits=SandboxLimits(memory_bytes=1536 * MiB)).run_tests(Q)
    assert res["exit_code"] != 0 and "MemoryError" in res["output"]
    assert res["limits_hit"] == ["memory_bytes"] and "memory_bytes=1610612736" in res["output"]


def test_process_limit_stops_a_test(repo):  # in the best mode here; how it is enforced is in the result
    _write_test(repo, "procs = [subprocess.Popen(['sleep', '30']) for _ in range(60)]")
    res = Workspace(repo, limits=SandboxLimits(max_processes=24)).run_tests(Q)
    if res["limits"]["max_processes"].startswith("not enforced"):
        pytest.skip(f"process count not enforceable here: {res['limits']['max_processes']}")
    assert res["exit_code"] != 0 and "BlockingIOError" in res["output"], res["output"]
    assert "max_processes" in res["limits_hit"]


_AS_NOBODY = """
import json, sys
from agentkit.tools.limits import SandboxLimits
from agentkit.tools.workspace import Workspace
res = Workspace(sys.argv[1], isolation=sys.argv[2], limits=SandboxLimits(max_processes=24)).run_tests(
    ["-q", "-p", "no:cacheprovider"])
print(json.dumps({k: res[k] for k in ("exit_code", "limits_hit", "limits", "output")}))
"""


@NEEDS_ROOT
@pytest.mark.parametrize("mode", _modes("bwrap", "unshare"))
def test_process_limit_as_a_non_root_user(mode):
    """As a user other than root (the kernel exempts uid 0 from RLIMIT_NPROC, and only root can make the pids
    cgroup), the process count is enforced by RLIMIT_NPROC inside the sandbox's user namespace."""
    res, work = run_as_nobody(_AS_NOBODY, mode, lambda repo: _write_test(
        repo, "procs = [subprocess.Popen(['sleep', '30']) for _ in range(60)]"))
    shutil.rmtree(work, ignore_errors=True)
    assert res["limits"]["max_processes"] == "RLIMIT_NPROC=24 (in the sandbox's user namespace)", res["limits"]
    assert res["exit_code"] != 0 and "BlockingIOError" in res["output"], res["output"][-2000:]
    assert res["limits_hit"] == ["max_processes"]


def test_file_size_limit_stops_a_test(repo):  # rlimits and the cgroup are the same in every mode
    _write_test(repo, "open('big.bin', 'wb').write(b'x' * (8 << 20))")
    res = Workspace(repo, limits=SandboxLimits(max_file_bytes=1 * MiB)).run_tests(Q)
    assert res["exit_code"] != 0 and "File too large" in res["output"], res["output"]
    assert res["limits_hit"] == ["max_file_bytes"]
    assert (repo / "big.bin").stat().st_size <= 1 * MiB


@NEEDS_BWRAP
def test_private_tmp_is_bounded(repo):
    _write_test(repo, "open('/tmp/fill.bin', 'wb').write(b'x' * (32 << 20))")
    res = Workspace(repo, isolation="bwrap", limits=SandboxLimits(tmp_bytes=4 * MiB)).run_tests(Q)
    assert res["exit_code"] != 0 and "No space left on device" in res["output"], res["output"]
    assert res["limits_hit"] == ["tmp_bytes"] and res["limits"]["tmp_bytes"] == f"tmpfs size={4 * MiB}"


def test_cpu_limit_stops_a_test(repo):
    _write_test(repo, "while True:\n    pass")
    t0 = time.monotonic()
    res = Workspace(repo, limits=SandboxLimits(cpu_seconds=5), command_timeout_s=300).run_tests(Q)
    assert not res["timed_out"] and res["exit_code"] != 0, res
    assert res["limits_hit"] == ["cpu_seconds"] and "cpu_seconds=5" in res["output"]
    assert time.monotonic() - t0 < 300


@pytest.mark.parametrize("mode", _modes("bwrap", "unshare"))
def test_setsid_grandchild_dies_with_the_run(repo, mode):
    (repo / "hang.py").write_text(
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(4); "
        "open(\"late.txt\", \"w\").write(\"alive\")'])\n"
        "time.sleep(60)\n")  # fmt: skip
    ws = Workspace(repo, allowed_commands=(("python", "hang.py"),), command_timeout_s=2, isolation=mode)
    assert ws.run_command(["python", "hang.py"])["timed_out"]
    time.sleep(4)
    assert not (repo / "late.txt").exists()


def test_isolation_choice(repo):
    assert Workspace(repo, isolation="none").isolation == "none"
    assert Workspace(repo).isolation == next((m for m in ("bwrap", "unshare") if AVAILABLE[m]), None)
    with pytest.raises(WorkspaceError, match="not one of"):
        Workspace(repo, isolation="docker")
    with pytest.raises(WorkspaceError, match="positive int"):
        SandboxLimits(memory_bytes=0)
    with pytest.raises(WorkspaceError, match="positive int"):
        SandboxLimits(cpu_seconds="10")  # type: ignore[arg-type]


@pytest.mark.skipif(sandbox_filter() is None, reason="no seccomp program for this architecture")
@pytest.mark.parametrize("mode", _modes("bwrap", "unshare"))
def test_no_new_unix_or_network_sockets(repo, mode):
    """The seccomp filter: socket() for AF_UNIX / AF_INET / AF_INET6 fails with EAFNOSUPPORT whatever is mounted;
    socketpair() (asyncio's self-pipe) still works."""
    _write_test(repo, """
import errno
for family in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6):
    try:
        socket.socket(family).close()
        made = True
    except OSError as e:
        made = e.errno
    assert made == errno.EAFNOSUPPORT, (family, made)
a, b = socket.socketpair()
a.sendall(b"x")
assert b.recv(1) == b"x"
""")
    res = Workspace(repo, isolation=mode).run_tests(Q)
    assert res["exit_code"] == 0, res["output"]
    assert "seccomp" in res["isolation"]


def test_the_seccomp_program():
    import struct

    prog = sandbox_filter("x86_64")
    assert prog is not None and len(prog) % 8 == 0 and sandbox_filter("riscv64") is None
    ins = [struct.unpack("=HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    assert ins[0] == (0x20, 0, 0, 4) and ins[1][3] == 0xC000003E  # the architecture is checked first
    returns = {k for code, _, _, k in ins if code == 0x06}
    assert returns == {0x7FFF0000, 0x00050000 | 1, 0x00050000 | 97, 0x00050000 | 38}  # allow, EPERM, EAFNOSUPPORT, ENOSYS
    checked = {k for code, _, _, k in ins if code == 0x15}
    assert {165, 166, 155, 272, 308, 101, 250, 321} <= checked  # mount umount2 pivot_root unshare setns ptrace keyctl bpf
    assert (sandbox_filter("aarch64") or b"")[12:16] == struct.pack("=I", 0xC00000B7)
