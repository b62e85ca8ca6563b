"""The OpenAI-compatible server on the tiny random engine: in-process (httpx ASGI) and on a loopback port."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import jsonschema
import pytest
from agentkit.serving.app import create_app

from agentkit.calibration import step_mode
from agentkit.constrain.nodes import Lit, Template
from agentkit.errors import UnsupportedSchemaError

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
                   "ok": {"type": "boolean"}},
    "required": ["name", "age", "ok"],
    "additionalProperties": False,  # closed and bounded: a random-weight model finishes within max_tokens
}
# bounded strings, closed objects: a random-weight model must finish the call within max_tokens
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                            "days": {"type": "integer", "minimum": 0, "maximum": 99}},
           "required": ["city", "days"], "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer", "minimum": -999, "maximum": 999},
                                         "b": {"type": "integer", "minimum": -999, "maximum": 999}},
        "required": ["a", "b"], "additionalProperties": False}}},
]
MSG = [{"role": "user", "content": "What is the weather in Paris?"}]


def _compiler():
    from agentkit.constrain.compiler import compile_schema

    return compile_schema


@pytest.fixture(scope="module")
def engine():
    from agentkit.engine import tiny_engine

    return tiny_engine(0)


class Gated:
    """The tiny engine behind a gate: generate() blocks until the test opens it."""

    batches = False  # one request at a time

    def __init__(self, eng) -> None:
        self.eng, self.name, self.tokenizer = eng, eng.name, eng.tokenizer
        self.gate = threading.Event()
        self.calls: list[str] = []

    def generate(self, messages, config, **kw):
        self.calls.append(messages[-1]["content"])
        assert self.gate.wait(10)
        return self.eng.generate(messages, config, **kw)


def _client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=30)


@pytest.fixture(scope="module")
def app(engine):
    app = create_app(engine, compile_schema=_compiler())
    yield app
    app.state.scheduler.close()


async def _post(app, body, **kw) -> httpx.Response:
    async with _client(app) as c:
        return await c.post("/v1/chat/completions", json=body, **kw)


# -- chat, schemas, tools -------------------------------------------------------------------------------------------
async def test_chat(app):
    r = await _post(app, {"model": "agentkit", "messages": MSG, "max_tokens": 8})
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["object"] == "chat.completion"
    assert isinstance(d["choices"][0]["message"]["content"], str)
    assert d["choices"][0]["finish_reason"] in ("stop", "length")
    assert d["usage"]["completion_tokens"] == d["agentkit_stats"]["output_tokens"] <= 8
    st = d["agentkit_stats"]
    assert st["mode"] == step_mode("reply") and st["batch_size"] == 1  # free text: the reply step's calibrated mode
    for k in ("forwards", "tokens_per_forward", "encoder_forwards", "decoder_forwards", "prefill_ms", "denoise_ms",
              "commit_ms", "latency_ms", "queue_ms"):
        assert k in st


@pytest.mark.parametrize("mode", [None, "ar", "diffusion", "verify"])
async def test_json_schema(app, mode):
    # strict (OpenAI's flag): no keys beyond the listed ones, so a random model cannot ramble past max_tokens
    body = {"model": "agentkit", "messages": MSG, "max_tokens": 64,
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "person", "schema": PERSON, "strict": True}}}
    if mode:
        body["agentkit"] = {"mode": mode, "canvas_length": 8}
    r = await _post(app, body)
    assert r.status_code == 200, r.text
    d = r.json()
    jsonschema.validate(json.loads(d["choices"][0]["message"]["content"]), PERSON)
    assert d["agentkit_stats"]["mode"] == (mode or step_mode("extract"))  # a schema, no tool: the extract step's mode
    assert d["choices"][0]["finish_reason"] == "stop"


async def test_json_object(app):
    r = await _post(app, {"model": "agentkit", "messages": MSG, "max_tokens": 32, "response_format": {"type": "json_object"}})
    assert r.status_code == 200, r.text
    json.loads(r.json()["choices"][0]["message"]["content"])


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "add"}}])
async def test_tool_call(app, choice):
    r = await _post(app, {"model": "agentkit", "messages": MSG, "tools": TOOLS, "tool_choice": choice, "max_tokens": 64})
    assert r.status_code == 200, r.text
    ch = r.json()["choices"][0]
    assert ch["finish_reason"] == "tool_calls" and ch["message"]["content"] is None
    (tc,) = ch["message"]["tool_calls"]
    assert tc["type"] == "function" and tc["id"].startswith("call_")
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    if isinstance(choice, dict):
        assert tc["function"]["name"] == "add"
    jsonschema.validate(json.loads(tc["function"]["arguments"]), schemas[tc["function"]["name"]])


async def test_tool_choice_auto_and_none(app):
    for choice in ("auto", "none"):
        r = await _post(app, {"model": "agentkit", "messages": MSG, "tools": TOOLS, "tool_choice": choice, "max_tokens": 8})
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")


async def test_unsupported_schema_names_keyword_and_pointer(engine):
    def refuse(schema, **kw):
        raise UnsupportedSchemaError("patternProperties", "#/properties/x")

    app = create_app(engine, compile_schema=refuse)
    r = await _post(app, {"model": "agentkit", "messages": MSG, "response_format": {"type": "json_schema",
                                                               "json_schema": {"name": "x", "schema": PERSON}}})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["keyword"] == "patternProperties" and err["pointer"] == "#/properties/x"
    assert "patternProperties" in err["message"] and "#/properties/x" in err["message"]
    r = await _post(app, {"model": "agentkit", "messages": MSG, "tools": TOOLS, "tool_choice": "required"})
    assert r.status_code == 400 and "tools[0].function.parameters" in r.json()["error"]["message"]
    app.state.scheduler.close()


# -- streaming ------------------------------------------------------------------------------------------------------
def _sse(text: str) -> list[tuple[str | None, str]]:
    out = []
    for block in text.strip().split("\n\n"):
        event, data = None, []
        for line in block.splitlines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        out.append((event, "\n".join(data)))
    return out


async def test_stream_diffusion_with_canvas_events(app):
    body = {"model": "agentkit", "messages": MSG, "max_tokens": 64, "stream": True,
            "agentkit": {"canvas_length": 8, "mode": "diffusion", "canvas": True},
            "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}}
    async with _client(app) as c, c.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = _sse((await r.aread()).decode())
    assert events[-1] == (None, "[DONE]")
    chunks = [(e, json.loads(d)) for e, d in events[:-1]]
    assert chunks[0][1]["choices"][0]["delta"]["role"] == "assistant"
    canvas = [c for e, c in chunks if e == "agentkit.canvas"]
    assert canvas and all(c["choices"] == [] and isinstance(c["agentkit_canvas"]["draft"], str) for c in canvas)
    plain = [c for e, c in chunks if e is None]
    assert all(c["object"] == "chat.completion.chunk" for c in plain)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in plain if c["choices"])
    jsonschema.validate(json.loads(text), PERSON)
    last = plain[-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["usage"]["completion_tokens"] > 0 and last["agentkit_stats"]["mode"] == "diffusion"


async def test_stream_tool_call(app):
    body = {"model": "agentkit", "messages": MSG, "tools": TOOLS, "tool_choice": "required", "stream": True, "max_tokens": 64,
            "agentkit": {"mode": "ar"}}
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json=body)
    chunks = [json.loads(d) for e, d in _sse(r.text)[:-1] if e is None]
    tcs = [tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls") or []]
    # streamed as OpenAI does: the id and name first, then argument fragments as they are committed
    assert len(tcs) >= 3 and all(tc["index"] == 0 for tc in tcs) and tcs[0]["id"].startswith("call_")
    assert all("id" not in tc and "name" not in tc["function"] for tc in tcs[1:])
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    args = json.loads("".join(tc["function"]["arguments"] for tc in tcs))
    jsonschema.validate(args, schemas[tcs[0]["function"]["name"]])
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert not any(c["choices"][0]["delta"].get("content") for c in chunks if c["choices"])


# -- overload, timeout, disconnect ------------------------------------------------------------------------------------
async def _until(cond, timeout=5.0):
    t = time.monotonic()
    while not cond():
        assert time.monotonic() - t < timeout, "condition not reached"
        await asyncio.sleep(0.01)


async def test_429_when_queue_full(engine):
    g = Gated(engine)
    app = create_app(g, max_queue=1)
    sched = app.state.scheduler
    async with _client(app) as c:
        body = {"model": "agentkit", "messages": MSG, "max_tokens": 4}
        a = asyncio.create_task(c.post("/v1/chat/completions", json=body))
        await _until(lambda: sched.running == 1)
        b = asyncio.create_task(c.post("/v1/chat/completions", json=body))
        await _until(lambda: sched.depth == 1)
        r = await c.post("/v1/chat/completions", json=body)
        assert r.status_code == 429
        assert int(r.headers["Retry-After"]) >= 1 and r.json()["error"]["code"] == "queue_full"
        g.gate.set()
        assert (await a).status_code == 200 and (await b).status_code == 200
        m = (await c.get("/metrics")).text
    assert 'agentkit_rejected_total{reason="queue_full"} 1.0' in m
    sched.close()


async def test_timeout_504(engine):
    g = Gated(engine)
    app = create_app(g, request_timeout_s=0.3)
    sched = app.state.scheduler
    async with _client(app) as c:
        body = {"model": "agentkit", "messages": MSG, "max_tokens": 4}
        running, queued = await asyncio.gather(c.post("/v1/chat/completions", json=body),
                                               c.post("/v1/chat/completions", json=body))
    for r in (running, queued):
        assert r.status_code == 504 and r.json()["error"]["code"] == "timeout"
    assert sched.depth == 0  # the queued one left the queue at once
    g.gate.set()
    await _until(lambda: sched.running == 0)
    assert len(g.calls) == 1  # ... and never reached the engine
    sched.close()


@pytest.mark.parametrize("stream", [False, True])
async def test_disconnect_frees_slot(engine, stream):
    g = Gated(engine)
    app = create_app(g, max_queue=1)
    sched = app.state.scheduler
    async with _client(app) as c:
        first = asyncio.create_task(c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 4}))
        await _until(lambda: sched.running == 1)
        # a raw ASGI request whose client goes away while it is queued
        body = json.dumps({"model": "agentkit", "messages": [{"role": "user", "content": "gone"}], "max_tokens": 4,
                           "stream": stream}).encode()
        sent = [False]
        queued = asyncio.Event()

        async def receive():
            if not sent[0]:
                sent[0] = True
                return {"type": "http.request", "body": body, "more_body": False}
            if sched.depth:
                queued.set()
            return {"type": "http.disconnect"} if queued.is_set() else {"type": "http.request", "body": b"",
                                                                       "more_body": False}

        out: list[dict] = []

        async def send(msg):
            out.append(msg)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
                 "query_string": b"", "root_path": "", "headers": [(b"content-type", b"application/json")],
                 "server": ("test", 80), "client": ("127.0.0.1", 1)}
        await asyncio.wait_for(app(scope, receive, send), 5)
        assert queued.is_set() and sched.depth == 0  # the slot is free while the first request still runs
        assert out[0]["status"] == 499
        g.gate.set()
        assert (await first).status_code == 200
    await _until(lambda: sched.running == 0)
    assert g.calls == [MSG[-1]["content"]]  # the disconnected request never reached the engine
    sched.close()


# -- auth, malformed ------------------------------------------------------------------------------------------------
async def test_api_key(engine):
    app = create_app(engine, api_key="s3cret")
    async with _client(app) as c:
        body = {"model": "agentkit", "messages": MSG, "max_tokens": 2}
        assert (await c.post("/v1/chat/completions", json=body)).status_code == 401
        r = await c.post("/v1/chat/completions", json=body, headers={"Authorization": "Bearer nope"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        assert (await c.get("/v1/models")).status_code == 401
        assert (await c.get("/metrics")).status_code == 401
        ok = {"Authorization": "Bearer s3cret"}
        assert (await c.post("/v1/chat/completions", json=body, headers=ok)).status_code == 200
        assert (await c.get("/v1/models", headers=ok)).json()["data"][0]["id"] == engine.name
        assert (await c.get("/health")).json()["status"] == "ok"
    app.state.scheduler.close()


@pytest.mark.parametrize("body,status,needle", [
    ("{not json", 400, "JSON"),
    ({}, 400, "messages"),
    ({"model": "agentkit", "messages": []}, 400, "messages"),
    ({"model": "agentkit", "messages": [{"role": "wizard", "content": "hi"}]}, 400, "role"),
    ({"model": "agentkit", "messages": [{"content": "hi"}]}, 400, "role"),
    ({"model": "agentkit", "messages": "hello"}, 400, "messages"),
    ({"model": "agentkit", "messages": MSG, "temperature": -1}, 400, "temperature"),
    ({"model": "agentkit", "messages": MSG, "max_tokens": 0}, 400, "max_tokens"),
    ({"model": "agentkit", "messages": MSG, "n": 9}, 400, "n"),
    ({"model": "agentkit", "messages": MSG, "stop": ["", "x"]}, 400, "stop"),
    ({"model": "agentkit", "messages": MSG, "agentkit": {"mode": "fast"}}, 400, "agentkit.mode"),
    ({"model": "agentkit", "messages": MSG, "response_format": {"type": "xml"}}, 400, "response_format"),
    ({"model": "agentkit", "messages": MSG, "response_format": {"type": "json_schema"}}, 400, "json_schema"),
    ({"model": "agentkit", "messages": MSG, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 3}}},
     400, "schema"),
    ({"model": "agentkit", "messages": MSG, "tool_choice": "required"}, 400, "tools"),
    ({"model": "agentkit", "messages": MSG, "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     400, "nope"),
    ({"model": "agentkit", "messages": MSG, "tools": [{"type": "function", "function": {"name": "bad name!"}}]}, 400, "name"),
    ({"model": "agentkit", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "image_url"),
    ({"model": "agentkit", "messages": MSG, "max_tokens": "many"}, 400, "max_tokens"),
])
async def test_malformed(app, body, status, needle):
    async with _client(app) as c:
        if isinstance(body, str):
            r = await c.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
        else:
            r = await c.post("/v1/chat/completions", json=body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert needle.lower() in err["message"].lower(), err


async def test_models_health_metrics(app):
    async with _client(app) as c:
        await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 2})
        assert (await c.get("/v1/models")).json()["object"] == "list"
        h = (await c.get("/health")).json()
        assert h["status"] == "ok" and h["queue_depth"] == 0
        m = (await c.get("/metrics")).text
    for line in ("# TYPE agentkit_request_latency_seconds histogram", 'agentkit_request_latency_seconds_count{mode="ar"}',
                 "agentkit_queue_depth 0.0", 'agentkit_forwards_total{mode="ar"}', "agentkit_tokens_per_forward_bucket",
                 'agentkit_batch_size_bucket{le="1.0"}', "# TYPE agentkit_first_token_seconds histogram",
                 "# TYPE agentkit_prepare_seconds histogram"):
        assert line in m, line


# -- the SDK's HTTP backend and the official openai client --------------------------------------------------------------
async def test_sdk_http_generator(app):
    from agentkit.config import DecodeConfig
    from agentkit.sdk._http import HTTPGenerator

    gen = HTTPGenerator("http://test", transport=httpx.ASGITransport(app=app))
    tpl = Template(Lit(""), schema=PERSON, meta={"step": "extract"})  # the SDK labels its steps
    res = await gen.generate(MSG, DecodeConfig(mode="diffusion", max_new_tokens=64, canvas_length=8), tpl)
    await gen.aclose()
    jsonschema.validate(res.value, PERSON)
    assert res.stats.mode == "diffusion" and res.stats.output_tokens > 0


@pytest.fixture(scope="module")
def server(engine, on_loopback):
    with on_loopback(create_app(engine, api_key="k", compile_schema=_compiler())) as url:
        yield url + "/v1"


def test_openai_client_round_trip(server):
    import openai

    client = openai.OpenAI(base_url=server, api_key="k", max_retries=0)
    assert client.models.list().data[0].id
    r = client.chat.completions.create(model="agentkit", messages=MSG, max_tokens=8)
    assert isinstance(r.choices[0].message.content, str) and r.usage.completion_tokens > 0
    assert r.model_extra["agentkit_stats"]["mode"] == step_mode("reply")
    r = client.chat.completions.create(
        model="agentkit", messages=MSG, max_tokens=64, extra_body={"agentkit": {"mode": "diffusion", "canvas_length": 8}},
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)
    r = client.chat.completions.create(model="agentkit", messages=MSG, tools=TOOLS, tool_choice="required",
                                       max_tokens=64)
    assert r.choices[0].finish_reason == "tool_calls"
    call = r.choices[0].message.tool_calls[0]
    assert call.function.name in {"get_weather", "add"} and isinstance(json.loads(call.function.arguments), dict)
    stream = client.chat.completions.create(
        model="agentkit", messages=MSG, max_tokens=64, stream=True, extra_body={"agentkit": {"canvas_length": 8}},
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    text, finish = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
    jsonschema.validate(json.loads(text), PERSON)
    assert finish == "stop"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server, api_key="wrong", max_retries=0).chat.completions.create(
            model="agentkit", messages=MSG)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="agentkit", messages=[])
