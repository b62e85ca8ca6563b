"""The server's pure rooms, without HTTP: request -> plan, result -> response parts, SSE framing, text deltas."""

from __future__ import annotations

import json

import pytest
from agentkit.serving.errors import APIError
from agentkit.serving.plan import plan_request, response_parts
from agentkit.serving.prepare import check_context, fit_max_tokens
from agentkit.serving.protocol import ChatRequest
from agentkit.serving.sse import Chunks, TextDeltas, event

from agentkit.calibration import step_mode

MSG = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {
    "a": {"type": "integer"}}, "required": ["a"]}}}


def _req(**kw) -> ChatRequest:
    return ChatRequest.model_validate({"model": "agentkit", "messages": MSG, **kw})


def test_free_text_plan():
    p = plan_request(_req(max_tokens=7, temperature=0.5, top_p=0.9, seed=3, stop="x"))
    assert p.schema is None and p.tool_mode == "none" and p.mode == step_mode("reply")
    c = p.config
    assert (c.max_new_tokens, c.temperature, c.top_p, c.seed, c.stop) == (7, 0.5, 0.9, 3, ["x"])
    assert p.max_tokens_given and p.logprobs is None


def test_schema_routes_to_the_calibrated_mode_and_tools_are_described():
    from agentkit.calibration import step_mode
    from agentkit.sdk import RoutingPolicy

    p = plan_request(_req(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "integer"}}}))
    # a schema with no tool is an extraction: the extract step's calibrated mode, the server's default as the SDK's
    assert p.mode == step_mode("extract") == RoutingPolicy().extract
    assert plan_request(_req()).mode == step_mode("reply") == RoutingPolicy().reply  # free text: the reply step's
    assert plan_request(_req(temperature=0.7)).mode == step_mode("reply")  # sampled: the same mode
    assert p.schema.kind == "response" and p.schema.schema == {"type": "integer"}
    p = plan_request(_req(tools=[TOOL], tool_choice="required", agentkit={"mode": "ar"}))
    assert p.mode == "ar" and p.tool_mode == "forced" and p.schema.kind == "tools" and p.tool_names == {"add"}
    assert '"name": "add"' in p.messages[0]["content"] and p.messages[0]["role"] == "system"
    p = plan_request(_req(tools=[TOOL]))  # auto: a choice decode over the tools plus "respond", then maybe text
    assert p.tool_mode == "auto" and p.schema.kind == "tools" and p.schema.no_call == "respond"
    assert p.mode == step_mode("tool_call") and p.text_config.mode == step_mode("reply")
    assert '"respond"' in p.messages[0]["content"] and not any('"add"' in m["content"] for m in p.text_messages)
    assert plan_request(_req(tools=[TOOL]), default_mode="verify").mode == "verify"


def test_a_sampled_request_keeps_a_calibrated_verify_step(monkeypatch):
    from agentkit.serving import plan

    monkeypatch.setattr(plan, "step_mode", lambda step: "verify")
    forced = {"tools": [TOOL], "tool_choice": "required"}
    assert plan_request(_req(**forced)).mode == "verify"  # greedy (the server's default temperature, 0)
    assert plan_request(_req(**forced, temperature=0.7)).mode == "verify"  # verify keeps AR's samples
    assert plan_request(_req(temperature=0.7)).mode == "verify"  # free text too
    assert plan_request(_req(**forced, temperature=0.7, agentkit={"mode": "ar"})).mode == "ar"
    assert plan_request(_req(**forced, temperature=0.7), default_mode="verify").mode == "verify"


def test_logprobs_plan():
    assert plan_request(_req(logprobs=True)).logprobs == 0
    assert plan_request(_req(logprobs=True, top_logprobs=3)).logprobs == 3


