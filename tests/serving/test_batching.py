"""Continuous batching in the server, on the tiny random engine: concurrent requests share forwards (``/metrics``
shows batch sizes > 1) and get exactly the tokens they get alone; queue, timeout and cancellation still hold."""

from __future__ import annotations

import asyncio
import re
import threading
import time

import httpx
import pytest
from agentkit.serving.app import create_app

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
                   "ok": {"type": "boolean"}},
    "required": ["name", "age", "ok"],
    "additionalProperties": False,
}
QUESTIONS = ["What is the weather in Paris?", "Extract: Ana, 31, Lisbon", "def add(a, b):", "Tell me a story"]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def engine():
    from agentkit.engine import tiny_engine

    return tiny_engine(0)


def _compiler():
    from agentkit.constrain.compiler import compile_schema

    return compile_schema


class Held:
    """The tiny engine with generate() held at a gate until the test opens it; it takes ``batch=``, so the app
    batches it."""

    batches = True

    def __init__(self, eng) -> None:
        self.eng, self.name, self.tokenizer, self.lock = eng, eng.name, eng.tokenizer, eng.lock
        self.gate = threading.Event()

    def generate(self, messages, config, *, batch=None, **kw):
        assert self.gate.wait(10)
        return self.eng.generate(messages, config, batch=batch, **kw)


def _client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=60)


async def _until(cond, timeout=5.0):
    t = time.monotonic()
    while not cond():
        assert time.monotonic() - t < timeout, "condition not reached"
        await asyncio.sleep(0.01)


def _body(i: int, mode: str, schema: bool) -> dict:
    b = {"model": "agentkit", "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}], "max_tokens": 24 + 4 * i,
         "agentkit": {"mode": mode, "canvas_length": 8}}
    if schema:
        b["response_format"] = {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON, "strict": True}}
    return b


def _batch_counts(metrics: str) -> tuple[int, int]:
    """(forwards that carried one request, all forwards) from /metrics."""
    one = int(float(re.search(r'^agentkit_batch_size_bucket\{le="1(?:\.0)?"\} ([\d.]+)$', metrics,
                              re.MULTILINE).group(1)))
    total = int(float(re.search(r"^agentkit_batch_size_count ([\d.]+)$", metrics, re.MULTILINE).group(1)))
    return one, total


@pytest.mark.parametrize("schema", [False, True], ids=["free", "json"])
@pytest.mark.parametrize("mode", ["ar", "diffusion", "verify"])
async def test_concurrent_requests_batch_and_match_alone(engine, mode, schema):
    n = 4
    held = Held(engine)
    app = create_app(held, max_batch=n, compile_schema=_compiler())
    sched = app.state.scheduler
    sched.batcher.max_wait_s = 0.05  # generous rendezvous: threads wake slowly on a loaded CI machine
    async with _client(app) as c:
        held.gate.set()
        alone = []
        for i in range(n):  # one at a time: every forward carries one request
            r = await c.post("/v1/chat/completions", json=_body(i, mode, schema))
            assert r.status_code == 200, r.text
            alone.append(r.json())
        one0, total0 = _batch_counts((await c.get("/metrics")).text)
        assert one0 == total0 > 0
        held.gate.clear()
        tasks = [asyncio.create_task(c.post("/v1/chat/completions", json=_body(i, mode, schema))) for i in range(n)]
        await _until(lambda: sched.running == n)  # all four decoding at once, held at the gate
        held.gate.set()
        together = [(await t) for t in tasks]
        m = (await c.get("/metrics")).text
        health = (await c.get("/health")).json()
    for a, r in zip(alone, together):
        assert r.status_code == 200, r.text
        d = r.json()
        assert d["agentkit_stats"]["token_ids"] == a["agentkit_stats"]["token_ids"]
        assert d["choices"][0]["message"] == a["choices"][0]["message"]
        assert a["agentkit_stats"]["batch_size"] == 1
    one, total = _batch_counts(m)
    assert total - total0 < sum(a["agentkit_stats"]["forwards"] + 1 for a in alone)  # fewer forwards than alone
    assert one - one0 < total - total0  # some forwards carried more than one request
    assert max(r.json()["agentkit_stats"]["batch_size_max"] for r in together) > 1
    assert health["max_batch"] == n and health["batching"].startswith("continuous")
    sched.close()


async def test_queue_full_counts_free_slots(engine):
    held = Held(engine)
    app = create_app(held, max_batch=2, max_queue=1)
    sched = app.state.scheduler
    body = {"model": "agentkit", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    async with _client(app) as c:
        a = asyncio.create_task(c.post("/v1/chat/completions", json=body))
        b = asyncio.create_task(c.post("/v1/chat/completions", json=body))
        await _until(lambda: sched.running == 2)  # two slots busy, nobody waiting
        q = asyncio.create_task(c.post("/v1/chat/completions", json=body))
        await _until(lambda: sched.depth == 1)
        r = await c.post("/v1/chat/completions", json=body)
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        held.gate.set()
        assert [(await t).status_code for t in (a, b, q)] == [200, 200, 200]
    sched.close()


async def test_timeout_aborts_running_ar_at_next_forward(engine):
    """An AR request with a large budget (what the tiny model's 2,048-token context leaves) times out; it stops at its next forward (no longer runs to max_tokens)
    and frees its slot, while a concurrent short request completes."""
    app = create_app(engine, max_batch=2, request_timeout_s=0.5)
    sched = app.state.scheduler
    async with _client(app) as c:
        long = asyncio.create_task(c.post("/v1/chat/completions", json={"model": "agentkit", 
            "messages": [{"role": "user", "content": "What is the weather in Paris?"}], "max_tokens": 2000,
            "agentkit": {"mode": "ar"}}))
        await _until(lambda: sched.running == 1)
        short = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": [{"role": "user", "content": "hi"}],
                                                            "max_tokens": 8})
        assert short.status_code == 200
        r = await long
        assert r.status_code == 504 and r.json()["error"]["code"] == "timeout"
        await _until(lambda: sched.running == 0, timeout=3)
    assert sched.batcher.forwards < 2000 and sched.batcher.live == 0
    sched.close()


async def test_engine_without_batch_support_runs_one_at_a_time(engine):
    class Plain:
        name, tokenizer, batches = engine.name, engine.tokenizer, False

        def generate(self, messages, config, **kw):
            return engine.generate(messages, config, **kw)

    app = create_app(Plain(), max_batch=8)
    sched = app.state.scheduler
    assert sched.max_batch == 1 and sched.batcher is None
    async with _client(app) as c:
        rs = await asyncio.gather(*(c.post("/v1/chat/completions", json={"model": "agentkit", 
            "messages": [{"role": "user", "content": q}], "max_tokens": 6}) for q in QUESTIONS))
        assert all(r.status_code == 200 and r.json()["agentkit_stats"]["batch_size"] == 1 for r in rs)
        n = sum(r.json()["agentkit_stats"]["forwards"] + 1 for r in rs)  # + 1: the prefill
        reg = app.state.metrics.registry
        await _until(lambda: reg.get_sample_value("agentkit_batch_size_count") == n)  # recorded as each job ends
        one, total = _batch_counts((await c.get("/metrics")).text)
        assert (await c.get("/health")).json()["batching"].startswith("none")
    assert one == total == n
    sched.close()
