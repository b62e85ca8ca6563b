"""A workspace confined to one directory: the file and test tools a coding agent gets.

Every path an agent names is relative to the workspace root; absolute paths, ``..`` escapes and symlinks
resolving outside the root are refused with a ``WorkspaceError`` naming the path. File sizes, listings and
outputs are bounded. Commands run without a shell, with a timeout, and only when their argv starts with an
allow-listed prefix. This confines the *tools*, it is not an OS sandbox: the test command itself runs the
repository's code with the caller's privileges.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from agentkit.constrain.edits import Edit, parse_edits, search_replace_template
from agentkit.constrain.edits import apply_edits as apply_edit_list
from agentkit.constrain.nodes import Template
from agentkit.errors import EditError, WorkspaceError

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache",
                       ".pytest_cache", ".ruff_cache", ".tox"})  # fmt: skip
MAX_LIST_ENTRIES = 500
MAX_SEARCH_MATCHES = 500
MAX_LINE_SCAN = 2_000  # characters of a line that search_text looks at
MAX_SHOWN_LINE = 200  # characters of a matching line that search_text shows


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob: ``*`` and ``?`` stay within one path segment, ``**/`` spans any number of directories."""
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
    return re.compile("".join(out))


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
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_file_bytes: int = 200_000,
        max_output_chars: int = 8_000,
        allowed_commands: tuple[tuple[str, ...], ...] = (("python", "-m", "pytest"),),
        command_timeout_s: float = 60,
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

    # ------------------------------------------------------------------ paths

    def resolve(self, path: str) -> Path:
        """The absolute path of workspace-relative ``path``, refusing anything that leaves the root."""
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            raise WorkspaceError(f"invalid path {path!r}", str(path))
        if PurePosixPath(path).is_absolute() or Path(path).is_absolute():
            raise WorkspaceError(
                f"{path!r}: absolute paths are not allowed; give a path relative to the workspace", path
            )
        norm = os.path.normpath(path)
        if norm == ".." or norm.startswith("../"):
            raise WorkspaceError(f"{path!r}: escapes the workspace root", path)
        full = (self.root / norm).resolve()
        if full != self.root and self.root not in full.parents:
            raise WorkspaceError(f"{path!r}: resolves outside the workspace root (through a symlink)", path)
        return full

    def rel(self, full: Path) -> str:
        """Workspace-relative posix form of an absolute path inside the root."""
        return full.relative_to(self.root).as_posix() or "."

    def _iter_files(self, base: Path) -> Iterator[Path]:
        """Files under ``base`` in sorted order, skipping tool/VCS directories and links leading outside."""
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                p = Path(dirpath, name)
                if p.is_symlink():
                    target = p.resolve()
                    if self.root not in target.parents or not target.is_file():
                        continue
                yield p

    def _read_bytes(self, full: Path, path: str) -> bytes:
        if not full.is_file():
            raise WorkspaceError(f"{path!r}: no such file", path)
        size = full.stat().st_size
        if size > self.max_file_bytes:
            raise WorkspaceError(f"{path!r}: file is {size} bytes, over the {self.max_file_bytes}-byte limit", path)
        data = full.read_bytes()
        if b"\x00" in data[:8192]:
            raise WorkspaceError(f"{path!r}: binary file", path)
        return data

    def _read_text(self, path: str) -> tuple[Path, str]:
        full = self.resolve(path)
        try:
            return full, self._read_bytes(full, path).decode("utf-8")
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
        base = self.resolve(subdir)
        if not base.is_dir():
            raise WorkspaceError(f"{subdir!r}: not a directory", subdir)
        out, chars, more = [], 0, 0
        for p in self._iter_files(base):
            if not _glob_match(pattern, p.relative_to(base).as_posix()):
                continue
            rel = self.rel(p)
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
        try:
            rx = re.compile(regex)
        except re.error as err:
            raise WorkspaceError(f"invalid regex {regex!r}: {err}") from None
        limit = max(1, min(max_matches, MAX_SEARCH_MATCHES))
        out: list[str] = []
        chars = 0
        for p in self._iter_files(self.root):
            rel = self.rel(p)
            if not _glob_match(path_glob, rel):
                continue
            try:
                text = self._read_bytes(p, rel).decode("utf-8", errors="replace")
            except WorkspaceError:  # too big or binary: not searched
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
        full = self.resolve(path)
        if full.exists() or full.is_symlink():
            raise WorkspaceError(f"{path!r}: already exists; change it with apply_edits", path)
        data = content.encode("utf-8")
        if len(data) > self.max_file_bytes:
            raise WorkspaceError(
                f"{path!r}: content is {len(data)} bytes, over the {self.max_file_bytes}-byte limit", path
            )
        full.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return f"wrote {self.rel(full)} ({len(content.splitlines())} lines, {len(data)} bytes)"

    def apply_edits(self, edits: str) -> str:
        """Apply SEARCH/REPLACE edit blocks to existing files; all of them or, on any error, none.

        Each block is the file path on its own line, then ``<<<<<<< SEARCH``, exact whole lines of the file,
        ``=======``, the replacement lines, and ``>>>>>>> REPLACE``.

        Args:
            edits: the text holding one or more edit blocks.

        Returns:
            A summary of the files changed, with a note for each SEARCH text found more than once.
        """
        parsed = parse_edits(edits)
        if not parsed:
            raise EditError(f"no edit block found: expected a path line, then {'<<<<<<< SEARCH'!r} ... >>>>>>> REPLACE")
        return self.apply_edit_list(parsed)

    def apply_edit_list(self, edits: list[Edit]) -> str:
        """Apply parsed ``Edit`` objects (see ``apply_edits``); not an agent tool."""
        files: dict[str, str] = {}
        fulls: dict[str, Path] = {}
        canon: list[Edit] = []
        for e in edits:
            full = self.resolve(e.path)
            rel = self.rel(full)
            if rel not in files:
                fulls[rel], files[rel] = self._read_text(e.path)
            canon.append(Edit(rel, e.search, e.replace))
        notes: list[str] = []
        new = apply_edit_list(files, canon, notes)
        for rel, text in new.items():
            if len(text.encode("utf-8")) > self.max_file_bytes:
                raise WorkspaceError(f"{rel!r}: edited file would exceed {self.max_file_bytes} bytes", rel)
        changed = []
        for rel, text in new.items():
            if text == files[rel]:
                continue
            full = fulls[rel]
            fd, tmp = tempfile.mkstemp(dir=full.parent, prefix=f".{full.name}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(text.encode("utf-8"))
            os.chmod(tmp, full.stat().st_mode & 0o7777)
            os.replace(tmp, full)
            delta = text.count("\n") - files[rel].count("\n")
            changed.append(f"{rel} ({delta:+d} lines)")
        summary = f"applied {len(edits)} edit(s); changed: {', '.join(changed) or 'nothing'}"
        return "\n".join([summary, *notes])

    def run_command(self, argv: list[str]) -> dict[str, object]:
        """Run an allow-listed command in the workspace root (no shell, bounded time and output); not a tool.

        Returns ``{"command", "exit_code", "timed_out", "output"}``; a timed-out command has a negative code.
        """
        if not argv or not all(isinstance(a, str) for a in argv):
            raise WorkspaceError(f"invalid command {argv!r}")
        prefix = next((c for c in self.allowed_commands if tuple(argv[: len(c)]) == c), None)
        if prefix is None:
            allowed = "; ".join(shlex.join(c) for c in self.allowed_commands)
            raise WorkspaceError(f"command {shlex.join(argv)!r} is not allowed (allowed prefixes: {allowed})")
        for arg in argv[len(prefix) :]:
            value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
            if value.startswith(("/", "~")) or ".." in PurePosixPath(value).parts:
                raise WorkspaceError(f"argument {arg!r} points outside the workspace", value)
        exe = [sys.executable, *argv[1:]] if argv[0] in ("python", "python3") else list(argv)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        with tempfile.TemporaryFile() as out:
            try:
                proc = subprocess.Popen(exe, cwd=self.root, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, env=env, start_new_session=True)  # fmt: skip
            except OSError as err:
                raise WorkspaceError(f"cannot run {argv[0]!r}: {err}") from None
            timed_out = False
            try:
                code = proc.wait(timeout=self.command_timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                try:  # the whole group: a hung test, and whatever it started
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                code = proc.wait()
            output = self._read_output(out)
        if timed_out:
            output += f"\n[command timed out after {self.command_timeout_s} s and was killed]"
        return {"command": shlex.join(argv), "exit_code": code, "timed_out": timed_out, "output": output}

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
        return self.run_command([*self.allowed_commands[0], *(args or [])])

    # ------------------------------------------------------------------ helpers for constrained decoding

    def edit_template(self, paths: list[str], max_edits: int = 4, max_search_lines: int = 20) -> Template:
        """A search/replace ``Template`` over the current contents of ``paths`` (see ``agentkit.constrain.edits``)."""
        files = {self.rel(self.resolve(p)): self._read_text(p)[1] for p in paths}
        return search_replace_template(files, max_edits=max_edits, max_search_lines=max_search_lines)


def workspace_tools(ws: Workspace) -> list[Callable[..., object]]:
    """The agent tools of ``ws`` as bound methods (names, signatures and docstrings carry their schemas)."""
    return [ws.list_files, ws.read_file, ws.search_text, ws.write_file, ws.apply_edits, ws.run_tests]
