"""The OS sandbox that ``Workspace.run_command`` (and so ``run_tests``) runs in, best first:

``bwrap``
    bubblewrap: a fresh mount namespace holding only what is bound in: ``/usr`` and the library/binary dirs, a few
    ``/etc`` files (a synthetic ``passwd``/``group``), the Python installation, venv and ``sys.path`` entries, all
    read-only; the workspace read-write except its control paths (:data:`CONTROL_PATHS`: ``.git``, ``.hg``,
    ``.svn``, ``.venv``, ``venv``), which are bound read-only over themselves; a private tmpfs ``/tmp``; a new
    ``/proc`` and a minimal ``/dev``. No host ``/tmp``, ``/run`` or home, so no host socket file exists to connect to;
    every namespace is unshared (network, IPC, PID, UTS, cgroup; user where possible), all capabilities dropped,
    ``--die-with-parent``, ``--new-session`` (no TIOCSTI into the host terminal).
``unshare``
    util-linux ``unshare`` (user, mount, network, PID namespaces): every mount read-only except the workspace and
    a private temporary directory, with the control paths re-bound read-only. Host files stay *readable* and a
    host socket file under a read-only mount can still be connected to.
``none``
    a plain process group with a clean environment. Nothing is isolated; only the control files ``.git/config``
    and ``.git/hooks/`` are restored afterwards when a run changed them (and said so in the result).

In every mode the limits of ``agentkit.tools.limits`` apply, and a control path that did not exist before the run
and does after (a planted ``.git``) is removed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from agentkit.tools.limits import PidsCgroup, SandboxLimits
from agentkit.tools.seccomp import socket_filter

from agentkit.errors import WorkspaceError

ISOLATION_MODES = ("bwrap", "unshare", "none")
CONTROL_PATHS = (".git", ".hg", ".svn", ".venv", "venv")  # the host runs code from these later
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf",
             "/etc/hosts", "/etc/alternatives", "/etc/mime.types")  # fmt: skip
DESCRIPTIONS = {
    "bwrap": "bwrap: only system dirs, Python and the workspace bound in (system and Python read-only); control "
             "paths (.git, venvs) read-only; private /tmp; no host sockets; no network; no new unix or network "
             "sockets (seccomp); own PID/IPC/UTS namespaces",
    "unshare": "unshare: no network, own PID namespace, read-only outside the workspace, control paths (.git, "
               "venvs) read-only; host files readable and host socket files reachable (bwrap not available)",
    "none": "none: bwrap, unshare or user namespaces unavailable (clean environment, process group and rlimits only; "
            ".git/config and .git/hooks restored after the run if changed)",
}  # fmt: skip


@dataclass
class Prepared:
    """A command ready for ``Popen``: its ``argv`` (launchers and sandbox included), clean ``env`` and the file
    descriptors it must inherit (``fds``: the seccomp program bwrap reads; closed by the caller after the run)."""

    argv: list[str]
    env: dict[str, str]
    fds: tuple[int, ...] = ()


def pick_mode(wanted: str) -> str:
    """The mode to use: ``wanted`` (``"auto"`` = the best available); a mode not available here is an error."""
    if wanted == "auto":
        return "bwrap" if bwrap_ok() else "unshare" if unshare_ok() else "none"
    if wanted not in ISOLATION_MODES:
        raise WorkspaceError(f"isolation {wanted!r} is not one of auto, {', '.join(ISOLATION_MODES)}")
    if (wanted == "bwrap" and not bwrap_ok()) or (wanted == "unshare" and not unshare_ok()):
        raise WorkspaceError(f"isolation {wanted!r} is not available on this machine")
    return wanted


def prepare(mode: str, root: Path, tmp: str, exe: list[str], limits: SandboxLimits, cgroup: PidsCgroup,
            ro_paths: tuple[str, ...] = ()) -> Prepared:  # fmt: skip
    """The argv and environment that run ``exe`` in ``root`` under ``mode``; ``tmp`` is a fresh host directory."""
    inner_tmp = "/tmp" if mode == "bwrap" else tmp
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW}
    env.update(PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", HOME=inner_tmp, TMPDIR=inner_tmp)
    inner = [*limits.inner(nproc=mode != "none"), *exe]
    outer = limits.outer(cgroup)
    if mode == "bwrap":
        fd = _seccomp_fd(tmp)
        seccomp = ["--seccomp", str(fd)] if fd is not None else []
        return Prepared([*outer, *bwrap_argv(root, tmp, inner, limits, ro_paths, seccomp)], env,
                        (fd,) if fd is not None else ())
    if mode == "unshare":
        return Prepared([*outer, *UNSHARE, "sh", "-c", UNSHARE_SH, "sandbox", str(root), tmp, *inner], env)
    return Prepared([*outer, *inner], env)


ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "SYSTEMROOT", "PYTHONHASHSEED")


def _seccomp_fd(tmp: str) -> int | None:
    """A read descriptor of the socket filter (``agentkit.tools.seccomp``) written under ``tmp``; None where there
    is no filter for this architecture."""
    program = socket_filter()
    if program is None:
        return None
    path = os.path.join(tmp, "sandbox-seccomp.bpf")
    Path(path).write_bytes(program)
    return os.open(path, os.O_RDONLY)


def bwrap_argv(root: Path, tmp: str, inner: list[str], limits: SandboxLimits, ro_paths: tuple[str, ...],
               seccomp: list[str] | None = None) -> list[str]:
    """bubblewrap's argv; order matters (a later mount covers an earlier one): ``/tmp`` and the read-only Python
    dirs first (the workspace may lie under either), then the workspace read-write, then what must stay read-only
    inside it (Python dirs there, control paths)."""
    a = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
         "--hostname", "sandbox", *(seccomp or [])]  # fmt: skip
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            a += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            a += ["--ro-bind", d, d]
    a += [x for f in ETC_FILES if os.path.exists(f) for x in ("--ro-bind", f, f)]
    a += ["--ro-bind", *_identity_file(tmp, "passwd"), "--ro-bind", *_identity_file(tmp, "group")]
    a += ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    ro = [p for p in _minimal(python_paths() + [os.path.abspath(p) for p in ro_paths])
          if p not in ("/", "/tmp") and not any(p == d or p.startswith(d + "/") for d in SYSTEM_DIRS)]  # fmt: skip
    inside = [p for p in ro if p.startswith(str(root) + "/")]
    a += [x for p in ro if p not in inside for x in ("--ro-bind", p, p)]  # a parent of the workspace included
    a += ["--bind", str(root), str(root)]
    a += [x for p in inside for x in ("--ro-bind", p, p)]
    for name in CONTROL_PATHS:
        if os.path.lexists(root / name):
            a += ["--ro-bind", str(root / name), str(root / name)]
    return [*a, "--chdir", str(root), "--", *inner]


def _identity_file(tmp: str, name: str) -> tuple[str, str]:
    """A one-user ``/etc/passwd`` or ``/etc/group`` written under ``tmp`` (the host's lists stay out)."""
    uid, gid = os.getuid(), os.getgid()
    text = f"sandbox:x:{uid}:{gid}::/tmp:/bin/sh\n" if name == "passwd" else f"sandbox:x:{gid}:\n"
    if uid != 0:
        text += "root:x:0:0::/:/bin/sh\n" if name == "passwd" else "root:x:0:\n"
    path = os.path.join(tmp, f"sandbox-{name}")
    Path(path).write_text(text)
    return path, f"/etc/{name}"


def _minimal(paths: list[str]) -> list[str]:
    """Existing paths, deduplicated, without those under another in the list."""
    out: list[str] = []
    for p in sorted({os.path.normpath(p) for p in paths if os.path.isabs(p) and os.path.exists(p)}):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


@lru_cache(maxsize=1)
def python_paths() -> list[str]:
    """The directories the test interpreter needs: its prefixes, its executable's directory and its ``sys.path``
    (as a fresh interpreter with a clean environment sees it, ``.pth`` files included), with symlinks resolved too."""
    code = ("import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]"
            " + [p for p in sys.path if p]))")  # fmt: skip
    try:
        out = subprocess.run([sys.executable, "-c", code], cwd="/", env={}, capture_output=True, text=True,
                             timeout=30, check=True).stdout  # fmt: skip
        paths = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError) as err:
        raise WorkspaceError(f"cannot list the test interpreter's paths: {err}") from None
    paths += [os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))]
    return paths + [os.path.realpath(p) for p in paths]


