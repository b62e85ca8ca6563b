"""Docstring parsing for tool schemas: a summary plus parameter descriptions (Google, numpy or sphinx style)."""

from __future__ import annotations

import inspect
import re

_GOOGLE_ARGS = re.compile(r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments):\s*$")
_GOOGLE_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns?|Yields?|Raises|Examples?|"
    r"Notes?|Attributes|See Also|References|Warnings?|Todo):\s*$"
)
_GOOGLE_PARAM = re.compile(r"^\*{0,2}(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_NUMPY_UNDERLINE = re.compile(r"^-{3,}\s*$")
_NUMPY_PARAM = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")
_SPHINX_FIELD = re.compile(r"^:(param|type|returns?|rtype|raises?|yields?)\b")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return ``(summary, {param: description})``; the summary is the text before the first section."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    in_summary = True
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        section = _GOOGLE_SECTION.match(stripped) or _SPHINX_FIELD.match(stripped) or _NUMPY_UNDERLINE.match(nxt)
        in_summary = in_summary and not (section and stripped)
        if _GOOGLE_ARGS.match(stripped):  # Google: "Args:" then indented "name (type): text"
            i = _google_params(lines, i + 1, params)
            continue
        if _NUMPY_UNDERLINE.match(nxt) and stripped:  # numpy: "Parameters\n----------"
            if stripped in ("Parameters", "Other Parameters", "Keyword Arguments"):
                i = _numpy_params(lines, i + 2, params)
            else:
                i = _skip_numpy_section(lines, i + 2)
            continue
        if _SPHINX_FIELD.match(stripped):  # sphinx: ":param name: text"
            i = _sphinx_field(lines, i, params)
            continue
        if _GOOGLE_SECTION.match(stripped):
            i = _skip_indented(lines, i + 1)
            continue
        if in_summary:
            summary.append(stripped)
        i += 1
    return _join(summary), params


def _join(parts: list[str]) -> str:
    """Join lines into paragraphs: single newlines become spaces, blank lines stay paragraph breaks."""
    text = "\n".join(parts).strip()
    return "\n\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _skip_indented(lines: list[str], i: int) -> int:
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > 0):
        i += 1
    return i


def _google_params(lines: list[str], i: int, params: dict[str, str]) -> int:
    base: int | None = None
    name = None
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        ind = _indent(line)
        if ind == 0:
            break
        if base is None:
            base = ind
        m = _GOOGLE_PARAM.match(line.strip())
        if ind == base and m:
            name = m.group(1)
            params[name] = m.group(3).strip()
        elif name is not None:  # continuation line
            params[name] = (params[name] + " " + line.strip()).strip()
        i += 1
    return i


def _numpy_params(lines: list[str], i: int, params: dict[str, str]) -> int:
    name = None
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if line.strip() and _NUMPY_UNDERLINE.match(nxt):  # next section
            break
        if not line.strip():
            i += 1
            continue
        if _indent(line) == 0:
            m = _NUMPY_PARAM.match(line.strip())
            if m is None:
                break
            name = m.group(1)
            params[name] = ""
        elif name is not None:
            params[name] = (params[name] + " " + line.strip()).strip()
        i += 1
    return i


def _skip_numpy_section(lines: list[str], i: int) -> int:
    while i < len(lines):
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if lines[i].strip() and _NUMPY_UNDERLINE.match(nxt):
            break
        i += 1
    return i


def _sphinx_field(lines: list[str], i: int, params: dict[str, str]) -> int:
    m = _SPHINX_PARAM.match(lines[i].strip())
    text = m.group(2).strip() if m else ""
    i += 1
    while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith(":"):
        text = (text + " " + lines[i].strip()).strip()
        i += 1
    if m:
        params[m.group(1)] = text
    return i
