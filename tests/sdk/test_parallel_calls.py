"""Parallel tool calls in the SDK (issue 35 item 2): with ``model_settings={"parallel_tool_calls": True}`` a tool step
may write several calls of the tool it picked (one per line, ``agentkit.toolcall.calls_template``); they run
concurrently, each distinct call once, and their results come back together. Off by default (one call)."""

from __future__ import annotations

import asyncio

from agentkit.sdk import Agent, FunctionModel
from agentkit.sdk._messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart, to_chat
from agentkit.toolcall import MAX_PARALLEL_CALLS


class ScoringModel(FunctionModel):
    """Scores call ``weather`` until a result is in the conversation, then answer."""

    can_score = True

    async def name_scores(self, messages, names, head):
        answered = any("weather" in m["content"] and "sunny" in m["content"] for m in messages if m["role"] == "user")
        return {n: (-9.0 if n == "final_answer" and not answered else 0.0) for n in names}


def _weather_tool(started: list[str]):
    both = asyncio.Event()

    async def weather(city: str) -> str:
        """Weather for a city."""
        started.append(city)
        if len(started) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 5)  # returns only once both calls run at the same time
        return f"sunny in {city}"

    return weather


async def test_parallel_calls_run_concurrently_each_once():
    started: list[str] = []
    templates = []
    paris, rome = {"name": "weather", "arguments": {"city": "Paris"}}, {"name": "weather", "arguments": {"city": "Rome"}}

    def fn(messages, info):
        if info.step == "tool_call":
            templates.append(info.template)
            return [paris, rome, paris]  # Paris twice: made once
        return "Sunny in both."

    agent = Agent(ScoringModel(fn), tools=[_weather_tool(started)], model_settings={"parallel_tool_calls": True})
    result = await agent.run("Weather in Paris and Rome?")
    assert result.output == "Sunny in both." and started == ["Paris", "Rome"]
    assert templates[0].kind == "jsonl" and templates[0].meta["max_calls"] == MAX_PARALLEL_CALLS
    response = next(m for m in result.all_messages() if isinstance(m, ModelResponse))
    calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
    assert [c.args for c in calls] == [{"city": "Paris"}, {"city": "Rome"}]
    request = result.all_messages()[result.all_messages().index(response) + 1]
    assert isinstance(request, ModelRequest)
    returns = [p for p in request.parts if isinstance(p, ToolReturnPart)]
    assert [r.tool_call_id for r in returns] == [c.tool_call_id for c in calls]
    assert [r.content for r in returns] == ["sunny in Paris", "sunny in Rome"]
    rec = result.trace[0]
    assert rec.tool == "weather" and "Rome" in rec.tool_args and "sunny in Rome" in rec.tool_result
    chat = to_chat([response])  # the model reads its earlier calls back as it wrote them: one per line
    assert chat == [{"role": "assistant", "content": '{"name": "weather", "arguments": {"city": "Paris"}}\n'
                                                     '{"name": "weather", "arguments": {"city": "Rome"}}'}]
    assert result.usage().tool_calls == 2


async def test_one_call_by_default_and_with_parallel_tool_calls_false():
    templates = []

    def fn(messages, info):
        if info.step == "tool_call":
            templates.append(info.template)
            return {"name": "weather", "arguments": {"city": "Paris"}}
        return "Sunny."

    async def weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    assert (await Agent(ScoringModel(fn), tools=[weather]).run("Weather in Paris?")).output == "Sunny."
    agent = Agent(ScoringModel(fn), tools=[weather], model_settings={"parallel_tool_calls": False})
    assert (await agent.run("Weather in Paris?")).output == "Sunny."
    assert [(t.kind, t.meta["max_calls"]) for t in templates] == [("json", 1), ("json", 1)]
