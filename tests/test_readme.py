"""The README stays a user's page: short, no history of the work, CI's command verbatim, imports that exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import agentkit

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def test_readme_is_short():
    assert len(README.splitlines()) <= 300


def test_readme_carries_ci_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    commands = [line for line in ci if line.startswith("python3 -m venv")]
    assert len(commands) == 1
    assert commands[0] in README.splitlines()


def test_readme_has_no_work_history():
    assert not re.search(r"\bsession \d+|\bs1?\d\b(?!\.)|issue \d+", README, re.IGNORECASE)


def test_readme_snippets_parse_and_import_public_names():
    blocks = _python_blocks(README)
    assert blocks
    names: list[str] = []
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module == "agentkit":
                names += [alias.name for alias in node.names]
            assert not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentkit.")), (
                "the README teaches the flat imports")
    assert names and set(names) <= set(agentkit.__all__)
