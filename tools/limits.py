"""Resource limits of a sandboxed test run: rlimits, a pids cgroup where one can be made, and how a hit is told.

Memory (``RLIMIT_AS``), file size (``RLIMIT_FSIZE``) and CPU seconds (``RLIMIT_CPU``) are set by a tiny launcher
that then execs the sandbox (no ``preexec_fn``: it is unsafe in a threaded process); they bind every process started. The process count is ``RLIMIT_NPROC``, set
*inside* the sandbox's user namespace by a tiny launcher (set outside, it would count every process of the user);
the kernel exempts uid 0 from it, so where a pids cgroup can be created (root, cgroup v1 ``pids`` or a delegated v2
tree) the count is also bounded by ``pids.max``. The private ``/tmp`` is a tmpfs of ``tmp_bytes``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from agentkit.errors import WorkspaceError

MiB = 1 << 20
GiB = 1 << 30
CPU_GRACE_S = 5  # hard CPU limit = soft + this: SIGXCPU first, SIGKILL after

# sets rlimits (RLIMIT_X=soft:hard) and joins a cgroup (cgroup=PATH to its cgroup.procs), then execs the command;
# run twice: outside the sandbox (memory, file size, CPU, cgroup) and inside it (the process count)
LAUNCHER = (
    "import os, resource, sys\n"
    "i = sys.argv.index('--')\n"
    "for spec in sys.argv[1:i]:\n"
    "    name, value = spec.split('=', 1)\n"
    "    if name == 'cgroup':\n"
    "        with open(value, 'w') as f:\n"
    "            f.write(str(os.getpid()))\n"
    "    else:\n"
    "        soft, hard = map(int, value.split(':'))\n"
    "        resource.setrlimit(getattr(resource, name), (soft, hard))\n"
    "os.execvp(sys.argv[i + 1], sys.argv[i + 1:])\n"
)


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one ``run_tests`` / ``run_command`` run; ``None`` leaves one unset.

    Attributes:
        memory_bytes: address space of each process (``RLIMIT_AS``); an allocation past it raises ``MemoryError``.
        max_processes: processes and threads of the run (``RLIMIT_NPROC`` in the sandbox's user namespace and
            ``pids.max`` of a cgroup where one can be made); a fork past it fails with ``EAGAIN``.
        max_file_bytes: largest file a process may write (``RLIMIT_FSIZE``); a write past it fails with ``EFBIG``.
        cpu_seconds: CPU time of each process (``RLIMIT_CPU``): ``SIGXCPU``, then ``SIGKILL`` 5 s later.
        tmp_bytes: size of the private ``/tmp`` (a tmpfs; bwrap only); a write past it fails with ``ENOSPC``.
    """

    memory_bytes: int | None = 4 * GiB
    max_processes: int | None = 256
    max_file_bytes: int | None = 1 * GiB
    cpu_seconds: int | None = 300
    tmp_bytes: int = 512 * MiB

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "max_processes", "max_file_bytes", "cpu_seconds", "tmp_bytes"):
            value = getattr(self, name)
            if value is None and name != "tmp_bytes":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise WorkspaceError(f"SandboxLimits.{name} must be a positive int or None, got {value!r}")

    def outer(self, cgroup: PidsCgroup) -> list[str]:
        """The launcher that sets memory, file size and CPU limits and joins ``cgroup`` before the sandbox starts."""
        specs = []
        if self.memory_bytes is not None:
            specs.append(f"RLIMIT_AS={self.memory_bytes}:{self.memory_bytes}")
        if self.max_file_bytes is not None:
            specs.append(f"RLIMIT_FSIZE={self.max_file_bytes}:{self.max_file_bytes}")
        if self.cpu_seconds is not None:
            specs.append(f"RLIMIT_CPU={self.cpu_seconds}:{self.cpu_seconds + CPU_GRACE_S}")
        if cgroup.path is not None:
            specs.append(f"cgroup={cgroup.path / 'cgroup.procs'}")
        return _launcher(specs)

    def inner(self, *, nproc: bool) -> list[str]:
        """The launcher run inside the sandbox: the process count, set only inside a user/PID namespace (``nproc``;
        outside one RLIMIT_NPROC would count every process of the user)."""
        n = self.max_processes
        return _launcher([f"RLIMIT_NPROC={n}:{n}"] if nproc and n is not None else [])


def _launcher(specs: list[str]) -> list[str]:
    return [sys.executable, "-I", "-S", "-c", LAUNCHER, *specs, "--"] if specs else []


