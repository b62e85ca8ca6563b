"""tool_choice auto (serving/toolchoice.py): the choice decode over the tools plus "respond", the text decode after
"respond" or a repeated call, and "required" -- on a scripted engine (each branch forced) and the tiny model."""

from __future__ import annotations

import json

import httpx
import pytest
from agentkit.serving.app import create_app
from agentkit.serving.toolchoice import answered_calls, no_call_name

from agentkit.engine.stats import DecodeStats, GenerationResult
from agentkit.toolcall import call_key

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"],
           "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                           "parameters": WEATHER}}]
MSG = [{"role": "user", "content": "What is the weather in Paris?"}]


def _compiler():
    from agentkit.constrain.compiler import compile_schema_cached

    return compile_schema_cached


class Scripted:
    """An engine whose choice decode (a call template) returns ``choice`` and whose free decode returns ``text``;
    it records each call's messages and whether a template was given."""

    name = "scripted"
    batches = False

    def __init__(self, choice: dict, text: str = "It is sunny.") -> None:
        self.choice, self.text = choice, text
        self.calls: list[tuple[list[dict], bool]] = []

    def generate(self, messages, config, *, template=None, on_tokens=None, on_draft=None, **kw):
        self.calls.append((messages, template is not None))
        if template is not None:
            return GenerationResult(json.dumps(self.choice), [1] * 9,
                                    DecodeStats(mode=config.mode, prompt_tokens=30, output_tokens=9,
                                                finish_reason="template"), self.choice)
        return GenerationResult(self.text, [2] * 4, DecodeStats(mode=config.mode, prompt_tokens=20, output_tokens=4,
                                                                finish_reason="stop"))


async def _post(engine, body) -> httpx.Response:
    app = create_app(engine, compile_schema=_compiler())
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=30) as c:
            return await c.post("/v1/chat/completions", json=body)
    finally:
        app.state.scheduler.close()


