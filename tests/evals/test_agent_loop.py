"""The agent-loop benchmark's environment, scoring and runner (agentkit.evals.agent_env / agent_loop / agent_peers):
scripted models that call the right tools score 1.0, wrong ones 0.0; a model that never stops does not finish; the
real loop on a tiny random model; the peer loops against a scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi import FastAPI, Request

from agentkit.evals import agent_tasks as at
from agentkit.evals.agent_env import NEUTRAL, ServiceUnavailable, TaskEnv, answer_has, call_right
from agentkit.evals.agent_loop import run_agent_loop, run_agentkit, summarize, table
from agentkit.sdk import FunctionModel

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = Path(__file__).parent / "data" / "agent_loop_tiny"
CODE = re.compile(r"\b[A-Z]+-\d{4}\b")


def tasks(kind: str | None = None) -> list[at.AgentTask]:
    return at.load(TINY, kinds=[kind] if kind else None)


def right_calls(task: at.AgentTask, wrong: bool = False) -> list[tuple[str, dict]]:
    """The calls a right run makes (the first allowed value of each argument); ``wrong``: every value changed."""
    out = []
    for e in task.expected:
        (name, allowed), = e.items()
        args = {k: next(v for v in vals if v != "") for k, vals in allowed.items() if any(v != "" for v in vals)}
        if wrong:
            args = {k: "nope" if isinstance(v, str) else v + 7 for k, v in args.items()}
        out.append((name, args))
    return [out[0], *out] if task.kind == "fail_once" else out


def scripted(all_tasks: list[at.AgentTask], wrong: bool = False, stop: bool = True) -> FunctionModel:
    """A model that, for the task whose prompt it is sent, makes its calls in order then ``final_answer``, and
    replies with the last code the conversation shows. ``stop=False``: calls the first tool forever."""
    plans = {t.prompt: right_calls(t, wrong) for t in all_tasks}
    done: dict[str, int] = {}

    def fn(messages, info):
        prompt = next(t for t in plans if any(m["content"].endswith(t) or t in m["content"] for m in messages
                                               if m["role"] == "user"))
        if info.step == "tool_call":
            if sum(m["role"] != "system" for m in messages) == 1:  # a new run: only the task so far
                done[prompt] = 0
            i = done.get(prompt, 0)
            done[prompt] = i + 1
            calls = plans[prompt]
            if not stop:
                name, args = calls[0] if calls else (info.tools[0] if info.tools else "final_answer", {})
                return {"tool": name, "arguments": args}
            if i < len(calls):
                return {"tool": calls[i][0], "arguments": calls[i][1]}
            return {"tool": "final_answer", "arguments": {}}
        text = " ".join(m["content"] for m in messages if m["role"] != "system")
        codes = [c for c in CODE.findall(text) if not c.startswith("R-")]
        return f"The result is {codes[-1]}." if codes else "I do not know."

    return FunctionModel(fn)


# -- environment and scoring -------------------------------------------------------------------------------------


def test_env_answers_the_right_call_with_the_canned_result():
    t = tasks("one_tool")[0]
    (name, args), = right_calls(t)
    env = TaskEnv(t)
    assert env.call(name, {k: "nope" for k in args}) == NEUTRAL
    assert env.call(name, args) == t.result
    assert [c.outcome for c in env.calls] == ["neutral", "result"] and env.got_result()


def test_env_fails_the_first_call_of_a_fail_once_task():
    t = tasks("fail_once")[0]
    name, args = right_calls(t)[0]
    env = TaskEnv(t)
    with pytest.raises(ServiceUnavailable, match="Call the tool again"):
        env.call(name, args)
    assert env.call(name, args) == t.result


def test_env_lookup_gives_the_value_only_for_the_reference():
    t = tasks("two_tool")[0]
    env = TaskEnv(t)
    assert env.call(at.LOOKUP, {"ref": "R-0000"})["value"] is None
    assert env.call(at.LOOKUP, {"ref": t.lookup["ref"]}) == t.lookup


def test_call_right_forgives_a_declared_default_filled_in():
    t = next(x for x in tasks() if "weather.current" in x.expected[-1])
    (name, args), = [c for c in right_calls(t) if c[0] == "weather.current"]
    assert call_right(t, name, args, t.expected[-1])
    assert call_right(t, name, {**args, "units": "metric"}, t.expected[-1])  # the default: as if left out
    assert not call_right(t, name, {**args, "units": "imperial"}, t.expected[-1])
    assert not call_right(t, name, {**args, "city": "Paris"}, t.expected[-1])


def test_answer_has_ignores_case_and_punctuation():
    assert answer_has("It is amber 4821.", "AMBER-4821")
    assert not answer_has("It is AMBER-4822.", "AMBER-4821") and not answer_has(None, "AMBER-4821")


# -- the runner ------------------------------------------------------------------------------------------------


def test_scripted_right_calls_score_one():
    ts = tasks()
    model = scripted(ts)
    s = summarize([run_agentkit(t, model, "ar") for t in ts])
    assert s["finished_rate"] == 1.0 and s["task_success"] == 1.0
    assert s["right_call_rate"] == 1.0 and s["answer_has_result_rate"] == 1.0 and s["no_tool_rate"] == 1.0
    assert s["tool_decision_rate"] == 1.0 and s["json_reply_rate"] == 0.0
    assert s["two_tool_right_rate"] == 1.0 and s["fail_once_recovered_rate"] == 1.0
    assert s["iterations_median_one_tool"] == 3  # call, final_answer, reply
    assert s["iteration_latency_ms"]["3"]["n"] == len(ts) - 2  # the no_tool runs have two iterations


def test_scripted_wrong_calls_score_zero():
    ts = tasks()
    model = scripted(ts, wrong=True)
    s = summarize([run_agentkit(t, model, "ar") for t in ts])
    assert s["finished_rate"] == 1.0  # it stops, but with nothing right
    assert s["right_call_rate"] == 0.0 and s["two_tool_right_rate"] == 0.0 and s["fail_once_recovered_rate"] == 0.0
    assert s["answer_has_result_rate"] is None and s["n_with_result"] == 0
    assert s["task_success"] == 0.25  # only the no_tool tasks (2 of 8): their answer is in the prompt


def test_a_model_that_never_stops_does_not_finish():
    t = tasks("one_tool")[0]
    row = run_agentkit(t, scripted([t], stop=False), "ar", max_iterations=2)
    assert not row["finished"] and row["iterations"] == 2 and row["error"].startswith("UsageLimitExceeded")
    assert row["first_call_right"] and not row["success"]
    # with room for the answer step, the repeated identical call is not executed: the run answers (sdk/_repeat.py)
    row = run_agentkit(t, scripted([t], stop=False), "ar", max_iterations=3)
    assert row["finished"] and row["iterations"] == 3 and row["first_call_right"]
    no_tool = tasks("no_tool")[0]  # calling a tool where none is needed: the wrong first decision
    name = no_tool.functions[0]["name"]
    model = FunctionModel(lambda m, info: {"tool": name, "arguments": {}} if info.step == "tool_call" else "x")
    s = summarize([run_agentkit(no_tool, model, "ar", max_iterations=2)])
    assert s["tool_decision_rate"] == 0.0 and s["no_tool_rate"] == 0.0
    blob = FunctionModel(lambda m, info: {"tool": "final_answer", "arguments": {}} if info.step == "tool_call"
                         else '{"answer": "' + no_tool.answer_value + '"}')
    s = summarize([run_agentkit(no_tool, blob, "ar")])
    assert s["json_reply_rate"] == 1.0 and s["no_tool_answer_rate"] == 1.0  # it carries the value, as a blob


def test_run_writes_results_and_plot(tmp_path):
    ts = tasks()
    out, plot = tmp_path / "r.json", tmp_path / "r.png"
    res = run_agent_loop(TINY, ["ar", "verify"], engine=scripted(ts), out=out, plot=plot, bfcl=False,
                         verbose=False)
    saved = json.loads(out.read_text())
    assert saved["partial"] is False and len(saved["items"]) == 16
    assert set(saved["summary"]["agentkit"]) == {"ar", "verify"} and saved["modes"]["ar"]["task_success"] == 1.0
    assert plot.is_file() and plot.stat().st_size > 10_000
    assert "| agentkit | verify |" in table(res)


def test_real_loop_on_a_tiny_random_model(tiny, tmp_path):
    """The runner drives the real Agent on an Engine (a tiny random model: it scores about nothing, but every row
    has its iterations and per-iteration latencies from the trace, and the BFCL single call runs on the item)."""
    ts = at.load(TINY, kinds=["one_tool", "no_tool"], limit=2)
    res = run_agent_loop(TINY, ["ar"], kinds=["one_tool", "no_tool"], limit=2, engine=tiny, bfcl=True,
                         max_iterations=2, out=tmp_path / "tiny.json", verbose=False)
    rows = res["items"]
    assert [r["id"] for r in rows] == [t.id for t in ts]
    for r in rows:
        assert 1 <= r["iterations"] <= 2 and len(r["iter_ms"]) == r["iterations"]
    assert isinstance(rows[0]["bfcl_single"], bool) and rows[1]["bfcl_single"] is None


# -- the peers against a scripted OpenAI-compatible server -----------------------------------------------------


def _scripted_server(task: at.AgentTask, wrong: bool):
    """A chat-completions endpoint that makes the task's calls (one per request, as tool_calls) then replies with
    the last code in the conversation."""
    calls = right_calls(task, wrong)
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        msg: dict = {"role": "assistant", "content": None}
        if done < len(calls):
            name, args = calls[done]
            msg["tool_calls"] = [{"id": f"call_{done}", "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}}]
        else:
            text = " ".join(str(m.get("content") or "") for m in body["messages"] if m["role"] != "system")
            codes = [c for c in CODE.findall(text) if not c.startswith("R-")]
            msg["content"] = f"The result is {codes[-1]}." if codes else "?"
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "scripted",
                "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if msg.get("tool_calls")
                             else "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    return app


@pytest.mark.parametrize("peer", ["openai", "pydantic-ai"])
@pytest.mark.parametrize("kind", ["one_tool", "two_tool", "fail_once"])
def test_peer_loops_score_right_and_wrong(peer, kind, on_loopback):
    from agentkit.evals.agent_peers import run_peer

    t = tasks(kind)[0]
    for wrong in (False, True):
        with on_loopback(_scripted_server(t, wrong)) as url:
            row = run_peer(peer, t, url + "/v1", max_iterations=6)
        assert row["finished"], row["error"]
        assert row["success"] is (not wrong) and row["first_call_right"] is (not wrong)
        assert row["iterations"] == len(right_calls(t)) + 1


def test_resume_keeps_earlier_rows(tmp_path):
    """A --limit run's rows are kept by a later run with --resume; only the rest runs (the counter shows which)."""
    ts = tasks()
    first = run_agent_loop(TINY, ["ar"], limit=3, engine=scripted(ts), out=tmp_path / "a.json", bfcl=False,
                           verbose=False)
    model = scripted(ts)
    res = run_agent_loop(TINY, ["ar"], engine=model, out=tmp_path / "b.json", bfcl=False, verbose=False,
                         resume=tmp_path / "a.json")
    assert res["items"][:3] == first["items"] and len(res["items"]) == 8
    first_steps = len(model.calls)
    assert first_steps == sum(r["iterations"] for r in res["items"][3:])  # the model ran only the 5 new tasks
    with pytest.raises(Exception, match="max_iterations"):
        run_agent_loop(TINY, ["ar"], engine=model, out=tmp_path / "c.json", bfcl=False, verbose=False,
                       resume=tmp_path / "a.json", max_iterations=3)


