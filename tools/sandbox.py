"""The OS sandbox that ``Workspace.run_command`` (and so ``run_tests``) runs in, best first:

``bwrap``
    bubblewrap: a fresh mount namespace holding only what is bound in: ``/usr`` and the library/binary dirs, a few
    ``/etc`` files (a synthetic ``passwd``/``group``), the Python installation, venv and ``sys.path`` entries, all
    read-only; the workspace read-write except its control paths (``agentkit.tools.control_paths``: VCS
    directories, virtualenvs and start-up files at any depth), which are bound read-only over themselves; a private
    tmpfs ``/tmp``; a new ``/proc`` and a minimal ``/dev``. No host ``/tmp``, ``/run`` or home; every namespace is
    unshared; all capabilities dropped, ``no_new_privs``; the seccomp filter of ``agentkit.tools.seccomp``;
    ``--die-with-parent``, ``--new-session``.
``unshare``
    the fallback where bubblewrap is missing: util-linux ``unshare`` (user, mount, network, PID namespaces) makes
    every mount read-only except the workspace and a private temporary directory and binds the control paths
    read-only; then ``setpriv`` clears every capability set (bounding, ambient, inheritable, so effective and
    permitted are empty after exec), locks the securebits and sets ``no_new_privs``; then ``confine.py`` checks
    that, restricts writes to the workspace and the temporary directory with Landlock (where the kernel has it) and
    loads the same seccomp filter. Host files stay *readable*.
``none``
    only when asked for by name: a plain process group with a clean environment. Nothing is isolated.

``isolation="auto"`` takes ``bwrap`` or else ``unshare``; where neither runs, running a command raises
``SandboxUnavailableError`` naming bubblewrap. In every mode the limits of ``agentkit.tools.limits`` apply, and
after the run ``agentkit.tools.control_paths.settle`` removes the control paths the run created and restores the
tracked ones it changed.
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
from agentkit.tools.seccomp import sandbox_filter

from agentkit.errors import SandboxUnavailableError, WorkspaceError

ISOLATION_MODES = ("bwrap", "unshare", "none")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf",
             "/etc/hosts", "/etc/alternatives", "/etc/mime.types")  # fmt: skip
CONFINE = str(Path(__file__).with_name("confine.py"))
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), or "
                "pass isolation='none' to run commands with no isolation at all")  # fmt: skip


def describe(mode: str) -> str:
    """What ``mode`` enforces here, in words (each run's result carries it)."""
    seccomp = "seccomp (no mount/umount/unshare/setns/ptrace/keyctl/bpf, no new unix or network sockets)"
    if mode == "bwrap":
        return ("bwrap: only system dirs, Python and the workspace bound in (system and Python read-only); control "
                "paths (VCS dirs, venvs, start-up files) read-only; private /tmp; no host sockets; no network; no "
                f"capabilities, no_new_privs; {seccomp}; own PID/IPC/UTS namespaces")
    if mode == "unshare":
        landlock = (f"Landlock (ABI {landlock_abi()}): writes only to the workspace and a private temp dir"
                    if landlock_abi() else "no Landlock in this kernel")
        return ("unshare: no capabilities (setpriv: every set cleared, securebits locked), no_new_privs; "
                f"{seccomp}; {landlock}; every host mount read-only, control paths (VCS dirs, venvs, start-up "
                "files) read-only; no network, own PID namespace; host files readable (bwrap not installed)")
    return ("none: NO isolation, as asked (clean environment, process group and rlimits only; control paths "
            "created or changed by the run are removed or restored afterwards)")


@dataclass
class Prepared:
    """A command ready for ``Popen``: its ``argv`` (launchers and sandbox included), clean ``env`` and the file
    descriptors it must inherit (``fds``: the seccomp program bwrap reads; closed by the caller after the run)."""

    argv: list[str]
    env: dict[str, str]
    fds: tuple[int, ...] = ()


def pick_mode(wanted: str) -> str | None:
    """The mode to use: ``wanted``, or for ``"auto"`` the best available (None: no sandbox that holds runs here,
    and commands are refused, see :func:`require`); a named mode not available here is an error."""
    if wanted == "auto":
        return "bwrap" if bwrap_ok() else "unshare" if unshare_ok() else None
    if wanted not in ISOLATION_MODES:
        raise WorkspaceError(f"isolation {wanted!r} is not one of auto, {', '.join(ISOLATION_MODES)}")
    if wanted == "bwrap" and not bwrap_ok():
        raise SandboxUnavailableError(f"isolation 'bwrap' is not available on this machine: {INSTALL_HINT}")
    if wanted == "unshare" and not unshare_ok():
        raise SandboxUnavailableError("isolation 'unshare' is not available on this machine (needs util-linux "
                                      f"unshare and setpriv, and user namespaces): {INSTALL_HINT}")
    return wanted


def require(mode: str | None) -> str:
    """``mode``, or the typed error that no sandbox holds here."""
    if mode is None:
        raise SandboxUnavailableError(f"no sandbox for running tests here: bubblewrap (bwrap) is not installed and "
                                      f"the unshare fallback cannot run; {INSTALL_HINT}")
    return mode


def prepare(mode: str, root: Path, tmp: str, exe: list[str], limits: SandboxLimits, cgroup: PidsCgroup,
            ro_paths: tuple[str, ...] = (), control: tuple[str, ...] = ()) -> Prepared:  # fmt: skip
    """The argv and environment that run ``exe`` in ``root`` under ``mode``; ``tmp`` is a fresh host directory and
    ``control`` the workspace-relative control paths to hold read-only."""
    inner_tmp = "/tmp" if mode == "bwrap" else tmp
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW}
    env.update(PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", HOME=inner_tmp, TMPDIR=inner_tmp)
    inner = [*limits.inner(nproc=mode != "none"), *exe]
    outer = limits.outer(cgroup)
    held = tuple(c for c in control if not os.path.islink(root / c))  # a symlink is put back afterwards instead
    if mode == "bwrap":
        fd = _seccomp_fd(tmp)
        seccomp = ["--seccomp", str(fd)] if fd is not None else []
        return Prepared([*outer, *bwrap_argv(root, tmp, inner, limits, ro_paths, seccomp, held)], env,
                        (fd,) if fd is not None else ())
    if mode == "unshare":
        return Prepared([*outer, *UNSHARE, "sh", "-c", UNSHARE_SH, "sandbox", str(root), tmp, *held, "--",
                         *confined(root, tmp, inner)], env)  # fmt: skip
    return Prepared([*outer, *inner], env)


ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "SYSTEMROOT", "PYTHONHASHSEED")


