"""The server's API surface beyond chat completions (issue 35 item 5), on the tiny random engine in-process:
``model`` checked against ``/v1/models``, ``n`` > 1, canvas events only when asked for, ``/v1/completions`` and
``/v1/responses`` (their bodies, streams and refusals)."""

from __future__ import annotations

import json

import httpx
import pytest
from agentkit.serving.app import create_app

pytestmark = pytest.mark.usefixtures("one_thread")

MSG = [{"role": "user", "content": "What is the weather in Paris?"}]
CITY = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                         "rank": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["name", "rank"], "additionalProperties": False}
WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
                               "required": ["city"], "additionalProperties": False}}


@pytest.fixture(scope="module")
def engine():
    from agentkit.engine import tiny_engine

    return tiny_engine(0)


@pytest.fixture(scope="module")
def app(engine):
    return create_app(engine)


async def _post(app, path: str, body: dict) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=60) as c:
        model = (await c.get("/v1/models")).json()["data"][0]["id"]  # OpenAI requires one (test_model_required)
        return await c.post(path, json={"model": model, **body})


def _sse(text: str) -> list[tuple[str | None, dict | str]]:
    """(event name, data) of each SSE event."""
    out = []
    for block in text.strip().split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        out.append((name, data if data == "[DONE]" else json.loads(data)))
    return out


# ---- model names ---------------------------------------------------------------------------------------------

async def test_an_unknown_model_is_a_404_and_a_served_one_is_echoed(app, engine):
    r = await _post(app, "/v1/chat/completions", {"model": "gpt-4o", "messages": MSG, "max_tokens": 2})
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["code"] == "model_not_found" and err["param"] == "model" and "gpt-4o" in err["message"]
    for name in (engine.name, "agentkit"):
        r = await _post(app, "/v1/chat/completions", {"model": name, "messages": MSG, "max_tokens": 2})
        assert r.status_code == 200 and r.json()["model"] == name
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        listed = [m["id"] for m in (await c.get("/v1/models")).json()["data"]]
    assert listed == [engine.name, "agentkit"]


async def test_served_model_names_replace_the_defaults(engine):
    app = create_app(engine, served_model_names=("smol",))
    assert (await _post(app, "/v1/chat/completions", {"model": "smol", "messages": MSG, "max_tokens": 2})
            ).json()["model"] == "smol"
    assert (await _post(app, "/v1/chat/completions", {"model": "agentkit", "messages": MSG, "max_tokens": 2})
            ).status_code == 404
    assert (await _post(app, "/v1/completions", {"model": "agentkit", "prompt": "x", "max_tokens": 2})
            ).status_code == 404
    assert (await _post(app, "/v1/responses", {"model": "agentkit", "input": "x"})).status_code == 404


# ---- n > 1 ---------------------------------------------------------------------------------------------------

async def test_n_choices_are_decoded_each_with_its_seed(app):
    body = {"messages": MSG, "max_tokens": 6, "n": 3, "temperature": 1.0, "seed": 7}
    r = await _post(app, "/v1/chat/completions", body)
    assert r.status_code == 200, r.text
    d = r.json()
    texts = [c["message"]["content"] for c in d["choices"]]
    assert [c["index"] for c in d["choices"]] == [0, 1, 2] and len(set(texts)) == 3  # seeds 7, 8, 9 sample apart
    assert d["usage"]["completion_tokens"] == sum(c["agentkit_stats"]["output_tokens"] for c in d["choices"])
    again = (await _post(app, "/v1/chat/completions", body)).json()
    assert [c["message"]["content"] for c in again["choices"]] == texts  # seeded: the same three again
    one = (await _post(app, "/v1/chat/completions", {**body, "n": 1, "seed": 8})).json()
    assert one["choices"][0]["message"]["content"] == texts[1]  # choice i is the request with seed + i


async def test_n_over_the_bound_is_a_400(app):
    r = await _post(app, "/v1/chat/completions", {"messages": MSG, "n": 9})
    assert r.status_code == 400 and r.json()["error"]["param"] == "n" and "max_n" in r.json()["error"]["message"]
    r = await _post(app, "/v1/chat/completions", {"messages": MSG, "n": 9, "stream": True})
    assert r.status_code == 400 and r.json()["error"]["param"] == "n"


