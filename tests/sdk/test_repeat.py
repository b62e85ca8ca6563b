"""The repeat policy (``Agent(on_repeat=..., repeat=...)``): a call of a tool that already returned a result."""

import pytest

from agentkit.errors import UsageLimitExceeded, UserError
from agentkit.sdk import Agent, FunctionModel, Limits, tool

CALLS: list[tuple] = []


@tool
def double(x: float) -> float:
    """Double a number.

    Args:
        x: the number
    """
    CALLS.append(("double", x))
    return x * 2


@tool
def note(text: str) -> str:
    """Write a note."""
    CALLS.append(("note", text))
    return "noted"


def call(name, **args):
    return {"tool": name, "arguments": args}


def model_of(*calls, reply="The answer is 6."):
    """The tool steps answer ``calls`` in order (then the last one forever); the reply step ``reply``."""
    seen = []

    def fn(messages, info):
        seen.append((info.step, messages))
        if info.step == "reply":
            return reply
        i = sum(1 for s, _ in seen if s == "tool_call") - 1
        return calls[min(i, len(calls) - 1)]

    model = FunctionModel(fn)
    model.seen = seen
    return model


@pytest.fixture(autouse=True)
def _clear():
    CALLS.clear()


async def test_answer_is_the_default_an_identical_call_is_not_executed_again():
    model = model_of(call("double", x=3))
    result = await Agent(model, tools=[double]).run("double 3")
    assert CALLS == [("double", 3)]
    assert [(r.step, r.tool) for r in result.trace] == [("tool_call", "double"), ("tool_call", "double"),
                                                         ("reply", None)]
    assert "not executed" in result.trace[1].error
    # the answer step sees the result (and no JSON call to imitate)
    answer = model.seen[-1][1]
    assert "double(x=3) returned 6" in answer[-1]["content"] and "{" not in answer[-1]["content"]
    assert result.output == "The answer is 6."


async def test_feedback_a_call_that_passes_the_result_back_is_a_repeat():
    model = model_of(call("double", x=3), call("double", x=6.0))
    result = await Agent(model, tools=[double]).run("double 3")
    assert CALLS == [("double", 3)]
    assert result.trace[-1].step == "reply"
    # repeat="call" executes it (the arguments differ), and then stops at the identical third call
    CALLS.clear()
    model = model_of(call("double", x=3), call("double", x=6.0), call("double", x=6.0))
    await Agent(model, tools=[double], repeat="call").run("double 3")
    assert CALLS == [("double", 3), ("double", 6.0)]


async def test_retry_tells_the_model_then_answers_on_a_second_repeat():
    model = model_of(call("double", x=3), call("double", x=3), call("note", text="hi"), call("final_answer"))
    result = await Agent(model, tools=[double, note], on_repeat="retry").run("double 3")
    assert CALLS == [("double", 3), ("note", "hi")]
    told = model.seen[2][1][-1]["content"]
    assert "You already called double and it returned: 6" in told
    # two repeats in a row end in the answer step even under "retry"
    CALLS.clear()
    model = model_of(call("double", x=3))
    result = await Agent(model, tools=[double], on_repeat="retry").run("double 3")
    assert CALLS == [("double", 3)]
    assert [r.step for r in result.trace] == ["tool_call", "tool_call", "tool_call", "reply"]


async def test_allow_executes_every_call_until_the_limit():
    model = model_of(call("double", x=3))
    with pytest.raises(UsageLimitExceeded):
        await Agent(model, tools=[double], on_repeat="allow", limits=Limits(max_iterations=3)).run("x")
    assert CALLS == [("double", 3)] * 3


async def test_another_tools_result_in_between_makes_the_same_call_new():
    model = model_of(call("double", x=3), call("note", text="a"), call("double", x=3), call("final_answer"))
    await Agent(model, tools=[double, note]).run("x")
    assert CALLS == [("double", 3), ("note", "a"), ("double", 3)]


async def test_repeat_tool_stops_any_second_call_of_a_tool():
    model = model_of(call("double", x=3), call("double", x=5))
    await Agent(model, tools=[double], repeat="tool").run("x")
    assert CALLS == [("double", 3)]


async def test_a_failed_call_is_never_a_repeat():
    attempts = []

    @tool
    def flaky(x: int) -> int:
        """Fails once."""
        attempts.append(x)
        if len(attempts) == 1:
            raise ValueError("try again")
        return x

    model = model_of(call("flaky", x=1), call("flaky", x=1), call("flaky", x=1))
    await Agent(model, tools=[flaky]).run("x")
    assert attempts == [1, 1]


def test_bad_values_are_refused():
    with pytest.raises(UserError, match="on_repeat"):
        Agent(FunctionModel(lambda m, i: ""), on_repeat="never")
    with pytest.raises(UserError, match="repeat"):
        Agent(FunctionModel(lambda m, i: ""), repeat="args")


async def test_the_answer_copies_from_the_tool_results_values():
    """The reply step after a result gets the result's values as its copy source (a free reply gets the copy
    prior only with one), a tool step after it the prompt and the values; a first tool step and a run without
    results get none (the config's ``copy_from``)."""
    model = model_of(call("double", x=3), {"name": "final_answer", "arguments": {}})
    seen = []
    inner = model.fn

    def fn(messages, info):
        seen.append((info.step, info.config.copy_source, info.config.copy_first_digit))
        return inner(messages, info)

    model.fn = fn
    await Agent(model, tools=[double]).run("double 3")
    # the second tool step copies from the prompt and the result too (a value passed on to the next call)
    assert seen == [("tool_call", None, False), ("tool_call", "double 3\n6.0", False), ("reply", "6.0", False)]
    seen.clear()
    await Agent(model).run("hello")
    assert seen == [("reply", None, False)]
    seen.clear()
    await Agent(model, tools=[double], model_settings={"copy_from": "prompt"}).run("double 3")  # the user's choice
    assert seen[-1] == ("reply", None, False)


async def test_the_answer_ends_at_a_loop_unless_the_settings_say():
    """The free-text reply gets ``stop_loops`` (steps.REPLY_STOP_LOOPS) unless the agent's config or the model
    settings set it; the structured steps never do (a template's output is not cut)."""
    from agentkit.config import DecodeConfig
    from agentkit.steps import kinds as steps

    model = model_of(call("double", x=3), {"name": "final_answer", "arguments": {}})
    seen = []
    inner = model.fn

    def fn(messages, info):
        seen.append((info.step, info.config.stop_loops))
        return inner(messages, info)

    model.fn = fn
    await Agent(model, tools=[double]).run("double 3")
    assert seen == [("tool_call", 0), ("tool_call", 0), ("reply", steps.REPLY_STOP_LOOPS)]
    seen.clear()
    await Agent(model, tools=[double], model_settings={"stop_loops": 0}).run("double 3")
    assert seen[-1] == ("reply", 0)
    seen.clear()
    await Agent(model, tools=[double], decode=DecodeConfig(stop_loops=5)).run("double 3")
    assert seen[-1] == ("reply", 5)
