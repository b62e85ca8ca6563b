"""The README's agent example on the default model: it finishes, with the right number in its answer."""

import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


def numbers(text):
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]


@pytest.mark.parametrize("task, expected", [("How many km is 26.2 miles?", 42.16),
                                            ("Convert 100 F to C", 37.78)])
def test_unit_converter_finishes_with_the_result(default_engine, task, expected):
    from unit_converter import build_agent

    result = build_agent(default_engine).run_sync(task)
    assert result.trace[-1].step == "reply"
    assert any(abs(n - expected) < 0.05 for n in numbers(result.output)), result.output
    calls = [r for r in result.trace if r.tool == "convert" and r.tool_result is not None]
    assert len(calls) == 1 and abs(float(calls[0].tool_result) - expected) < 0.01