async def test_n_choices_stream_interleaved_with_their_index_and_match_the_unstreamed_ones(app):
    body = {"messages": MSG, "max_tokens": 6, "n": 3, "temperature": 1.0, "seed": 7}
    plain = (await _post(app, "/v1/chat/completions", body)).json()
    events = _sse((await _post(app, "/v1/chat/completions", {**body, "stream": True})).text)
    assert events[-1] == (None, "[DONE]")
    chunks = [d for _, d in events[:-1]]
    assert len({c["id"] for c in chunks}) == 1
    text: dict[int, str] = {}
    finish: dict[int, str] = {}
    for c in chunks[:-1]:
        (ch,) = c["choices"]
        text[ch["index"]] = text.get(ch["index"], "") + (ch["delta"].get("content") or "")
        if ch["finish_reason"]:
            finish[ch["index"]] = ch["finish_reason"]
            assert "usage" not in c and c["agentkit_stats"]["output_tokens"] >= 1  # each choice's own stats
    assert [text[i] for i in range(3)] == [c["message"]["content"] for c in plain["choices"]]
    assert finish == {i: c["finish_reason"] for i, c in enumerate(plain["choices"])}
    last = chunks[-1]  # the request's usage, once, after every choice ended
    assert last["choices"] == [] and last["usage"] == plain["usage"]


async def test_completions_stream_n_choices_per_prompt(app):
    body = {"prompt": ["Once upon a time", "The sky"], "max_tokens": 4, "n": 2, "temperature": 1.0, "seed": 3}
    plain = (await _post(app, "/v1/completions", body)).json()
    events = _sse((await _post(app, "/v1/completions", {**body, "stream": True})).text)
    text: dict[int, str] = {}
    for _, d in events[:-1]:
        for ch in d["choices"]:
            text[ch["index"]] = text.get(ch["index"], "") + ch["text"]
    assert [text[i] for i in range(4)] == [c["text"] for c in plain["choices"]]
    assert events[-2][1]["choices"] == [] and events[-2][1]["usage"] == plain["usage"]


# ---- canvas events -------------------------------------------------------------------------------------------

async def test_canvas_events_only_when_asked_for(app):
    body = {"messages": MSG, "max_tokens": 8, "stream": True, "agentkit": {"mode": "diffusion", "canvas_length": 4}}
    plain = _sse((await _post(app, "/v1/chat/completions", body)).text)
    assert not [n for n, _ in plain if n == "agentkit.canvas"]
    assert all(d == "[DONE]" or d["choices"] for _, d in plain)  # every chunk has a choice, as OpenAI's do
    asked = _sse((await _post(app, "/v1/chat/completions", {**body, "agentkit": {**body["agentkit"],
                                                                              "canvas": True}})).text)
    canvas = [d for n, d in asked if n == "agentkit.canvas"]
    assert canvas and all(d["choices"] == [] and "draft" in d["agentkit_canvas"] for d in canvas)


# ---- /v1/completions -----------------------------------------------------------------------------------------

async def test_completions_text_echo_logprobs_and_defaults(app, engine):
    r = await _post(app, "/v1/completions", {"prompt": "Once upon a time", "logprobs": 2})
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["object"] == "text_completion" and d["model"] == engine.name
    ch = d["choices"][0]
    assert d["usage"]["completion_tokens"] == 16  # OpenAI's completions default max_tokens
    lp = ch["logprobs"]
    assert len(lp["tokens"]) == 16 and "".join(lp["tokens"]) == ch["text"]
    assert all(len(t) == 2 for t in lp["top_logprobs"]) and lp["text_offset"][0] == 0
    # the prompt is raw: no chat template, so fewer prompt tokens than the same text as a chat message
    chat = (await _post(app, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Once upon a time"}],
                                                      "max_tokens": 1})).json()
    assert d["usage"]["prompt_tokens"] == len(engine.encode_prompt("Once upon a time", raw=True))
    assert d["usage"]["prompt_tokens"] < chat["usage"]["prompt_tokens"]
    echo = (await _post(app, "/v1/completions", {"prompt": "Once upon a time", "echo": True})).json()
    assert echo["choices"][0]["text"] == "Once upon a time" + ch["text"]


