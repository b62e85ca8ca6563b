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
    matmuls, float32 on one without; the loop adapter merged in), not the float32 of the ``default_engine``
    fixture."""
    from agentkit.config import EngineConfig
    from agentkit.engine.engine import Engine

    engine = Engine(EngineConfig())
    assert engine.lm.meta["lora"].endswith("smollm2-135m-loop")
    return engine


TASKS = [("How many km is 26.2 miles?", 42.16), ("Convert 100 F to C", 37.78)]


@pytest.mark.parametrize("which, task, expected", [("readme_engine", *TASKS[0]), ("readme_engine", *TASKS[1]),
                                                    ("default_engine", *TASKS[0]), ("default_engine", *TASKS[1])])
def test_unit_converter_finishes_with_the_result(request, which, task, expected):
    """The README's engine (bf16 here) and the float32 engine on both README tasks (the call's units are the
    question's, each on its side: evals/results/examples/unit_converter_grounded.json has 8 of 8 in both dtypes)."""
    from unit_converter import build_agent

    result = build_agent(request.getfixturevalue(which)).run_sync(task)
    assert result.trace[-1].step == "reply"
    assert any(abs(n - expected) < 0.05 for n in numbers(result.output)), result.output
    calls = [r for r in result.trace if r.tool == "convert" and r.tool_result is not None]
    assert len(calls) == 1 and abs(float(calls[0].tool_result) - expected) < 0.01


def test_agentkit_demo_extracts_the_meeting_as_extract_does(readme_engine):
    """``agentkit demo`` (the README's first command) on the default model, in its default (calibrated) mode and in
    diffusion: the default mode prints exactly the text's values; diffusion, another distribution, prints what
    ``extract`` returns in diffusion on the same engine, each value a span of the text (extract's grounded
    template: without it diffusion printed the invented city "Lopezbon" in float32)."""
    import json

    from pydantic import BaseModel
    from typer.testing import CliRunner

    import agentkit
    from agentkit.calibration import why
    from agentkit.cli import app

    class Meeting(BaseModel):
        person: str
        city: str
        day: str
        attendees: int

    text = "Lunch with Maria Lopez in Lisbon on Friday, the four of us."
    for args in ([], ["--mode", "diffusion"]):
        out = CliRunner().invoke(app, ["demo", *args])
        assert out.exit_code == 0, out.output
        value = json.loads(next(x for x in out.stdout.splitlines() if x.startswith('{"person"')))
        if not args:  # the default mode: exactly the text's values, and why it is the default
            assert value == {"person": "Maria Lopez", "city": "Lisbon", "day": "Friday", "attendees": 4}
            assert "the extract step's mode: " + why("extract") in " ".join(out.output.split())
        else:
            assert all(value[k] in text for k in ("person", "city", "day")) and value["attendees"] == 4, value
            assert value == agentkit.extract(Meeting, text, model=readme_engine, mode="diffusion").model_dump()
