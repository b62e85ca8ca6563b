"""Code-edit templates: aider-style SEARCH/REPLACE blocks whose SEARCH text can only be real file lines.

A search/replace response is 1..``max_edits`` blocks separated by a blank line::

    path/to/file.py
    <<<<<<< SEARCH
    <a verbatim contiguous run of 1..max_search_lines whole lines of that file>
    =======
    <free replacement lines, possibly none>
    >>>>>>> REPLACE

The path is a ``Choice`` among the given files and the SEARCH part is a line trie of that file (every
contiguous run of up to ``max_search_lines`` lines, shared prefixes merged), so a constrained decoder cannot
produce a SEARCH that does not occur in the file. File lines that are exactly ``=======`` cannot be part of a
SEARCH (they would end it early when parsed). The REPLACE part is a ``Slot`` of lines not starting with
``>>>>>>>``. A file whose last line lacks a newline is matched as if it had one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentkit.constrain.nodes import Choice, Lit, Node, Repeat, Slot, Template, seq
from agentkit.errors import EditError, InvalidRequestError

SEARCH_MARK = "<<<<<<< SEARCH"
DIVIDER = "======="
REPLACE_MARK = ">>>>>>> REPLACE"
FENCE = "```"

#: Any number of whole lines, none starting with ``>>>>>>>`` (so the REPLACE marker cannot appear early).
REPLACE_REGEX = r"(?:>{0,6}(?:[^>\n][^\n]*)?\n)*"
#: Any number of whole lines, none starting with a code fence.
FENCED_BODY_REGEX = r"(?:`{0,2}(?:[^`\n][^\n]*)?\n)*"

#: Above this many trie lines (summed over files) ``Template.matches`` checks structurally instead of by regex.
REGEX_MATCH_LIMIT = 2_000


@dataclass(frozen=True)
class Edit:
    """One SEARCH/REPLACE block: replace the ``search`` lines of ``path`` by ``replace``."""

    path: str
    search: str
    replace: str


def file_lines(content: str) -> list[str]:
    """Split ``content`` into lines that each end with ``\\n`` (a missing final newline is added)."""
    if not content:
        return []
    parts = content.split("\n")
    if parts[-1] == "":
        parts.pop()
    return [p + "\n" for p in parts]


def _check_path(path: str) -> None:
    bad = not path or path != path.strip() or any(c in path for c in "\n\r\x0b\x0c") or path[0] in "`*"
    if bad or path in (SEARCH_MARK, DIVIDER, REPLACE_MARK):
        raise InvalidRequestError(f"edit template: unusable file path {path!r}")


def _search_trie(lines: list[str], max_lines: int) -> tuple[dict, int]:
    """The trie of all contiguous runs of 1..max_lines lines (none containing a divider line); and its size."""
    root: dict = {}
    size = 0
    for i in range(len(lines)):
        node = root
        for line in lines[i : i + max_lines]:
            if line.rstrip() == DIVIDER:
                break
            if line not in node:
                node[line] = {}
                size += 1
            node = node[line]
    return root, size


def _trie_node(children: dict, top: bool) -> Node | None:
    """Tree of a trie level: a top level must pick a line; lower levels may also stop (``Lit("")``)."""
    options: list[Node] = [] if top else [Lit("")]
    for line, sub in children.items():
        rest = _trie_node(sub, top=False) if sub else None
        options.append(seq(Lit(line), rest) if rest is not None else Lit(line))
    if not options:
        return None
    return options[0] if len(options) == 1 else Choice(tuple(options))


class EditTemplate(Template):
    """A ``Template`` whose ``matches`` falls back to a structural check when the regex would be too big.

    ``files`` (path -> content) is kept on the instance, not in ``meta``, so traces stay small.
    """

    files: dict[str, str]

    def matches(self, text: str) -> bool:
        if self.meta["trie_lines"] <= REGEX_MATCH_LIMIT:
            return super().matches(text)
        return _matches_structurally(text, self.files, self.meta["max_edits"], self.meta["max_search_lines"])


def search_replace_template(
    files: dict[str, str], *, max_edits: int = 4, max_search_lines: int = 20, max_replace_tokens: int = 256
) -> Template:
    """Template of a response of 1..``max_edits`` SEARCH/REPLACE blocks over ``files`` (path -> content).

    Construction is O(lines x max_search_lines). Files with no usable line are left out of the path choice.
    """
    if max_edits < 1 or max_search_lines < 1 or max_replace_tokens < 1:
        raise InvalidRequestError("edit template: max_edits, max_search_lines, max_replace_tokens must be >= 1")
    heads: list[Node] = []
    total = 0
    for path, content in files.items():
        _check_path(path)
        trie, size = _search_trie(file_lines(content), max_search_lines)
        search = _trie_node(trie, top=True)
        if search is None:
            continue
        total += size
        heads.append(seq(Lit(f"{path}\n{SEARCH_MARK}\n"), search))
    if not heads:
        raise InvalidRequestError("edit template: no file with at least one line to search for")
    head = heads[0] if len(heads) == 1 else Choice(tuple(heads))
    replace = Slot(REPLACE_REGEX, max_tokens=max_replace_tokens, name="replace")
    block = seq(head, Lit(f"{DIVIDER}\n"), replace, Lit(f"{REPLACE_MARK}\n"))
    meta = {
        "format": "search_replace",
        "paths": list(files),
        "max_edits": max_edits,
        "max_search_lines": max_search_lines,
        "trie_lines": total,
    }
    tpl = EditTemplate(Repeat(block, sep="\n", min=1, max=max_edits), kind="edit", meta=meta)
    tpl.files = dict(files)
    return tpl


def whole_file_template(path_choices: list[str], *, max_body_tokens: int = 2048) -> Template:
    """Template of a whole-file answer: a path line (one of ``path_choices``) then a fenced body.

    The body is any lines not starting with a code fence; the output looks like ``path\\n```\\n<body>```\\n``.
    """
    if not path_choices:
        raise InvalidRequestError("whole-file template: no path to choose from")
    for p in path_choices:
        _check_path(p)
    paths = [Lit(f"{p}\n{FENCE}\n") for p in path_choices]
    head = paths[0] if len(paths) == 1 else Choice(tuple(paths))
    body = Slot(FENCED_BODY_REGEX, max_tokens=max_body_tokens, name="body")
    meta = {"format": "whole_file", "paths": list(path_choices)}
    return Template(seq(head, body, Lit(f"{FENCE}\n")), kind="edit", meta=meta)


def parse_whole_file(text: str) -> tuple[str, str]:
    """Parse a whole-file answer into ``(path, content)``; raises ``EditError`` if it has no fenced body."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith(FENCE) and i > 0 and lines[i - 1].strip():
            for j in range(i + 1, len(lines)):
                if lines[j].startswith(FENCE):
                    return lines[i - 1].strip().strip("`"), "".join(x + "\n" for x in lines[i + 1 : j])
            break
    raise EditError("whole-file answer: expected a path line followed by a fenced body")


