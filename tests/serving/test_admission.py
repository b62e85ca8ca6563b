"""Issue 36's server-side reproducers on the tiny model: bounded canvases and steps, admission that charges work
(400 per request, 429 + Retry-After for the server, readiness while the budget is spent), failed schemas refused at
once whatever the mode, a fair preparation queue, strict numeric fields, and big enums compiled as tries."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from agentkit.serving.app import create_app
from agentkit.serving.config import ServerConfig

from agentkit.constrain.limits import CompileLimits, budget, current
from agentkit.errors import SchemaLimitError

pytestmark = pytest.mark.usefixtures("one_thread")
MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def engine():
    from agentkit.engine import tiny_engine

    return tiny_engine(0)


class Gated:
    """The tiny engine whose generate() waits for ``gate`` (a request held in flight as long as a test wants)."""

    def __init__(self, eng) -> None:
        self.eng, self.gate, self.entered = eng, threading.Event(), threading.Event()

    def __getattr__(self, name):
        return getattr(self.eng, name)

    def generate(self, messages, config, *, batch=None, **kw):
        self.entered.set()
        assert self.gate.wait(60), "the test never opened the gate"
        return self.eng.generate(messages, config, batch=batch, **kw)


AR = {"agentkit": {"mode": "ar"}}


def _client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=60)


def _app(engine, **settings):
    return create_app(engine, ServerConfig(**settings))


# -- bounds and strict types ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("field,bound", [("canvas_length", 64), ("max_denoising_steps", 64)])
async def test_canvas_and_steps_over_the_bound_are_400_naming_field_and_bound(engine, field, bound):
    app = _app(engine)
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 8, "agentkit": {
            "mode": "diffusion", field: 4096}})
    app.state.scheduler.close()
    err = r.json()["error"]
    assert r.status_code == 400 and err["param"] == f"agentkit.{field}" and err["limit_value"] == bound
    assert str(bound) in err["message"] and err["code"] == "limit_exceeded"


@pytest.mark.parametrize("body", [{"max_tokens": "10"}, {"max_tokens": True}, {"max_tokens": 10.0},
                                  {"temperature": "0.5"}, {"temperature": True}, {"stream": "true"},
                                  {"stream": 1}, {"seed": "1"}, {"agentkit": {"canvas_length": "32"}}])
async def test_numbers_and_flags_must_have_their_json_type(engine, body):
    app = _app(engine)
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, **body})
    app.state.scheduler.close()
    field = next(iter(body))
    assert r.status_code == 400 and r.json()["error"]["param"].startswith(field), r.text


async def test_an_integer_is_a_valid_number(engine):
    app = _app(engine)
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 2, "temperature": 0})
    app.state.scheduler.close()
    assert r.status_code == 200, r.text


# -- work ----------------------------------------------------------------------------------------------------------
async def test_a_request_over_the_work_bound_is_400_naming_it(engine):
    app = _app(engine, max_request_work=1000)
    async with _client(app) as c:
        big = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 64, "agentkit": {
            "mode": "diffusion", "canvas_length": 32, "max_denoising_steps": 32}})  # 64 x 32 = 2048 > 1000
        ok = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 4})
    app.state.scheduler.close()
    err = big.json()["error"]
    assert big.status_code == 400 and err["limit"] == "max_request_work" and err["work"] > 1000
    assert ok.status_code == 200, ok.text



async def test_a_calibrated_verify_over_the_work_bound_decodes_in_ar(engine):
    from agentkit.calibration import step_mode

    assert step_mode("reply") == "verify"  # a greedy free-text reply's calibrated mode (the shipped calibration)
    app = _app(engine, max_request_work=1000)
    async with _client(app) as c:
        body = {"model": "agentkit", "messages": MSG, "max_tokens": 40}  # verify: 40 x 32 > 1000; AR: 40 + prompt
        auto = await c.post("/v1/chat/completions", json=body)
        short = await c.post("/v1/chat/completions", json={**body, "max_tokens": 8})  # 8 x 32 fits: verify
        asked = await c.post("/v1/chat/completions", json={**body, "agentkit": {"mode": "verify"}})
    app.state.scheduler.close()
    assert auto.status_code == 200 and auto.json()["agentkit_stats"]["mode"] == "ar"
    assert short.status_code == 200 and short.json()["agentkit_stats"]["mode"] == "verify"
    assert asked.status_code == 400 and asked.json()["error"]["limit"] == "max_request_work"  # a mode asked for is kept


async def test_work_budget_429_with_retry_after_and_readiness_until_released(engine):
    gated = Gated(engine)  # AR requests: their work is max_tokens plus the prompt (verify's: x canvas_length)
    app = _app(gated, max_work=300, max_queue=4)
    async with _client(app) as c:
        assert (await c.get("/health/ready")).status_code == 200
        first = asyncio_task(c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 250, **AR}))
        await wait_for(gated.entered.is_set)
        second = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 100, **AR})
        ready = await c.get("/health/ready")
        gated.gate.set()
        r1 = await first
        ready_after = await c.get("/health/ready")
        third = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 4, **AR})
    app.state.scheduler.close()
    assert second.status_code == 429 and second.json()["error"]["code"] == "work_budget_spent"
    assert int(second.headers["Retry-After"]) >= 1
    assert ready.status_code == 503 and ready.json()["error"]["code"] == "work_budget_spent"
    assert r1.status_code == 200 and ready_after.status_code == 200 and third.status_code == 200
    assert app.state.service.budget.used == 0


async def test_memory_over_its_bound_is_429_and_not_ready(engine):
    app = _app(engine, max_memory_mb=1.0)  # any process is over 1 MiB
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 4})
        ready = await c.get("/health/ready")
    app.state.scheduler.close()
    assert r.status_code == 429 and r.json()["error"]["code"] == "memory_over" and "Retry-After" in r.headers
    assert ready.status_code == 503 and ready.json()["error"]["code"] == "memory_over"


# -- schema failures and the preparation queue ------------------------------------------------------------------------
class SlowCompile:
    """A compile_schema double: schemas holding "slow" fail after the budget's deadline (like a real build over
    max_seconds), those holding "gate" wait for ``gate``; it counts its calls per schema."""

    def __init__(self, engine) -> None:
        from agentkit.constrain.compiler import compile_schema_cached

        self.real, self.calls, self.gate, self.lock = compile_schema_cached, {}, threading.Event(), threading.Lock()
        self.gated = threading.Event()

    def __call__(self, schema, **kw):
        key = str(schema)
        with self.lock:
            self.calls[key] = self.calls.get(key, 0) + 1
        if "slow" in key:
            while True:
                current().check("#/properties/slow")  # raises max_seconds at the deadline
                time.sleep(0.01)
        if "gate" in key:
            self.gated.set()
            assert self.gate.wait(60)
        if "ticks" in key and self.calls[key] == 1:  # slow only on its first try (the fast lane's slice)
            while True:
                current().check("#")
                time.sleep(0.01)
        return self.real({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})


def _schema_body(schema, **ext):
    return {"model": "agentkit", "messages": MSG, "max_tokens": 16, "response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": schema}}, "agentkit": {"schema_prompt": False, **ext}}  # a padded schema is no prompt


async def test_a_failed_schema_is_refused_at_once_in_any_mode_with_the_same_pointer(engine):
    comp = SlowCompile(engine)
    app = create_app(engine, ServerConfig(compile_limits=CompileLimits(max_seconds=0.2)), compile_schema=comp)
    schema = {"type": "object", "properties": {"slow": {"type": "string"}}, "padding": "x" * 5000}  # slow lane
    async with _client(app) as c:
        r1 = await c.post("/v1/chat/completions", json=_schema_body(schema, mode="diffusion"))
        r2 = await c.post("/v1/chat/completions", json=_schema_body(schema, mode="ar", json_style="spaced"))
    app.state.scheduler.close()
    e1, e2 = r1.json()["error"], r2.json()["error"]
    assert r1.status_code == r2.status_code == 400 and e1["limit"] == e2["limit"] == "max_seconds"
    assert e1["pointer"] == e2["pointer"] == "#" and "remembered" in e2["message"]
    assert comp.calls[str(schema)] == 1  # the second request never compiled


def test_time_out_pointer_is_the_whole_schema():
    with budget(CompileLimits(max_seconds=0.001)) as b:
        time.sleep(0.01)
        with pytest.raises(SchemaLimitError) as ei:
            b.check("#/anyOf/17/properties/v")
    assert ei.value.pointer == "#" and ei.value.limit == "max_seconds"


async def test_small_schemas_never_wait_behind_a_slow_build(engine):
    comp = SlowCompile(engine)
    app = create_app(engine, ServerConfig(prepare_workers=1), compile_schema=comp)
    slow = {"type": "object", "properties": {"gate": {"type": "string"}}, "padding": "x" * 5000}
    async with _client(app) as c:
        held = asyncio_task(c.post("/v1/chat/completions", json=_schema_body(slow)))
        await wait_for(comp.gated.is_set)  # the only slow-lane worker is busy
        small = await c.post("/v1/chat/completions", json=_schema_body({"type": "object", "title": "small"}))
        still_held = not held.done()
        comp.gate.set()
        r = await held
    app.state.scheduler.close()
    assert small.status_code == 200 and still_held and r.status_code == 200


async def test_a_small_schema_over_the_fast_lane_slice_moves_to_the_slow_lane(engine):
    comp = SlowCompile(engine)
    app = create_app(engine, ServerConfig(fast_lane_s=0.05, compile_limits=CompileLimits(max_seconds=30)),
                     compile_schema=comp)
    schema = {"type": "object", "title": "ticks"}
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json=_schema_body(schema))
    app.state.scheduler.close()
    assert r.status_code == 200, r.text
    assert comp.calls[str(schema)] == 2  # cut on the fast lane, then built on the slow one


# -- big enums ---------------------------------------------------------------------------------------------------------
def test_a_big_enum_is_a_trie_with_few_threads_per_state(engine):
    from agentkit.constrain.build import build_constraint
    from agentkit.constrain.matcher import tree_matches

    members = [f"pfx_{'prefix_shared_' * 8}{j:05d}" for j in range(5000)]
    tpl = build_constraint({"enum": members}, engine=engine)
    tc = engine.constraint(tpl)
    assert all(tree_matches(tpl, f'"{m}"') for m in members[::97])
    assert not tree_matches(tpl, f'"{members[0][:-1]}"') and not tree_matches(tpl, '"pfx_99999"')
    state = tc.start()
    for b in '"pfx_prefix_shared_':
        tid = next(t for t in range(len(engine.vocab.token_bytes)) if engine.vocab.token_bytes[t] == b.encode())
        state = tc.advance(state, tid)
    assert len(state) <= 2  # one thread inside the shared prefix, not 5,000


@pytest.mark.parametrize("texts", [["", "a", "ab", "abc", "b"] + [f"w{i}" for i in range(40)],
                                   [f"x{i:03d}" for i in range(300)] + ["x", "x0", "y"]])
def test_lit_trie_has_the_language_of_the_flat_choice(texts):
    from agentkit.constrain.matcher import tree_matches
    from agentkit.constrain.nodes import lit_trie

    t = lit_trie(sorted(set(texts)))
    assert all(tree_matches(t, x, any_end=True) for x in texts)
    others = {x + "z" for x in texts} | {x[:-1] for x in texts if x and x[:-1] not in texts} | {"q", "x1000"}
    assert not any(tree_matches(t, x, any_end=True) for x in others - set(texts))


# -- helpers -----------------------------------------------------------------------------------------------------------
def asyncio_task(coro):
    import asyncio

    return asyncio.ensure_future(coro)


async def wait_for(cond, limit_s: float = 30.0) -> None:
    import asyncio

    deadline = time.monotonic() + limit_s
    while not cond():
        assert time.monotonic() < deadline, "condition never held"
        await asyncio.sleep(0.01)


async def test_a_wide_anyof_of_objects_is_refused_before_compiling_with_a_fixed_pointer(engine):
    schema = {"anyOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}, "v": {"type": "string"}},
                         "required": [f"k{i}"]} for i in range(200)]}
    app = _app(engine)
    async with _client(app) as c:
        rs = [await c.post("/v1/chat/completions", json=_schema_body(schema, mode=m)) for m in ("diffusion", "ar")]
    app.state.scheduler.close()
    for r in rs:
        err = r.json()["error"]
        assert r.status_code == 400 and err["limit"] == "max_branch_names" and err["pointer"] == "#/anyOf"