def test_cli_names_a_bad_mode_and_kind():
    from typer.testing import CliRunner

    from agentkit.cli import app

    res = CliRunner().invoke(app, ["eval", "agent-loop", "--data", str(TINY), "--mode", "fast"])
    assert res.exit_code == 2 and "unknown agent-loop mode" in res.output
    res = CliRunner().invoke(app, ["eval", "agent-loop", "--data", str(TINY), "--kinds", "three_tool"])
    assert res.exit_code == 2 and "unknown task kind" in res.output


def test_merge_joins_runs_and_resummarizes(tmp_path):
    from agentkit.evals.agent_loop import merge_results

    ts = tasks()
    run_agent_loop(TINY, ["ar"], limit=4, engine=scripted(ts), out=tmp_path / "a.json", bfcl=False, verbose=False)
    run_agent_loop(TINY, ["ar"], kinds=["fail_once"], engine=scripted(ts, wrong=True), out=tmp_path / "b.json",
                   bfcl=False, verbose=False)
    res = merge_results([tmp_path / "a.json", tmp_path / "b.json"], tmp_path / "m.json", tmp_path / "m.png")
    assert res["tasks"] == 5 and len(res["items"]) == 5  # one fail_once task ran in both: the first row is kept
    assert res["modes"]["ar"]["fail_once_recovered_rate"] == 0.5 and (tmp_path / "m.png").is_file()


def test_the_spawned_server_loads_the_lora_the_run_names(monkeypatch):
    """``agentkit eval agent-loop --peers ... --lora DIR`` without ``--base-url``: the server started for the peers
    merges the same LoRA (it used to load the base weights, so the peers ran on other weights than the agent)."""
    from agentkit.errors import UserError
    from agentkit.evals import agent_peers

    class Exited:
        returncode = 3

        def __init__(self, cmd, **kw):
            self.cmd = cmd

        def poll(self):
            return self.returncode

        def terminate(self):
            pass

        def wait(self, timeout=None):
            return self.returncode

        def kill(self):
            pass

    monkeypatch.setattr(agent_peers.subprocess, "Popen", Exited)
    with pytest.raises(UserError, match=r"--lora adapters/x"), agent_peers.serve(lora="adapters/x"):
        pass
