"""The agent-loop task generator (agentkit.evals.agent_tasks) on a tiny BFCL-format folder, and the committed sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentkit.errors import UserError
from agentkit.evals import agent_tasks as at

TINY = Path(__file__).parent / "data" / "agent_loop_tiny"
COUNTS = {"one_tool": 2, "no_tool": 2, "two_tool": 2, "fail_once": 2}
COMMITTED = Path(__file__).resolve().parents[2] / "evals" / "agent_loop" / "tasks.jsonl"


def test_generates_each_kind_from_distinct_items():
    tasks = at.generate(TINY, seed=0, counts=COUNTS)
    assert [t.kind for t in tasks] == ["one_tool"] * 2 + ["no_tool"] * 2 + ["two_tool"] * 2 + ["fail_once"] * 2
    assert len({t.source for t in tasks}) == 8  # each item used once


def test_generation_is_seeded():
    a = [t.to_json() for t in at.generate(TINY, seed=0, counts=COUNTS)]
    assert a == [t.to_json() for t in at.generate(TINY, seed=0, counts=COUNTS)]
    assert a != [t.to_json() for t in at.generate(TINY, seed=1, counts=COUNTS)]


def test_call_tasks_carry_a_hashed_code_not_in_the_prompt():
    for t in at.generate(TINY, seed=0, counts=COUNTS):
        assert t.answer_value.split("-")[0] in {w for w in at._WORDS}
        if t.kind == "no_tool":
            assert t.answer_value in t.prompt and t.result is None and t.expected == []
            continue
        assert t.answer_value not in t.prompt and t.result == {"status": "ok", "result": t.answer_value}
        # the code is a hash of the ground-truth call: the same call gives the same code whatever the item id
        assert t.answer_value == at.code_for(t.kind, t.expected[-1])


def test_two_tool_prompt_hides_the_value_behind_a_reference():
    two = [t for t in at.generate(TINY, seed=0, counts=COUNTS) if t.kind == "two_tool"]
    assert two
    for t in two:
        ref, value = t.lookup["ref"], t.lookup["value"]
        assert ref in t.prompt and value.lower() not in t.prompt.lower()
        assert t.tool_names[0] == at.LOOKUP and t.expected[0] == {at.LOOKUP: {"ref": [ref]}}
        (_name, args), = t.expected[1].items()
        assert any(value in vals for vals in args.values())  # the lookup's value is the item call's argument


def test_fewer_tasks_when_the_folder_runs_out():
    tasks = at.generate(TINY, seed=0, counts={"one_tool": 50})
    assert len(tasks) == 8 and {t.kind for t in tasks} == {"one_tool"}


def test_load_filters_kinds_and_interleaves_under_a_limit(tmp_path):
    tasks = at.load(TINY / "tasks.jsonl", limit=4)
    assert [t.kind for t in tasks] == list(at.KINDS)
    assert {t.kind for t in at.load(TINY, kinds=["no_tool"])} == {"no_tool"}
    with pytest.raises(UserError, match="unknown task kind"):
        at.load(TINY, kinds=["three_tool"])
    with pytest.raises(UserError, match="neither a task file"):
        at.load(tmp_path)


def test_committed_tiny_set_is_the_generators_output():
    expected = [t.to_json() for t in at.generate(TINY, seed=0, counts=COUNTS)]
    assert (TINY / "tasks.jsonl").read_text().splitlines() == expected


def test_committed_benchmark_set(shared_data):
    lines = COMMITTED.read_text().splitlines()
    kinds = [json.loads(line)["kind"] for line in lines]
    assert len(lines) >= 150 and set(kinds) == set(at.KINDS)
    assert lines == [t.to_json() for t in at.generate(shared_data / "bfcl", seed=0)]  # reproducible from the data
