"""The SDK over the real in-process engine (tiny random-weight model): EngineGenerator, templates, drafts.

Templates are hand-built here (integer slots), so these tests do not depend on the schema compiler.
"""

import json

import pytest
from pydantic import BaseModel

from agentkit.constrain.nodes import Lit, Slot, Template, seq
from agentkit.errors import AgentRunError, UsageLimitExceeded, UserError
from agentkit.sdk import Agent, EngineGenerator, FunctionModel, Limits, RoutingPolicy, tool
from agentkit.steps import kinds as _steps

INT = r"-?(0|[1-9][0-9]{0,3})"


def int_object_template(schema, style=None, strict=True):
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


@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@pytest.mark.parametrize("mode", ["ar", "verify"])
async def test_agent_tool_calls_on_tiny_engine_are_valid(tiny, mode):
    # the choice decoded under the call template (the random model's scores may answer at once: tested below)
    agent = Agent(tiny, tools=[add], limits=Limits(max_iterations=3), decide="decode")
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


@pytest.mark.parametrize("call", [True, False])
async def test_scores_decide_call_or_answer_on_tiny_engine(tiny, monkeypatch, call):
    """decide="scores" (the default with an engine): the calibrated scores decide; a call decodes only the picked
    tool's arguments (its name pinned), an answer goes straight to the reply step, whose record carries the
    decision. Both branches forced through ``agentkit.decide.calibrated``; the scores themselves are the model's."""
    from agentkit import decide

    real = decide.calibrated
    seen = []

    def forced(scores, null, names, no_call, margin=True):
        _, info = real(scores, null, names, no_call, margin)
        seen.append((scores, null))
        return call, info

    monkeypatch.setattr(decide, "calibrated", forced)
    agent = Agent(tiny, tools=[add, shout], limits=Limits(max_iterations=2))
    try:
        trace = (await agent.run("What is two plus three?", mode="ar")).trace  # words: no typed values (covering)
    except UsageLimitExceeded as e:
        trace = e.trace
    first = trace[0]
    assert first.decision is not None and first.decision["call"] is call and first.decide_ms > 0
    assert set(seen[0][0]) == {"add", "shout", "respond"} and all(v < 0 for v in seen[0][0].values())
    if call:  # the tool whose score rises most over the content-free question's (the scores alone without one)
        scores, null = seen[0]
        picked = max(("add", "shout"), key=lambda n: scores[n] - (null[n] if null is not None else 0.0))
        assert (first.step, first.tool) == ("tool_call", picked) and first.error is None
        assert first.decision["tool"] == picked
    else:
        assert (first.step, first.tool) == ("reply", None) and len(trace) == 1
    by_options = {}
    for _, null in seen:  # the baseline is scored once per agent and option set (the same dict is reused)
        assert by_options.setdefault(tuple(null), null) is null


@pytest.mark.parametrize("decision, call_prompt", [("choice", "tool_step"), ("choice", "choice_example"),
                                                   ("choice", "choice"), ("listed_first", "tool_step")])
async def test_a_call_on_a_prompt_that_starts_as_the_decisions_reuses_its_pieces(tiny, monkeypatch, decision,
                                                                                 call_prompt):
    """``_decide.CALL_PROMPT``: the call's prompt pass reuses the decision's stored pieces where its system text
    starts with the decision's ("choice_example"), all but the assistant's header where it is the decision's
    ("choice"), and none where the tool step's own prompt differs from its first line ("tool_step", the default).
    A "listed_first" decision opens as the tool step's prompt does, so the tool step's call reuses its blocks."""
    from agentkit import decide
    from agentkit.sdk import _decide

    monkeypatch.setattr(_decide, "DECISION_PROMPT", decision)
    monkeypatch.setattr(_decide, "CALL_PROMPT", call_prompt)
    tiny.prefixes.clear()  # the engine is shared: another test's prompts are not this decision's
    monkeypatch.setattr(decide, "calibrated", lambda scores, null, names, no_call, margin=True: (True, {
        "no_call_margin": 0.0, "no_call_margin_null": 0.0, "tool": "add"}))
    agent = Agent(tiny, tools=[add, shout], limits=Limits(max_iterations=1), prefetch=False)  # the prompts' own share
    try:
        trace = (await agent.run("What is two plus three?", mode="ar")).trace
    except UsageLimitExceeded as e:
        trace = e.trace
    first = trace[0]
    assert (first.step, first.tool) == ("tool_call", "add")
    if (decision, call_prompt) == ("choice", "tool_step"):
        assert first.cached_prompt_tokens == 0
    elif call_prompt == "choice":
        assert first.prompt_tokens - 8 <= first.cached_prompt_tokens < first.prompt_tokens
    else:
        assert 128 <= first.cached_prompt_tokens < first.prompt_tokens


