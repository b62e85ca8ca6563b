"""Adding a docstring to a function: a code-edit template with the function pinned and one value slot.

The template's fixed text is the function's header as the file writes it and the docstring's indentation and
quotes; the model writes only the slot between the quotes, under the template's token masks, as one line
(:data:`SLOT_REGEX`: no quote, backslash, newline or ``<``/``>``/``=`` character, so neither the closing quotes nor
merge-marker text can be written; at most :data:`SLOT_TOKENS` tokens). The written text is checked again
(:func:`docstring_problem`: marker text, a runaway repeat, too short), then the file with the docstring inserted is
checked on scratch copies (it parses, the tests do not get worse; ``agentkit.repair.checked``) and only then
written. A function that has a docstring already, or whose body sits on its ``def`` line, is refused.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agentkit.tools.edit_guard import MARKERS, is_test_path

from .checked import EditOutcome, check_and_apply

SLOT_REGEX = r'[A-Za-z][^"\\\n<>=]*[^"\\\n<>=\s]'
SLOT_TOKENS = 48
MIN_CHARS = 8
REPEAT_LIMIT = 2  # a run of three words that occurs more often than this is a runaway repeat
SYSTEM = "You are a careful Python programmer. You write short, accurate docstrings."


class DocstringWriter(Protocol):
    """What writes the slot: the model under the template (:class:`EngineWriter`), or a scripted writer in tests.
    ``pinned`` is the answer's fixed start; returns the slot's text (between the pinned quotes and the closing
    ones)."""

    def write(self, messages: list[dict[str, str]], pinned: str, template: Any, max_new_tokens: int) -> str: ...


class EngineWriter:
    """An ``agentkit`` Engine decoding the template greedily (AR)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def write(self, messages: list[dict[str, str]], pinned: str, template: Any, max_new_tokens: int) -> str:
        from agentkit.config import DecodeConfig

        cfg = DecodeConfig(mode="ar", temperature=0.0, max_new_tokens=max_new_tokens)
        text = self.engine.generate(messages, cfg, template=template).text
        return text[len(pinned):].split('"""', 1)[0] if text.startswith(pinned) else ""


@dataclass
class DocstringSite:
    """Where the docstring goes: the function, the line its body starts on (1-based) and that line's indent."""

    path: str
    function: str
    header: str  # the function's lines from its ``def`` up to its body's first line
    body_line: int
    pad: str


def find_site(source: str, path: str, function: str) -> DocstringSite | str:
    """The docstring's place in ``function`` of ``source``, or why there is none."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return f"{path} does not parse: {err.msg}"
    fns = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == function]
    if len(fns) != 1:
        return f"{path} defines {len(fns)} functions named {function!r}, not one"
    fn = fns[0]
    if ast.get_docstring(fn) is not None:
        return f"{function!r} has a docstring already"
    first = fn.body[0]
    lines = source.splitlines(keepends=True)
    body = lines[first.lineno - 1]
    pad = body[: len(body) - len(body.lstrip())]
    if first.lineno == fn.lineno or body.encode("utf-8")[: first.col_offset].strip():
        return f"the body of {function!r} starts on its def line"
    return DocstringSite(path, function, "".join(lines[fn.lineno - 1: first.lineno - 1]), first.lineno, pad)


def docstring_problem(text: str) -> str:
    """Why ``text`` may not become a docstring ("" when it may): marker text, a runaway repeat, too short."""
    if any(m in text for m in MARKERS) or re.search(r"[<>=]{3,}", text):
        return "the docstring holds merge-marker text"
    if '"""' in text or "\\" in text or "\n" in text:
        return "the docstring is not one plain line"
    if len(text.strip()) < MIN_CHARS:
        return f"the docstring is shorter than {MIN_CHARS} characters"
    words = re.findall(r"\w+", text.lower())
    runs: dict[tuple[str, ...], int] = {}
    for i in range(len(words) - 2):
        run = tuple(words[i:i + 3])
        runs[run] = runs.get(run, 0) + 1
        if runs[run] > REPEAT_LIMIT:
            return f"the docstring repeats {' '.join(run)!r} {runs[run]} times: a runaway repeat"
    if any(a == b == c for a, b, c in zip(words, words[1:], words[2:])):
        return "the docstring repeats a word three times in a row: a runaway repeat"
    return ""


def prompt(site: DocstringSite, source: str, request: str) -> tuple[list[dict[str, str]], str]:
    """The chat messages and the pinned start of the answer (the code up to the docstring's opening quotes)."""
    try:
        fn = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                  and n.name == site.function)
        code = ast.get_source_segment(source, fn) or source
    except (SyntaxError, StopIteration):
        code = source
    user = (f"{request.strip()}\n\nThe function, from {site.path}:\n\n```python\n{code}\n```\n\n"
            f"Write the function again with a one-line docstring that says what it does and what it returns.")
    pinned = "```python\n" + site.header + site.pad + '"""'
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}], pinned


def template_for(pinned: str) -> Any:
    from agentkit.constrain.nodes import Lit, Slot, Template, seq

    return Template(seq(Lit(pinned), Slot(SLOT_REGEX, SLOT_TOKENS, name="docstring"), Lit('"""\n')), kind="regex")


def write_docstring(site: DocstringSite, source: str, request: str, writer: DocstringWriter) -> str:
    """The slot's text as the writer filled it under the template (the text between the quotes)."""
    messages, pinned = prompt(site, source, request)
    return writer.write(messages, pinned, template_for(pinned), SLOT_TOKENS + 8)


def with_docstring(source: str, site: DocstringSite, text: str) -> str:
    lines = source.splitlines(keepends=True)
    line = f'{site.pad}"""{text.strip()}"""\n'
    return "".join([*lines[: site.body_line - 1], line, *lines[site.body_line - 1:]])


def add_docstring(root: str | Path, path: str, function: str, request: str, writer: DocstringWriter, *,
                  time_limit_s: float = 60.0, apply: bool = True) -> EditOutcome:
    """Add a docstring to ``function`` of ``path`` in the repository at ``root`` (see the module docstring)."""
    root = Path(root).resolve()
    if is_test_path(path) or not path.endswith(".py"):
        return EditOutcome("docstring", False, f"{path!r} is not a non-test Python file")
    try:
        source = (root / path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        return EditOutcome("docstring", False, f"{path!r} cannot be read: {err}")
    site = find_site(source, path, function)
    if isinstance(site, str):
        return EditOutcome("docstring", False, site)
    text = write_docstring(site, source, request, writer)
    problem = docstring_problem(text)
    if problem:
        return EditOutcome("docstring", False, f"{problem}: {text[:80]!r}")
    return check_and_apply(root, {path: with_docstring(source, site, text)}, "docstring",
                           time_limit_s=time_limit_s, apply=apply)