def confined(root: Path, tmp: str, inner: list[str]) -> list[str]:
    """``inner`` behind ``setpriv`` (every capability set cleared, securebits locked, ``no_new_privs``) and
    ``confine.py`` (checks that; Landlock and the seccomp filter), as the fallback runs it."""
    drop = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all",
            "--securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked,+keep_caps_locked"]
    opts = ["--landlock", str(root), "--landlock", tmp] if landlock_abi() else []
    path = _seccomp_file(tmp)
    opts += ["--seccomp", path] if path is not None else []
    return [*drop, "--", sys.executable, "-I", CONFINE, *opts, "--", *inner]


def _seccomp_file(tmp: str) -> str | None:
    """The seccomp program (``agentkit.tools.seccomp``) written under ``tmp``; None where there is no filter for
    this architecture."""
    program = sandbox_filter()
    if program is None:
        return None
    path = os.path.join(tmp, "sandbox-seccomp.bpf")
    Path(path).write_bytes(program)
    return path


def _seccomp_fd(tmp: str) -> int | None:
    """A read descriptor of the seccomp program, for bwrap's ``--seccomp``."""
    path = _seccomp_file(tmp)
    return None if path is None else os.open(path, os.O_RDONLY)


@lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none, or the ``landlock`` package is missing)."""
    try:
        import landlock

        return int(landlock.landlock_abi_version())
    except Exception:  # noqa: BLE001 -- ImportError, or the package's error on a kernel without Landlock
        return 0


def bwrap_argv(root: Path, tmp: str, inner: list[str], limits: SandboxLimits, ro_paths: tuple[str, ...],
               seccomp: list[str] | None = None, control: tuple[str, ...] = ()) -> list[str]:
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
    a += [x for c in control for x in ("--ro-bind", str(root / c), str(root / c))]
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
# control paths given before "--" are bound read-only over themselves (failing the run if that cannot be done),
# then the rest of the argv (setpriv and confine.py, which drop every privilege) is run
UNSHARE_SH = r"""
set -e
ws="$1"; tmp="$2"; shift 2
mount --bind "$ws" "$ws"
mount --bind "$tmp" "$tmp"
for m in $(awk '{print $2}' /proc/self/mounts | sort -u); do
  [ "$m" = "$ws" ] || [ "$m" = "$tmp" ] || mount -o remount,bind,ro "$m" 2>/dev/null || true
done
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  mount --bind "$ws/$1" "$ws/$1"
  mount -o remount,bind,ro "$ws/$1"
  shift
done
shift
cd "$ws"
exec "$@"
"""
UNSHARE = ("unshare", "--user", "--map-root-user", "--mount", "--net", "--pid", "--fork", "--kill-child",
           "--mount-proc")  # fmt: skip
# what the fallback's probe checks from inside: no capability, no_new_privs, a seccomp filter
PROBE = ("s = open('/proc/self/status').read(); import sys; "
         "sys.exit(0 if all(f'{k}:\\t0000000000000000' in s for k in ('CapPrm', 'CapEff', 'CapBnd', 'CapAmb')) "
         "and 'NoNewPrivs:\\t1' in s and 'Seccomp:\\t2' in s else 3)")  # fmt: skip


@lru_cache(maxsize=1)
def unshare_ok() -> bool:
    """Whether the fallback runs here as it is meant to: ``unshare`` with user, mount, network and PID namespaces,
    then ``setpriv`` and ``confine.py``, leaving a process with no capability, ``no_new_privs`` and the seccomp
    filter (probed once, from inside)."""
    if sys.platform != "linux" or not all(shutil.which(t) for t in ("unshare", "setpriv", "sh")):
        return False
    if sandbox_filter() is None:
        return False
    with tempfile.TemporaryDirectory(prefix="agentkit-probe-") as tmp:
        argv = [*UNSHARE, "sh", "-c", UNSHARE_SH, "sandbox", tmp, tmp, "--",
                *confined(Path(tmp), tmp, [sys.executable, "-I", "-c", PROBE])]  # fmt: skip
        try:
            return subprocess.run(argv, timeout=30, stdin=subprocess.DEVNULL, capture_output=True,
                                  check=False).returncode == 0  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return False
