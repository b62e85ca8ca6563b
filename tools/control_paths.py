"""The workspace's control paths: what a host runs code from later without being asked, and the one list of them.

A control path is, at any depth of the workspace:

- a VCS directory (:data:`VCS_DIRS`: ``.git``, ``.hg``, ``.svn``), a ``.git`` *file* (a ``gitdir:`` pointer), or a
  directory laid out as a bare git repository (``HEAD`` beside ``objects/`` or ``refs/``);
- a virtualenv: a directory holding ``pyvenv.cfg``, or named ``.venv`` / ``venv``;
- a Python start-up file: ``*.pth``, ``sitecustomize.py``, ``usercustomize.py``; and the markers that would make a
  directory one of the above (``pyvenv.cfg``, a file named ``HEAD``).

Three users share this list:

- the file tools refuse to write a control path (:func:`refusal`);
- the sandbox binds every control path that exists before a run read-only (:func:`Snapshot.paths`);
- after every run, in every isolation mode, a control path the run created is removed, one it moved is moved back,
  and a tracked control file it changed (``.git/config``, ``.git/hooks/*``, ``.hg/hgrc``, start-up files) is put
  back (:func:`take`, :func:`settle`); the result names each.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

VCS_DIRS = (".git", ".hg", ".svn")
VENV_NAMES = (".venv", "venv")
STARTUP_FILES = ("sitecustomize.py", "usercustomize.py")
MARKER_FILES = ("pyvenv.cfg", "HEAD")  # a file that turns its directory into a venv or a bare repository
TRACKED_IN_VCS = ("config", "hgrc")  # files of a VCS directory that name commands the host runs
MAX_TRACKED_BYTES = 1 << 20  # a control file larger than this is compared by mode only


def control_name(name: str) -> str | None:
    """Why a single path component is a control path by its name alone (None: it is not)."""
    if name in VCS_DIRS:
        return "a version-control directory"
    if name in VENV_NAMES:
        return "a virtualenv"
    if name.endswith(".pth") or name in STARTUP_FILES:
        return "a Python start-up file"
    if name in MARKER_FILES:
        return "a virtualenv or repository marker"
    return None


def control_dir(path: Path) -> str | None:
    """Why the directory ``path`` is a control directory by what it holds (None: it is not)."""
    if os.path.lexists(path / "pyvenv.cfg"):
        return "a virtualenv (holds pyvenv.cfg)"
    if os.path.lexists(path / "HEAD") and (os.path.lexists(path / "objects") or os.path.lexists(path / "refs")):
        return "a git repository (HEAD beside objects/ or refs/)"
    return None


def refusal(root: Path, parts: list[str]) -> str | None:
    """Why writing the workspace path ``parts`` (canonical components below ``root``) is refused, or None."""
    for i, part in enumerate(parts):
        why = control_name(part)
        if why is not None:
            return f"{'/'.join(parts[: i + 1])} is {why}"
    for i in range(len(parts)):  # the root and every directory on the way
        why = control_dir(root.joinpath(*parts[:i]))
        if why is not None:
            return f"{'/'.join(parts[:i]) or '.'} is {why}"
    return None


@dataclass
class Snapshot:
    """The control paths of a tree: directories by ``(st_dev, st_ino)`` and tracked files by ``(mode, bytes)``."""

    dirs: dict[str, tuple[int, int]] = field(default_factory=dict)
    files: dict[str, tuple[int, bytes | None]] = field(default_factory=dict)

    def paths(self) -> list[str]:
        """Every control path, workspace-relative, outermost first (what the sandbox binds read-only)."""
        inside = [f for f in self.files if not any(f.startswith(d + "/") for d in self.dirs)]
        return sorted([*self.dirs, *inside], key=lambda p: (p.count("/"), p))


def take(root: Path) -> Snapshot:
    """Walk ``root`` (iteratively, symlinks not followed) and record its control paths."""
    snap = Snapshot()
    todo = [""]
    while todo:
        rel = todo.pop()
        try:
            entries = sorted(os.scandir(root / rel if rel else root), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            sub = f"{rel}/{entry.name}" if rel else entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            if is_dir and (entry.name in VCS_DIRS or entry.name in VENV_NAMES or control_dir(Path(entry.path))):
                st = entry.stat(follow_symlinks=False)
                snap.dirs[sub] = (st.st_dev, st.st_ino)
                _track_inside(root, sub, snap)
            elif is_dir:
                todo.append(sub)
            elif control_name(entry.name) is not None:
                snap.files[sub] = _read(Path(entry.path))
    return snap


def _track_inside(root: Path, rel: str, snap: Snapshot) -> None:
    """Record the files of a control directory that name code the host runs: a VCS directory's config and hooks,
    a virtualenv's start-up files."""
    base = root / rel
    if control_name(rel.rsplit("/", 1)[-1]) == "a virtualenv" or os.path.lexists(base / "pyvenv.cfg"):
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in filenames:
                if name.endswith(".pth") or name in STARTUP_FILES:
                    full = Path(dirpath) / name
                    snap.files[full.relative_to(root).as_posix()] = _read(full)
        return
    for name in TRACKED_IN_VCS:
        if os.path.lexists(base / name):
            snap.files[f"{rel}/{name}"] = _read(base / name)
    hooks = base / "hooks"
    if hooks.is_dir() and not hooks.is_symlink():
        for name in sorted(os.listdir(hooks))[:500]:
            snap.files[f"{rel}/hooks/{name}"] = _read(hooks / name)


