"""Race-free path resolution beneath a root directory.

A path is walked one component at a time from an open directory descriptor: every directory is opened with
``O_DIRECTORY | O_NOFOLLOW`` relative to its parent's descriptor, so a directory swapped for a symlink between
two calls (or between the check and the open) is never followed: the open fails and the call raises a typed
``WorkspaceError``. Symlinks met on the way are resolved by hand (their target's components are walked the same
way, ``..`` pops the walk's own stack of descriptors and can never rise above the root; an absolute target is
accepted only when it names a path inside the root), at most :data:`MAX_SYMLINKS` of them (more is a loop).

The caller gets the descriptor of the last component's parent directory and that component's name, and opens it
itself with ``O_NOFOLLOW`` (relative to that descriptor): nothing is ever opened by a path string.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self

from agentkit.errors import WorkspaceError

MAX_SYMLINKS = 40  # symlinks followed while resolving one path (the kernel's own bound); more is a loop
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


@dataclass
class Resolved:
    """The parent directory (an open descriptor) and name of a resolved path; ``name`` is "" for the root.

    ``parts`` is the canonical path inside the root (symlinks resolved), ``exists`` whether ``name`` was found.
    Close it (or use it as a context manager) to release the descriptor.
    """

    dir_fd: int
    name: str
    parts: list[str] = field(default_factory=list)
    exists: bool = True

    @property
    def rel(self) -> str:
        return "/".join(self.parts) or "."

    def close(self) -> None:
        if self.dir_fd >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def changed(path: str) -> WorkspaceError:
    return WorkspaceError(f"{path!r}: a path component was replaced (by a symlink or another file type) while the "
                          "call ran; nothing was followed, try again", path)


def resolve_beneath(root: str, rel_parts: list[str], path: str, *, create_dirs: bool = False,
                    guard: Callable[[list[str]], None] | None = None) -> Resolved:
    """Walk ``rel_parts`` (already lexically normalised, no ``..``) from ``root``; see the module doc.

    ``create_dirs`` creates missing directories on the way (not the last component). The last component may be
    missing (``exists`` is then False); a missing directory on the way is a "no such file" error. ``guard`` is
    called with the canonical components of every directory about to be created, and of the last component,
    before anything is made: it raises to refuse, and then nothing was created.
    """
    stack = [open_dir(root, None, path)]
    names: list[str] = []
    todo = list(reversed(rel_parts))  # a stack: the next component is todo[-1]
    links = 0
    try:
        while todo:
            part = todo.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if not names:
                    raise WorkspaceError(f"{path!r}: resolves outside the workspace root (through a symlink)", path)
                os.close(stack.pop())
                names.pop()
                continue
            last = not any(p not in ("", ".") for p in todo)
            st = _lstat(part, stack[-1], path)
            if st is not None and stat.S_ISLNK(st.st_mode):
                links += 1
                if links > MAX_SYMLINKS:
                    raise WorkspaceError(f"{path!r}: symlink loop (more than {MAX_SYMLINKS} symlinks followed)",
                                         path)
                target = _readlink(part, stack[-1], path)
                if target.startswith("/"):
                    inside = _inside_root(root, target, path)
                    while len(stack) > 1:
                        os.close(stack.pop())
                    names.clear()
                    target = inside
                todo.extend(reversed(target.split("/")))
                continue
            if last:
                if guard is not None:
                    guard([*names, part])
                return Resolved(stack.pop(), part, [*names, part], exists=st is not None)
            if st is None:
                if not create_dirs:
                    raise WorkspaceError(f"{path!r}: no such file or directory", path)
                if guard is not None:
                    guard([*names, part])
                _mkdir(part, stack[-1], path)
            stack.append(open_dir(part, stack[-1], path))
            names.append(part)
        return Resolved(stack.pop(), "", names)
    finally:
        for fd in stack:
            os.close(fd)


def open_dir(name: str, dir_fd: int | None, path: str) -> int:
    """``name`` (relative to ``dir_fd``) opened as a directory without following a symlink; typed errors."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            if dir_fd is None:
                raise WorkspaceError(f"workspace root {name!r} is not a directory", name) from None
            if err.errno == errno.ENOTDIR:
                raise WorkspaceError(f"{path!r}: {name!r} is not a directory", path) from None
            raise changed(path) from None
        raise WorkspaceError(f"{path!r}: cannot open directory {name!r}: {err.strerror}", path) from None


def _lstat(name: str, dir_fd: int, path: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:
            raise WorkspaceError(f"{path[:80]!r}: name too long", path[:80]) from None
        raise WorkspaceError(f"{path!r}: cannot look up {name!r}: {err.strerror}", path) from None


def _readlink(name: str, dir_fd: int, path: str) -> str:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError as err:
        if err.errno in (errno.EINVAL, errno.ENOENT):  # no longer a symlink: swapped under us
            raise changed(path) from None
        raise WorkspaceError(f"{path!r}: cannot read symlink {name!r}: {err.strerror}", path) from None


def _mkdir(name: str, dir_fd: int, path: str) -> None:
    try:
        os.mkdir(name, 0o755, dir_fd=dir_fd)
    except FileExistsError:
        pass  # created meanwhile: the O_NOFOLLOW open that follows checks what it is
    except OSError as err:
        raise WorkspaceError(f"{path!r}: cannot create directory {name!r}: {err.strerror}", path) from None


def _inside_root(root: str, target: str, path: str) -> str:
    """An absolute symlink target as a path relative to ``root``; outside the root is an error."""
    norm = os.path.normpath(target)
    if norm == root:
        return "."
    if not norm.startswith(root.rstrip("/") + "/"):
        raise WorkspaceError(f"{path!r}: resolves outside the workspace root (through a symlink)", path)
    return norm[len(root.rstrip("/")) + 1 :]
