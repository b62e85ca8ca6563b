"""OpenTelemetry spans: agent run -> iteration -> model call / tool call, GenAI attributes, trace fields."""

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentkit.errors import UnexpectedModelBehavior
from agentkit.sdk import Agent, FunctionModel, Instrumentation, TestModel, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Instrumentation(tracer_provider=provider), exporter


async def test_span_tree_and_attributes(spans):
    otel, exporter = spans
    result = await Agent(TestModel(), tools=[add], name="calc", instrument=otel).run("1+1", mode="diffusion")
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    assert sorted(by_name) == ["chat TestModel", "execute_tool add", "invoke_agent calc", "iteration 1 tool_call",
                               "iteration 2 tool_call", "iteration 3 reply"]
    root = by_name["invoke_agent calc"]
    assert root.parent is None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "calc"
    assert root.attributes["agentkit.run_id"] == result.run_id
    assert root.attributes["agentkit.iterations"] == 3
    iterations = [s for s in exporter.get_finished_spans() if s.name.startswith("iteration")]
    assert all(s.parent.span_id == root.context.span_id for s in iterations)
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert len(chats) == 3
    assert {c.parent.span_id for c in chats} == {s.context.span_id for s in iterations}
    first = by_name["iteration 1 tool_call"]
    rec = result.trace[0]
    assert first.attributes["agentkit.step"] == "tool_call" and first.attributes["agentkit.mode"] == "diffusion"
    assert first.attributes["agentkit.encoder_forwards"] == rec.encoder_forwards
    assert first.attributes["agentkit.output_tokens"] == rec.output_tokens
    assert first.attributes["agentkit.tool_args"] == '{"a":0,"b":0}'
    tool_span = by_name["execute_tool add"]
    assert tool_span.parent.span_id == first.context.span_id
    assert tool_span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_span.attributes["gen_ai.tool.name"] == "add"
    assert tool_span.attributes["gen_ai.tool.call.result"] == "0"
    chat = next(c for c in chats if c.parent.span_id == first.context.span_id)
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.usage.output_tokens"] == rec.output_tokens
    assert tuple(chat.attributes["gen_ai.response.finish_reasons"]) == ("stop",)  # the conventions' word
    assert chat.attributes["agentkit.finish_reason"] == "template"
    assert chat.attributes["gen_ai.provider.name"] == "agentkit" and "gen_ai.system" not in chat.attributes
    assert chat.attributes["gen_ai.request.temperature"] == 0.0


async def test_failed_run_marks_spans_as_errors(spans):
    otel, exporter = spans
    agent = Agent(FunctionModel(lambda m, i: "nope"), output_type={"type": "object"}, output_retries=0,
                  instrument=otel)
    with pytest.raises(UnexpectedModelBehavior):
        await agent.run("x")
    root = next(s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent"))
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes["error.type"] == "UnexpectedModelBehavior"


async def test_off_by_default_and_instrument_all(spans):
    otel, exporter = spans
    await Agent(TestModel()).run("x")
    assert exporter.get_finished_spans() == ()
    Agent.instrument_all(otel)
    try:
        await Agent(TestModel()).run("x")
    finally:
        Agent.instrument_all(False)
    assert [s.name for s in exporter.get_finished_spans()] == ["chat TestModel", "iteration 1 reply",
                                                               "invoke_agent agent"]
