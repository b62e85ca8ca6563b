"""Sizes the project keeps: every function of the CLI, the server, the step runner and the SDK is at most
``MAX_LINES`` long (from its ``def`` to its last line), and the agent loop's module at most ``MAX_AGENT_LINES``."""

from __future__ import annotations

from pathlib import Path

from tests.constrain.test_function_length import MAX_LINES, long_functions

ROOT = Path(__file__).resolve().parents[1]
PLACES = ("agentkit/cli.py", "serving", "agentkit/steps", "agentkit/sdk")
MAX_AGENT_LINES = 600


def test_no_function_of_the_cli_server_steps_or_sdk_is_over_the_limit():
    files = [p for place in PLACES for p in ([ROOT / place] if place.endswith(".py") else
                                             sorted((ROOT / place).glob("*.py")))]
    assert len(files) > 30
    over = [f"{p.relative_to(ROOT)}:{line} {name} ({n} lines)" for p in files
            for name, line, n in long_functions(p.read_text())]
    assert not over, "over {} lines: {}".format(MAX_LINES, ", ".join(over))


def test_the_agent_loop_module_is_within_its_size():
    assert len((ROOT / "agentkit/sdk/_agent.py").read_text().splitlines()) <= MAX_AGENT_LINES
