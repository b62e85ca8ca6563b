"""A workspace confined to one directory: the file and test tools a coding agent gets.

Every path an agent names is relative to the workspace root; absolute paths, ``..`` escapes and symlinks
resolving outside the root are refused with a ``WorkspaceError`` naming the path. File sizes, listings and
outputs are bounded. Commands run without a shell, with a timeout, and only when their argv starts with an
allow-listed prefix. Files with more than one hard link are refused (one could alias a file outside the root),
names too long or not encodable are refused, ``.git/`` is read-only to the tools, and searches use RE2 (linear
time: no catastrophic backtracking). Globs hold at most :data:`MAX_GLOB_STARS` ``**``.

File tools never open a path string: each path is walked component by component from a descriptor of the root
(``agentkit.tools.beneath``), so a directory swapped for a symlink mid-call is never followed; every failure, a symlink
loop or an argument of the wrong type included, is a ``WorkspaceError``.

``run_tests`` runs the test command in an OS sandbox (``agentkit.tools.sandbox``: bubblewrap where it runs, else
``unshare``, else a plain process group; ``Workspace.isolation`` and each result say which) with a clean environment
(an allow-list), resource limits (``agentkit.tools.limits.SandboxLimits``) and the workspace's control paths
(``.git``, venvs) read-only. See docs/sandbox.md.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import IO

from agentkit.tools import control_paths
from agentkit.tools.beneath import FILE_FLAGS, Resolved, changed, open_dir, resolve_beneath
from agentkit.tools.limits import PidsCgroup, SandboxLimits, describe_hit, enforcement, limits_hit
from agentkit.tools.sandbox import describe, pick_mode, prepare, require

from agentkit.constrain.edits import Edit, parse_edits, search_replace_template
from agentkit.constrain.edits import apply_edits as apply_edit_list
from agentkit.constrain.nodes import Template
from agentkit.errors import EditError, WorkspaceError
from agentkit.tools.edit_guard import EditGuard

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache",
                       ".pytest_cache", ".ruff_cache", ".tox"})  # fmt: skip
MAX_LIST_ENTRIES = 500
MAX_SEARCH_MATCHES = 500
MAX_LINE_SCAN = 2_000  # characters of a line that search_text looks at
MAX_SHOWN_LINE = 200  # characters of a matching line that search_text shows
MAX_GLOB_STARS = 4  # ``**`` in one glob
MAX_GLOB_CHARS = 256
MAX_NAME_BYTES = 255  # one path component (NAME_MAX)
MAX_PATH_BYTES = 4096
MAX_DEPTH = 64  # directories in one path, and levels a walk descends
# pytest options that could point it outside the workspace or load arbitrary plugins/config
REFUSED_OPTIONS = ("-o", "--override-ini", "-p", "-c", "--config-file", "--rootdir", "--confcutdir", "--basetemp",
                   "--debug", "--junit-xml", "--junitxml", "--result-log", "--resultlog")

try:  # linear-time regexes for agent-given patterns
    import re2 as _re2
except ImportError:  # pragma: no cover - google-re2 is a dependency
    _re2 = None


def _compile_user_regex(pattern: str):
    """An agent's regex compiled with RE2 (no backtracking); Python ``re`` only when RE2 is not installed."""
    if _re2 is None:  # pragma: no cover
        return re.compile(pattern)
    opts = _re2.Options()
    opts.log_errors = False
    return _re2.compile(pattern, opts)


@lru_cache(maxsize=64)
def _glob_regex(pattern: str):
    """Compile a glob: ``*`` and ``?`` stay within one path segment, ``**/`` spans any number of directories.
    At most MAX_GLOB_STARS ``**`` (repeats collapse: ``**/**/`` is ``**/``); matched with RE2 (linear time)."""
    while "**/**/" in pattern:
        pattern = pattern.replace("**/**/", "**/")
    if len(pattern) > MAX_GLOB_CHARS or pattern.count("**") > MAX_GLOB_STARS:
        raise WorkspaceError(f"glob {pattern[:60]!r}: too complex (at most {MAX_GLOB_CHARS} characters and "
                             f"{MAX_GLOB_STARS} '**')")
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (j := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : j]
            out.append("[" + ("^" + re.escape(body[1:]) if body[0] == "!" else re.escape(body)) + "]")
            i = j + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    try:
        return _compile_user_regex("".join(out))
    except Exception as err:  # noqa: BLE001 -- re2.error / re.error
        raise WorkspaceError(f"invalid glob {pattern!r}: {err}") from None