def test_prompt_bound_before_tokenizing():
    long = [{"role": "user", "content": "x" * 10_000}]
    with pytest.raises(APIError) as e:
        plan_request(ChatRequest.model_validate({"model": "agentkit", "messages": long, "max_tokens": 100}), context=2048,
                     max_token_chars=4)
    assert e.value.status == 400 and e.value.code == "context_length_exceeded"
    assert "2500" in e.value.message and "2048" in e.value.message and "100" in e.value.message
    plan_request(ChatRequest.model_validate({"model": "agentkit", "messages": long}), context=2048, max_token_chars=8)  # 1250: fits


def test_fit_max_tokens():
    p = plan_request(_req())  # no max_tokens: the default shrinks to what the context leaves
    assert fit_max_tokens(p, 2000, 2048) == 48
    p = plan_request(_req(max_tokens=100))
    with pytest.raises(APIError, match="2000 tokens and max_tokens is 100"):
        fit_max_tokens(p, 2000, 2048)
    assert fit_max_tokens(p, 10, None) == 100
    check_context(1948, 2048, 100)


def test_response_parts():
    from agentkit.steps.runner import reply_of

    def parts(p, text, value, finish):
        return response_parts(text, finish, reply_of(p.step, text, value))

    p = plan_request(_req(tools=[TOOL], tool_choice="required"))
    msg, finish = parts(p, '{"name":"add","arguments":{"a":1}}', {"name": "add", "arguments": {"a": 1}}, "template")
    assert finish == "tool_calls" and json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"a": 1}
    # auto (the user's message writes a number, so add's argument can be grounded): the choice decode's call is a
    # call ...
    p = plan_request(_req(tools=[TOOL], messages=[{"role": "user", "content": "add 2"}]))
    msg, finish = parts(p, '{"name": "add", "arguments": {"a": 2}}', {"name": "add", "arguments": {"a": 2}}, "template")
    assert finish == "tool_calls" and msg["content"] is None
    msg, finish = parts(p, ' {"name": "add", "arguments": {"a": 2}}', None, "stop")  # ... a text reply is not
    assert finish == "stop" and msg["content"].startswith(" {")
    msg, finish = parts(p, '{"name": "sub", "arguments": {}}', None, "length")  # not one of the tools
    assert finish == "length" and msg["content"].startswith("{")


def test_grounded_arguments_plan():
    """A call's values come from the conversation: a tool whose required argument it has no value for is not
    picked under auto (a forced call is made even so), and the call's template is grounded in its text."""
    p = plan_request(_req(tools=[TOOL]))  # "hi" writes no number: add cannot be called
    assert p.tool_mode == "auto" and p.tool_names == frozenset() and p.schema.arguments_source == "hi"
    p = plan_request(_req(tools=[TOOL], messages=[{"role": "user", "content": "add 4 please"}]))
    assert p.tool_names == {"add"} and p.schema.arguments_source == "add 4 please"
    p = plan_request(_req(tools=[TOOL], tool_choice="required"))
    assert p.tool_names == {"add"} and p.schema.arguments_source == "hi"
    off = plan_request(_req(tools=[TOOL], agentkit={"grounded_arguments": False}))
    assert off.tool_names == {"add"} and off.schema.arguments_source is None
    assert off.schema.key != p.schema.key


def test_sse_framing():
    c = Chunks("id1", 5, "m")
    assert event(c.chunk({"content": "a"})) == (
        'data: {"id": "id1", "object": "chat.completion.chunk", "created": 5, "model": "m", "system_fingerprint": '
        'null, "choices": [{"index": 0, "delta": {"content": "a"}, "logprobs": null, "finish_reason": null}]}\n\n')
    assert event(c.chunk(None, x=1), "agentkit.canvas").startswith("event: agentkit.canvas\ndata: ")
    assert json.loads(event(c.chunk(None))[6:])["choices"] == []


