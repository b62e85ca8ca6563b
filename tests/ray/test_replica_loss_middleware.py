"""The proxy middleware that turns a proxy-made failure into a 503 with Retry-After (no Ray needed)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("ray")

from agentkit.serving.ray_serve import REPLICA_HEADER, ReplicaLossMiddleware


def _run(status: int | None, replica: bool) -> list[dict]:
    async def app(scope, receive, send):
        if status is None:
            raise ConnectionError("replica died")
        headers = [(REPLICA_HEADER.encode(), b"r1")] if replica else []
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"x"})

    sent: list[dict] = []

    async def send(msg):
        sent.append(msg)

    asyncio.run(ReplicaLossMiddleware(app)({"type": "http"}, None, send))
    return sent


@pytest.mark.parametrize("status", [500, 502, 503, 408, None])
def test_a_proxy_made_failure_becomes_503_with_retry_after(status):
    start = _run(status, replica=False)[0]
    assert start["status"] == 503
    assert (b"retry-after", b"1") in start["headers"]


@pytest.mark.parametrize("status", [200, 408, 429, 500, 504])
def test_a_replica_response_passes_unchanged(status):
    sent = _run(status, replica=True)
    assert sent[0]["status"] == status and sent[1]["body"] == b"x"


def test_a_proxy_made_client_error_passes():
    assert _run(404, replica=False)[0]["status"] == 404