def _read(path: Path) -> tuple[int, bytes | None]:
    """``(mode, content)``: a regular file's bytes, a symlink's target; None for other kinds and large files
    (compared, and put back, by mode only)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return st.st_mode, os.fsencode(os.readlink(path))
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_TRACKED_BYTES:
        return st.st_mode, None
    return st.st_mode, path.read_bytes()


def settle(root: Path, before: Snapshot) -> list[str]:
    """Undo what a run did to control paths; one note per thing found changed (empty: untouched).

    A control directory the run moved is moved back; one it created, or put in the place of one it deleted, is
    removed; a deleted one is reported (it cannot be rebuilt). A tracked control file the run created is removed,
    and one it changed or deleted is written back from ``before``.
    """
    notes: list[str] = []
    after = take(root)
    by_inode = {ident: rel for rel, ident in before.dirs.items()}
    for rel in sorted(after.dirs, key=lambda p: -p.count("/")):
        if before.dirs.get(rel) == after.dirs[rel]:
            continue
        origin = by_inode.get(after.dirs[rel])
        if origin is not None and origin != rel and not os.path.lexists(root / origin):
            os.rename(root / rel, root / origin)
            notes.append(f"moved {rel} back to {origin} (moved by the run)")
        else:
            _remove(root / rel)
            notes.append(f"removed {rel} (created by the run)")
    after = take(root)
    notes += [f"{rel} was deleted by the run (not restored)" for rel in sorted(set(before.dirs) - set(after.dirs))]
    for rel in sorted(set(before.files) | set(after.files)):
        was, now = before.files.get(rel), after.files.get(rel)
        if was == now or (was is not None and not _parent_exists(root, rel)):
            continue
        if was is None:
            _remove(root / rel)
            notes.append(f"removed {rel} (created by the run)")
        elif _put_back(root / rel, was):
            notes.append(f"restored {rel} (changed by the run)")
        else:
            notes.append(f"{rel} was changed by the run (too large to have been kept; mode put back if present)")
    return notes


def _parent_exists(root: Path, rel: str) -> bool:
    """Whether every directory on the way to ``rel`` is a real directory (no symlink to follow out of the tree)."""
    path = root
    for part in rel.split("/")[:-1]:
        path = path / part
        if not stat.S_ISDIR(os.lstat(path).st_mode) if os.path.lexists(path) else True:
            return False
    return True


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


def _put_back(path: Path, saved: tuple[int, bytes | None]) -> bool:
    """Write a tracked control file back as ``saved`` (a file's bytes or a symlink's target); False where only its
    mode was recorded (then only the mode is put back)."""
    mode, content = saved
    if content is None:
        if os.path.lexists(path) and not path.is_symlink():
            os.chmod(path, stat.S_IMODE(mode))
        return False
    if os.path.lexists(path):
        _remove(path)
    if stat.S_ISLNK(mode):
        os.symlink(os.fsdecode(content), path)
        return True
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, stat.S_IMODE(mode))
    with os.fdopen(fd, "wb") as f:
        f.write(content)
    return True
