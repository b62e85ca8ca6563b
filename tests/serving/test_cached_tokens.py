"""The server reports prefix-cache reuse: usage.prompt_tokens_details.cached_tokens (OpenAI's field) and the
agentkit_cached_prompt_tokens counter (tiny random engine, prompt chunks of 8 tokens)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from agentkit.serving.app import create_app

from agentkit.config import EngineConfig
from agentkit.engine.engine import Engine
from agentkit.models.tiny import tiny_llama

pytestmark = pytest.mark.usefixtures("one_thread")
SYSTEM = {"role": "system", "content": "You are a careful assistant that answers in one short sentence. " * 3}


async def test_requests_sharing_a_system_prompt_report_cached_tokens():
    for cache, want_cached in ((True, True), (False, False)):
        eng = Engine.from_loaded(tiny_llama(0), EngineConfig(prompt_chunk=8, prefix_cache=cache))
        app = create_app(eng)
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=30) as c:
                usages = []
                for q in ("What is the weather in Paris?", "And in Rome?"):
                    r = await c.post("/v1/chat/completions", json={
                        "model": "agentkit", "messages": [SYSTEM, {"role": "user", "content": q}], "max_tokens": 4})
                    assert r.status_code == 200, r.text
                    usages.append(r.json()["usage"])
                for _ in range(100):  # the counter is updated just after the response is sent
                    metrics = (await c.get("/metrics")).text
                    if _counter(metrics) == usages[1]["prompt_tokens_details"]["cached_tokens"]:
                        break
                    await asyncio.sleep(0.05)
        finally:
            app.state.scheduler.close()
        assert usages[0]["prompt_tokens_details"]["cached_tokens"] == 0
        second = usages[1]["prompt_tokens_details"]["cached_tokens"]
        assert (second >= 16 and second % 8 == 0) if want_cached else second == 0
        assert _counter(metrics) == second


def _counter(metrics: str) -> float:
    lines = [ln for ln in metrics.splitlines() if ln.startswith("agentkit_cached_prompt_tokens_total{")]  # by mode
    return sum(float(ln.split()[-1]) for ln in lines)
