"""The user-tool benchmark's tools, readers and scoring, and its committed tasks."""

from pathlib import Path

import pytest

from agentkit.errors import UserError
from agentkit.evals import user_tools as ut

TASKS = Path(__file__).resolve().parents[2] / "evals" / "user_tools" / "tasks.jsonl"


def test_the_tools_answer_from_the_fixed_environment():
    assert ut.get_weather("Oslo")["temperature_c"] == -3 and "error" in ut.get_weather("Atlantis")
    assert ut.calculator("(45 + 55) * 3.2")["result"] == 320 and ut.evaluate("15% * 240") == 36
    with pytest.raises(ValueError):
        ut.evaluate("__import__('os')")
    assert ut.get_calendar_events("tomorrow")["events"][0]["city"] == "Porto"
    assert ut.get_calendar_events("March 14th")["date"] == "2026-03-14"
    assert ut.convert_currency(100, "dollars", "euros")["result"] == 92.0
    assert ut.convert_units(100, "F", "celsius")["result"] == 37.78
    assert "error" in ut.convert_units(3, "kg", "km")
    assert "Herbert" in ut.web_search("who wrote Dune")["top_result"]


def test_scoring_reads_arguments_as_the_tools_do():
    task = {"id": "t", "kind": "two", "expected": [
        {"tool": "convert_currency", "args": {"amount": 250, "from_currency": "EUR", "to_currency": "USD"}},
        {"tool": "calculator", "args": {"expression": {"eval": 40.76}}}]}
    right = [("convert_currency", {"amount": 250.0, "from_currency": "euros", "to_currency": "usd"}),
             ("calculator", {"expression": "271.74 * 0.15"})]
    row = ut.score_run(task, right)
    assert row["call_when_needed"] and row["right_tool"] and row["right_arguments"] and row["extra_calls"] == 0
    wrong = ut.score_run(task, [("calculator", {"expression": "250 * 0.15"})])
    assert wrong["call_when_needed"] and not wrong["right_tool"] and not wrong["right_arguments"]
    none = ut.score_run({"id": "n", "kind": "none", "expected": []}, [("get_weather", {"city": "2"})])
    assert none["no_call_when_none"] is False
    s = ut.summary([row, wrong, none])
    assert s["right_arguments"] == 0.5 and s["no_call_when_none"] == 0.0 and s["call_when_needed_n"] == "2/2"


def test_the_committed_tasks_are_consistent_and_split(tmp_path):
    tasks = ut.load_tasks(TASKS)
    assert len(tasks) >= 80 and {t["kind"] for t in tasks} == {"one", "none", "two"}
    for split in ut.SPLITS:
        kinds = [t["kind"] for t in tasks if t["split"] == split]
        assert min(kinds.count(k) for k in ("one", "none", "two")) >= 10
    for t in tasks:  # every expected call, made as written, scores right through the real tools
        calls = []
        for w in t["expected"]:
            args = {k: str(v["eval"]) if isinstance(v, dict) and "eval" in v else
                    " ".join(v["contains"]) if isinstance(v, dict) else v for k, v in w["args"].items()}
            assert "error" not in ut.BY_NAME[w["tool"]](**args), t["id"]
            calls.append((w["tool"], args))
        assert ut.score_run(t, calls).get("right_arguments", True), t["id"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "split": "dev", "kind": "one", "prompt": "hi", "expected": []}\n')
    with pytest.raises(UserError, match="kind 'one'"):
        ut.load_tasks(bad)