async def test_completions_several_prompts_and_the_stream(app):
    d = (await _post(app, "/v1/completions", {"prompt": ["A", "B"], "n": 2, "max_tokens": 4})).json()
    assert [c["index"] for c in d["choices"]] == [0, 1, 2, 3]
    assert d["choices"][0]["text"] == d["choices"][1]["text"]  # greedy: both choices of one prompt agree
    whole = (await _post(app, "/v1/completions", {"prompt": "Once", "max_tokens": 8, "stop": ["zz"]})).json()
    events = _sse((await _post(app, "/v1/completions", {"prompt": "Once", "max_tokens": 8, "stop": ["zz"],
                                                          "stream": True})).text)
    assert events[-1][1] == "[DONE]"
    chunks = [d for _, d in events[:-1]]
    assert all(c["object"] == "text_completion" for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length" and chunks[-1]["usage"]["completion_tokens"] == 8


@pytest.mark.parametrize("body, param", [
    ({"prompt": [1, 2, 3]}, "prompt"),
    ({"prompt": []}, "prompt"),
    ({"prompt": "x", "suffix": "y"}, "suffix"),
    ({"prompt": "x", "best_of": 2}, "best_of"),
    ({"prompt": "x", "echo": True, "logprobs": 1}, "echo"),
    ({"prompt": "x", "logprobs": 6}, "logprobs"),
    ({"prompt": "x", "presence_penalty": -3}, "presence_penalty"),
    ({"prompt": "x", "max_tokens": "4"}, "max_tokens"),
    ({"prompt": "x", "colour": 1}, "colour"),
])
async def test_completions_refusals_name_the_field(app, body, param):
    r = await _post(app, "/v1/completions", body)
    assert r.status_code == 400, r.text
    assert param in r.json()["error"]["message"]


# ---- /v1/responses -------------------------------------------------------------------------------------------

async def test_responses_text_and_json_schema(app):
    r = await _post(app, "/v1/responses", {"input": "Hello", "instructions": "Be brief.", "max_output_tokens": 4})
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["object"] == "response" and d["status"] == "incomplete"
    assert d["incomplete_details"] == {"reason": "max_output_tokens"}
    (item,) = d["output"]
    assert item["type"] == "message" and item["content"][0]["type"] == "output_text"
    assert d["usage"]["output_tokens"] == 4 and d["usage"]["input_tokens"] > 0
    r = await _post(app, "/v1/responses", {
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Name a city."}]}],
        "text": {"format": {"type": "json_schema", "name": "city", "schema": CITY, "strict": True}},
        "max_output_tokens": 48, "agentkit": {"mode": "ar"}})
    d = r.json()
    assert d["status"] == "completed", d
    value = json.loads(d["output"][0]["content"][0]["text"])
    assert set(value) == {"name", "rank"} and 0 <= value["rank"] <= 99


async def test_responses_function_call_and_its_output(app):
    body = {"input": "Weather in Paris?", "tools": [WEATHER_TOOL], "tool_choice": "required", "max_output_tokens": 40}
    d = (await _post(app, "/v1/responses", body)).json()
    (call,) = d["output"]
    assert call["type"] == "function_call" and call["name"] == "get_weather" and call["call_id"].startswith("call_")
    assert set(json.loads(call["arguments"])) == {"city"}
    follow = {"input": [{"role": "user", "content": "Weather in Paris?"}, call,
                        {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}],
              "tools": [WEATHER_TOOL], "max_output_tokens": 6}
    r = await _post(app, "/v1/responses", follow)
    assert r.status_code == 200, r.text
    # the repeat rule holds across the translation: the answered call is not made again
    out = r.json()["output"]
    assert not any(o["type"] == "function_call" and o["arguments"] == call["arguments"] for o in out)


async def test_responses_stream_events(app):
    r = await _post(app, "/v1/responses", {"input": "Hello", "max_output_tokens": 5, "stream": True})
    events = _sse(r.text)
    kinds = [n for n, _ in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete"]
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    deltas = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
    final = events[-1][1]["response"]
    assert deltas == final["output"][0]["content"][0]["text"] == events[-4][1]["text"]
    assert final["usage"]["output_tokens"] == 5
    call = _sse((await _post(app, "/v1/responses", {"input": "Weather?", "tools": [WEATHER_TOOL],
                                                     "tool_choice": {"type": "function", "name": "get_weather"},
                                                     "max_output_tokens": 40, "stream": True})).text)
    kinds = [n for n, _ in call]
    assert "response.function_call_arguments.delta" in kinds and kinds[-1] == "response.completed"
    args = "".join(d["delta"] for n, d in call if n == "response.function_call_arguments.delta")
    done = next(d for n, d in call if n == "response.function_call_arguments.done")
    assert args == done["arguments"] == call[-1][1]["response"]["output"][0]["arguments"]
    json.loads(args)


@pytest.mark.parametrize("body, param", [
    ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
    ({"input": "x", "background": True}, "background"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": [{"type": "reasoning", "summary": []}]}, "input[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]"),
    ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
    ({"input": "x", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "x", "frequency": 1}, "frequency"),
])
async def test_responses_refusals_name_the_field(app, body, param):
    r = await _post(app, "/v1/responses", body)
    assert r.status_code == 400, r.text
    assert param in r.json()["error"]["message"]


# ---- parallel tool calls -------------------------------------------------------------------------------------

TOOLS_CHAT = [{"type": "function", "function": {k: v for k, v in WEATHER_TOOL.items() if k != "type"}}]
PLACES = "What is the weather in Paris, in Rome, in Oslo and in Lima?"  # a city is one of the places it names


async def test_parallel_tool_calls_several_calls_each_once(app):
    # sampled (seeded): the greedy tiny model writes one call 8 times over, which is made once
    body = {"messages": [{"role": "user", "content": PLACES}], "tools": TOOLS_CHAT, "tool_choice": "required", "max_tokens": 160, "temperature": 1.0,
            "seed": 4}
    d = (await _post(app, "/v1/chat/completions", body)).json()  # parallel_tool_calls: true by default
    calls = d["choices"][0]["message"]["tool_calls"]
    args = [c["function"]["arguments"] for c in calls]
    assert d["choices"][0]["finish_reason"] == "tool_calls"
    assert 2 <= len(calls) <= 8 and len(set(args)) == len(args)  # the tiny model writes several; each made once
    assert len({c["id"] for c in calls}) == len(calls)
    text = d["agentkit_stats"]  # the decode wrote one call per line
    assert text["output_tokens"] > 0
    one = (await _post(app, "/v1/chat/completions", {**body, "parallel_tool_calls": False})).json()
    (only,) = one["choices"][0]["message"]["tool_calls"]
    assert only["function"]["arguments"] == args[0]  # the first call is the same either way
    events = _sse((await _post(app, "/v1/chat/completions", {**body, "stream": True})).text)
    streamed: dict[int, dict] = {}
    for _, ch in events[:-1]:
        for tc in (ch["choices"][0]["delta"].get("tool_calls") or []) if ch["choices"] else []:
            s = streamed.setdefault(tc["index"], {"name": "", "arguments": ""})
            s["name"] += tc.get("function", {}).get("name") or ""
            s["arguments"] += tc.get("function", {}).get("arguments") or ""
    assert [json.loads(streamed[i]["arguments"]) for i in sorted(streamed)] == [json.loads(a) for a in args]
    r = await _post(app, "/v1/chat/completions", {**body, "parallel_tool_calls": "yes"})
    assert r.status_code == 400 and "parallel_tool_calls" in r.text


async def test_responses_parallel_calls_are_items(app):
    body = {"input": PLACES, "tools": [WEATHER_TOOL], "tool_choice": "required",
            "max_output_tokens": 160, "temperature": 1.0, "seed": 4}
    out = (await _post(app, "/v1/responses", body)).json()["output"]
    assert len(out) >= 2 and all(o["type"] == "function_call" for o in out)
    events = _sse((await _post(app, "/v1/responses", {**body, "stream": True})).text)
    done = [d["item"] for n, d in events if n == "response.output_item.done"]
    assert [json.loads(i["arguments"]) for i in done] == [json.loads(o["arguments"]) for o in out]
    assert [d["output_index"] for n, d in events if n == "response.output_item.added"] == list(range(len(out)))
    single = (await _post(app, "/v1/responses", {**body, "parallel_tool_calls": False})).json()["output"]
    assert len(single) == 1


async def test_the_penalties_reach_the_decoder(app):
    """OpenAI's frequency_penalty and presence_penalty are honoured (chat and completions), not just accepted."""
    ids = {}
    for path, body in (("/v1/chat/completions", {"messages": MSG}), ("/v1/completions", {"prompt": "The sea"})):
        for pen in (0, 2):
            r = await _post(app, path, {**body, "max_tokens": 24, "frequency_penalty": pen, "presence_penalty": pen})
            assert r.status_code == 200, r.text
            ids[path, pen] = r.json()["agentkit_stats"]["token_ids"]
        plain, penalized = ids[path, 0], ids[path, 2]
        assert len(set(plain)) < len(plain)  # the tiny model repeats itself, so the penalty has work to do
        assert penalized != plain and len(set(penalized)) / len(penalized) > len(set(plain)) / len(plain)


async def test_logit_bias_bans_tokens_and_bad_keys_are_400s(app):
    r = await _post(app, "/v1/chat/completions", {"messages": MSG, "max_tokens": 12})
    plain = r.json()["agentkit_stats"]["token_ids"]
    banned = {str(t): -100 for t in plain[:3]}
    r = await _post(app, "/v1/chat/completions", {"messages": MSG, "max_tokens": 12, "logit_bias": banned})
    assert r.status_code == 200, r.text
    assert not set(r.json()["agentkit_stats"]["token_ids"]) & set(map(int, banned))
    for bias, says in (({"x": 1}, "token ids"), ({"5": 101}, "logit_bias"), ({"999999": 1}, "vocabulary")):
        r = await _post(app, "/v1/completions", {"prompt": "The sea", "logit_bias": bias})
        assert r.status_code == 400 and says in r.json()["error"]["message"], (bias, r.text)
        assert r.json()["error"]["param"] == "logit_bias" or says != "vocabulary", r.text
