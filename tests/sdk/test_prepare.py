"""``Tool(prepare=...)``: which tools a tool step offers (pydantic-ai's name; a workflow a small model can follow)."""

import pytest

from agentkit.errors import UserError
from agentkit.sdk import Agent, FunctionModel, RunContext, Tool, tool


def read(path: str) -> str:
    """Read a file."""
    return f"text of {path}"


def edit(change: str) -> str:
    """Change a file."""
    return "edited"


def after_read(ctx: RunContext, t: Tool) -> Tool | None:
    """Offered once ``read`` returned in this run."""
    done = any(getattr(p, "tool_name", None) == "read" and p.part_kind == "tool-return"
               for m in ctx.messages for p in getattr(m, "parts", []))
    return t if done else None


async def test_a_tool_is_offered_only_when_its_prepare_says_so():
    seen = []

    def fn(messages, info):
        seen.append(sorted(info.tools or []) if info.step == "tool_call" else info.step)
        if info.step == "reply":
            return "done"
        if "read" in info.tools and "edit" not in info.tools:
            return {"name": "read", "arguments": {"path": "a.py"}}
        if "edit" in info.tools and len(seen) == 2:
            return {"name": "edit", "arguments": {"change": "x"}}
        return {"name": "final_answer", "arguments": {}}

    agent = Agent(FunctionModel(fn), tools=[Tool(read), Tool(edit, prepare=after_read)])
    result = await agent.run("fix a.py")
    assert seen[:3] == [["read"], ["edit", "read"], ["edit", "read"]]
    assert [r.tool for r in result.trace if r.step == "tool_call"][:2] == ["read", "edit"]


async def test_async_prepare_and_a_step_with_no_tool_left_answers():
    async def never(ctx, t):
        return None

    seen = []

    def fn(messages, info):
        seen.append(info.step)
        return "no tools today"

    result = await Agent(FunctionModel(fn), tools=[Tool(read, prepare=never)]).run("hi")
    assert seen == ["reply"] and result.output == "no tools today"


async def test_prepare_must_return_the_tool_or_none():
    bad = Tool(read, prepare=lambda ctx, t: "read")
    with pytest.raises(UserError, match="prepare must return the tool"):
        await Agent(FunctionModel(lambda m, i: "x"), tools=[bad]).run("hi")
    with pytest.raises(UserError, match="prepare must be callable"):
        Tool(read, prepare=3)
    assert tool(prepare=after_read)(read).prepare is after_read
