"""A replica's health check asks its own app with a Host the app serves: ``agentkit serve --ray`` on the default
loopback bind allows only localhost and the loopback addresses, and a health check with any other Host got 403, so
Serve never saw a healthy replica and the deployment failed."""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("ray")

from agentkit.serving.app import create_app
from agentkit.serving.config import ServerConfig
from agentkit.serving.connections import loopback_hosts
from agentkit.serving.ray_serve import health_host

from agentkit.engine import tiny_engine


def test_health_host_is_one_the_server_allows():
    assert health_host(None) == "replica"
    assert health_host(("*",)) == "replica"
    assert health_host(("*.example.com", "other.org")) == "replica.example.com"
    assert health_host(("::1",)) == "[::1]"
    assert health_host(loopback_hosts("127.0.0.1")) == "localhost"


async def test_the_loopback_default_answers_the_health_check():
    app = create_app(tiny_engine(0), ServerConfig(allowed_hosts=loopback_hosts("127.0.0.1")))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://{health_host(loopback_hosts('127.0.0.1'))}") as c:
        assert (await c.get("/health")).status_code == 200
    async with httpx.AsyncClient(transport=transport, base_url="http://replica") as c:
        assert (await c.get("/health")).status_code == 403