def test_text_deltas_hold_back_stop_prefixes_and_partial_utf8():
    pieces = {1: "Hel", 2: "lo ", 3: "EN", 4: "D!", 5: "\xe9"}

    def decode(ids):
        return "".join(pieces[i] for i in ids)

    d = TextDeltas(decode, stop=["END"])
    assert d.feed([1]) == "Hel" and d.feed([2]) == "lo "
    assert d.feed([3]) == ""  # "EN" may begin "END"
    assert d.feed([4]) == "" and d.stopped  # cut at the stop string
    assert d.finish("Hello ") == "" and d.sent == "Hello "
    raw = {1: "a", 2: "\ufffd", 3: "b"}  # an incomplete UTF-8 sequence decodes as U+FFFD until completed
    d = TextDeltas(lambda ids: "a\ufffd" if ids == [1, 2] else "".join(raw[i] for i in ids))
    assert d.feed([1]) == "a" and d.feed([2]) == "" and d.finish("a\xe9b") == "\xe9b"


def test_model_context_comes_from_the_engines_tokenizing_face(tiny):
    from types import SimpleNamespace as NS

    from agentkit.serving.prepare import longest_token_chars, model_context

    from agentkit.engine.engine import Engine

    assert model_context(tiny) == tiny.context_length == 2048
    assert longest_token_chars(tiny) == tiny.longest_token_chars
    assert model_context(NS(context_length=512)) is None  # not a Tokenizing engine: no guess at its attributes

    def ctx(lm, backbone=None):  # Engine.context_length's sources: the torch config, else llama.cpp's
        e = Engine.__new__(Engine)
        e.lm, e.backbone = lm, backbone
        return e.context_length

    assert ctx(NS(model=NS(config=NS(max_position_embeddings=2048)))) == 2048
    assert ctx(NS(model=None), NS(options=NS(n_ctx=16384))) == 16384
    assert ctx(NS(model=None), NS(n_ctx_train=8192, options=NS(n_ctx=16384))) == 8192
    assert ctx(NS(model=None), NS()) is None


