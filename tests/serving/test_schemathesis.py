"""Property-based fuzz of the server from its own OpenAPI schema (schemathesis), bounded in examples and time:
whatever the body, the server answers without a 5xx, and every error is OpenAI's error object."""

from __future__ import annotations

import contextlib

import pytest
import schemathesis
from agentkit.serving.app import create_app
from hypothesis import HealthCheck, settings

pytestmark = pytest.mark.usefixtures("one_thread")


def _app():
    from agentkit.engine import tiny_engine

    app = create_app(tiny_engine(0), request_timeout_s=10)

    @contextlib.asynccontextmanager
    async def keep_open(app):  # schemathesis' test client runs the lifespan around every call
        yield

    app.router.lifespan_context = keep_open
    return app


APP = _app()
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.include(path_regex="^/(v1|health)").parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_5xx_and_one_error_shape(case):
    if case.path == "/v1/chat/completions" and isinstance(case.body, dict):
        case.body["max_tokens"] = 4  # keep every accepted request short on the random model
    r = case.call()
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        err = r.json()["error"]
        assert isinstance(err["message"], str) and err["type"]
