"""``agentkit serve --ray``: the app as Ray Serve replicas on a local Ray (tiny random model, 2 replicas)."""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import pytest

pytest.importorskip("ray")

from agentkit.serving.config import ServerConfig

from agentkit.calibration import step_mode

TIMEOUT_S = 20.0
BODY = {"model": "agentkit", "messages": [{"role": "user", "content": "What is the weather in Paris?"}], "max_tokens": 16}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVER = ServerConfig(max_batch=4, max_queue=32, request_timeout_s=TIMEOUT_S)


def _config(replicas: int, port: int):
    from agentkit.serving.ray_serve import RayServeConfig

    return RayServeConfig(replicas=replicas, port=port, engine_factory="agentkit.engine:tiny_engine",
                          num_cpus_per_replica=0.5, threads=1, health_check_period_s=2.0)


@pytest.fixture(scope="module")
def url(ray_local):
    from agentkit.serving.ray_serve import start
    from ray import serve

    port = _free_port()
    start(SERVER, _config(2, port))
    yield f"http://127.0.0.1:{port}"
    serve.shutdown()


async def _burst(url: str, n: int, body: dict, on_start=None) -> list[httpx.Response | Exception]:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT_S + 15,
                                 limits=httpx.Limits(max_connections=n)) as c:
        async def one() -> httpx.Response | Exception:
            try:
                return await c.post("/v1/chat/completions", json=body)
            except httpx.HTTPError as e:
                return e

        tasks = [asyncio.create_task(one()) for _ in range(n)]
        if on_start is not None:
            await on_start()
        return await asyncio.gather(*tasks)


def _replicas() -> dict[str, str]:
    """Replica id -> its actor name (the live Serve replicas of the app)."""
    import ray

    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
    return {n.rsplit("#", 1)[1]: n for n in names if "#AgentkitServer#" in n}


def _running() -> int:
    from ray import serve

    st = serve.status().applications["agentkit"].deployments["AgentkitServer"]
    return sum(n for s, n in st.replica_states.items() if str(s).endswith("RUNNING"))


def _settled(n: int, within_s: float = 60.0) -> dict[str, str]:
    """The app's replicas once Serve shows exactly ``n``, all running (a replica it is replacing shows as a third)."""
    deadline = time.time() + within_s
    while time.time() < deadline:
        now = _replicas()
        if len(now) == n and _running() == n:
            return now
        time.sleep(0.5)
    pytest.fail(f"Serve did not settle at {n} running replicas: {_replicas()}, {_running()} running")


def test_two_replicas_both_serve_and_label_metrics(url):
    seen: set[str] = set()
    with httpx.Client(base_url=url, timeout=TIMEOUT_S + 5) as c:
        for _ in range(40):
            r = c.post("/v1/chat/completions", json=BODY)
            assert r.status_code == 200, r.text
            seen.add(r.headers["x-agentkit-replica"])
            if len(seen) == 2:
                break
        assert len(seen) == 2, seen
        with c.stream("POST", "/v1/chat/completions", json={"model": "agentkit", **BODY, "stream": True}) as r:
            assert r.status_code == 200 and r.headers["x-agentkit-replica"] in seen
            events = [ln for ln in r.iter_lines() if ln.startswith("data: ")]
        assert events[-1] == "data: [DONE]" and len(events) >= 3  # streaming passes through Serve
        health = c.get("/health")
        assert health.status_code == 200 and health.headers["x-agentkit-replica"] in seen
        m = c.get("/metrics")
    rid = m.headers["x-agentkit-replica"]
    samples = [ln for ln in m.text.splitlines() if ln and not ln.startswith("#")]
    assert samples and all(f'replica="{rid}"' in ln for ln in samples)
    mode = step_mode("reply")  # free text: the reply step's calibrated mode
    assert f'agentkit_requests_total{{replica="{rid}",mode="{mode}",status="200"}}' in m.text


def test_32_concurrent_requests_no_5xx_none_lost(url):
    res = asyncio.run(_burst(url, 32, BODY))
    lost = [r for r in res if isinstance(r, Exception)]
    assert not lost, lost
    codes = [r.status_code for r in res]
    assert codes == [200] * 32, codes
    assert all(r.json()["choices"][0]["message"]["content"] is not None for r in res)
    assert len({r.headers["x-agentkit-replica"] for r in res}) == 2


