"""The same agent in-process and over HTTP (the server on the same tiny engine) writes the same outputs: the HTTP
body carries every decoding setting and the JSON style, so the server decodes what the SDK would."""

import httpx
import pytest
from pydantic import BaseModel, Field

from agentkit.config import DecodeConfig
from agentkit.errors import UnexpectedModelBehavior
from agentkit.sdk import Agent
from agentkit.sdk._http import HTTPGenerator

pytest.importorskip("fastapi")
pytestmark = pytest.mark.usefixtures("one_thread")


class Trip(BaseModel):
    city: str = Field(max_length=10)
    days: int = Field(ge=0, le=99)


@pytest.fixture(scope="module")
def app():
    from agentkit.serving.app import create_app

    from agentkit.engine import tiny_engine

    engine = tiny_engine(0)
    app = create_app(engine, max_batch=1)
    yield engine, app
    app.state.scheduler.close()


@pytest.mark.parametrize("settings", [{}, {"json_style": "spaced", "greedy": "token", "copy_bias": 0.0},
                                      {"copy_from": "prompt", "copy_numbers": False, "mode": "verify"}])
def test_in_process_and_http_agents_agree(app, settings):
    engine, asgi = app
    decode = DecodeConfig(max_new_tokens=48, canvas_length=8)
    local = Agent(engine, output_type=Trip, decode=decode, model_settings=settings, output_retries=0)
    remote = Agent(HTTPGenerator("http://test", transport=httpx.ASGITransport(app=asgi)), output_type=Trip,
                   decode=decode, model_settings=settings, output_retries=0)
    task = "Plan 3 days in Lisbon."
    outs = []
    for agent in (local, remote):
        try:
            result = agent.run_sync(task)
            outs.append(("ok", result.all_messages()[-1].parts[0].content))
        except UnexpectedModelBehavior as e:  # a random model may write an invalid value: then both alike
            outs.append(("unusable", str(e)))
    assert outs[0] == outs[1], outs
