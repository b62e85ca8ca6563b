"""The loop adapter's traces: right runs of the real Agent loop on generated tasks, recorded step by step."""

import json
import random
from pathlib import Path

import jsonschema
import pytest

from agentkit.evals.agent_env import parameters
from agentkit.steps.kinds import call_head
from agentkit.training import loop_traces as lt

SHARED_BFCL = Path(__file__).resolve().parents[3] / "shared" / "data" / "bfcl"


def _examples(n=40, seed=3):
    return lt.generate(n, seed)


def test_every_kind_is_traced_with_the_steps_a_right_run_takes():
    r = random.Random(0)
    want = {"one_tool": ["decide", "tool_call", "decide", "reply"], "no_tool": ["decide", "reply"],
            "two_tool": ["decide", "tool_call", "decide", "tool_call", "decide", "reply"],
            "fail_once": ["decide", "tool_call", "decide", "tool_call", "decide", "reply"]}
    for kind, steps in want.items():
        task = None
        while task is None:
            task = lt.make_task(r, 0, kind)
        got = lt.trace(task, r)
        assert [e.step for e in got] == steps, kind
        assert task.answer_value in got[-1].target
        assert got[-1].messages[-1]["role"] == "user"


def test_calls_are_valid_for_their_function_and_copy_the_request():
    exs = _examples()
    calls = [e for e in exs if e.step == "tool_call"]
    assert len(calls) >= 30
    for e in calls:
        call = json.loads(e.target)
        assert set(call) == {"name", "arguments"}
        assert f'"{call["name"]}"' in e.messages[0]["content"]  # a tool the system message lists
    for e in exs:
        if e.step == "decide":
            assert e.prefix == call_head() and e.target.endswith('"')


def test_call_arguments_match_the_schema():
    r = random.Random(5)
    for i in range(30):
        task = lt.make_task(r, i, "one_tool")
        (name, args), = task.expected[0].items()
        fn = next(f for f in task.functions if f["name"] == name)
        jsonschema.validate({k: v[0] for k, v in args.items()}, parameters(fn))
        assert "." in name  # always namespaced: no bare name that a benchmark function has


def test_the_same_seed_gives_the_same_examples():
    assert [e.target for e in _examples(10, 1)] == [e.target for e in _examples(10, 1)]
    assert [e.target for e in _examples(10, 1)] != [e.target for e in _examples(10, 2)]


@pytest.mark.skipif(not SHARED_BFCL.is_dir(), reason="shared/data/bfcl is not here")
def test_no_traced_function_is_a_benchmark_function():
    bench = set()
    for f in SHARED_BFCL.glob("BFCL_*.json"):
        for line in f.read_text().splitlines():
            if line.strip():
                bench.update(fn["name"] for fn in json.loads(line).get("function", []))
    r, names = random.Random(0), set()
    for i in range(600):
        task = lt.make_task(r, i, lt.KINDS[i % 4])
        names.update(task.tool_names if task is not None else [])
    assert len(names) > 900 and bench and not names & bench


def test_the_committed_calibration_chats_are_the_generators(tmp_path):
    """agentkit/models/data/loop_calibration.jsonl (the text a merged LoRA's 4-bit grids are fitted on) is what
    ``python -m agentkit.training.loop_traces --n 48 --seed 1 --calibration`` writes."""
    from agentkit.models.gptq import CALIBRATION
    from agentkit.training.loop_traces import main

    out = tmp_path / "cal.jsonl"
    assert main(["--n", "48", "--seed", "1", "--calibration", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == CALIBRATION.read_text(encoding="utf-8")
