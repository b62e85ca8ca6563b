"""The workspace's control paths (what the host executes later: ``.git`` config and hooks, venvs) before and after a
test run: a control path the run created is removed; in the unisolated mode, where nothing stops a test from
writing them, ``.git/config`` and ``.git/hooks/`` are put back as they were. Both are reported in the result."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from agentkit.tools.sandbox import CONTROL_PATHS

MAX_TRACKED_BYTES = 1 << 20  # a hook or config larger than this is not snapshotted (reported as changed if it is)


@dataclass
class Snapshot:
    """Which control paths existed, and the bytes of ``.git/config`` and each ``.git/hooks/*`` file (None: absent)."""

    existed: set[str] = field(default_factory=set)
    files: dict[str, tuple[int, bytes] | None] = field(default_factory=dict)


def take(root: Path) -> Snapshot:
    snap = Snapshot({n for n in CONTROL_PATHS if os.path.lexists(root / n)})
    git = root / ".git"
    if not git.is_dir() or git.is_symlink():
        return snap
    snap.files[".git/config"] = _read(git / "config")
    hooks = git / "hooks"
    if hooks.is_dir() and not hooks.is_symlink():
        for entry in sorted(os.listdir(hooks))[:500]:
            snap.files[f".git/hooks/{entry}"] = _read(hooks / entry)
    return snap


def _read(path: Path) -> tuple[int, bytes] | None:
    """``(mode, bytes)`` of a regular file; other kinds and large files as ``(mode, b"")`` (compared by mode)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_TRACKED_BYTES:
        return st.st_mode, b""
    return st.st_mode, path.read_bytes()


def settle(root: Path, before: Snapshot, *, restore: bool) -> list[str]:
    """Undo what the run did to control paths; returns one note per thing changed (empty: untouched).

    A control path created by the run is removed. With ``restore``, ``.git/config`` and the hooks are rewritten
    from ``before`` and new hooks deleted; without it (the path was read-only in the sandbox), a difference is
    only reported.
    """
    notes = []
    for name in CONTROL_PATHS:
        path = root / name
        if name not in before.existed and os.path.lexists(path):
            _remove(path)
            notes.append(f"removed {name} (created by the run)")
    after = take(root)
    for rel in sorted(set(before.files) | set(after.files)):
        if before.files.get(rel) == after.files.get(rel):
            continue
        if restore:
            _put_back(root / rel, before.files.get(rel))
            notes.append(f"restored {rel} (changed by the run)")
        else:
            notes.append(f"{rel} changed during the run")
    return notes


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


def _put_back(path: Path, saved: tuple[int, bytes] | None) -> None:
    if os.path.lexists(path):
        _remove(path)
    if saved is not None and stat.S_ISREG(saved[0]):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, stat.S_IMODE(saved[0]))
        with os.fdopen(fd, "wb") as f:
            f.write(saved[1])
