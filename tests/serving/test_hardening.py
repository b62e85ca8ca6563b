"""Issue 18's reproductions against the server on the tiny model, each with a wall-clock bound: every bad field
is a 400 in OpenAI's error shape naming it, prompts over the context are refused before any forward, errors known
before the first token are plain 4xx even when streaming, a slow schema build holds nobody else, a 500 keeps the
connection, and readiness fails when the engine stalls."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest
from agentkit.serving.app import create_app

pytestmark = pytest.mark.usefixtures("one_thread")
MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def engine():
    from agentkit.engine import tiny_engine

    return tiny_engine(0)


class Counting:
    """The tiny engine, counting generate() calls (a refused request never reaches it)."""

    def __init__(self, eng) -> None:
        self.eng, self.calls = eng, 0

    def __getattr__(self, name):
        return getattr(self.eng, name)

    def generate(self, messages, config, *, batch=None, **kw):
        self.calls += 1
        return self.eng.generate(messages, config, batch=batch, **kw)


@pytest.fixture(scope="module")
def counting(engine):
    return Counting(engine)


@pytest.fixture(scope="module")
def app(counting):
    app = create_app(counting)
    yield app
    app.state.scheduler.close()


def _client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=30)


def _schema_raw(schema: str) -> str:
    return ('{"model": "agentkit", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "response_format": '
            '{"type": "json_schema", "json_schema": {"name": "x", "schema": ' + schema + '}}}')


BAD = [  # (body: dict or raw JSON text, the field the error must name)
    ({"model": "agentkit", "messages": MSG, "seed": 1180591620717411303424}, "seed"),
    ('{"model": "agentkit", "messages": [{"role": "user", "content": "a\\ud800"}]}', "messages[0].content"),
    (_schema_raw('{"type": "number", "maximum": 1e999}'), "response_format.json_schema.schema.maximum"),
    (_schema_raw('{"type": "number", "maximum": NaN}'), "response_format.json_schema.schema.maximum"),
    (_schema_raw('{"type": "number", "minimum": -Infinity}'), "response_format.json_schema.schema.minimum"),
    (_schema_raw('{"const": "\\ud800"}'), "response_format.json_schema.schema.const"),
    ('{"model": "agentkit", "messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', "temperature"),
    ({"model": "agentkit", "messages": MSG, "mode": "diffusion"}, "mode"),
    ({"model": "agentkit", "messages": MSG, "agentkit": {"mdoe": "ar"}}, "agentkit.mdoe"),
    ({"model": "agentkit", "messages": MSG, "frequency_penalty": 2.5}, "frequency_penalty"),
    ({"model": "agentkit", "messages": MSG, "top_logprobs": 2}, "top_logprobs"),
    ({"model": "agentkit", "messages": MSG, "top_p": 0}, "top_p"),
    ({"model": "agentkit", "messages": MSG, "metadata": {"x": json.loads("[" * 80 + "]" * 80)}}, "metadata.x"),
    ("{not json", "body"),
    ("[1, 2]", "body"),
]


@pytest.mark.parametrize("body,param", BAD, ids=[p for _, p in BAD])
async def test_bad_fields_are_400_naming_the_field(app, counting, body, param):
    before = counting.calls
    t = time.monotonic()
    async with _client(app) as c:
        if isinstance(body, str):
            r = await c.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
        else:
            r = await c.post("/v1/chat/completions", json=body)
    assert time.monotonic() - t < 5
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "code", "param"} and err["type"] == "invalid_request_error"
    assert err["param"].startswith(param) and param in err["message"], err
    assert counting.calls == before


@pytest.mark.parametrize("method,path,status", [("GET", "/v1/chat/completions", 405), ("GET", "/v1/nothing", 404),
                                                ("POST", "/v1/models", 405)])
async def test_routing_errors_use_the_openai_body(app, method, path, status):
    async with _client(app) as c:
        r = await c.request(method, path)
    assert r.status_code == status and path in r.json()["error"]["message"]


@pytest.mark.parametrize("chars", [500_000, 5_000_000])
async def test_prompt_over_the_context_is_400_before_any_forward(app, counting, chars):
    before = counting.calls
    t = time.monotonic()
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": [{"role": "user", "content": "word " * (
            chars // 5)}], "max_tokens": 16})
        small = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 4})
    assert time.monotonic() - t < 10
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    assert "2048" in r.json()["error"]["message"] and "max_tokens is 16" in r.json()["error"]["message"]
    assert small.status_code == 200 and counting.calls == before + 1


async def test_max_context_caps_the_models(engine):
    app = create_app(engine, max_context=64)
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": [{"role": "user", "content": "word " * 8}],
                                                       "max_tokens": 30})
        assert r.status_code == 400 and "context of 64 tokens" in r.json()["error"]["message"]
        r = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": [{"role": "user", "content": "word " * 8}]})
        assert r.status_code == 200 and r.json()["usage"]["total_tokens"] <= 64  # the default max_tokens shrank
    app.state.scheduler.close()


async def test_prompt_that_fits_only_without_max_tokens(app):
    prompt = [{"role": "user", "content": "What is the weather in Paris? " * 150}]  # ~1,300 tokens here
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": prompt, "max_tokens": 1000})
        assert r.status_code == 400 and "max_tokens is 1000" in r.json()["error"]["message"]
        r = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": prompt, "max_tokens": 4})
        assert r.status_code == 200, r.text


@pytest.mark.parametrize("body", [
    {"model": "agentkit", "messages": MSG, "stream": True, "max_tokens": 2, "response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "properties": {"a_long_property_name": {"type": "integer"}},
                                "required": ["a_long_property_name"]}}}},
    {"model": "agentkit", "messages": [{"role": "user", "content": "word " * 3000}], "stream": True},
], ids=["template-longer-than-max-tokens", "prompt-too-long"])
async def test_stream_errors_before_the_first_token_are_4xx(app, body):
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json=body)
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/json"), r.text
    assert r.json()["error"]["message"]


class SlowCompile:
    """A schema compiler that takes ``seconds`` on schemas titled "slow" (an adversarial build), then refuses."""

    def __init__(self, seconds: float) -> None:
        from agentkit.constrain.compiler import compile_schema

        self.inner, self.seconds, self.running = compile_schema, seconds, threading.Event()
        self.release = threading.Event()

    def __call__(self, schema, **kw):
        if schema.get("title") == "slow":
            self.running.set()
            self.release.wait(self.seconds)
            from agentkit.errors import UnsupportedSchemaError

            raise UnsupportedSchemaError("pattern", "#", "build budget exceeded")
        return self.inner(schema, **kw)


async def test_slow_build_holds_nobody_and_ends_at_its_timeout(engine):
    slow = SlowCompile(30)
    app = create_app(engine, compile_schema=slow, request_timeout_s=3, max_batch=1, prepare_workers=1)
    sched = app.state.scheduler
    schema = {"title": "slow", "type": "object"}
    async with _client(app) as c:
        t0 = time.monotonic()
        bad = asyncio.ensure_future(c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "response_format": {
            "type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}))
        while not slow.running.is_set():
            await asyncio.sleep(0.01)
        t = time.monotonic()
        small = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 4})
        assert small.status_code == 200 and time.monotonic() - t < 5  # the one decoding slot was never taken
        r = await bad
        assert r.status_code == 504 and time.monotonic() - t0 < 6  # the build counts against the timeout
        assert sched.preparing == 0 and sched.depth == 0
    slow.release.set()
    sched.close()


async def test_readiness_fails_while_the_engine_stalls(engine):
    gate = threading.Event()

    class Stuck:
        name, tokenizer, batches = engine.name, engine.tokenizer, False

        def generate(self, messages, config, **kw):
            assert gate.wait(10)
            return engine.generate(messages, config, **kw)

    app = create_app(Stuck(), ready_stall_s=0.3)
    async with _client(app) as c:
        assert (await c.get("/health/ready")).status_code == 200
        req = asyncio.ensure_future(c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 2}))
        await asyncio.sleep(0.8)
        r = await c.get("/health/ready")
        assert r.status_code == 503 and r.json()["error"]["code"] == "engine_stalled"
        assert (await c.get("/health")).status_code == 200  # liveness stays cheap and green
        gate.set()
        assert (await req).status_code == 200
        assert (await c.get("/health/ready")).status_code == 200
    app.state.scheduler.close()


def test_500_keeps_the_connection_usable(engine, on_loopback):
    class Broken:
        name, tokenizer, batches = engine.name, engine.tokenizer, False

        def generate(self, messages, config, **kw):
            if messages[-1]["content"] == "boom":
                raise RuntimeError("a bug")
            return engine.generate(messages, config, **kw)

    with on_loopback(create_app(Broken()), log_level="critical") as url, httpx.Client(base_url=url, timeout=20) as c:
        r = c.post("/v1/chat/completions", json={"model": "agentkit", "messages": [{"role": "user", "content": "boom"}]})
        assert r.status_code == 500 and r.json()["error"]["code"] == "internal_error"
        assert r.headers.get("connection", "").lower() != "close"
        ok = c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 2})
        assert ok.status_code == 200
        assert len(c._transport._pool.connections) == 1  # the same keep-alive connection served both


async def test_logprobs_are_the_models_and_top_p_tiny_is_greedy(app):
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 6, "logprobs": True,
                                                       "top_logprobs": 3})
        greedy = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 6})
        nucleus = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 6, "temperature": 1.0,
                                                             "top_p": 1e-6, "seed": 1})
        sampled = [await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 6,
                                                              "temperature": 2.0, "seed": s}) for s in range(4)]
    d = r.json()
    content = d["choices"][0]["logprobs"]["content"]
    assert len(content) == d["usage"]["completion_tokens"] > 0
    for e in content:  # greedy AR without a template takes the model's argmax: the chosen token is the top one
        assert len(e["top_logprobs"]) == 3 and e["logprob"] <= 0
        assert e["logprob"] == pytest.approx(e["top_logprobs"][0]["logprob"], abs=1e-5)
    ids = greedy.json()["agentkit_stats"]["token_ids"]
    assert nucleus.json()["agentkit_stats"]["token_ids"] == ids  # a nucleus of one token is the argmax
    assert any(s.json()["agentkit_stats"]["token_ids"] != ids for s in sampled)  # temperature alone differs


async def test_metrics_escape_label_values(app):
    from agentkit.serving.metrics import Metrics

    m = Metrics()
    m.request('a"b\\c\nd', 200, 0.1)
    text = m.render(0, 0).decode()
    assert 'agentkit_requests_total{mode="a\\"b\\\\c\\nd",status="200"} 1.0' in text
    json.dumps(text)  # one line per sample


async def test_one_requests_failure_does_not_fail_its_batch(engine, monkeypatch):
    """A batched forward that fails (here: a pass that raises for one request's prefill, as an allocation failure
    would) is rerun request by request, so only the request that causes it fails."""
    bb = engine.backbone
    poison = [{"role": "user", "content": "poison " * 9}]
    # the poison's own token ids (the prompt pass is cut into pieces, so a piece is told by its tokens, not its length)
    marked = set(engine.encode_prompt(poison)) - set(engine.encode_prompt(MSG))
    assert marked
    real_many, real_encode, batched = bb.forward_many, bb.encode, []

    def forward_many(items):
        batched.append(len(items))
        if any(marked & set(it.ids) for it in items):
            raise RuntimeError("cannot allocate")
        return real_many(items)

    def encode(ids, *a, **kw):
        if marked & set(ids):
            raise RuntimeError("cannot allocate")
        return real_encode(ids, *a, **kw)

    monkeypatch.setattr(bb, "forward_many", forward_many)
    monkeypatch.setattr(bb, "encode", encode)
    gate = threading.Event()

    class Held:
        name, tokenizer, lock, batches = engine.name, engine.tokenizer, engine.lock, True

        def generate(self, messages, config, *, batch=None, **kw):
            with batch.batcher._cond:  # live before its first call, so the batcher waits for both prefills
                batch.batcher._join(batch)
            assert gate.wait(10)
            return engine.generate(messages, config, batch=batch, **kw)

    app = create_app(Held(), max_batch=2)
    app.state.scheduler.batcher.max_wait_s = 0.2  # both prefills meet in one forward
    async with _client(app) as c:
        bad = asyncio.ensure_future(c.post("/v1/chat/completions", json={"model": "agentkit", "messages": poison, "max_tokens": 3}))
        good = asyncio.ensure_future(c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 3}))
        while app.state.scheduler.running < 2:
            await asyncio.sleep(0.01)
        gate.set()
        bad, good = await bad, await good
    assert 2 in batched  # they did share a forward, which failed
    assert bad.status_code == 500 and good.status_code == 200, (bad.text, good.text)
    app.state.scheduler.close()


def test_an_abandoned_build_does_not_delay_exit():
    """A preparation still running when the server stops is abandoned: the process exits at once (it used to
    ignore SIGTERM for the length of the build)."""
    import subprocess
    import sys

    code = ("import time, threading\n"
            "from serving.scheduler import Scheduler\n"
            "s = Scheduler(1)\n"
            "started = threading.Event()\n"
            "def build(job):\n"
            "    started.set(); time.sleep(60)\n"
            "s.submit(lambda job: None, build, timeout_s=1)\n"
            "started.wait(5); s.close(); print('closed', flush=True)\n")
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50, check=False)
    assert p.returncode == 0 and "closed" in p.stdout, p.stderr
    assert time.monotonic() - t < 30


ADVERSARIAL = {  # issue 18's schema reproductions: each must end (a value or a typed 400) within its bound
    "int64 range": {"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807},
    "pattern [ab]*a[ab]{20}": {"type": "string", "pattern": "^[ab]*a[ab]{20}$"},
    "pattern [\\s\\S]{256}": {"type": "string", "pattern": "^[\\s\\S]{256}$"},
    "exclusiveMaximum 1e20": {"type": "number", "exclusiveMaximum": 1e20},
    "minimum 1e308": {"type": "number", "minimum": 1e308},
    "enum 10k": {"enum": [f"item{i}" for i in range(10_000)]},
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
async def test_adversarial_schema_ends_while_a_small_request_completes(engine, name):
    from agentkit.constrain.limits import CompileLimits

    app = create_app(engine, compile_limits=CompileLimits(max_seconds=6), request_timeout_s=20)
    params = {"type": "object", "properties": {"v": ADVERSARIAL[name]}, "required": ["v"]}
    async with _client(app) as c:
        t0 = time.monotonic()
        bad = asyncio.ensure_future(c.post("/v1/chat/completions", json={"model": "agentkit", 
            "messages": MSG, "max_tokens": 48, "tool_choice": "required",
            "tools": [{"type": "function", "function": {"name": "f", "parameters": params}}]}))
        await asyncio.sleep(0.3)
        t = time.monotonic()
        small = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 4})
        assert small.status_code == 200 and time.monotonic() - t < 5
        r = await bad
        assert time.monotonic() - t0 < 10
        assert r.status_code in (200, 400), r.text  # a value, or a typed refusal (a build limit, the template
        if r.status_code == 400:                     # longer than max_tokens, the tool list over the context)
            assert r.json()["error"]["code"] in ("schema_limit", "unsupported_schema", "InvalidRequestError",
                                                 "context_length_exceeded"), r.text
    app.state.scheduler.close()
