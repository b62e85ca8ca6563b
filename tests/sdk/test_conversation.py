"""Conversations: message models, message_history across runs (sync, async, stream), JSON round trips."""

import pytest

from agentkit.errors import UnexpectedModelBehavior, UsageLimitExceeded, UserError
from agentkit.sdk import (
    Agent,
    FunctionModel,
    Limits,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    tool,
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def echo_model():
    """Replies with the user prompts it has seen so far, joined by '|' (records every call's messages)."""
    seen: list[list[dict[str, str]]] = []

    def fn(messages, info):
        seen.append(messages)
        return "|".join(m["content"] for m in messages if m["role"] == "user")

    return FunctionModel(fn), seen


async def test_three_turn_conversation_sees_earlier_messages():
    model, seen = echo_model()
    agent = Agent(model, instructions="Be brief.")
    r1 = await agent.run("one")
    r2 = await agent.run("two", message_history=r1.all_messages())
    r3 = await agent.run("three", message_history=r2.all_messages())
    assert [r1.output, r2.output, r3.output] == ["one", "one|two", "one|two|three"]
    assert seen[2] == [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": "one"}, {"role": "assistant", "content": "one"},
                       {"role": "user", "content": "two"}, {"role": "assistant", "content": "one|two"},
                       {"role": "user", "content": "three"}]
    assert len(r3.all_messages()) == 6 and len(r3.new_messages()) == 2
    req, resp = r3.new_messages()
    assert isinstance(req, ModelRequest) and req.parts[0] == UserPromptPart(content="three",
                                                                            timestamp=req.parts[0].timestamp)
    assert isinstance(resp, ModelResponse) and resp.text == "one|two|three" and resp.step == "reply"
    assert r1.all_messages() == r2.all_messages()[:2]  # the history is not mutated


def test_history_round_trips_through_json_and_continues_sync():
    model, _ = echo_model()
    agent = Agent(model, tools=[add])
    model.fn = _tool_then_reply(model.fn)
    r1 = agent.run_sync("first")
    kinds = [type(p).__name__ for m in r1.all_messages() for p in m.parts]
    assert kinds == ["UserPromptPart", "ToolCallPart", "ToolReturnPart", "ToolCallPart", "TextPart"]
    data = r1.all_messages_json()
    history = ModelMessagesTypeAdapter.validate_json(data)
    assert history == r1.all_messages()
    call = history[1].parts[0]
    assert isinstance(call, ToolCallPart) and call.args == {"a": 1, "b": 2}
    ret = history[2].parts[0]
    assert isinstance(ret, ToolReturnPart) and ret.content == "3" and ret.tool_call_id == call.tool_call_id
    r2 = agent.run_sync("second", message_history=history)
    assert r2.messages[:len(r1.messages)] == r1.messages
    assert r2.messages[len(r1.messages)] == {"role": "user", "content": "second"}


def _tool_then_reply(reply_fn):
    def fn(messages, info):
        if info.step == "tool_call":
            done = any(m["content"].startswith("Tool add") for m in messages[-1:])
            return {"tool": "final_answer" if done else "add", "arguments": {} if done else {"a": 1, "b": 2}}
        return reply_fn(messages, info)
    return fn


async def test_stream_continues_a_conversation():
    model, _ = echo_model()
    agent = Agent(model)
    r1 = await agent.run("hi")
    async with agent.run_stream("again", message_history=r1.all_messages()) as s:
        text = "".join([d async for d in s.stream_text(delta=True)])
    assert text == "hi|again" and len(s.all_messages()) == 4 and len(s.new_messages()) == 2


async def test_run_errors_carry_the_messages_so_far():
    model = FunctionModel(lambda m, i: {"tool": "add", "arguments": {"a": 1, "b": 1}})
    with pytest.raises(UsageLimitExceeded) as exc:
        await Agent(model, tools=[add], limits=Limits(max_iterations=2), on_repeat="allow").run("loop")
    parts = [type(p).__name__ for m in exc.value.messages for p in m.parts]
    assert parts == ["UserPromptPart", "ToolCallPart", "ToolReturnPart", "ToolCallPart", "ToolReturnPart"]

    bad = FunctionModel(lambda m, i: "not json")
    with pytest.raises(UnexpectedModelBehavior) as exc2:
        await Agent(bad, output_type={"type": "object"}, output_retries=0).run("x")
    last = exc2.value.messages[-1].parts[0]
    assert isinstance(last, RetryPromptPart) and "not JSON" in last.content and last.tool_name is None


async def test_retry_prompts_render_as_before():
    outputs = iter(["oops", '{"x": 1}'])
    model = FunctionModel(lambda m, i: next(outputs))
    result = await Agent(model, output_type={"type": "object"}).run("go")
    assert result.messages[-3:-1] == [
        {"role": "assistant", "content": "oops"},
        {"role": "user", "content": "That answer was not usable: output is not JSON (Expecting value at char 0): "
                                    "'oops'. Answer again."}]
    assert isinstance(result.new_messages()[-1].parts[0], TextPart)


async def test_bad_history_is_a_user_error():
    with pytest.raises(UserError, match="message_history must hold ModelRequest/ModelResponse"):
        await Agent(echo_model()[0]).run("x", message_history=[{"role": "user", "content": "hi"}])