class PidsCgroup:
    """A fresh pids cgroup bounding the run's process count (cgroup v1 ``pids`` or a v2 tree with ``pids``
    delegated), or nothing where none can be made (``path`` None)."""

    def __init__(self, limit: int | None) -> None:
        self.path: Path | None = None
        if limit is None:
            return
        for parent in _cgroup_parents():
            child = parent / f"agentkit-{os.getpid()}-{secrets.token_hex(4)}"
            try:
                child.mkdir()
            except OSError:
                continue
            try:
                (child / "pids.max").write_text(str(limit))
                self.path = child
                return
            except OSError:
                self.remove(child)

    def hit(self) -> bool:
        """Whether a fork was refused by ``pids.max``."""
        if self.path is None:
            return False
        with contextlib.suppress(OSError):
            for line in (self.path / "pids.events").read_text().splitlines():
                if line.startswith("max ") and int(line.split()[1]) > 0:
                    return True
        return False

    def kill(self) -> None:
        """SIGKILL every process left in the cgroup (a daemon that left the run's process group included):
        ``cgroup.kill`` on v2, else each pid of ``cgroup.procs`` until none is left."""
        if self.path is None:
            return
        with contextlib.suppress(OSError):
            if (self.path / "cgroup.kill").exists():
                (self.path / "cgroup.kill").write_text("1")
                return
        for _ in range(50):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                return
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def remove(self, path: Path | None = None) -> None:
        """Remove the cgroup (retried briefly: killed processes leave it asynchronously)."""
        path = path or self.path
        if path is None:
            return
        for _ in range(50):
            try:
                path.rmdir()
                return
            except OSError:
                time.sleep(0.02)


def _cgroup_parents() -> list[Path]:
    """Where a pids cgroup may be created: the v1 ``pids`` hierarchy, or this process's own v2 cgroup."""
    out = [Path("/sys/fs/cgroup/pids")]
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                v2 = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
                if "pids" in (v2 / "cgroup.subtree_control").read_text().split():
                    out.append(v2)
    return [p for p in out if os.access(p, os.W_OK)]


_SIGNS = (
    ("memory_bytes", ("MemoryError", "Cannot allocate memory", "std::bad_alloc")),
    ("max_file_bytes", ("File too large", "[Errno 27]")),
    ("tmp_bytes", ("No space left on device", "[Errno 28]")),
    ("max_processes", ("Resource temporarily unavailable", "[Errno 11]", "can't start new thread")),
)


def limits_hit(limits: SandboxLimits, code: int, timed_out: bool, output: str, cgroup: PidsCgroup) -> list[str]:
    """Which limits stopped the run, from the exit status, the cgroup's counters and the errors the limits raise
    (a test's own output could imitate these; the pids counter and the signals cannot)."""
    hit = []
    sig = -code if code < 0 else code - 128 if code > 128 else 0
    # util-linux unshare exits 1 with this message when its child died of a signal
    killed = sig == signal.SIGKILL or "unshare: sigprocmask unblock failed" in output
    if limits.cpu_seconds is not None and (sig == signal.SIGXCPU or (killed and not timed_out)):
        hit.append("cpu_seconds")  # SIGKILL without our timeout: the hard CPU limit
    if sig == signal.SIGXFSZ:
        hit.append("max_file_bytes")
    if cgroup.hit():
        hit.append("max_processes")
    for name, signs in _SIGNS:
        if name not in hit and getattr(limits, name) is not None and any(s in output for s in signs):
            hit.append(name)
    return hit


def enforcement(limits: SandboxLimits, mode: str, cgroup: PidsCgroup) -> dict[str, str]:
    """How each limit is enforced in this run (or why it is not), for the result."""
    out = {}
    for name, how in (("memory_bytes", "RLIMIT_AS"), ("max_file_bytes", "RLIMIT_FSIZE"), ("cpu_seconds", "RLIMIT_CPU")):
        out[name] = f"{how}={getattr(limits, name)}" if getattr(limits, name) is not None else "not set"
    n = limits.max_processes
    ways = []
    if n is not None and cgroup.path is not None:
        ways.append(f"pids.max={n} (cgroup)")
    if n is not None and mode != "none" and os.getuid() != 0:
        ways.append(f"RLIMIT_NPROC={n} (in the sandbox's user namespace)")
    out["max_processes"] = " and ".join(ways) or ("not set" if n is None else
                                                   "not enforced (uid 0 is exempt from RLIMIT_NPROC, or no user "
                                                   "namespace; and no pids cgroup could be made)")  # fmt: skip
    out["tmp_bytes"] = (f"tmpfs size={limits.tmp_bytes}" if mode == "bwrap" else
                        "not enforced (the private temporary directory lies on the host's /tmp)")  # fmt: skip
    return out


def describe_hit(limits: SandboxLimits, hit: list[str]) -> str:
    shown = ", ".join(f"{name}={getattr(limits, name)}" for name in hit)
    return f"\n[sandbox: the run was stopped by a resource limit: {shown} (see SandboxLimits)]"
