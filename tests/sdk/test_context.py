"""Dependencies: RunContext for tools (deps, usage, retry, run_id, messages) and dynamic instructions."""

from dataclasses import dataclass

import pytest

from agentkit.errors import UserError
from agentkit.sdk import Agent, FunctionModel, ModelRetry, RunContext, TestModel, Tool


@dataclass
class Db:
    rows: dict[str, int]


def lookup(ctx: RunContext[Db], key: str) -> int:
    """Look a key up in the database.

    Args:
        key: The key.
    """
    return ctx.deps.rows[key]


def test_context_parameter_is_not_in_the_schema():
    t = Tool(lookup)
    assert t.takes_ctx
    assert t.parameters_schema == {"type": "object", "properties": {"key": {"type": "string",
                                   "description": "The key."}}, "required": ["key"], "additionalProperties": False}


def test_context_must_come_first():
    def bad(key: str, ctx: RunContext[Db]) -> int:
        return 0

    with pytest.raises(UserError, match="a RunContext parameter must come first"):
        Tool(bad)


async def test_tool_reads_deps():
    agent = Agent(TestModel(), tools=[lookup], deps_type=Db)
    result = await agent.run("find a", deps=Db({"a": 42}))
    assert result.trace[0].tool_result == "42"
    assert result.messages[3] == {"role": "user", "content": "Tool lookup returned: 42"}


async def test_context_fields_seen_by_a_tool():
    seen: list[RunContext[str]] = []
    agent = Agent(FunctionModel(_calls_twice_then_stops), deps_type=str)

    @agent.tool
    async def probe(ctx: RunContext[str], n: int) -> str:
        seen.append(ctx)
        if ctx.retry == 0:
            raise ModelRetry("try again")
        return f"{ctx.deps}:{n}"

    result = await agent.run("go", deps="D")
    first, second = seen
    assert (first.retry, second.retry) == (0, 1)
    assert first.deps == "D" and first.run_id == result.run_id and first.prompt == "go"
    assert first.tool_name == "probe" and first.usage is result.usage()
    assert len(second.messages) > len(first.messages)
    assert result.usage().requests == 4 and result.usage().tool_calls == 2
    assert result.usage().output_tokens == sum(r.output_tokens for r in result.trace)


def _calls_twice_then_stops(messages, info):
    if info.step != "tool_call":
        return "done"
    calls = sum(m["content"].startswith("Tool probe") for m in messages)
    return {"tool": "probe", "arguments": {"n": 1}} if calls < 2 else {"tool": "final_answer", "arguments": {}}


async def test_dynamic_instructions_from_the_context():
    systems = []
    model = FunctionModel(lambda m, i: systems.append(m[0]["content"]) or "ok")
    agent = Agent(model, deps_type=str, instructions=["Static.", lambda ctx: f"User is {ctx.deps}."])

    @agent.instructions
    async def more(ctx: RunContext[str]) -> str:
        return f"Run {ctx.run_id}."

    r = await agent.run("hi", deps="ann")
    assert systems == [f"Static.\n\nUser is ann.\n\nRun {r.run_id}."]
    assert r.all_messages()[0].instructions == systems[0]


async def test_tool_taking_context_called_directly_needs_one():
    with pytest.raises(UserError, match="takes a RunContext"):
        await Tool(lookup).call({"key": "a"})
    assert await Tool(lookup).call({"key": "a"}, RunContext(deps=Db({"a": 1}))) == 1