def test_schema_cache_key_keeps_property_order():
    def job(props):
        return plan_request(_req(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": props}}})).schema

    a, b = job({"x": {"type": "integer"}, "y": {"type": "integer"}}), job({"y": {"type": "integer"},
                                                                            "x": {"type": "integer"}})
    assert a.key != b.key  # the output writes properties in schema order: two different templates
    assert a.key == job({"x": {"type": "integer"}, "y": {"type": "integer"}}).key


def test_json_style_reaches_the_compiled_template():
    """``agentkit.json_style`` picks the pinned JSON's style of the response schema and of forced tool calls; it is
    part of the template cache key; an unknown style is a 400 naming the field."""
    from agentkit.serving.prepare import Preparer

    from agentkit.constrain.matcher import tree_matches

    rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}
    prep = Preparer(engine=None)
    jobs = {s: plan_request(_req(response_format=rf, agentkit={"json_style": s} if s else None)).schema
            for s in (None, "compact", "spaced")}
    assert len({j.key for j in jobs.values()}) == 3
    def ok(job, text):
        return tree_matches(prep.template(job), text)

    assert ok(jobs["compact"], '{"a":1}') and not ok(jobs["compact"], '{"a": 1}')
    assert ok(jobs["spaced"], '{"a": 1}') and ok(jobs[None], '{"a": 1}') and not ok(jobs["spaced"], '{"a":1}')
    tools = plan_request(_req(tools=[TOOL], tool_choice="required", agentkit={"json_style": "compact"})).schema
    assert ok(tools, '{"name":"add","arguments":{"a":1}}') and not ok(tools, '{"name": "add", "arguments": {"a": 1}}')
    with pytest.raises(Exception, match="json_style"):
        _req(agentkit={"json_style": "pretty"})


def test_greedy_reaches_the_decode_config():
    from agentkit.serving.plan import decode_config

    assert decode_config(_req(), "ar", 8).greedy == "byte"
    assert decode_config(_req(agentkit={"greedy": "token"}), "ar", 8).greedy == "token"
    with pytest.raises(Exception, match="greedy"):
        _req(agentkit={"greedy": "argmax"})


def test_copy_bias_reaches_the_decode_config():
    from agentkit.serving.plan import decode_config

    assert decode_config(_req(), "ar", 8).copy_bias == 2.0  # DecodeConfig's default
    assert decode_config(_req(agentkit={"copy_bias": 2}), "ar", 8).copy_bias == 2.0
    with pytest.raises(Exception, match="copy_bias"):
        _req(agentkit={"copy_bias": -1})
    assert decode_config(_req(agentkit={"copy_bias": 2, "copy_from": "user"}), "ar", 8).copy_from == "user"
    with pytest.raises(Exception, match="copy_from"):
        _req(agentkit={"copy_from": "system"})
    assert decode_config(_req(), "ar", 8).copy_numbers is True
    assert decode_config(_req(agentkit={"copy_numbers": False}), "ar", 8).copy_numbers is False
    with pytest.raises(Exception, match="copy_numbers"):
        _req(agentkit={"copy_numbers": "sometimes"})


def test_a_text_reply_after_tool_results_copies_their_values():
    """After ``tool`` messages (since the last user message) the text reply's copy source is their values; an
    explicit ``agentkit.copy_source`` or ``copy_from`` wins; before any tool message there is none."""
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    msgs = MSG + [{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": "c1", "content": '{"status": "ok", "result": "AMBER-4231"}'}]
    p = plan_request(_req(messages=msgs, tools=[TOOL]))
    assert p.tool_mode == "auto" and p.text_config.copy_source == "ok\nAMBER-4231"
    # a call after the results copies from the question and the results (no first-digit prior in a call)
    assert (p.config.copy_source, p.config.copy_first_digit) == ("hi\nok\nAMBER-4231", False)
    assert plan_request(_req(messages=msgs)).config.copy_source == "ok\nAMBER-4231"  # no tools offered: free text
    assert plan_request(_req(messages=msgs, agentkit={"copy_source": "x"})).config.copy_source == "x"
    assert plan_request(_req(messages=msgs, agentkit={"copy_from": "user"})).config.copy_source is None
    assert plan_request(_req(tools=[TOOL])).text_config.copy_source is None
    later = msgs + [{"role": "assistant", "content": "AMBER-4231"}, {"role": "user", "content": "thanks"}]
    assert plan_request(_req(messages=later)).config.copy_source is None  # results before the last user message


def test_a_plain_reply_decodes_on_the_plain_weights_and_a_step_with_a_result_does_not():
    """The server's plain replies take the weights the SDK's take (engine.faces.plain_weights): a chat with no tools
    and no tool result; a call, a schema, the text reply of tool_choice auto (the answer after deciding not to call,
    a loop step) and a reply after results keep the engine's own."""
    from agentkit.serving.completions import CompletionRequest, plan_completion

    from agentkit.engine.faces import Unmerging, plain_weights

    class Merged:
        def can_load_unmerged(self) -> bool:
            return True

    assert isinstance(Merged(), Unmerging) and plain_weights(Merged()) == "loaded" and plain_weights(object()) is None
    assert plan_request(_req(), plain_weights="loaded").config.weights == "loaded"
    assert plan_request(_req()).config.weights == "auto"
    auto = plan_request(_req(tools=[TOOL]), plain_weights="loaded")
    # the call's step and the answer after deciding not to call: both loop steps, on the merged adapter
    assert auto.config.weights == "auto" and auto.text_config.weights == "auto"
    forced = plan_request(_req(tools=[TOOL], tool_choice="required"), plain_weights="loaded")
    assert forced.config.weights == "auto"
    after = _req(tools=[TOOL], messages=[
        *MSG, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "2"}])
    p = plan_request(after, plain_weights="loaded")
    assert p.text_config.weights == "auto" and p.config.weights == "auto"
    creq = CompletionRequest.model_validate({"model": "agentkit", "prompt": "Once"})
    assert plan_completion(creq, "Once", plain_weights="loaded").config.weights == "loaded"
