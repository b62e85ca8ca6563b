"""No comment or docstring in the package narrates the history of the work: no round labels (``s9`` ... ``s24``,
"session 16"), no "until"/"since" a round, no win/loss tallies ("won 14, lost 9"). What a setting does and the
figure that supports it belong in the docs, with the command that reproduces it; git keeps the history.

A result file cited by its path (``evals/results/<topic>/<file>.json``) is a citation, not a narration: the path
is left out of the check.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("agentkit", "serving", "tools")
PATH = re.compile(r"\S*evals/results/\S*")
NARRATION = re.compile(
    r"(?<![\w=./])(?:s(?:9|[12][0-9])(?![\w.-])|sessions? [0-9]+|rounds? [0-9]+)"  # round labels
    r"|\b(?:won|lost) [0-9]+|\b[0-9]+ (?:won|lost)\b(?!\s+[a-z])")  # tallies


def _texts(path: Path):
    """(line, text) of every comment and string token of a module (docstrings included)."""
    src = path.read_text(encoding="utf-8")
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING):
            for i, line in enumerate(tok.string.splitlines()):
                yield tok.start[0] + i, line


def narrations() -> list[str]:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, text in _texts(path):
                hit = NARRATION.search(PATH.sub("", text))
                if hit:
                    found.append(f"{path.relative_to(ROOT)}:{n}: {hit.group(0)!r} in {text.strip()[:100]}")
    return found


def test_the_pattern_finds_narration_and_spares_ordinary_text():
    for text in ("(s18; replies at the", "BFCL 600: won 14, lost 9", "until session 16", "3 won, 0 lost",
                 "the loop adapter, 1 thread, s24)"):
        assert NARRATION.search(PATH.sub("", text)), text
    for text in ("evals/results/s14/prompts600.json", "steps=8", "s.strip()", "the 4 lost tokens", "class S1",
                 "pass seconds=s1", "x=s12", "a win"):
        assert not NARRATION.search(PATH.sub("", text)), text


def test_no_comment_narrates_the_history_of_the_work():
    assert narrations() == []
