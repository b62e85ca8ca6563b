"""The SDK over the real in-process engine (tiny random-weight model): EngineGenerator, templates, drafts.

Templates are hand-built here (integer slots), so these tests do not depend on the schema compiler.
"""

import json

import pytest
from pydantic import BaseModel

from agentkit.constrain.nodes import Lit, Slot, Template, seq
from agentkit.errors import AgentRunError, UsageLimitExceeded
from agentkit.sdk import Agent, EngineGenerator, Limits, RoutingPolicy, _steps, tool

INT = r"-?(0|[1-9][0-9]{0,3})"


def int_object_template(schema, style=None):
    items = [Lit("{")]
    for i, key in enumerate(schema["properties"]):
        items += [Lit(("," if i else "") + json.dumps(key) + ":"), Slot(INT, max_tokens=6, name="/" + key)]
    return Template(root=seq(*items, Lit("}")), schema=schema)


@pytest.fixture(autouse=True)
def _hand_built_templates(monkeypatch):
    monkeypatch.setattr(_steps, "compile_template", int_object_template)


@tool
def add(a: int, b: int) -> int:
    return a + b


@pytest.mark.parametrize("mode", ["ar", "verify"])
async def test_agent_tool_calls_on_tiny_engine_are_valid(tiny, mode):
    agent = Agent(tiny, tools=[add], limits=Limits(max_iterations=3))
    assert isinstance(agent.generator, EngineGenerator)
    try:
        result = await agent.run("What is 2+3?", mode=mode)
        trace = result.trace
    except UsageLimitExceeded as e:  # a random model may keep calling the tool
        trace = e.trace
    assert len(trace) >= 2
    for rec in trace:
        assert rec.mode == mode and rec.error is None
        if rec.step == "tool_call":
            assert rec.tool in ("add", "final_answer")
            assert rec.pinned_tokens > 0 and rec.encoder_forwards > 0


async def test_agent_tool_calls_on_tiny_engine_diffusion(tiny):
    diffusion = RoutingPolicy(plan="diffusion", tool_call="diffusion", tool_input="diffusion", extract="diffusion")
    agent = Agent(tiny, tools=[add], limits=Limits(max_iterations=3), routing=diffusion)
    try:
        trace = (await agent.run("What is 2+3?")).trace
    except UsageLimitExceeded as e:
        trace = e.trace
    assert all(r.error is None for r in trace)
    assert [r.mode for r in trace if r.step == "tool_call"] == ["diffusion"] * sum(
        r.step == "tool_call" for r in trace)


class Pair(BaseModel):
    a: int
    b: int


async def test_canvas_drafts_stream_from_the_engine_thread(tiny):
    # an extraction step under the hand-built template: its integer slots must be denoised on a canvas (a tool-call
    # step may be decided without any canvas pass, when the model's first choice forces the rest)
    agent = Agent(tiny, output_type=Pair, limits=Limits(max_iterations=1), routing=RoutingPolicy.force("diffusion"))
    events = []
    try:
        async for event in agent.run_stream("a is 2 and b is 3"):
            events.append(event)
    except AgentRunError:
        pass  # a random model may not give a valid Pair in one iteration; the drafts are what is tested
    assert events[0].kind == "step_started" and events[0].mode == "diffusion"
    drafts = [e for e in events if e.kind == "canvas_draft"]
    assert drafts and all(d.iteration == 1 and isinstance(d.text, str) for d in drafts)
    assert all(len(d.token_ids) == len(d.fixed) for d in drafts)
