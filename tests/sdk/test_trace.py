import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentkit.engine.stats import DecodeStats
from agentkit.sdk import Agent, FunctionModel, IterationRecord, RoutingPolicy, TestModel, Trace, tool
from agentkit.sdk._models import VERIFY_RUN
from agentkit.sdk._trace import append_jsonl

REPO = Path(__file__).resolve().parents[2]


@tool
def add(a: int, b: int) -> int:
    return a + b


def test_record_takes_counts_and_latency_split_from_stats():
    stats = DecodeStats(mode="diffusion", prompt_tokens=10, output_tokens=24, pinned_tokens=16, slot_tokens=8,
                        encoder_forwards=3, decoder_forwards=7, prefill_ms=5.0, denoise_ms=20.0, commit_ms=4.0)
    rec = IterationRecord(1, "tool_call", "diffusion")
    stats.cached_prompt_tokens = 8
    rec.add_stats(stats)
    assert rec.cached_prompt_tokens == 8
    assert (rec.prefill_ms, rec.denoise_ms, rec.commit_ms) == (5.0, 20.0, 4.0)
    assert (rec.encoder_forwards, rec.decoder_forwards, rec.output_tokens) == (3, 7, 24)
    assert (rec.pinned_tokens, rec.slot_tokens, rec.prompt_tokens) == (16, 8, 10)
    assert rec.tokens_per_forward == round(24 / 9, 4)  # forwards after the prompt prefill: 3 + 7 - 1
    verify = DecodeStats(mode="verify", output_tokens=12, encoder_forwards=6, verify_forwards=5,
                         accepted_slot_tokens=4)
    rec = IterationRecord(2, "extract", "verify")
    rec.add_stats(verify)
    assert (rec.verify_forwards, rec.accepted_slot_tokens, rec.accepted_per_pass) == (5, 4, 0.8)
    totals = Trace([rec, IterationRecord(3, "reply", "ar", verify_forwards=3, accepted_slot_tokens=2)]).totals()
    assert (totals["verify_forwards"], totals["accepted_slot_tokens"], totals["accepted_per_pass"]) == (8, 6, 0.75)


async def test_run_trace_fields():
    model = TestModel(ms_per_forward=2.0)
    # tool calls in diffusion (named: the default is calibrated), so the denoise/commit split is exercised
    routing = RoutingPolicy(tool_call="diffusion", reply="verify")
    result = await Agent(model, tools=[add], name="calc", routing=routing).run("1+1")
    first, final, reply = result.trace
    assert first.to_dict() | {"total_ms": 0, "queue_ms": 0, "tool_ms": 0, "compile_ms": 0} == {
        "iteration": 1, "step": "tool_call", "mode": "diffusion", "tool": "add",
        "queue_ms": 0, "prefill_ms": 2.0, "denoise_ms": 16.0, "commit_ms": 4.0, "tool_ms": 0, "compile_ms": 0,
        "total_ms": 0, "prompt_tokens": first.prompt_tokens, "cached_prompt_tokens": 0, "encoder_forwards": 3, "decoder_forwards": 8,
        "output_tokens": 40, "pinned_tokens": 33, "slot_tokens": 7, "tokens_per_forward": 4.0,
        "verify_forwards": 0, "accepted_slot_tokens": 0, "accepted_per_pass": 0.0, "retries": 0,
        "error": None, "run_id": result.run_id, "agent": "calc", "finish_reason": "template",
        "tool_args": '{"a":0,"b":0}', "tool_result": "0", "decide_ms": 0.0, "decision": None}
    assert first.tool_ms > 0 and first.total_ms >= first.tool_ms + first.queue_ms
    assert first.compile_ms > 0 and final.compile_ms == 0  # the tool-call template compiles once per agent
    # the reply in verify: a fake pass commits VERIFY_RUN tokens, no denoiser pass
    assert (reply.step, reply.mode, reply.decoder_forwards) == ("reply", "verify", 0)
    assert reply.verify_forwards == reply.encoder_forwards - 1 == -(-reply.output_tokens // VERIFY_RUN)
    assert reply.tokens_per_forward == pytest.approx(reply.output_tokens / reply.verify_forwards, abs=1e-4)
    assert [r.iteration for r in result.trace] == [1, 2, 3]


def test_totals_and_table():
    trace = Trace([IterationRecord(1, "tool_call", "diffusion", tool="add", total_ms=10.0, prompt_tokens=5,
                                   encoder_forwards=2, decoder_forwards=4, output_tokens=20),
                   IterationRecord(2, "reply", "ar", total_ms=5.0, prompt_tokens=5, encoder_forwards=6,
                                   output_tokens=5, error="x" * 100)])
    totals = trace.totals()
    assert (totals["total_ms"], totals["output_tokens"], totals["iterations"]) == (15.0, 25, 2)
    assert totals["tokens_per_forward"] == 25 / 10
    assert max(len(line) for line in trace.render().splitlines()) <= 100  # the default fits 100 columns
    text = trace.render(200)  # the full column set
    lines = text.splitlines()
    assert any(line.split()[:4] == ["1", "tool_call", "diffusion", "add"] for line in lines)
    assert any(line.split()[:3] == ["2", "reply", "ar"] for line in lines)
    assert any(line.split()[:2] == ["all", "15.0"] for line in lines)
    assert trace.to_table().row_count == 3


def test_write_and_read_jsonl_round_trip(tmp_path):
    path = tmp_path / "t.jsonl"
    trace = Trace([IterationRecord(1, "extract", "diffusion", error="bad"), IterationRecord(2, "reply", "ar")])
    trace.write_jsonl(path)
    trace.write_jsonl(path)  # appends
    lines = path.read_text().splitlines()
    assert len(lines) == 4
    assert json.loads(lines[0])["error"] == "bad"
    assert [r.step for r in Trace.read_jsonl(path)] == ["extract", "reply", "extract", "reply"]


def test_append_after_torn_line_starts_a_new_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"iteration": 1, "step": "reply", "mode": "ar"}\n{"iteration": 2, "st')
    append_jsonl(path, [IterationRecord(3, "reply", "ar")])
    assert path.read_text().splitlines()[-1] == json.dumps(IterationRecord(3, "reply", "ar").to_dict())
    assert [r.iteration for r in Trace.read_jsonl(path)] == [1, 3]


async def test_run_appends_each_iteration_as_it_ends(tmp_path):
    path = tmp_path / "run.jsonl"
    lines_seen = []
    outputs = iter([{"tool": "add", "arguments": {"a": 1, "b": 2}}, {"tool": "final_answer", "arguments": {}}, "3"])

    def fn(messages, info):
        lines_seen.append(len(path.read_text().splitlines()) if path.exists() else 0)
        return next(outputs)

    result = await Agent(FunctionModel(fn), tools=[add]).run("x", trace_path=str(path))
    assert lines_seen == [0, 1, 2]  # each generation finds every earlier iteration already on disk
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["step"], r["tool"]) for r in records] == [("tool_call", "add"), ("tool_call", "final_answer"),
                                                         ("reply", None)]
    assert [r["run_id"] for r in records] == [result.run_id] * 3