def _path_before(lines: list[str], i: int) -> str:
    """The file path line above a SEARCH marker at ``lines[i]``, skipping blank and code-fence lines."""
    for j in range(i - 1, -1, -1):
        s = lines[j].strip()
        if not s or s.startswith(FENCE):
            continue
        if s in (REPLACE_MARK, DIVIDER, SEARCH_MARK):
            break
        return s.strip("`*").strip() if s[0] in "`*" else s
    raise EditError(f"edit block at line {i + 1}: no file path line before {SEARCH_MARK!r}")


def parse_edits(text: str) -> list[Edit]:
    """Parse every SEARCH/REPLACE block of ``text`` (lenient about prose and code fences around blocks).

    Returns an empty list when ``text`` holds no block; raises ``EditError`` for an unterminated block.
    """
    lines = [x + "\n" for x in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    edits: list[Edit] = []
    i = 0
    while i < len(lines):
        if lines[i].rstrip() != SEARCH_MARK:
            i += 1
            continue
        path = _path_before(lines, i)
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != DIVIDER:
            j += 1
        if j == len(lines):
            raise EditError(f"{path}: edit block has no {DIVIDER!r} line", path)
        k = j + 1
        while k < len(lines) and lines[k].rstrip() != REPLACE_MARK:
            k += 1
        if k == len(lines):
            raise EditError(f"{path}: edit block has no {REPLACE_MARK!r} line", path)
        search, replace = "".join(lines[i + 1 : j]), "".join(lines[j + 1 : k])
        edits.append(Edit(path, _with_newline(search), _with_newline(replace)))
        i = k + 1
    return edits


def _with_newline(s: str) -> str:
    return s if not s or s.endswith("\n") else s + "\n"


def _short(s: str, limit: int = 300) -> str:
    return s if len(s) <= limit else s[:limit] + f"... [{len(s) - limit} more chars]"


def _line_aligned(hay: str, needle: str) -> list[int]:
    """Start offsets of ``needle`` in ``hay`` that begin a line."""
    out, start = [], hay.find(needle)
    while start != -1:
        if start == 0 or hay[start - 1] == "\n":
            out.append(start)
        start = hay.find(needle, start + 1)
    return out


def apply_edits(files: dict[str, str], edits: list[Edit], notes: list[str] | None = None) -> dict[str, str]:
    """Apply ``edits`` to ``files`` (path -> content) and return the new contents (unedited files unchanged).

    Every SEARCH is located in the file as given (the text the model saw), at a line start, and edits are
    applied in order: each takes the first occurrence not already taken by an earlier edit of the same file.
    When a SEARCH occurs several times, the first free occurrence is replaced and a note is appended to
    ``notes``. Raises ``EditError`` (naming the file and the text) for an unknown file, an empty or missing
    SEARCH, or a SEARCH whose every occurrence overlaps an earlier edit; nothing is applied then.
    """
    spans: dict[str, list[tuple[int, int, str]]] = {}
    for n, e in enumerate(edits, 1):
        if e.path not in files:
            raise EditError(f"edit {n}: unknown file {e.path!r} (known: {', '.join(sorted(files)) or 'none'})", e.path)
        if not e.search:
            raise EditError(f"edit {n}: {e.path}: empty SEARCH text", e.path)
        content = files[e.path]
        hay = content if content.endswith("\n") or not content else content + "\n"
        taken = spans.setdefault(e.path, [])
        found = _line_aligned(hay, _with_newline(e.search))
        free = [s for s in found if all(s + len(e.search) <= a or s >= b for a, b, _ in taken)]
        if not found:
            raise EditError(f"edit {n}: {e.path}: SEARCH text not found in the file:\n{_short(e.search)}", e.path)
        if not free:
            raise EditError(f"edit {n}: {e.path}: SEARCH text overlaps an earlier edit:\n{_short(e.search)}", e.path)
        if len(found) > 1 and notes is not None:
            first_line = hay.count("\n", 0, free[0]) + 1
            notes.append(
                f"edit {n}: {e.path}: SEARCH text occurs {len(found)} times; replaced the one at line {first_line}"
            )
        taken.append((free[0], free[0] + len(_with_newline(e.search)), e.replace))
    out = dict(files)
    for path, taken in spans.items():
        content = files[path]
        virtual = bool(content) and not content.endswith("\n")
        hay = content + "\n" if virtual else content
        parts, pos = [], 0
        for a, b, rep in sorted(taken):
            parts += [hay[pos:a], rep]
            pos = b
        parts.append(hay[pos:])
        new = "".join(parts)
        out[path] = new[:-1] if virtual and new.endswith("\n") else new
    return out


def _is_run(search: str, lines: list[str], max_search_lines: int) -> bool:
    """Whether ``search`` is 1..max_search_lines contiguous whole lines of ``lines`` with no divider line."""
    want = file_lines(search)
    if not 1 <= len(want) <= max_search_lines or any(x.rstrip() == DIVIDER for x in want):
        return False
    return any(lines[i : i + len(want)] == want for i, x in enumerate(lines) if x == want[0])


def _matches_structurally(text: str, files: dict[str, str], max_edits: int, max_search_lines: int) -> bool:
    """Exact membership test for a search/replace template, without building its (large) regex."""
    tail = re.compile(REPLACE_REGEX + re.escape(f"{REPLACE_MARK}\n"))
    divider = re.compile(rf"^{re.escape(DIVIDER)}\n", re.MULTILINE)
    lines_of: dict[str, list[str]] = {}
    pos, count = 0, 0
    while True:
        nl = text.find("\n", pos)
        path = text[pos:nl]
        if nl < 0 or path not in files or not text.startswith(f"{SEARCH_MARK}\n", nl + 1):
            return False
        start = nl + 2 + len(SEARCH_MARK)
        div = divider.search(text, start)
        if div is None:
            return False
        if path not in lines_of:
            lines_of[path] = file_lines(files[path])
        if not _is_run(text[start : div.start()], lines_of[path], max_search_lines):
            return False
        end = tail.match(text, div.end())
        if end is None:
            return False
        count += 1
        if count > max_edits:
            return False
        if end.end() == len(text):
            return True
        if text[end.end()] != "\n":
            return False
        pos = end.end() + 1
