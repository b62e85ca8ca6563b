"""BFCL's parallel categories (issue 35 item 2): the one-to-one checker, the several-calls template and prompt, and a
run of the suite on a parallel file. The items here are written for the test (BFCL's parallel files are not in
../shared/data/bfcl)."""

from __future__ import annotations

import json

import pytest

from agentkit.evals.bfcl import MAX_CALLS, PARALLEL_NOTE, build_prompt, check_calls, compile_call, evaluate, load_bfcl

FN = {"name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "dict", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                     "required": ["city"]}}
QUESTION = {"id": "parallel_0", "question": [[{"role": "user", "content": "Weather in Paris for 2 days and in Rome?"}]],
            "function": [FN]}
ANSWER = {"id": "parallel_0", "ground_truth": [{"get_weather": {"city": ["Paris"], "days": [2]}},
                                               {"get_weather": {"city": ["Rome"], "days": ["", 1]}}]}


@pytest.fixture
def data(tmp_path):
    (tmp_path / "possible_answer").mkdir()
    (tmp_path / "BFCL_v4_parallel.json").write_text(json.dumps(QUESTION) + "\n")
    (tmp_path / "possible_answer" / "BFCL_v4_parallel.json").write_text(json.dumps(ANSWER) + "\n")
    return tmp_path


def test_the_checker_matches_calls_one_to_one_in_any_order(data):
    (item,) = load_bfcl(data)
    assert item.category == "parallel" and item.parallel
    paris, rome = ("get_weather", {"city": "Paris", "days": 2}), ("get_weather", {"city": "Rome"})
    assert check_calls(item, [paris, rome]) and check_calls(item, [rome, paris])
    assert check_calls(item, [paris]).error_type == "parallel:wrong_count"
    assert check_calls(item, [paris, paris]).error_type == "parallel:no_match"  # one call cannot answer both
    assert check_calls(item, [paris, ("get_weather", {"city": "Rome", "days": 5})]).error_type == "parallel:no_match"
    assert check_calls(item, []).error_type == "no_call"
    text = json.dumps({"name": "get_weather", "arguments": rome[1]}) + "\n" + json.dumps(
        {"name": "get_weather", "arguments": paris[1]})
    row = evaluate(item, text)
    assert row["success"] and row["valid"] and [c["arguments"]["city"] for c in row["calls"]] == ["Rome", "Paris"]


def test_a_parallel_item_gets_the_several_calls_template_and_prompt(data):
    (item,) = load_bfcl(data)
    tpl = compile_call(item).template()
    assert tpl.kind == "jsonl" and tpl.meta["max_calls"] == MAX_CALLS
    assert build_prompt(item)[0]["content"].endswith(PARALLEL_NOTE)
    single = dict(QUESTION, id="simple_0")
    (tmp := data / "s").mkdir()
    (tmp / "possible_answer").mkdir()
    (tmp / "BFCL_v4_simple.json").write_text(json.dumps(single) + "\n")
    (tmp / "possible_answer" / "BFCL_v4_simple.json").write_text(json.dumps(dict(ANSWER, id="simple_0")) + "\n")
    (one,) = load_bfcl(tmp)
    assert not one.parallel and compile_call(one).template().kind == "json"
    assert PARALLEL_NOTE not in build_prompt(one)[0]["content"]


def test_the_suite_runs_a_parallel_file(data, tmp_path):
    from agentkit.engine import tiny_engine
    from agentkit.evals.runner import run_eval

    res = run_eval("bfcl", data, ["ar-constrained"], out=tmp_path / "r.json", engine=tiny_engine(0),
                   progress=False, quiet=True, max_new_tokens=160)
    (row,) = res["items"]
    assert row["category"] == "parallel" and row["valid"] and 1 <= len(row["calls"]) <= MAX_CALLS
    assert row["error_type"] in ("", "parallel:wrong_count", "parallel:no_match")  # scored by the parallel checker
    assert json.loads((tmp_path / "r.json").read_text())["items"][0]["calls"] == row["calls"]


def test_a_peer_gets_an_array_of_calls_for_a_parallel_item(data):
    from agentkit.evals.peers import item_schema

    (item,) = load_bfcl(data)
    schema = item_schema(item)
    assert schema["type"] == "array" and schema["maxItems"] == MAX_CALLS
    calls = [{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}},
             {"name": "get_weather", "arguments": {"city": "Rome"}}]
    import json

    assert evaluate(item, json.dumps(calls), calls)["success"]  # a peer's array scores as agentkit's lines do