CHILD = """
import sys
from agentkit.sdk import Agent, FunctionModel, Limits, tool

@tool(retries=10**9)
def work(n: int) -> str:
    raise ValueError("e" * 400)  # long error strings make lines of ~1 KB

model = FunctionModel(lambda m, i: {"tool": "work", "arguments": {"n": 1}})
Agent(model, tools=[work], limits=Limits(max_iterations=10**9)).run_sync("loop", trace_path=sys.argv[1])
"""


def test_jsonl_survives_sigkill_mid_run(tmp_path):
    path = tmp_path / "killed.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists() and path.stat().st_size > 50_000:
                break
            assert child.poll() is None, "the child exited early"
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
    data = path.read_bytes()
    assert data.endswith(b"\n")
    lines = data.decode().split("\n")[:-1]
    assert len(lines) >= 40
    records = [json.loads(line) for line in lines]
    assert [r["iteration"] for r in records] == list(range(1, len(records) + 1))
    assert all(r["error"] == "ValueError: " + "e" * 400 for r in records)


async def test_render_is_readable_at_80_columns():
    result = await Agent(TestModel(), tools=[add]).run("1+1", mode="diffusion")
    text = result.trace.render(width=80)
    rows = text.splitlines()
    assert max(len(r) for r in rows) <= 80
    assert "…" not in text  # no column collapsed
    header = next(r for r in rows if r.lstrip().startswith("#"))
    assert header.split() == ["#", "step", "mode", "tool", "ms", "fwd", "out", "tok/fwd", "error"]
    first = next(r for r in rows if r.lstrip().startswith("1 "))
    rec = result.trace[0]
    assert first.split()[:7] == ["1", "tool_call", "diffusion", "add", f"{rec.total_ms:.0f}",
                                 str(rec.encoder_forwards + rec.decoder_forwards), str(rec.output_tokens)]
    assert "prefill" in result.trace.render(width=200)  # wide terminals keep every column


async def test_tool_arguments_and_results_are_clipped_in_the_jsonl(tmp_path):
    @tool
    def big(n: int) -> str:
        """Return a long text."""
        return "x" * 2000

    path = tmp_path / "t.jsonl"
    await Agent(TestModel(), tools=[big]).run("go", trace_path=str(path))
    first = json.loads(path.read_text().splitlines()[0])
    assert first["tool_args"] == '{"n":0}'
    assert len(first["tool_result"]) == 500 and first["tool_result"].endswith("…")


def test_writer_escapes_lone_surrogates_in_one_write(tmp_path, monkeypatch):
    """A tool error holding "\\ud800" used to raise UnicodeEncodeError in the writer (and lose the trace)."""
    rec = IterationRecord(1, "tool_call", "ar", tool="bad\ud800tool")
    rec.error = "boom \ud800 and \udcff"
    writes = []
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: writes.append(data) or real_write(fd, data))
    path = tmp_path / "t.jsonl"
    append_jsonl(path, [rec, IterationRecord(2, "reply", "ar")])
    assert len(writes) == 1  # one write call for the whole batch of records
    back = Trace.read_jsonl(path)
    assert len(back) == 2 and back[0].tool == "bad\ud800tool" and back[0].error == "boom \ud800 and \udcff"