async def test_the_first_calls_prompt_pass_runs_ahead_with_the_same_output(tiny, monkeypatch):
    """``Agent(prefetch=True)``: the first call's prompt (the tool step's own) is encoded beside the decision, so the
    call reuses all of it but the assistant's header; the call and the answer are those without it."""
    from agentkit import decide

    monkeypatch.setattr(decide, "calibrated", lambda scores, null, names, no_call, margin=True: (True, {
        "no_call_margin": 0.0, "no_call_margin_null": 0.0, "tool": "add"}))
    firsts = {}
    for prefetch in (False, True):
        tiny.prefixes.clear()  # the engine is shared: another test's prompts are not this run's
        agent = Agent(tiny, tools=[add, shout], limits=Limits(max_iterations=1), prefetch=prefetch)
        try:
            trace = (await agent.run("What is two plus three?", mode="ar")).trace
        except UsageLimitExceeded as e:
            trace = e.trace
        firsts[prefetch] = trace[0]
    off, on = firsts[False], firsts[True]
    assert (on.step, on.tool, on.tool_args) == (off.step, off.tool, off.tool_args) == ("tool_call", "add", off.tool_args)
    assert off.cached_prompt_tokens == 0 and on.prompt_tokens == off.prompt_tokens
    assert on.prompt_tokens - 8 <= on.cached_prompt_tokens < on.prompt_tokens


def test_prefetch_is_checked():
    with pytest.raises(UserError, match="prefetch must be True, False or None"):
        Agent(FunctionModel(lambda m, i: "x"), prefetch="yes")
    with pytest.raises(UserError, match="prefetch=True needs a generator"):
        Agent(FunctionModel(lambda m, i: "x"), prefetch=True)
    assert Agent(FunctionModel(lambda m, i: "x")).prefetch is False  # nothing to run a pass ahead on


async def test_a_pass_ahead_is_told_to_stop_when_the_decision_answers(tiny, monkeypatch):
    """The decision answers: the call's pass ahead is cancelled (it ends at its next piece), and the answer is the
    one without a pass ahead."""
    import asyncio

    from agentkit import decide
    from agentkit.config import DecodeConfig
    from agentkit.sdk import _prefetch

    seen: list[bool] = []

    class Slow:
        async def prefill(self, messages, config, stop):
            seen.append(stop())
            await asyncio.sleep(0.05)
            seen.append(stop())

    ahead = _prefetch.CallPrefetch()
    ahead.start(Slow(), [], DecodeConfig())
    await asyncio.sleep(0.01)
    ahead.cancel()
    await ahead.ready()
    assert seen == [False, True]

    monkeypatch.setattr(decide, "calibrated", lambda scores, null, names, no_call, margin=True: (False, {
        "no_call_margin": 0.0, "no_call_margin_null": 0.0, "tool": None}))
    cancelled, cancel = [], _prefetch.CallPrefetch.cancel
    monkeypatch.setattr(_prefetch.CallPrefetch, "cancel", lambda self: (cancelled.append(True), cancel(self)))
    outputs = []
    for prefetch in (False, True):
        tiny.prefixes.clear()
        result = await Agent(tiny, tools=[add, shout], prefetch=prefetch).run("Say hi.", mode="ar")
        outputs.append((result.output, [r.step for r in result.trace]))
    assert cancelled == [True] and outputs[0] == outputs[1] and outputs[0][1] == ["reply"]


async def test_a_pass_ahead_stops_when_the_run_that_started_it_ends():
    """A run that ends while its pass ahead still runs (a timeout in the decision) tells the pass to stop."""
    import asyncio

    from agentkit.config import DecodeConfig
    from agentkit.sdk import _prefetch

    seen: list[bool] = []

    class Slow:
        async def prefill(self, messages, config, stop):
            for _ in range(20):
                seen.append(stop())
                await asyncio.sleep(0.01)

    ahead = _prefetch.CallPrefetch()

    async def run():
        ahead.start(Slow(), [], DecodeConfig())
        await asyncio.sleep(0.03)  # the run ends (or times out) before the pass

    await asyncio.create_task(run())
    await ahead.ready()
    assert seen[0] is False and seen[-1] is True and ahead.cancelled.is_set()


def test_a_pass_ahead_needs_a_spare_core(tiny, monkeypatch):
    """``prefetch=None`` is on where the process may run on twice the cores the engine's passes use."""
    import os

    from agentkit.sdk import _prefetch

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    generator = EngineGenerator(tiny)
    for cores, spare in (({0}, False), ({0, 1}, tiny.threads == 1)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, cores=cores: cores)
        assert _prefetch.spare_core(generator) is spare
