"""Value-based repair of string literals (kind ``string_diff``): a failing assertion's actual and expected values
say which piece of a string is wrong, and a literal that produced that piece is rewritten to produce the expected
one.

The actual and expected values come from pytest's report (:func:`agentkit.repair.failures.assertion_values`).
``difflib`` aligns the two; each string literal of the suspect line that occurs in the actual value is mapped
through the alignment to the part of the expected value it should produce (a boundary that falls inside a changed
block maps to either end of it, so both are proposed), and the literal is rewritten with that text, in its own
prefix and quotes. ``return str(n) + " itmes"`` with actual ``'3 itmes'`` and expected ``'3 items'`` gives
``return str(n) + " items"``: the literal's piece, changed as the values differ, not the test's
expected string copied (a line that holds the test's whole expected string is still refused by validation).

f-strings and bytes are left alone; a literal that does not occur in the actual value gives nothing.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator
from difflib import SequenceMatcher

from .mutate import LineEdit, parses

KIND = "string_diff"
MAX_OCCURRENCES = 8  # places in the actual value one literal is mapped from
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def literal_variants(source: str, lineno: int, pairs: list[tuple[str, str]]) -> list[LineEdit]:
    """Line ``lineno`` of ``source`` with one string literal rewritten per (actual, expected) pair in ``pairs``
    (see the module docstring); each variant parses as a whole file and differs from the line; deduplicated."""
    lines = source.splitlines()
    if not 1 <= lineno <= len(lines):
        return []
    original = lines[lineno - 1]
    out: dict[str, LineEdit] = {}
    for start, end, token in string_tokens(original):
        value = ast.literal_eval(token)
        for actual, expected in pairs:
            if not (isinstance(actual, str) and isinstance(expected, str)) or actual == expected:
                continue
            for new in mapped_values(value, actual, expected):
                literal = requote(token, new)
                if literal is None:
                    continue
                text = original[:start] + literal + original[end:]
                if text != original and text not in out and parses(lines, lineno, text):
                    out[text] = LineEdit(lineno, text, KIND)
    return list(out.values())


def string_tokens(line: str) -> list[tuple[int, int, str]]:
    """(start column, end column, token text) of the plain string literals (not f-strings, not bytes) of ``line``
    whose value is a non-empty ``str``; a line that does not tokenize on its own gives the tokens before the
    error."""
    pad = len(line) - len(line.lstrip())
    out: list[tuple[int, int, str]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if tok.type != tokenize.STRING or tok.start[0] != 1 or tok.end[0] != 1:
                continue
            prefix = tok.string[: len(tok.string) - len(tok.string.lstrip("rRuUbBfF"))].lower()
            if "b" in prefix or "f" in prefix:
                continue
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, str) and value:
                out.append((tok.start[1] + pad, tok.end[1] + pad, tok.string))
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def mapped_values(value: str, actual: str, expected: str) -> list[str]:
    """The texts ``value`` should be, for each place it occurs in ``actual``: that span of ``actual`` mapped
    through the alignment of ``actual`` with ``expected``; the value itself left out."""
    ops = SequenceMatcher(None, actual, expected, autojunk=False).get_opcodes()
    out: dict[str, None] = {}
    for at in occurrences(value, actual):
        for a in mapped_positions(at, ops):
            for b in mapped_positions(at + len(value), ops):
                if a <= b and expected[a:b] != value:
                    out[expected[a:b]] = None
    return list(out)


def occurrences(piece: str, text: str) -> Iterator[int]:
    """Start offsets of ``piece`` in ``text`` (overlapping ones too), at most :data:`MAX_OCCURRENCES`."""
    i, n = text.find(piece), 0
    while i >= 0 and n < MAX_OCCURRENCES:
        yield i
        i, n = text.find(piece, i + 1), n + 1


def mapped_positions(x: int, ops: list[tuple[str, int, int, int, int]]) -> list[int]:
    """Where offset ``x`` of the first text falls in the second: one place inside an equal block; a block's start or
    end at its edges; either end of a changed block for an offset inside it."""
    out: dict[int, None] = {}
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal" and i1 <= x <= i2:
            out[j1 + x - i1] = None
        elif tag != "equal" and i1 <= x <= i2:
            if x < i2 or i1 == i2:
                out[j1] = None
            if x > i1 or i1 == i2:
                out[j2] = None
    return sorted(out)


def requote(token: str, value: str) -> str | None:
    """``value`` written as a literal with ``token``'s prefix and quotes; None where that cannot hold it (a raw
    string that would need an escape)."""
    body = token.lstrip("rRuU")
    prefix = token[: len(token) - len(body)]
    quote = body[:3] if body[:3] in ('"""', "'''") else body[0]
    raw = "r" in prefix.lower()
    if raw:
        text = value
    else:
        text = "".join(_ESCAPES.get(c, c) if not (len(quote) == 3 and c == "\n") else c for c in value)
        text = text.replace(quote[0], "\\" + quote[0]) if len(quote) == 1 else text
        text = "".join(c if c.isprintable() or c in "\n" else repr(c)[1:-1] for c in text)
        if len(quote) == 3 and text.endswith(quote[0]):
            text = text[:-1] + "\\" + quote[0]
    literal = f"{prefix}{quote}{text}{quote}"
    try:
        ok = ast.literal_eval(literal) == value
    except (ValueError, SyntaxError):
        ok = False
    return literal if ok else None