def test_killing_a_replica_mid_load(url):
    import ray

    before = _settled(2)
    # 64 tokens keep each request in flight >= 0.1 s (the victim holds a queue of them when the kill lands) while the
    # survivor's whole share stays well inside TIMEOUT_S on a loaded machine: at 256 tokens 32 requests on one tiny
    # replica took ~14 s on a quiet 2-core box and CI's loaded run passed 20 s (504s from the survivor, not the kill).
    body = {**BODY, "max_tokens": 64, "agentkit": {"mode": "ar"}}  # AR: a token a forward (greedy free text is verify)
    killed: list[str] = []

    async def kill_soon() -> None:
        # Kill the first replica seen holding requests: a fixed delay raced the burst (CI saw the kill land before
        # any request reached the chosen replica, so every request went to the survivor and the path under test
        # was not taken); polling one chosen replica missed it on a loaded machine.
        actors = {rid: ray.get_actor(name, namespace="serve") for rid, name in before.items()}
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline and not killed:
            for rid, actor in actors.items():
                if await asyncio.to_thread(ray.get, actor.get_num_ongoing_requests.remote()) >= 1:
                    ray.kill(actor, no_restart=True)
                    killed.append(rid)
                    break
            else:
                await asyncio.sleep(0.01)
        if not killed:
            pytest.fail("no request reached either replica")

    t0 = time.perf_counter()
    res = asyncio.run(_burst(url, 32, body, kill_soon))
    elapsed = time.perf_counter() - t0
    assert elapsed < TIMEOUT_S + 15  # nothing hung past the server's timeout (+ the proxy's backstop)
    lost = [r for r in res if isinstance(r, Exception)]
    assert not lost, lost
    for r in res:
        assert r.status_code == 200 or "retry-after" in r.headers, (r.status_code, r.text[:200])
        if r.status_code != 200:
            assert r.json()["error"]["code"] in ("replica_unavailable", "queue_full"), r.text
    unavailable = [r for r in res if r.status_code == 503]
    assert unavailable, "the kill hit no request in flight"  # the path under test was taken
    assert all("x-agentkit-replica" not in r.headers for r in unavailable)  # made by the proxy, not a replica
    deadline = time.time() + 90
    while time.time() < deadline:  # Serve starts a replacement
        now = _replicas()
        if killed[0] not in now and len(now) == 2 and _running() == 2:
            break
        time.sleep(1)
    else:
        pytest.fail(f"no replacement replica: {_replicas()}")
    res = asyncio.run(_burst(url, 8, BODY))
    assert [r.status_code for r in res] == [200] * 8


def test_scale_down_drains_in_flight_requests(url):
    """A replica removed while requests run on it finishes them (graceful shutdown) before it stops."""
    from agentkit.serving.ray_serve import application
    from ray import serve

    body = {**BODY, "max_tokens": 128, "agentkit": {"mode": "ar"}}  # AR: a token a forward, still running at 0.3 s
    port = int(url.rsplit(":", 1)[1])

    async def scale_down() -> None:
        await asyncio.sleep(0.3)
        await asyncio.to_thread(serve.run, application(SERVER, _config(1, port)), name="agentkit",
                                route_prefix="/", blocking=False)

    res = asyncio.run(_burst(url, 16, body, scale_down))
    assert not [r for r in res if isinstance(r, Exception)]
    assert [r.status_code for r in res] == [200] * 16, [r.text[:100] for r in res if r.status_code != 200]
    served_by = {r.headers["x-agentkit-replica"] for r in res}
    deadline = time.time() + 60
    while len(_replicas()) != 1 and time.time() < deadline:
        time.sleep(0.5)
    left = set(_replicas())
    removed = served_by - left
    assert len(left) == 1 and removed, (served_by, left)
    # ... and at least one of its requests was still running when the scale-down was issued (at 0.3 s)
    assert max(r.elapsed.total_seconds() for r in res if r.headers["x-agentkit-replica"] in removed) > 0.3


def test_app_builder_for_serve_config_files():
    from agentkit.serving.ray_serve import app_builder, deployment_options

    app = app_builder({"replicas": 3, "max_batch": 4, "max_queue": 8, "engine_factory": "agentkit.engine:tiny_engine"})
    assert app is not None
    from agentkit.errors import UserError

    with pytest.raises(UserError, match="unknown application args"):
        app_builder({"replica": 3})
    from agentkit.serving.ray_serve import RayServeConfig

    opts = deployment_options(ServerConfig(max_batch=4, max_queue=8), RayServeConfig(autoscale=(1, 4)))
    assert opts["autoscaling_config"]["target_ongoing_requests"] == 4 and "num_replicas" not in opts
    assert opts["max_ongoing_requests"] == 4 + 8 + 8


def test_replicas_load_the_engine_options_given():
    from agentkit.serving.ray_serve import RayServeConfig, app_builder

    from agentkit.errors import InvalidRequestError

    cfg = RayServeConfig(dtype="float32", backend="torch", pass_width=8, model="/m", threads=1, attention="sdpa",
                         q4_steps="off", row_exact="off", prefix_cache=False,
                         prefix_cache_bytes=2 ** 20, prompt_chunk=64, lora="/adapters/loop")
    e = cfg.engine_config()
    assert e.lora == "/adapters/loop"
    assert (e.dtype, e.backend, e.pass_width, e.model, e.threads) == ("float32", "torch", 8, "/m", 1)
    assert (e.attention, e.q4_steps, e.row_exact, e.prefix_cache) == ("sdpa", "off", "off", False)
    assert (e.prefix_cache_bytes, e.prompt_chunk) == (2 ** 20, 64)
    with pytest.raises(InvalidRequestError, match="pass_width"):
        RayServeConfig(pass_width=0)
    assert app_builder({"pass_width": 8, "dtype": "bfloat16", "engine_factory": "agentkit.engine:tiny_engine"})
