"""A seccomp filter for the ``bwrap`` sandbox: no new sockets of the families that reach other processes or a
network (``AF_UNIX``, ``AF_INET``, ``AF_INET6``, ``AF_PACKET``).

The bwrap sandbox already binds in no host socket file and has no network; the filter is the second wall the
issue's probe asked for (as OpenAI's Codex sandbox denies sockets by seccomp): ``socket()`` for those families
fails with ``EAFNOSUPPORT`` whatever the mounts are. ``socketpair()`` stays allowed (a pair of connected sockets
reaches nothing outside; asyncio's self-pipe is one). On x86_64 the x32 system-call ABI, which would bypass the
check, is refused (``ENOSYS``).

The program is classic BPF written here (no libseccomp needed), for x86_64 and aarch64; on another architecture
:func:`socket_filter` returns None and the sandbox runs without it (``docs/sandbox.md`` says so). bubblewrap loads
it with ``--seccomp FD``.
"""

from __future__ import annotations

import platform
import socket
import struct

# struct seccomp_data: nr (u32) at 0, arch (u32) at 4, instruction_pointer (u64) at 8, args[6] (u64 each) from 16
_NR, _ARCH, _ARG0 = 0, 4, 16
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_EAFNOSUPPORT, _ENOSYS = 97, 38
_X32_BIT = 0x40000000
# machine -> (AUDIT_ARCH_*, the socket() system call's number)
ARCHES = {"x86_64": (0xC000003E, 41), "amd64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198),
          "arm64": (0xC00000B7, 198)}
DENIED_FAMILIES = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, getattr(socket, "AF_PACKET", 17))


def socket_filter(machine: str | None = None) -> bytes | None:
    """The BPF program (``struct sock_filter`` array) or None on an architecture it is not written for."""
    machine = (machine or platform.machine()).lower()
    if machine not in ARCHES:
        return None
    arch, nr = ARCHES[machine]
    x32 = ARCHES[machine][1] == 41  # x86_64
    # (code, jump-true label, jump-false label, k); labels resolve to instruction indexes below
    prog: list[tuple[int, str | None, str | None, int]] = [
        (_LD_W_ABS, None, None, _ARCH),
        (_JEQ_K, None, "allow", arch),  # another architecture's calls: not filtered (cannot be judged here)
        (_LD_W_ABS, None, None, _NR),
        *([(_JGE_K, "deny_x32", None, _X32_BIT)] if x32 else []),
        (_JEQ_K, None, "allow", nr),
        (_LD_W_ABS, None, None, _ARG0),  # the family: args[0]'s low 32 bits (little-endian)
        *[(_JEQ_K, "deny", None, family) for family in DENIED_FAMILIES],
        ("allow", None, None, _RET_ALLOW),  # type: ignore[list-item]
        ("deny", None, None, _RET_ERRNO | _EAFNOSUPPORT),  # type: ignore[list-item]
        ("deny_x32", None, None, _RET_ERRNO | _ENOSYS),  # type: ignore[list-item]
    ]
    at = {code: i for i, (code, *_rest) in enumerate(prog) if isinstance(code, str)}
    out = b""
    for i, (code, jt, jf, k) in enumerate(prog):
        if isinstance(code, str):
            code = _RET_K
        rel = [0 if j is None else at[j] - (i + 1) for j in (jt, jf)]
        out += struct.pack("=HBBI", code, rel[0], rel[1], k)
    return out