def _sse(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


async def test_auto_tool_branch_streamed():
    eng = Scripted({"name": "get_weather", "arguments": {"city": "Paris"}})
    r = await _post(eng, {"model": "agentkit", "messages": MSG, "tools": TOOLS, "stream": True})
    chunks = [c for c in _sse(r.text) if c["choices"]]
    calls = [c["choices"][0]["delta"]["tool_calls"] for c in chunks if c["choices"][0]["delta"].get("tool_calls")]
    assert len(calls) == 1 and json.loads(calls[0][0]["function"]["arguments"]) == {"city": "Paris"}
    assert not any(c["choices"][0]["delta"].get("content") for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_auto_tool_branch():
    eng = Scripted({"name": "get_weather", "arguments": {"city": "Paris"}})
    r = await _post(eng, {"model": "agentkit", "messages": MSG, "tools": TOOLS})
    d = r.json()
    ch = d["choices"][0]
    assert ch["finish_reason"] == "tool_calls" and ch["message"]["content"] is None
    assert json.loads(ch["message"]["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    (msgs, templated), = eng.calls  # one decode: the choice
    assert templated and '"respond"' in msgs[0]["content"] and '"get_weather"' in msgs[0]["content"]
    assert d["usage"] == {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39,
                          "prompt_tokens_details": {"cached_tokens": 0}}


@pytest.mark.parametrize("stream", [False, True])
async def test_auto_no_call_branch_decodes_text_without_the_tools(stream):
    eng = Scripted({"name": "respond", "arguments": {}})
    r = await _post(eng, {"model": "agentkit", "messages": MSG, "tools": TOOLS, "max_tokens": 8, "stream": stream})
    assert r.status_code == 200, r.text
    [(_, t1), (m2, t2)] = eng.calls
    assert t1 and not t2  # the choice under its template, then free text
    assert not any("get_weather" in m["content"] or "respond" in m["content"] for m in m2)
    assert m2[-1] == MSG[-1]
    if stream:
        chunks = _sse(r.text)
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        assert text == "It is sunny." and not any(c["choices"] and c["choices"][0]["delta"].get("tool_calls")
                                                  for c in chunks)
        final = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]][-1]
        assert final["choices"][0]["finish_reason"] == "stop" and final["usage"]["completion_tokens"] == 13
    else:
        d = r.json()
        assert d["choices"][0]["message"] == {"role": "assistant", "content": "It is sunny."}
        assert d["choices"][0]["finish_reason"] == "stop"
        assert d["usage"] == {"prompt_tokens": 50, "completion_tokens": 13, "total_tokens": 63,
                              "prompt_tokens_details": {"cached_tokens": 0}}  # both decodes


HISTORY = MSG + [
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21 C"}]


async def test_repeat_rule_answers_in_text():
    eng = Scripted({"name": "get_weather", "arguments": {"city": "Paris"}}, text="Sunny, 21 C.")
    off = {"grounded_arguments": False}  # the repeat rule itself (grounded, the served request answers first)
    d = (await _post(eng, {"model": "agentkit", "messages": HISTORY, "tools": TOOLS, "agentkit": off})).json()
    assert d["choices"][0]["message"]["content"] == "Sunny, 21 C." and d["choices"][0]["finish_reason"] == "stop"
    assert len(eng.calls) == 2 and "sunny, 21 C" in eng.calls[1][0][-1]["content"]  # the result in view
    eng = Scripted({"name": "get_weather", "arguments": {"city": "Paris"}}, text="Sunny, 21 C.")
    d = (await _post(eng, {"model": "agentkit", "messages": HISTORY, "tools": TOOLS})).json()
    assert d["choices"][0]["message"]["content"] == "Sunny, 21 C."  # Paris was taken: served, no call decoded
    assert len(eng.calls) == 1 and "sunny, 21 C" in eng.calls[0][0][-1]["content"]
    rome = HISTORY + [{"role": "user", "content": "And in Rome?"}]
    eng = Scripted({"name": "get_weather", "arguments": {"city": "Rome"}})  # a new call is returned
    d = (await _post(eng, {"model": "agentkit", "messages": rome, "tools": TOOLS})).json()
    assert d["choices"][0]["finish_reason"] == "tool_calls" and len(eng.calls) == 1
    eng = Scripted({"name": "get_weather", "arguments": {"city": "Oslo"}}, text="Ask me anything.")
    d = (await _post(eng, {"model": "agentkit", "messages": HISTORY, "tools": TOOLS, "agentkit": off})).json()  # no value from the conversation: text
    assert d["choices"][0]["message"]["content"] == "Ask me anything." and len(eng.calls) == 2
    eng = Scripted({"name": "get_weather", "arguments": {"city": "Paris"}})  # required: the call asked for
    d = (await _post(eng, {"model": "agentkit", "messages": HISTORY, "tools": TOOLS, "tool_choice": "required"})).json()
    assert d["choices"][0]["finish_reason"] == "tool_calls" and len(eng.calls) == 1
    no_result = HISTORY[:-1] + [{"role": "user", "content": "again"}]  # a call without a result is no repeat
    eng = Scripted({"name": "get_weather", "arguments": {"city": "Paris"}})
    d = (await _post(eng, {"model": "agentkit", "messages": no_result, "tools": TOOLS})).json()
    assert d["choices"][0]["finish_reason"] == "tool_calls"


def test_answered_calls_and_names():
    from agentkit.serving.protocol import ChatRequest

    req = ChatRequest.model_validate({"model": "agentkit", "messages": HISTORY})
    assert answered_calls(req.messages) == {call_key("get_weather", {"city": "Paris"})}
    assert call_key("f", {"a": 1, "b": 2}) == call_key("f", {"b": 2, "a": 1})
    assert no_call_name(["get_weather"]) == "respond" and no_call_name(["respond", "respond_"]) == "respond__"


@pytest.fixture(scope="module")
def tiny():
    from agentkit.engine import tiny_engine

    return tiny_engine(0)


@pytest.mark.parametrize("forced", [True, False])
async def test_auto_on_the_tiny_model(tiny, monkeypatch, forced):
    """The tiny random model through the real templates: the decision (forced each way by monkeypatching the
    calibrated rule, so both branches run) picks the decode: a call under the tools' template (no "respond" option
    left), or text from a template-free decode with no choice decode before it."""
    from agentkit import decide as scores
    from agentkit.steps import runner, tool_step

    seen, asked = [], []
    real = tiny.generate

    def spy(messages, config, **kw):
        seen.append(kw.get("template") is not None)
        return real(messages, config, **kw)

    def score(engine, messages, names, head, slot=None):
        asked.append((messages[-1]["content"], names, head))
        return {n: 0.0 for n in names}

    def decide(request, null, names, no_call, margin=True):
        return forced, {"no_call_margin": 0.0, "no_call_margin_null": 0.0, "tool": names[0]}

    monkeypatch.setattr(tiny, "generate", spy)
    monkeypatch.setattr(runner, "name_scores", score)
    monkeypatch.setattr(scores, "calibrated", decide)
    # random weights write random arguments; the grounding rule has its own test (test_repeat_rule_answers_in_text)
    monkeypatch.setattr(tool_step, "call_grounded", lambda args, text: True)
    d = (await _post(tiny, {"model": "agentkit", "messages": MSG, "tools": TOOLS, "max_tokens": 16})).json()
    ch = d["choices"][0]
    options = (["get_weather", "respond"], '{"name": "')
    assert asked == [(MSG[-1]["content"], *options), (scores.NULL_QUESTION, *options)]  # the request, the baseline
    assert d["agentkit_stats"]["tool_choice"]["call"] is forced
    if forced:
        assert seen == [True] and ch["finish_reason"] == "tool_calls"
        tc = ch["message"]["tool_calls"][0]["function"]
        assert tc["name"] == "get_weather" and set(json.loads(tc["arguments"])) == {"city"}
    else:
        assert seen == [False] and isinstance(ch["message"]["content"], str) and ch["finish_reason"] != "tool_calls"


def test_auto_is_calibrated_against_the_null_question(tiny):
    """The decision is the margin of "respond" over the tools on the request minus the same margin on the
    content-free question: a margin that is low only because the tool list favours the tools still calls, one above
    the null margin answers in text (the shared step's decision, answered from a table; the engine's own scores
    below)."""
    from agentkit.decide import NULL_QUESTION, calibrates, name_scores
    from agentkit.steps.decision import DecisionAsk, decide
    from agentkit.steps.drive import drive

    sysmsg = {"role": "system", "content": "tools"}
    for asked, null, want in [(-1.0, -3.0, False), (-3.0, -1.0, True), (2.0, 1.0, False), (0.5, 1.0, True)]:
        table = {"q": {"f": 0.0, "respond": asked}, NULL_QUESTION: {"f": 0.0, "respond": null}}
        ask = DecisionAsk("auto", [sysmsg, {"role": "user", "content": "q"}], ["f"], "respond", "{",
                          calibrate=calibrates(tiny))
        got = drive(decide(ask), lambda score, table=table: table[score.messages[-1]["content"]])
        assert got.call is want and got.info["no_call_margin"] == asked
    scores = name_scores(tiny, [{"role": "user", "content": "hi"}], ["get_weather", "respond"], '{"name": "')
    assert set(scores) == {"get_weather", "respond"} and all(v < 0 for v in scores.values())


def test_name_scores_equal_a_full_pass_per_name(tiny):
    """The cached scoring (one prompt pass, then one pass over every name's tokens side by side under a tree mask,
    cropped back) gives each name's log-probability as a separate full pass over prompt + head + name does."""
    import torch
    from agentkit.serving.toolchoice import name_scores

    msgs, head, names = MSG, '{"name": "', ["get_weather", "add", "respond", "a_longer_tool_name"]
    bb, tok = tiny.backbone, tiny.tokenizer
    passes = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bb, "branches", lambda heads, cache, f=bb.branches: passes.append(len(heads)) or f(heads, cache))
        got = name_scores(tiny, msgs, names, head)
    assert passes == [sum(len(tok.encode(n + '"', add_special_tokens=False)) > 1 for n in names)]
    base = list(tiny.encode_prompt(msgs)) + tok.encode(head, add_special_tokens=False)
    for n in names:
        cont = tok.encode(n + '"', add_special_tokens=False)
        ids = base + cont
        lp = torch.log_softmax(bb.encode(ids, bb.new_cache(), rows=list(range(len(base) - 1, len(ids) - 1))).float(),
                               -1)
        assert got[n] == pytest.approx(sum(float(lp[i, t]) for i, t in enumerate(cont)), abs=1e-3)
    assert len({round(v, 3) for v in got.values()}) == len(names)  # the names are told apart


def test_many_continuations_are_read_in_bounded_passes(tiny, monkeypatch):
    """More continuation tokens than one pass holds (``MAX_BRANCH_POSITIONS``) go in several passes, in order, with
    the logits one pass gives."""
    import torch

    from agentkit.engine import backbone

    bb = tiny.backbone
    cache = bb.new_cache()
    bb.encode([5, 6, 7, 8], cache, whole=True)
    heads = [[10 + i, 20 + i, 30 + i] for i in range(7)]
    whole = backbone.continuation_logits(bb, cache, heads)
    sizes = []
    monkeypatch.setattr(backbone, "MAX_BRANCH_POSITIONS", 7)
    monkeypatch.setattr(bb, "branches", lambda group, c, f=bb.branches: sizes.append(len(group)) or f(group, c))
    parts = backbone.continuation_logits(bb, cache, heads)
    assert sizes == [2, 2, 2, 1] and cache.get_seq_length() == 4
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(parts, whole, strict=True))


def test_a_backbone_without_branch_passes_scores_each_name_in_its_own_pass(tiny, monkeypatch):
    """A backbone that cannot score branches (a server's batched seat, llama.cpp) reads each name in a pass of
    its own, cropped back, with the same scores."""
    from types import SimpleNamespace

    from agentkit.serving.toolchoice import name_scores

    from agentkit.engine.faces import Branching

    class WithoutBranches:  # the backbone, less its branch pass
        def __init__(self, bb):
            self.bb = bb

        def __getattr__(self, name):
            if name == "branches":
                raise AttributeError(name)
            return getattr(self.bb, name)

    msgs, head, names = MSG, '{"name": "', ["get_weather", "add", "respond", "a_longer_tool_name"]
    want = name_scores(tiny, msgs, names, head)
    bb, passes = tiny.backbone, []
    monkeypatch.setattr(bb, "encode", lambda ids, cache, rows=(-1,), whole=False, f=bb.encode: passes.append(
        whole) or f(ids, cache, rows, whole))
    wrapped = WithoutBranches(bb)
    assert not isinstance(wrapped, Branching)
    got = name_scores(tiny, msgs, names, head, slot=SimpleNamespace(wrap=lambda _: wrapped))
    longer = sum(len(tiny.tokenizer.encode(n + '"', add_special_tokens=False)) > 1 for n in names)
    assert passes.count(False) == longer > 1  # the prompt's own pieces are whole passes
    assert got == pytest.approx(want, abs=1e-3)


async def test_required_picks_the_tool_the_model_scores_highest(tiny):
    """required with several tools: the call is of the tool whose whole name scores highest (names sharing their
    start, so greedy decoding would decide on the first differing token only)."""
    from agentkit.serving.plan import plan_request
    from agentkit.serving.protocol import ChatRequest
    from agentkit.serving.toolchoice import name_scores

    params = {"type": "object", "properties": {}, "additionalProperties": False}
    names = ["to_c", "to_f", "to_kelvin"]  # on tiny_engine(0) greedy decoding takes to_kelvin, the scores to_f
    tools = [{"type": "function", "function": {"name": n, "parameters": params}} for n in names]
    body = {"model": "agentkit", "messages": MSG, "tools": tools, "tool_choice": "required", "max_tokens": 32}
    plan = plan_request(ChatRequest.model_validate(body))
    scores = name_scores(tiny, plan.messages, sorted(names), '{"name": "')
    d = (await _post(tiny, body)).json()
    got = d["choices"][0]["message"]["tool_calls"][0]["function"]["name"]
    assert got == max(scores, key=scores.get) == d["agentkit_stats"]["tool_choice"]["tool"]


def test_a_call_is_grounded_when_it_takes_a_value_from_the_conversation():
    from agentkit.toolcall import call_grounded

    assert not call_grounded({"base": 10, "height": 10}, "What is the capital of France?")
    assert call_grounded({"base": 10, "height": 5}, "A triangle with base 10 and height 5")
    assert call_grounded({"location": "New York, NY"}, "vegan places in new york")  # a word of the value
    assert call_grounded({"guests": 4}, "the four of us") and call_grounded({"total": 1200}, "within $1,200")
    assert not call_grounded({"city": "Oslo", "days": [3]}, "What is the weather in Paris?")
    assert call_grounded({}, "hi") and call_grounded({"metric": True, "x": None}, "hi")  # nothing to check
    assert call_grounded({"expression": "7.25% * 18400"}, "a 7.25% fee on the 18,400 I invested")  # its numbers
    assert not call_grounded({"expression": "2 * 3"}, "hello there")
    assert call_grounded({"amount": 5000, "from_currency": "INR", "to_currency": "SEK"},
                         "Quick one — 5k Indian rupees in Swedish kronor?")  # as grounding reads the text


async def test_a_call_whose_tool_message_reports_a_failure_may_be_made_again():
    """A ``tool`` message that reports a failure (pydantic-ai's retry prompt, or text starting with "error")
    answers nothing: the same call again is a retry and is returned, not answered in text."""
    from agentkit.serving.toolchoice import tool_failed

    assert tool_failed("error: Service temporarily unavailable (HTTP 503)")
    assert tool_failed("Service temporarily unavailable (HTTP 503)\n\nFix the errors and try again.")
    assert not tool_failed("sunny, 21 C") and not tool_failed("no errors found")
    failed = HISTORY[:-1] + [{"role": "tool", "tool_call_id": "c1", "content": "error: timed out"}]
    eng = Scripted({"name": "get_weather", "arguments": {"city": "Paris"}})
    d = (await _post(eng, {"model": "agentkit", "messages": failed, "tools": TOOLS})).json()
    assert d["choices"][0]["finish_reason"] == "tool_calls" and len(eng.calls) == 1


async def test_after_a_failed_tool_message_auto_calls_again(tiny):
    """The retry rule: a conversation ending with a tool message that reports a failure gets a call under "auto"
    (the decision is not asked), of the tool the model scores highest; a result instead leaves it to the decision."""
    from agentkit.serving.plan import plan_request
    from agentkit.serving.protocol import ChatRequest
    from agentkit.serving.toolchoice import retrying

    failed = HISTORY[:-1] + [{"role": "tool", "tool_call_id": "c1", "content": "error: timed out"}]
    assert retrying(ChatRequest.model_validate({"model": "agentkit", "messages": failed}).messages)
    assert not retrying(ChatRequest.model_validate({"model": "agentkit", "messages": HISTORY}).messages)
    assert not retrying(ChatRequest.model_validate({"model": "agentkit", "messages": failed + [MSG[0]]}).messages)  # a user turn since
    assert plan_request(ChatRequest.model_validate({"model": "agentkit", "messages": failed, "tools": TOOLS})).retry
    d = (await _post(tiny, {"model": "agentkit", "messages": failed, "tools": TOOLS, "max_tokens": 8})).json()
    decision = d["agentkit_stats"]["tool_choice"]  # (the random model's arguments are not grounded in the
    # conversation, so its reply is text: the grounding rule still applies to a retry)
    assert {k: decision[k] for k in ("by", "call", "tool")} == {"by": "retry after a failed tool message",
                                                                "call": True, "tool": "get_weather"}
    assert set(decision["scores"]) == {"get_weather"}  # the tools' scores that picked it
    eng = Scripted({"name": "get_weather", "arguments": {"city": "Paris"}})  # no scores: the choice decode's call
    d = (await _post(eng, {"model": "agentkit", "messages": failed, "tools": TOOLS})).json()
    assert d["choices"][0]["finish_reason"] == "tool_calls" and len(eng.calls) == 1


def test_the_text_reply_after_tool_results_sees_no_json_call():
    """Under auto, the text reply after tool results reads the SDK answer step's view: the task with the calls'
    results and a one-sentence request, no call written as JSON (a small model imitates it); without results since
    the last user message it reads the conversation as it is."""
    from agentkit.serving.plan import chat_messages, plan_request
    from agentkit.serving.protocol import ChatRequest

    sys_msg = {"role": "system", "content": "Be brief."}
    failed = {"role": "tool", "tool_call_id": "c0", "content": "error: busy"}
    retry = {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
    body = {"model": "agentkit", "messages": [sys_msg, *MSG, retry, failed, *HISTORY[1:]], "tools": TOOLS}
    text = plan_request(ChatRequest.model_validate(body)).text_messages
    assert text == [sys_msg, {"role": "user", "content": MSG[0]["content"] + "\n\nUse this tool result in your "
                              "answer: get_weather(city=\"Paris\") returned sunny, 21 C\nAnswer in one sentence "
                              "that gives the result."}]  # the failed call is not a result
    req = ChatRequest.model_validate({"model": "agentkit", "messages": MSG, "tools": TOOLS})
    assert plan_request(req).text_messages == chat_messages(req, [])
