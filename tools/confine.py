"""The fallback sandbox's last launcher: run as a script (``python -I confine.py ...``) inside the ``unshare``
namespaces, after ``setpriv`` has cleared every capability set and set ``no_new_privs``, and before the test command.

It checks that the process holds no capability and has ``no_new_privs`` (and refuses to run the command otherwise),
restricts writes to the given directories with Landlock (``--landlock``; reads stay allowed), loads the seccomp
program written by ``agentkit.tools.seccomp`` (``--seccomp FILE``), then execs the command. Both are irreversible
for the process and everything it starts.

It imports nothing from agentkit (the test interpreter starts it without the package's start-up cost); its only
dependency is the ``landlock`` package, and only with ``--landlock``.
"""

from __future__ import annotations

import ctypes
import os
import sys

PR_GET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 39, 22, 2
EXIT_REFUSED = 126  # the command was not run: the confinement could not be set up


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _fail(message: str) -> None:
    sys.stderr.write(f"agentkit sandbox: {message}; the command was not run\n")
    sys.exit(EXIT_REFUSED)


def check_unprivileged(libc: ctypes.CDLL) -> None:
    """Refuse to go on while any capability is held or ``no_new_privs`` is unset."""
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    held = [k for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb") if int(status.get(k, "0"), 16)]
    if held:
        _fail(f"capabilities still held ({', '.join(held)})")
    if libc.prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1:
        _fail("no_new_privs is not set")


def restrict_writes(dirs: list[str]) -> None:
    """Landlock: creating, writing, truncating, renaming or removing files is allowed only beneath ``dirs`` (and
    writing ``/dev/null``); reading and executing stay allowed everywhere."""
    try:
        import landlock
        from landlock import FSAccess
    except ImportError:
        _fail("Landlock was asked for but the 'landlock' package is not installed")
    abi = landlock.landlock_abi_version()
    writes = (FSAccess.WRITE_FILE | FSAccess.REMOVE_DIR | FSAccess.REMOVE_FILE | FSAccess.MAKE_CHAR
              | FSAccess.MAKE_DIR | FSAccess.MAKE_REG | FSAccess.MAKE_SOCK | FSAccess.MAKE_FIFO
              | FSAccess.MAKE_BLOCK | FSAccess.MAKE_SYM)  # fmt: skip
    if abi >= 2:
        writes |= FSAccess.REFER
    if abi >= 3:
        writes |= FSAccess.TRUNCATE
    rules = landlock.Ruleset(restrict_rules=writes)
    rules.allow(*dirs, rules=writes)
    if os.path.exists("/dev/null"):
        rules.allow("/dev/null", rules=writes & (FSAccess.WRITE_FILE | FSAccess.TRUNCATE))
    rules.apply()


def load_seccomp(libc: ctypes.CDLL, path: str) -> None:
    """Load the classic-BPF program in ``path`` as this process's seccomp filter."""
    with open(path, "rb") as f:
        program = f.read()
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        _fail(f"cannot load the seccomp filter (errno {ctypes.get_errno()})")


def main(argv: list[str]) -> None:
    if "--" not in argv:
        _fail("usage: confine.py [--landlock DIR]... [--seccomp FILE] -- COMMAND...")
    sep = argv.index("--")
    opts, command = argv[:sep], argv[sep + 1 :]
    dirs = [opts[i + 1] for i, o in enumerate(opts) if o == "--landlock"]
    seccomp = [opts[i + 1] for i, o in enumerate(opts) if o == "--seccomp"]
    libc = ctypes.CDLL(None, use_errno=True)
    check_unprivileged(libc)
    if dirs:
        restrict_writes(dirs)
    for path in seccomp:
        load_seccomp(libc, path)
    try:
        os.execvp(command[0], command)
    except OSError as err:
        _fail(f"cannot run {command[0]!r}: {err.strerror}")


if __name__ == "__main__":
    main(sys.argv[1:])
