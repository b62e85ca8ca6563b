"""The README's agent example on the default model: it finishes, with the right number in its answer."""

import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


def numbers(text):
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]


@pytest.fixture(scope="module")
def readme_engine():
    """The engine the README's commands get: ``EngineConfig()``'s defaults (bf16 on a CPU with native bf16
    matmuls, float32 on one without), not the float32 of the ``default_engine`` fixture."""
    from agentkit.config import EngineConfig
    from agentkit.engine.engine import Engine

    return Engine(EngineConfig())


@pytest.fixture(scope="module")
def loop_engine():
    """What ``examples/unit_converter.py`` builds: the README's engine with the loop adapter merged in."""
    from agentkit.config import EngineConfig
    from agentkit.engine.engine import Engine
    from agentkit.models.adapter import LOOP_DIR

    return Engine(EngineConfig(lora=str(LOOP_DIR)))


@pytest.fixture(scope="module")
def loop_engine_f32():
    from agentkit.config import EngineConfig
    from agentkit.engine.engine import Engine
    from agentkit.models.adapter import LOOP_DIR

    return Engine(EngineConfig(lora=str(LOOP_DIR), dtype="float32"))


TASKS = [("Turn 2 miles into meters.", 3218.69), ("Convert 100 F to C", 37.78)]


@pytest.mark.parametrize("which", ["loop_engine", "loop_engine_f32"])
@pytest.mark.parametrize("task, expected", [*TASKS, ("How many km is 26.2 miles?", 42.16)])
def test_unit_converter_with_the_loop_adapter_finishes_with_the_result(request, which, task, expected):
    test_unit_converter_finishes_with_the_result(request, which, task, expected)


@pytest.mark.parametrize("which", ["readme_engine", "default_engine"])
@pytest.mark.parametrize("task, expected", TASKS)
def test_unit_converter_finishes_with_the_result(request, which, task, expected):
    """On the base weights too (the 26.2 miles question is wrong in bf16 there: README)."""
    from unit_converter import build_agent

    result = build_agent(request.getfixturevalue(which)).run_sync(task)
    assert result.trace[-1].step == "reply"
    assert any(abs(n - expected) < 0.05 for n in numbers(result.output)), result.output
    calls = [r for r in result.trace if r.tool == "convert" and r.tool_result is not None]
    assert len(calls) == 1 and abs(float(calls[0].tool_result) - expected) < 0.01


def test_agentkit_demo_extracts_the_meeting_as_extract_does():
    """``agentkit demo`` (the README's first command) on the default model, in its default (calibrated) mode and in
    diffusion: the meeting's values are the text's (it printed person "Lopez" with its own prompt and no copy
    prior, before it used extract's)."""
    import json

    from typer.testing import CliRunner

    from agentkit.cli import app

    for args in ([], ["--mode", "diffusion"]):
        out = CliRunner().invoke(app, ["demo", *args])
        assert out.exit_code == 0, out.output
        line = next(x for x in out.stdout.splitlines() if x.startswith('{"person"'))
        assert json.loads(line) == {"person": "Maria Lopez", "city": "Lisbon", "day": "Friday", "attendees": 4}
