"""The sandbox's seccomp filter, loaded by bubblewrap (``--seccomp FD``) and by the fallback's launcher
(``agentkit.tools.confine``) before the test command runs.

It denies, whatever the mounts and capabilities are:

- new sockets of the families that reach other processes or a network (``AF_UNIX``, ``AF_INET``, ``AF_INET6``,
  ``AF_PACKET``): ``socket()`` fails with ``EAFNOSUPPORT``; ``socketpair()`` stays allowed (a connected pair reaches
  nothing outside; asyncio's self-pipe is one);
- the calls that change what the sandbox sees or reach another process (:data:`DENIED_CALLS`: ``mount``,
  ``umount2``, ``pivot_root``, ``chroot``, the new mount API, ``unshare``, ``setns``, ``ptrace``, ``keyctl`` and
  the key calls, ``bpf``), and ``clone()`` with a namespace flag: ``EPERM``;
- ``clone3()``, whose flags sit behind a pointer a filter cannot read: ``ENOSYS``, so the C library falls back to
  ``clone()``, which is checked (as Docker's and Chromium's filters do);
- on x86_64 the x32 system-call ABI, which would bypass the checks: ``ENOSYS``.

The program is classic BPF assembled here (no libseccomp needed), for x86_64 and aarch64; on another architecture
:func:`sandbox_filter` returns None and the sandbox runs without it (``docs/sandbox.md`` says so).
"""

from __future__ import annotations

import platform
import socket
import struct

# struct seccomp_data: nr (u32) at 0, arch (u32) at 4, instruction_pointer (u64) at 8, args[6] (u64 each) from 16
_NR, _ARCH, _ARG0 = 0, 4, 16
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _EAFNOSUPPORT, _ENOSYS = 1, 97, 38
_X32_BIT = 0x40000000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
DENIED_FAMILIES = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, getattr(socket, "AF_PACKET", 17))


# the system-call numbers, per machine: (AUDIT_ARCH_*, {name: number}); the new mount API's numbers are shared
_GENERIC_MOUNT_API = {"open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
                      "fspick": 433, "mount_setattr": 442}
_X86_64 = (0xC000003E, {"socket": 41, "clone": 56, "clone3": 435, "ptrace": 101, "pivot_root": 155, "chroot": 161,
                        "mount": 165, "umount2": 166, "add_key": 248, "request_key": 249, "keyctl": 250,
                        "unshare": 272, "setns": 308, "bpf": 321, **_GENERIC_MOUNT_API})
_AARCH64 = (0xC00000B7, {"socket": 198, "clone": 220, "clone3": 435, "ptrace": 117, "pivot_root": 41, "chroot": 51,
                         "mount": 40, "umount2": 39, "add_key": 217, "request_key": 218, "keyctl": 219,
                         "unshare": 97, "setns": 268, "bpf": 280, **_GENERIC_MOUNT_API})
ARCHES = {"x86_64": _X86_64, "amd64": _X86_64, "aarch64": _AARCH64, "arm64": _AARCH64}
DENIED_CALLS = ("mount", "umount2", "pivot_root", "chroot", *_GENERIC_MOUNT_API, "unshare", "setns", "ptrace",
                "keyctl", "add_key", "request_key", "bpf")

# an instruction: (label or None, code, jump-if-true label, jump-if-false label, k); a code given as a string is a
# return whose k is the action
_Insn = tuple[str | None, int, str | None, str | None, int]


def sandbox_filter(machine: str | None = None) -> bytes | None:
    """The BPF program (``struct sock_filter`` array) or None on an architecture it is not written for."""
    machine = (machine or platform.machine()).lower()
    if machine not in ARCHES:
        return None
    arch, nr = ARCHES[machine]
    prog: list[_Insn] = [
        (None, _LD_W_ABS, None, None, _ARCH),
        (None, _JEQ_K, None, "allow", arch),  # another architecture's calls: not filtered (cannot be judged here)
        (None, _LD_W_ABS, None, None, _NR),
        *([(None, _JGE_K, "enosys", None, _X32_BIT)] if machine in ("x86_64", "amd64") else []),
        (None, _JEQ_K, "socket", None, nr["socket"]),
        (None, _JEQ_K, "clone", None, nr["clone"]),
        (None, _JEQ_K, "enosys", None, nr["clone3"]),
        *[(None, _JEQ_K, "eperm", None, nr[name]) for name in DENIED_CALLS],
        ("allow", _RET_K, None, None, _RET_ALLOW),
        ("socket", _LD_W_ABS, None, None, _ARG0),  # the family: args[0]'s low 32 bits (little-endian)
        *[(None, _JEQ_K, "eafnosupport", None, family) for family in DENIED_FAMILIES],
        (None, _RET_K, None, None, _RET_ALLOW),
        ("clone", _LD_W_ABS, None, None, _ARG0),  # the flags
        (None, _JSET_K, "eperm", None, CLONE_NAMESPACE_FLAGS),
        (None, _RET_K, None, None, _RET_ALLOW),
        ("eperm", _RET_K, None, None, _RET_ERRNO | _EPERM),
        ("eafnosupport", _RET_K, None, None, _RET_ERRNO | _EAFNOSUPPORT),
        ("enosys", _RET_K, None, None, _RET_ERRNO | _ENOSYS),
    ]
    return _assemble(prog)


def _assemble(prog: list[_Insn]) -> bytes:
    """Resolve labels to forward jump offsets and pack the instructions."""
    at = {label: i for i, (label, *_rest) in enumerate(prog) if label is not None}
    out = b""
    for i, (_label, code, jt, jf, k) in enumerate(prog):
        rel = [0 if j is None else at[j] - (i + 1) for j in (jt, jf)]
        assert all(0 <= r <= 255 for r in rel), "classic BPF jumps forward, at most 255 instructions"
        out += struct.pack("=HBBI", code, rel[0], rel[1], k)
    return out
