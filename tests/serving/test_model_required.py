"""A request without ``model`` is a 400 naming it, as OpenAI answers (chat, completions, responses)."""

from __future__ import annotations

import httpx
import pytest
from agentkit.serving.app import create_app


@pytest.fixture(scope="module")
def app():
    from agentkit.constrain.compiler import compile_schema
    from agentkit.engine import tiny_engine

    return create_app(tiny_engine(0), compile_schema=compile_schema)


@pytest.mark.parametrize("route, body", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2}),
    ("/v1/responses", {"input": "hi", "max_output_tokens": 2}),
])
async def test_a_request_without_model_is_a_400_naming_it(app, route, body):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=30) as c:
        r = await c.post(route, json=body)
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["param"] == "model" and err["type"] == "invalid_request_error"
        ok = await c.post(route, json={"model": "agentkit", **body})
        assert ok.status_code == 200, ok.text
