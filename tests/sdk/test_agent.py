import asyncio
import json

import pytest
from pydantic import BaseModel

from agentkit.calibration import step_mode
from agentkit.config import DecodeConfig
from agentkit.constrain.nodes import Choice, Lit, Seq
from agentkit.errors import UnexpectedModelBehavior, UsageLimitExceeded, UserError
from agentkit.sdk import (
    Agent,
    CanvasDraft,
    Final,
    FunctionModel,
    Limits,
    ModelRetry,
    Reply,
    RoutingPolicy,
    StepStarted,
    TestModel,
    TextDelta,
    ToolCall,
    ToolResult,
    tool,
)
from agentkit.steps.kinds import tool_call_schema, tool_call_template


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First.
        b: Second.
    """
    return a + b


@tool
async def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


class City(BaseModel):
    name: str
    population: int


def script(*outputs):
    """A FunctionModel answering each call with the next output (call info recorded on the model)."""
    it = iter(outputs)
    return FunctionModel(lambda messages, info: next(it))


def call(name, **args):
    return {"name": name, "arguments": args}


FINAL = call("final_answer")


async def test_test_model_calls_every_tool_once_then_replies():
    agent = Agent(TestModel(), tools=[add, shout])
    result = await agent.run("do things")
    assert result.output == '{"add":"0","shout":"A"}'
    structured = RoutingPolicy().tool_call  # the calibrated default
    assert [(r.step, r.mode, r.tool) for r in result.trace] == [
        ("tool_call", structured, "add"),
        ("tool_call", structured, "shout"),
        ("tool_call", structured, "final_answer"),
        ("reply", RoutingPolicy().reply, None),  # calibrated: verify (greedy)
    ]


async def test_message_format_for_tool_calls():
    outputs = iter([call("add", a=2, b=3), FINAL, "It is 5."])
    sent = []
    model = FunctionModel(lambda messages, info: sent.append(messages) or next(outputs))
    result = await Agent(model, tools=[add], instructions="Be terse.").run("2+3?")
    system = result.messages[0]
    assert system["role"] == "system"
    assert system["content"].startswith("Be terse.\n\nYou can call the following tool:\n")
    assert ('{"name":"add","description":"Add two integers.","parameters":{"type":"object","properties":'
            '{"a":{"description":"First.","type":"integer"},"b":{"description":"Second.","type":"integer"}},'
            '"required":["a","b"],"additionalProperties":false}}') in system["content"]
    assert result.messages[1:] == [
        {"role": "user", "content": "2+3?"},
        {"role": "assistant", "content": '{"name": "add", "arguments": {"a": 2, "b": 3}}'},
        {"role": "user", "content": "Tool add returned: 5"},
        {"role": "assistant", "content": '{"name": "final_answer", "arguments": {}}'},
        {"role": "assistant", "content": "It is 5."},
    ]
    # the answer step sees no JSON call: the instructions (no tool specs), then the task with the results restated
    assert sent[2] == [{"role": "system", "content": "Be terse."},
                       {"role": "user", "content": "2+3?\n\nUse this tool result in your answer: add(a=2, b=3) "
                                                   "returned 5\nAnswer in one sentence that gives the result."}]
    assert sent[1][-1] == {"role": "user", "content": "Tool add returned: 5"}
    reply_info = model.calls[-1]
    assert (reply_info.step, reply_info.mode, reply_info.template) == ("reply", RoutingPolicy().reply, None)
    assert result.output == "It is 5."


async def test_tool_call_template_is_one_choice_over_tools_and_final_answer():
    template = tool_call_template([add, shout])
    assert isinstance(template.root, Seq)
    first, choice, last = template.root.items
    assert first == Lit('{"name": "') and last == Lit("}")  # the name's opening quote is pinned with the start
    assert isinstance(choice, Choice)
    heads = [o.items[0].text if isinstance(o, Seq) else o.text for o in choice.options]
    # each option opens with the rest of its pinned name (merged with the pinned start of its arguments)
    assert [h.split('"', 1)[0] for h in heads] == ["add", "shout", "final_answer"]
    assert all(h.startswith(f'{n}", "arguments": ') for h, n in zip(heads, ["add", "shout", "final_answer"]))
    assert template.matches('{"name": "final_answer", "arguments": {}}')
    assert not template.matches('{"name": "rm", "arguments": {}}')
    assert template.meta["step"] == "tool_call"
    assert template.meta["tools"] == {"add": add.parameters_schema, "shout": shout.parameters_schema}


def test_tool_call_schema_hoists_and_prefixes_defs():
    @tool
    def visit(city: City) -> str:
        return city.name

    schema = tool_call_schema([visit])
    assert list(schema["$defs"]) == ["visit__City"]
    assert schema["anyOf"][0]["properties"]["arguments"]["properties"]["city"] == {"$ref": "#/$defs/visit__City"}
    import jsonschema

    jsonschema.validate(call("visit", city={"name": "Oslo", "population": 1}), schema)
    jsonschema.validate(FINAL, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(call("visit", city={"name": "Oslo"}), schema)


async def test_tool_exception_goes_back_as_observation_then_succeeds():
    attempts = []

    @tool(retries=2)
    def flaky(n: int) -> str:
        attempts.append(n)
        if len(attempts) < 3:
            raise ValueError(f"boom {n}")
        return "fine"

    model = script(call("flaky", n=1), call("flaky", n=2), call("flaky", n=3), FINAL, "done")
    result = await Agent(model, tools=[flaky]).run("go")
    assert attempts == [1, 2, 3]
    assert [m["content"] for m in result.messages if m["content"].startswith("Tool ")] == [
        "Tool flaky failed: ValueError: boom 1",
        "Tool flaky failed: ValueError: boom 2",
        "Tool flaky returned: fine",
    ]
    assert [(r.retries, r.error) for r in result.trace] == [
        (0, "ValueError: boom 1"), (1, "ValueError: boom 2"), (2, None), (0, None), (0, None)]


async def test_tool_retry_limit_raises_with_trace():
    @tool(retries=1)
    def broken() -> str:
        raise RuntimeError("down")

    model = script(call("broken"), call("broken"), FINAL, "never")
    with pytest.raises(UnexpectedModelBehavior) as exc:
        await Agent(model, tools=[broken]).run("go")
    assert str(exc.value) == "tool 'broken' failed 2 time(s) in a row (retries=1); last error: RuntimeError: down"
    assert [(r.tool, r.error) for r in exc.value.trace] == [("broken", "RuntimeError: down")] * 2


async def test_model_retry_message_is_the_observation():
    @tool
    def lookup(key: str) -> str:
        if key != "b":
            raise ModelRetry(f"no key {key!r}; known keys: b")
        return "value-b"

    model = script(call("lookup", key="a"), call("lookup", key="b"), FINAL, "ok")
    result = await Agent(model, tools=[lookup]).run("find")
    assert result.messages[3] == {"role": "user", "content": "Tool lookup failed: no key 'a'; known keys: b"}
    assert result.messages[5] == {"role": "user", "content": "Tool lookup returned: value-b"}
    assert result.trace[0].error == "no key 'a'; known keys: b"


async def test_invalid_arguments_become_an_observation():
    model = script(call("add", a="x"), call("add", a=1, b=2), FINAL, "3")
    result = await Agent(model, tools=[add]).run("add")
    assert result.messages[3]["content"] == (
        "Tool add failed: invalid arguments: a: Input should be a valid integer, unable to parse string as an "
        "integer; b: Field required. Fix the arguments and call the tool again.")
    assert result.messages[5]["content"] == "Tool add returned: 3"


async def test_unusable_tool_call_output_is_retried_then_fails():
    model = script("not json", call("nope"), FINAL)
    with pytest.raises(UnexpectedModelBehavior) as exc:
        await Agent(model, tools=[add], output_retries=1).run("x")
    assert str(exc.value) == (
        "tool_call output unusable 2 time(s) in a row (output_retries=1); "
        "last error: unknown tool 'nope'; the tools are ['add', 'final_answer']")
    assert [r.error for r in exc.value.trace] == [
        "output is not JSON (Expecting value at char 0): 'not json'",
        "unknown tool 'nope'; the tools are ['add', 'final_answer']",
    ]


async def test_output_type_runs_an_extract_step_with_validation_retry():
    model = script({"name": "Oslo"}, {"name": "Oslo", "population": 700000})
    agent = Agent(model, output_type=City)
    result = await agent.run("Oslo has 700k people")
    assert result.output == City(name="Oslo", population=700000)
    structured = RoutingPolicy().extract  # the calibrated default
    retry = "ar" if structured == "diffusion" else structured  # a retry samples; a canvas's in AR (for_retry)
    assert [(r.step, r.mode, r.error) for r in result.trace] == [
        ("extract", structured, "population: Field required"), ("extract", retry, None)]
    assert result.trace[1].retries == 1
    assert result.messages[-2] == {
        "role": "user", "content": "That answer was not usable: population: Field required. Answer again."}


async def test_output_type_dict_schema_returns_dict():
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    result = await Agent(TestModel(), output_type=schema).run("check")
    assert result.output == {"ok": False}


def test_bad_output_type_is_user_error():
    with pytest.raises(UserError, match="output_type must be a JSON Schema dict or a type pydantic can validate"):
        Agent(TestModel(), output_type=42)
    with pytest.raises(UserError, match="output_type is not a valid JSON Schema"):
        Agent(TestModel(), output_type={"type": "nonsense"})


async def test_plan_step_comes_first():
    model = script({"steps": ["add", "answer"]}, call("add", a=1, b=1), FINAL, "2")
    result = await Agent(model, tools=[add], plan=True).run("1+1")
    assert result.plan.steps == ["add", "answer"]
    assert [r.step for r in result.trace] == ["plan", "tool_call", "tool_call", "reply"]
    assert model.calls[0].step == "plan"
    assert result.messages[2:4] == [
        {"role": "assistant", "content": '{"steps":["add","answer"]}'},
        {"role": "user", "content": "Carry out the plan."},
    ]


async def test_routing_default_per_agent_and_per_call():
    def modes(result):
        return [r.mode for r in result.trace]

    default = RoutingPolicy()
    # each step kind defaults to the calibrated mode of the default model on CPU (the step's own measurement: a plan,
    # a tool call, a templated tool's input, extraction, the reply; else structured steps' in general)
    assert (default.plan, default.tool_call, default.tool_input, default.extract, default.reply) == (
        step_mode("plan"), step_mode("tool_call"), step_mode("tool_input"), step_mode("extract"), step_mode("reply"))
    agent = Agent(TestModel(), tools=[add], plan=True)
    assert modes(await agent.run("x")) == [default.plan, default.tool_call, default.tool_call, default.reply]
    diffusion_agent = Agent(TestModel(), tools=[add], plan=True, routing=RoutingPolicy(tool_call="diffusion"))
    assert modes(await diffusion_agent.run("x")) == [default.plan, "diffusion", "diffusion", default.reply]
    verify_agent = Agent(TestModel(), tools=[add], plan=True, routing=RoutingPolicy(tool_call="verify"))
    assert modes(await verify_agent.run("x")) == [default.plan, "verify", "verify", default.reply]
    assert modes(await verify_agent.run("x", mode="ar")) == ["ar"] * 4
    assert modes(await agent.run("x", routing=RoutingPolicy.force("verify"))) == ["verify"] * 4


async def test_a_verify_step_that_samples_stays_in_verify():
    def modes(result):
        return [r.mode for r in result.trace]

    routing = RoutingPolicy(plan="verify", tool_call="verify", tool_input="verify", extract="verify", reply="verify")
    agent = Agent(TestModel(), tools=[add], plan=True, routing=routing)
    assert modes(await agent.run("x")) == ["verify"] * 4  # greedy: verify
    sampled = Agent(TestModel(), tools=[add], plan=True, routing=routing, decode=DecodeConfig(temperature=0.7))
    assert modes(await sampled.run("x")) == ["verify"] * 4  # verify keeps AR's samples for the seed
    assert modes(await agent.run("x", model_settings={"temperature": 0.7})) == ["verify"] * 4
    assert modes(await agent.run("x", model_settings={"temperature": 0.0})) == ["verify"] * 4


async def test_decode_config_sent_to_generator_carries_mode_and_base_settings():
    model = script(FINAL, "ok")
    await Agent(model, tools=[add], decode=DecodeConfig(canvas_length=16, max_new_tokens=99),
                routing=RoutingPolicy(tool_call="diffusion")).run("x")
    assert [(c.config.mode, c.config.canvas_length, c.config.max_new_tokens) for c in model.calls] == [
        ("diffusion", 16, 99), (RoutingPolicy().reply, 16, 99)]


def test_routing_rejects_unknown_mode():
    with pytest.raises(UserError, match="RoutingPolicy modes must be one of"):
        RoutingPolicy(reply="beam")


async def test_max_iterations_raises_with_trace_so_far():
    model = FunctionModel(lambda messages, info: call("add", a=1, b=1))
    with pytest.raises(UsageLimitExceeded) as exc:
        await Agent(model, tools=[add], limits=Limits(max_iterations=3), on_repeat="allow").run("loop")
    assert str(exc.value) == "max_iterations=3 reached"
    assert len(exc.value.trace) == 3


async def test_max_tokens_clamps_then_raises():
    model = script(call("add", a=1, b=2), FINAL, "x" * 50)
    with pytest.raises(UsageLimitExceeded) as exc:
        await Agent(model, tools=[add], limits=Limits(max_tokens=100)).run("x")
    used = [r.output_tokens for r in exc.value.trace]
    assert used == [40, 38, 50]  # synthetic: one token per byte
    assert str(exc.value) == "max_tokens=100 exceeded (128 used)"
    assert model.calls[2].config.max_new_tokens == 100 - 40 - 38


async def test_timeout_raises_with_trace_so_far():
    async def slow(messages, info):
        if info.step == "reply":
            await asyncio.sleep(5)
        return FINAL

    with pytest.raises(UsageLimitExceeded) as exc:
        await Agent(FunctionModel(slow), tools=[add], limits=Limits(timeout_s=0.2)).run("x")
    assert str(exc.value) == ("timeout_s=0.2 exceeded after 1 iteration(s); the reply step in progress was stopped "
                              "at its next forward")
    assert exc.value.trace[-1].finish_reason == "cancelled" and exc.value.trace[-1].step == "reply"
    assert [r.tool for r in exc.value.trace] == ["final_answer", None]


def test_limits_validation():
    with pytest.raises(UserError, match="max_iterations must be an integer >= 1"):
        Limits(max_iterations=0)
    with pytest.raises(UserError, match="timeout_s must be > 0"):
        Limits(timeout_s=0)


async def test_run_stream_yields_events_in_order():
    agent = Agent(TestModel(), tools=[add], routing=RoutingPolicy(tool_call="diffusion"))  # canvas drafts
    events = [e async for e in agent.run_stream("go")]
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert "".join(d.delta for d in deltas if d.step == "reply") == '{"add":"0"}'
    assert "".join(d.delta for d in deltas if d.iteration == 1) == '{"name":"add","arguments":{"a":0,"b":0}}'
    events = [e for e in events if not isinstance(e, TextDelta)]
    kinds = [e.kind for e in events]
    assert kinds == ["step_started", "canvas_draft", "canvas_draft", "tool_call", "tool_result",
                     "step_started", "canvas_draft", "canvas_draft",
                     "step_started", "reply", "final"]
    assert events[0] == StepStarted(1, "tool_call", "diffusion")
    draft = events[2]
    assert isinstance(draft, CanvasDraft) and draft.text == '{"name":"add","arguments":{"a":0,"b":0}}'
    assert all(draft.fixed)
    assert events[3] == ToolCall(1, "add", {"a": 0, "b": 0})
    assert events[4] == ToolResult(1, "add", "Tool add returned: 0", False)
    assert events[9] == Reply(3, '{"add":"0"}')
    assert isinstance(events[-1], Final) and events[-1].result.output == '{"add":"0"}'


async def test_run_stream_raises_run_errors():
    model = FunctionModel(lambda m, i: call("add", a=1, b=1))
    agent = Agent(model, tools=[add], limits=Limits(max_iterations=1))
    with pytest.raises(UsageLimitExceeded):
        async for _ in agent.run_stream("x"):
            pass


def test_run_sync():
    result = Agent(TestModel(output_text="hi")).run_sync("hello")
    assert result.output == "hi"
    assert [(r.step, r.mode) for r in result.trace] == [("reply", RoutingPolicy().reply)]


async def test_run_sync_inside_loop_is_user_error():
    with pytest.raises(UserError, match="run_sync\\(\\) cannot be called from a running event loop"):
        Agent(TestModel()).run_sync("x")


async def test_agent_tool_decorator_registers_and_rejects_duplicates():
    agent = Agent(TestModel())

    @agent.tool
    def ping() -> str:
        return "pong"

    assert [t.name for t in agent.tools] == ["ping"]
    with pytest.raises(UserError, match="tool 'ping': the name is used by 2 tools"):
        agent.tool(ping.function)
    result = await agent.run("x")
    assert result.output == '{"ping":"pong"}'


async def test_engine_like_model_is_wrapped_and_run_in_a_thread():
    import threading

    from agentkit.engine.stats import DecodeStats, GenerationResult
    from agentkit.sdk import EngineGenerator

    seen = []

    class FakeEngine:
        batches = False

        def generate(self, prompt, config=None, *, template=None, on_draft=None, **kw):
            seen.append((threading.current_thread() is threading.main_thread(), config.mode, template is None))
            value = FINAL if template is not None else None
            return GenerationResult(json.dumps(value) if value else "hi", [], DecodeStats(mode=config.mode), value)

    agent = Agent(FakeEngine(), tools=[add], routing=RoutingPolicy(tool_call="diffusion"))
    assert isinstance(agent.generator, EngineGenerator)
    result = await agent.run("x")
    assert result.output == "hi"
    assert seen == [(False, "diffusion", False), (False, RoutingPolicy().reply, True)]


async def test_workspace_tools_mix_with_user_tools(tmp_path):
    from agentkit.tools.workspace import Workspace, workspace_tools

    (tmp_path / "notes.txt").write_text("hello\n")
    agent = Agent(TestModel(call_tools=["list_files", "add"]), tools=[*workspace_tools(Workspace(tmp_path)), add])
    assert [t.name for t in agent.tools] == ["list_files", "read_file", "search_text", "write_file", "apply_edits",
                                            "run_tests", "add"]
    result = await agent.run("what files are there?")
    assert [r.tool for r in result.trace if r.step == "tool_call"] == ["list_files", "add", "final_answer"]
    assert json.loads(result.output) == {"list_files": '["notes.txt"]', "add": "0"}


async def test_long_tool_results_are_clipped_in_the_conversation_with_a_marker():
    from agentkit.sdk import Limits
    from agentkit.sdk._tools import clip_result

    @tool
    def dump() -> str:
        """A long log."""
        return "START " + "x" * 9000 + " END"

    outputs = iter([call("dump"), FINAL, "done"])
    result = await Agent(FunctionModel(lambda m, i: next(outputs)), tools=[dump],
                         limits=Limits(max_tool_result_chars=600)).run("go")
    seen = next(m["content"] for m in result.messages if m["content"].startswith("Tool dump returned"))
    assert "START" in seen and seen.endswith(" END") and "characters cut (Limits.max_tool_result_chars=600)" in seen
    assert len(seen) < 700
    assert clip_result("short", 100) == "short" and clip_result("y" * 500, None) == "y" * 500
    with pytest.raises(UserError, match="max_tool_result_chars"):
        Limits(max_tool_result_chars=5)


async def test_a_tool_past_its_timeout_fails_with_its_name_and_the_run_goes_on():
    import time as _time

    @tool(timeout_s=0.2)
    def slow() -> str:
        """Sleeps."""
        _time.sleep(2)
        return "late"

    outputs = iter([call("slow"), FINAL, "gave up"])
    result = await Agent(FunctionModel(lambda m, i: next(outputs)), tools=[slow]).run("go")
    assert result.output == "gave up"
    assert result.trace[0].error == "tool 'slow' timed out after 0.2 s (its timeout_s); it was abandoned"
    with pytest.raises(UserError, match="timeout_s must be a number > 0"):
        tool(timeout_s=0)(lambda: 1)


def test_run_sync_returns_at_the_run_timeout_while_a_sync_tool_hangs():
    import threading
    import time as _time

    from agentkit.sdk import Limits

    release = threading.Event()

    @tool
    def hang() -> str:
        """Never returns on its own."""
        release.wait(30)
        return "done"

    agent = Agent(FunctionModel(lambda m, i: call("hang") if i.step == "tool_call" else "x"), tools=[hang],
                  limits=Limits(timeout_s=0.5))
    t0 = _time.perf_counter()
    try:
        with pytest.raises(UsageLimitExceeded, match="tool 'hang' was running"):
            agent.run_sync("go")
        assert _time.perf_counter() - t0 < 5  # not the 30 s the tool would take
    finally:
        release.set()