def _glob_match(pattern: str, rel: str) -> bool:
    """Match a posix path; a pattern without ``/`` is matched against the file name alone (``*.py``)."""
    target = rel if "/" in pattern else rel.rsplit("/", 1)[-1]
    return _glob_regex(pattern).fullmatch(target) is not None


def _truncate(text: str, limit: int, hint: str = "") -> str:
    """Keep the head and (mostly) the tail of ``text`` within ``limit`` characters."""
    if len(text) <= limit:
        return text
    head, tail = limit // 4, limit - limit // 4
    note = f"\n[... {len(text) - head - tail} characters truncated{hint} ...]\n"
    return text[:head] + note + text[len(text) - tail :]


class Workspace:
    """File and test tools confined to ``root``.

    Args:
        root: the workspace directory; every tool path is relative to it.
        max_file_bytes: largest file that may be read, searched, edited or written.
        max_output_chars: bound on the text any tool returns.
        allowed_commands: argv prefixes that may be run; the first is the test command of ``run_tests``.
            A leading ``python``/``python3`` runs the current interpreter.
        command_timeout_s: wall-clock limit of a command; its whole process group is killed after it.
        limits: memory, process, file-size, CPU and /tmp limits of a command (``SandboxLimits``; its defaults).
        isolation: the sandbox of commands: ``"auto"`` (the best available: bwrap, then the unshare fallback;
            with neither, running a command raises ``SandboxUnavailableError``), one of ``"bwrap"``,
            ``"unshare"`` (an unavailable one is an error), or ``"none"``: NO isolation, only when named. The mode
            chosen is ``self.isolation`` (None: none holds here); what it enforces is in
            ``agentkit.tools.sandbox`` and docs/sandbox.md.
        sandbox_ro_paths: more host paths the tests need, bound read-only into the bwrap sandbox (by default only
            system dirs and the Python installation, venv and ``sys.path`` are).
        guard: what edits and writes may not do (``agentkit.tools.edit_guard.EditGuard``: no added merge markers
            or runaway repeats; with ``protect_tests``, no change to test files or test data).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_file_bytes: int = 200_000,
        max_output_chars: int = 8_000,
        allowed_commands: tuple[tuple[str, ...], ...] = (("python", "-m", "pytest"),),
        command_timeout_s: float = 60,
        limits: SandboxLimits | None = None,
        isolation: str = "auto",
        sandbox_ro_paths: tuple[str, ...] = (),
        guard: EditGuard | None = None,
    ) -> None:
        if not Path(root).is_dir():
            raise WorkspaceError(f"workspace root {str(root)!r} is not a directory", str(root))
        self.root = Path(root).resolve()
        self.max_file_bytes = max_file_bytes
        self.max_output_chars = max_output_chars
        self.allowed_commands = tuple(tuple(c) for c in allowed_commands)
        if not self.allowed_commands or not all(self.allowed_commands):
            raise WorkspaceError("allowed_commands needs at least one non-empty argv prefix")
        self.command_timeout_s = command_timeout_s
        self.limits = limits or SandboxLimits()
        self.isolation = pick_mode(isolation)
        self.sandbox_ro_paths = tuple(sandbox_ro_paths)
        self.guard = guard if guard is not None else EditGuard()

    # ------------------------------------------------------------------ paths

    def _parts(self, path: str) -> list[str]:
        """The lexically normalised components of workspace-relative ``path``; refuses bad names and escapes."""
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            raise WorkspaceError(f"invalid path {path!r}", str(path))
        try:
            raw = os.fsencode(path)
            path.encode("utf-8")
        except UnicodeEncodeError:
            raise WorkspaceError(f"{_shown(path)}: not encodable as a file name (lone surrogate?)",
                                 _shown(path)) from None
        if len(raw) > MAX_PATH_BYTES or any(len(part) > MAX_NAME_BYTES for part in raw.split(b"/")):
            raise WorkspaceError(f"{path[:80]!r}...: name too long (at most {MAX_NAME_BYTES} bytes a component, "
                                 f"{MAX_PATH_BYTES} in all)", path[:80])
        if raw.count(b"/") >= MAX_DEPTH:
            raise WorkspaceError(f"{path[:80]!r}...: too deep (at most {MAX_DEPTH} components)", path[:80])
        if PurePosixPath(path).is_absolute() or Path(path).is_absolute():
            raise WorkspaceError(
                f"{path!r}: absolute paths are not allowed; give a path relative to the workspace", path
            )
        norm = os.path.normpath(path)
        if norm == ".." or norm.startswith("../"):
            raise WorkspaceError(f"{path!r}: escapes the workspace root", path)
        return [p for p in norm.split("/") if p not in ("", ".")]

    def _walk(self, path: str, *, create_dirs: bool = False, for_write: bool = False) -> Resolved:
        """Resolve ``path`` race-free from a descriptor of the root (see ``agentkit.tools.beneath``); ``for_write``
        refuses a control path (or a path too deep) before any directory is created."""
        guard = (lambda parts: self._writable(parts, path)) if for_write else None
        return resolve_beneath(str(self.root), self._parts(path), path, create_dirs=create_dirs, guard=guard)

    def resolve(self, path: str) -> Path:
        """The absolute path of workspace-relative ``path`` (symlinks inside resolved), refusing anything that
        leaves the root. Informational: the tools themselves never open a path string (see ``_walk``)."""
        with self._walk(path) as r:
            return self.root.joinpath(*r.parts)

    def rel(self, full: Path) -> str:
        """Workspace-relative posix form of an absolute path inside the root."""
        return full.relative_to(self.root).as_posix() or "."

    def _iter_files(self, base_rel: str) -> Iterator[str | TooDeep]:
        """Workspace-relative paths of the files under ``base_rel``, each directory's files (sorted) before its
        subdirectories (sorted), skipping tool/VCS directories and symlinks that lead outside or to no regular
        file. Walked iteratively by descriptors, each directory opened ``O_NOFOLLOW`` from its parent's (a directory
        swapped for a symlink mid-walk is not descended into); at most :data:`MAX_DEPTH` levels, one descriptor a
        level. Directories below that depth are not entered; a last ``TooDeep`` says how many."""
        with self._walk(base_rel) as r:
            base_fd = open_dir(r.name or ".", r.dir_fd, base_rel)
            prefix = r.parts
        stack: list[tuple[int, list[str], list[str]]] = []  # (dir fd, its parts, its subdirectories still to visit)
        too_deep = 0
        try:
            fd, here = base_fd, prefix
            while True:
                dirs, files = _list_dir(fd)
                for name in files:
                    rel = "/".join([*here, name])
                    if not self._linked_file_outside(name, fd, rel):
                        yield rel
                stack.append((fd, here, [d for d in reversed(dirs) if d not in SKIP_DIRS]))
                fd = -1
                while stack and fd < 0:
                    top_fd, top, todo = stack[-1]
                    if not todo:
                        os.close(stack.pop()[0])
                        continue
                    name = todo.pop()
                    if len(top) + 1 >= MAX_DEPTH:  # its files would be deeper than a tool may name
                        too_deep += 1
                        continue
                    with contextlib.suppress(WorkspaceError):
                        fd, here = open_dir(name, top_fd, "/".join([*top, name])), [*top, name]
                if fd < 0:
                    break
        finally:
            for entry in stack:
                os.close(entry[0])
        if too_deep:
            yield TooDeep(too_deep)

    def _linked_file_outside(self, name: str, dir_fd: int, rel: str) -> bool:
        """Whether ``name`` is a symlink that does not resolve to a regular file inside the root."""
        try:
            if not stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                return False
            with self._walk(rel) as r:
                return not stat.S_ISREG(os.stat(r.name, dir_fd=r.dir_fd, follow_symlinks=False).st_mode)
        except (OSError, WorkspaceError):
            return True

    def _writable(self, parts: list[str], path: str) -> None:
        """Refuse writes to control paths (the host runs code from them later; ``agentkit.tools.control_paths``)
        and paths deeper than :data:`MAX_DEPTH` once symlinks are resolved."""
        if len(parts) > MAX_DEPTH:
            raise WorkspaceError(f"{path[:80]!r}: too deep (at most {MAX_DEPTH} components)", path[:80])
        why = control_paths.refusal(self.root, parts)
        if why is not None:
            raise WorkspaceError(f"{path!r}: read-only to the workspace tools ({why}: the host runs code from it)",
                                 path)

    def _read_bytes(self, path: str) -> tuple[str, bytes]:
        """The canonical relative path and bytes of a file, read through one descriptor opened race-free and then
        checked: a regular file, not a symlink, one hard link only (a second link could be an outside file's),
        within the size limit, not binary."""
        with self._walk(path) as r:
            try:
                fd = os.open(r.name, os.O_RDONLY | FILE_FLAGS, dir_fd=r.dir_fd)
            except OSError as err:
                if err.errno == errno.ELOOP:  # became a symlink after the walk looked at it
                    raise changed(path) from None
                if err.errno == errno.ENAMETOOLONG:
                    raise WorkspaceError(f"{path[:80]!r}: name too long", path[:80]) from None
                raise WorkspaceError(f"{path!r}: no such file", path) from None
            rel = r.rel
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise WorkspaceError(f"{path!r}: {kind}; read_file reads files (list_files lists directories)", path)
        with os.fdopen(fd, "rb") as f:
            if st.st_nlink > 1:
                raise WorkspaceError(f"{path!r}: file has {st.st_nlink} hard links; linked files are refused (one "
                                     "link may be a file outside the workspace)", path)
            if st.st_size > self.max_file_bytes:
                raise WorkspaceError(f"{path!r}: file is {st.st_size} bytes, over the {self.max_file_bytes}-byte "
                                     "limit", path)
            data = f.read(self.max_file_bytes + 1)
        if len(data) > self.max_file_bytes:
            raise WorkspaceError(f"{path!r}: file grew over the {self.max_file_bytes}-byte limit", path)
        if b"\x00" in data[:8192]:
            raise WorkspaceError(f"{path!r}: binary file", path)
        return rel, data

    def _read_text(self, path: str) -> tuple[str, str]:
        rel, data = self._read_bytes(path)
        try:
            return rel, data.decode("utf-8")
        except UnicodeDecodeError:
            raise WorkspaceError(f"{path!r}: not UTF-8 text", path) from None

    # ------------------------------------------------------------------ tools

    def list_files(self, subdir: str = ".", pattern: str = "*") -> list[str]:
        """List files under a directory of the workspace, recursively.

        Args:
            subdir: directory to list, relative to the workspace root.
            pattern: glob on the file name (``*.py``); with a ``/`` it matches the path relative to ``subdir``
                (``pkg/**/*.py``).

        Returns:
            Sorted workspace-relative paths; a last entry says how many more were left out.
        """
        _check_types("list_files", subdir=(subdir, str), pattern=(pattern, str))
        with self._walk(subdir) as r:
            st = _stat_at(r)
            if st is None or not stat.S_ISDIR(st.st_mode):
                raise WorkspaceError(f"{subdir!r}: not a directory", subdir)
            base = "" if not r.parts else r.rel + "/"
        out, chars, more = [], 0, 0
        for rel in self._iter_files(subdir):
            if isinstance(rel, TooDeep):
                out.append(rel.note())
                break
            if not _glob_match(pattern, rel[len(base):]):
                continue
            if len(out) >= MAX_LIST_ENTRIES or chars + len(rel) + 1 > self.max_output_chars:
                more += 1
                continue
            out.append(rel)
            chars += len(rel) + 1
        if more:
            out.append(f"... {more} more files not shown (narrow subdir or pattern)")
        return out

    def read_file(
        self, path: str, start_line: int | None = None, end_line: int | None = None, line_numbers: bool = False
    ) -> str:
        """Read a text file of the workspace, whole or a range of lines.

        Args:
            path: file path relative to the workspace root.
            start_line: first line to return (1-based, inclusive); default the first line.
            end_line: last line to return (inclusive); default the last line.
            line_numbers: prefix each line with its number and a tab.

        Returns:
            The text, cut to the output limit with a note saying where to continue.
        """
        _check_types("read_file", path=(path, str), start_line=(start_line, int | None),
                     end_line=(end_line, int | None), line_numbers=(line_numbers, bool))
        _, text = self._read_text(path)
        lines = text.splitlines(keepends=True)
        if not lines:
            return ""
        start = 1 if start_line is None else start_line
        end = len(lines) if end_line is None else min(end_line, len(lines))
        if not 1 <= start <= end:
            raise WorkspaceError(
                f"{path!r}: bad line range {start_line}..{end_line} (file has {len(lines)} lines)", path
            )
        out, chars = [], 0
        for n in range(start, end + 1):
            line = f"{n}\t{lines[n - 1]}" if line_numbers else lines[n - 1]
            if chars + len(line) > self.max_output_chars and out:
                out.append(f"\n[... truncated: lines {n}-{end} not shown; read again with start_line={n}]\n")
                break
            out.append(line)
            chars += len(line)
        return _truncate("".join(out), self.max_output_chars + 200)

    def search_text(self, regex: str, path_glob: str = "**/*", max_matches: int = 50) -> list[str]:
        """Search the workspace's text files for lines matching a regular expression (Python syntax).

        Args:
            regex: pattern searched for in each line.
            path_glob: which files to search (``**/*.py``; a pattern without ``/`` matches file names).
            max_matches: most matching lines to return (at most 500).

        Returns:
            ``path:line: text`` entries; a last entry says when more matches were left out.
        """
        _check_types("search_text", regex=(regex, str), path_glob=(path_glob, str), max_matches=(max_matches, int))
        try:
            regex.encode("utf-8")
            rx = _compile_user_regex(regex)
        except UnicodeEncodeError:
            raise WorkspaceError(f"invalid regex {_shown(regex)}: not encodable text") from None
        except Exception as err:  # noqa: BLE001 -- re2.error (backreferences, lookaround: RE2 has neither)
            raise WorkspaceError(f"invalid regex {regex!r} (RE2 syntax: no backreferences or lookaround): {err}") \
                from None
        limit = max(1, min(max_matches, MAX_SEARCH_MATCHES))
        out: list[str] = []
        chars = 0
        for rel in self._iter_files("."):
            if isinstance(rel, TooDeep):
                out.append(rel.note())
                break
            if not _glob_match(path_glob, rel):
                continue
            try:
                text = self._read_bytes(rel)[1].decode("utf-8", errors="replace")
            except WorkspaceError:  # too big, binary or changed meanwhile: not searched
                continue
            for n, line in enumerate(text.splitlines(), 1):
                if rx.search(line[:MAX_LINE_SCAN]) is None:
                    continue
                hit = f"{rel}:{n}: {line.strip()[:MAX_SHOWN_LINE]}"
                if len(out) >= limit or chars + len(hit) > self.max_output_chars:
                    out.append(f"... more matches not shown (limit {limit}); narrow regex or path_glob")
                    return out
                out.append(hit)
                chars += len(hit) + 1
        return out

    def write_file(self, path: str, content: str) -> str:
        """Create a new text file (missing parent directories are created). Existing files are not overwritten.

        Args:
            path: new file path relative to the workspace root.
            content: the file's full text.

        Returns:
            A one-line confirmation.
        """
        _check_types("write_file", path=(path, str), content=(content, str))
        parts = self._parts(path)
        self._writable(parts, path)
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as err:
            raise WorkspaceError(f"{path!r}: content is not encodable as UTF-8 (character {err.start})", path) \
                from None
        if len(data) > self.max_file_bytes:
            raise WorkspaceError(
                f"{path!r}: content is {len(data)} bytes, over the {self.max_file_bytes}-byte limit", path
            )
        self.guard.check("/".join(parts), "", content)
        with self._walk(path, create_dirs=True, for_write=True) as r:
            self.guard.check(r.rel, "", content)
            if r.exists or not r.name:
                raise WorkspaceError(f"{path!r}: already exists; change it with apply_edits", path)
            try:
                fd = os.open(r.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | FILE_FLAGS, 0o644, dir_fd=r.dir_fd)
            except FileExistsError:
                raise WorkspaceError(f"{path!r}: already exists; change it with apply_edits", path) from None
            except OSError as err:
                raise WorkspaceError(f"{path!r}: cannot create: {err.strerror}", path) from None
            rel = r.rel
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return f"wrote {rel} ({len(content.splitlines())} lines, {len(data)} bytes)"

    def apply_edits(self, edits: str) -> str:
        """Apply SEARCH/REPLACE edit blocks to existing files; all of them or, on any error, none.

        Each block is the file path on its own line, then ``<<<<<<< SEARCH``, exact whole lines of the file,
        ``=======``, the replacement lines, and ``>>>>>>> REPLACE``.

        Args:
            edits: the text holding one or more edit blocks.

        Returns:
            A summary of the files changed, with a note for each SEARCH text found more than once.
        """
        _check_types("apply_edits", edits=(edits, str))
        parsed = parse_edits(edits)
        if not parsed:
            raise EditError(f"no edit block found: expected a path line, then {'<<<<<<< SEARCH'!r} ... >>>>>>> REPLACE")
        return self.apply_edit_list(parsed)

    def apply_edit_list(self, edits: list[Edit]) -> str:
        """Apply parsed ``Edit`` objects (see ``apply_edits``); not an agent tool."""
        files: dict[str, str] = {}
        canon: list[Edit] = []
        for e in edits:
            self._writable(self._parts(e.path), e.path)
            rel, text = self._read_text(e.path)
            self._writable(rel.split("/"), e.path)
            files.setdefault(rel, text)
            canon.append(Edit(rel, e.search, e.replace))
        notes: list[str] = []
        new = apply_edit_list(files, canon, notes)
        for rel, text in new.items():
            try:
                size = len(text.encode("utf-8"))
            except UnicodeEncodeError as err:
                raise WorkspaceError(f"{rel!r}: edited text is not encodable as UTF-8 (character {err.start})",
                                     rel) from None
            if size > self.max_file_bytes:
                raise WorkspaceError(f"{rel!r}: edited file would exceed {self.max_file_bytes} bytes", rel)
        for rel, text in new.items():
            self.guard.check(rel, files[rel], text)
        changed = []
        for rel, text in new.items():
            if text == files[rel]:
                continue
            self._replace(rel, text.encode("utf-8"))
            delta = text.count("\n") - files[rel].count("\n")
            changed.append(f"{rel} ({delta:+d} lines)")
        if not changed:  # every REPLACE equals its SEARCH: reported, not a silent success the model builds on
            raise EditError("the edit changes nothing: its REPLACE lines are the same as its SEARCH lines; "
                            "write the corrected lines after =======", canon[0].path)
        summary = f"applied {len(edits)} edit(s); changed: {', '.join(changed)}"
        return "\n".join([summary, *notes])

    def _replace(self, rel: str, data: bytes) -> None:
        """Write ``data`` to a temporary file beside ``rel`` and rename it over ``rel``, all by directory
        descriptor (a parent swapped for a symlink meanwhile fails the walk instead of being followed)."""
        with self._walk(rel) as r:
            st = _stat_at(r)
            if st is None or not stat.S_ISREG(st.st_mode):
                raise changed(rel)
            tmp = f".{r.name[:200]}.{secrets.token_hex(6)}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | FILE_FLAGS, 0o600, dir_fd=r.dir_fd)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    os.fchmod(f.fileno(), st.st_mode & 0o7777)
                os.replace(tmp, r.name, src_dir_fd=r.dir_fd, dst_dir_fd=r.dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=r.dir_fd)
                raise

    def run_command(self, argv: list[str]) -> dict[str, object]:
        """Run an allow-listed command in the workspace root (no shell, bounded time, output and resources, in the
        sandbox of ``self.isolation``); not a tool.

        Returns ``{"command", "exit_code", "timed_out", "output", "isolation", "limits_hit", "limits",
        "control_paths"}``: a timed-out or killed command has a negative code; ``limits_hit`` names the
        ``SandboxLimits`` fields that stopped it, ``limits`` how each is enforced here; ``control_paths`` says what
        the run did to ``.git`` and other control paths (and what was undone).
        """
        exe = self._checked_argv(argv)
        mode = require(self.isolation)
        before = control_paths.take(self.root)
        cgroup = PidsCgroup(self.limits.max_processes)
        try:
            with tempfile.TemporaryFile() as out, tempfile.TemporaryDirectory(prefix="agentkit-ws-") as tmp:
                run = prepare(mode, self.root, tmp, exe, self.limits, cgroup, self.sandbox_ro_paths,
                              tuple(before.paths()))
                try:
                    code, timed_out = self._run(run.argv, run.env, out, run.fds)
                    cgroup.kill()  # what left the process group (a double-forked daemon) where a cgroup holds it
                finally:
                    for fd in run.fds:
                        os.close(fd)
                output = self._read_output(out)
            hit = limits_hit(self.limits, code, timed_out, output, cgroup)
            enforced = enforcement(self.limits, mode, cgroup)
        finally:
            cgroup.remove()
        notes = control_paths.settle(self.root, before)
        if timed_out:
            output += f"\n[command timed out after {self.command_timeout_s} s and was killed]"
        if hit:
            output += describe_hit(self.limits, hit)
        if notes:
            output += "\n[sandbox: " + "; ".join(notes) + "]"
        return {"command": shlex.join(argv), "exit_code": code, "timed_out": timed_out, "output": output,
                "isolation": describe(mode), "limits_hit": hit, "limits": enforced,
                "control_paths": notes}  # fmt: skip

    def _checked_argv(self, argv: list[str]) -> list[str]:
        """The argv to execute for ``argv`` (a leading ``python`` is this interpreter), after the allow-list."""
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise WorkspaceError(f"invalid command {argv!r}")
        prefix = next((c for c in self.allowed_commands if tuple(argv[: len(c)]) == c), None)
        if prefix is None:
            allowed = "; ".join(shlex.join(c) for c in self.allowed_commands)
            raise WorkspaceError(f"command {shlex.join(argv)!r} is not allowed (allowed prefixes: {allowed})")
        _check_args(argv[len(prefix) :])
        return [sys.executable, *argv[1:]] if argv[0] in ("python", "python3") else list(argv)

    def _run(self, argv: list[str], env: dict[str, str], out: IO[bytes], fds: tuple[int, ...] = ()
             ) -> tuple[int, bool]:
        """Run to completion or the timeout (``fds`` inherited); the whole process group is killed either way."""
        try:
            proc = subprocess.Popen(argv, cwd=self.root, stdin=subprocess.DEVNULL, stdout=out, pass_fds=fds,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)  # fmt: skip
        except (OSError, subprocess.SubprocessError) as err:
            raise WorkspaceError(f"cannot run {argv[-1]!r} in the {self.isolation!r} sandbox: {err}") from None
        timed_out = False
        try:
            proc.wait(timeout=self.command_timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:  # the whole group: a hung test, and whatever it started
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            code = proc.wait()
        return code, timed_out

    def _read_output(self, out: IO[bytes]) -> str:
        limit = self.max_output_chars
        size = out.seek(0, os.SEEK_END)
        out.seek(0)
        if size <= 8 * limit:
            return _truncate(out.read().decode("utf-8", errors="replace"), limit)
        head = out.read(limit).decode("utf-8", errors="replace")
        out.seek(size - 4 * limit)
        tail = out.read().decode("utf-8", errors="replace")
        return _truncate(head + f"\n[... {size - 5 * limit} bytes skipped ...]\n" + tail, limit)

    def run_tests(self, args: list[str] | None = None) -> dict[str, object]:
        """Run the test command (by default ``python -m pytest``) in the workspace root.

        Args:
            args: extra arguments, e.g. ``["-q", "tests/test_app.py::test_add"]``; paths must stay inside.

        Returns:
            ``exit_code`` (0 when all tests pass; negative when killed), ``timed_out``, and the ``output``
            (head and tail kept when long).
        """
        if args is not None and (not isinstance(args, list) or not all(isinstance(a, str) for a in args)):
            raise WorkspaceError(f"run_tests: argument 'args' must be a list of strings or None, got {args!r:.80}")
        return self.run_command([*self.allowed_commands[0], *(args or [])])

    # ------------------------------------------------------------------ helpers for constrained decoding

    def edit_template(self, paths: list[str], max_edits: int = 4, max_search_lines: int = 20) -> Template:
        """A search/replace ``Template`` over the current contents of ``paths`` (see ``agentkit.constrain.edits``)."""
        files = dict(self._read_text(p) for p in paths)
        return search_replace_template(files, max_edits=max_edits, max_search_lines=max_search_lines)


@dataclass(frozen=True)
class TooDeep:
    """The last item of a walk that left directories out for depth: how many."""

    dirs: int

    def note(self) -> str:
        return f"... {self.dirs} directories deeper than {MAX_DEPTH} levels not walked"


def _list_dir(fd: int) -> tuple[list[str], list[str]]:
    """The sorted subdirectory and non-directory names of the open directory ``fd`` (symlinks not followed)."""
    dirs, files = [], []
    with os.scandir(fd) as it:
        for entry in it:
            (dirs if entry.is_dir(follow_symlinks=False) else files).append(entry.name)
    return sorted(dirs), sorted(files)


def _stat_at(r: Resolved) -> os.stat_result | None:
    """``lstat`` of a resolved entry (the root itself when ``r.name`` is empty); None when missing."""
    try:
        return os.stat(r.name or ".", dir_fd=r.dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _check_types(tool: str, **args: tuple[object, object]) -> None:
    """A typed error for an argument of the wrong type (``read_file("a.txt", "1")``), naming tool, argument and
    the type given; ``bool`` is not accepted where an ``int`` is asked."""
    for name, (value, want) in args.items():
        if isinstance(value, bool) and want is not bool:
            ok = False
        else:
            ok = isinstance(value, want)  # type: ignore[arg-type]
        if not ok:
            shown = getattr(want, "__name__", None) or str(want).replace("NoneType", "None")
            raise WorkspaceError(f"{tool}: argument {name!r} must be {shown}, got {type(value).__name__} "
                                 f"{value!r:.60}")


def _shown(text: str) -> str:
    return repr(text.encode("utf-8", "backslashreplace").decode("utf-8")[:80])


def _check_args(args: list[str]) -> None:
    """Refuse arguments that name paths outside the workspace or options that reconfigure pytest (``-o``,
    ``--override-ini``, ``-c``, ``--rootdir``...; ``-p`` only as ``-p no:NAME``)."""
    for i, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if value.startswith(("/", "~")) or ".." in PurePosixPath(value).parts:
            raise WorkspaceError(f"argument {arg!r} points outside the workspace", value)
        if arg.startswith("-pno:") or (arg == "-p" and i + 1 < len(args) and args[i + 1].startswith("no:")):
            continue  # -p no:NAME only disables a plugin
        opt = arg.split("=", 1)[0]
        if opt in REFUSED_OPTIONS or any(arg.startswith(o) for o in REFUSED_OPTIONS if len(o) == 2):
            raise WorkspaceError(f"option {arg!r} is not allowed for the test command (refused: "
                                 f"{', '.join(REFUSED_OPTIONS)}; -p only as -p no:NAME)", arg)


def workspace_tools(ws: Workspace) -> list[Callable[..., object]]:
    """The agent tools of ``ws`` as bound methods (names, signatures and docstrings carry their schemas)."""
    return [ws.list_files, ws.read_file, ws.search_text, ws.write_file, ws.apply_edits, ws.run_tests]