@lru_cache(maxsize=1)
def bwrap_ok() -> bool:
    """Whether bubblewrap runs here with every namespace unshared (probed once, with a real Python run)."""
    if sys.platform != "linux" or shutil.which("bwrap") is None:
        return False
    with tempfile.TemporaryDirectory(prefix="agentkit-probe-") as tmp:
        try:
            argv = bwrap_argv(Path(tmp), tmp, [sys.executable, "-c", "pass"], SandboxLimits(), ())
            return subprocess.run(argv, timeout=30, stdin=subprocess.DEVNULL, capture_output=True,
                                  check=False).returncode == 0  # fmt: skip
        except (OSError, subprocess.SubprocessError, WorkspaceError):
            return False


# inside the namespaces: the workspace and a private tmp stay writable, every other mount becomes read-only, then the
# control paths inside the workspace are bound read-only over themselves (failing the run if that cannot be done)
UNSHARE_SH = r"""
set -e
ws="$1"; tmp="$2"; shift 2
mount --bind "$ws" "$ws"
mount --bind "$tmp" "$tmp"
for m in $(awk '{print $2}' /proc/self/mounts | sort -u); do
  [ "$m" = "$ws" ] || [ "$m" = "$tmp" ] || mount -o remount,bind,ro "$m" 2>/dev/null || true
done
for c in .git .hg .svn .venv venv; do
  if [ -e "$ws/$c" ] || [ -L "$ws/$c" ]; then
    mount --bind "$ws/$c" "$ws/$c"
    mount -o remount,bind,ro "$ws/$c"
  fi
done
cd "$ws"
exec "$@"
"""
UNSHARE = ("unshare", "--user", "--map-root-user", "--mount", "--net", "--pid", "--fork", "--kill-child",
           "--mount-proc")  # fmt: skip


@lru_cache(maxsize=1)
def unshare_ok() -> bool:
    """Whether ``unshare`` runs here with user, mount, network and PID namespaces (probed once)."""
    if sys.platform != "linux" or shutil.which("unshare") is None or shutil.which("sh") is None:
        return False
    try:
        return subprocess.run([*UNSHARE, "sh", "-c", "mount --bind / / 2>/dev/null; exit 0"], timeout=10,
                              stdin=subprocess.DEVNULL, capture_output=True, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
