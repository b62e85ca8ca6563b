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


PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": ["string", "null"]},
                                           "age": {"type": ["integer", "null"]}}, "required": ["name"]}
TEXTS = ["Met Ana Silva from Porto at the fair; she is 41.", "Tom, 29, lives in Leeds.",
         "Call Rui Costa tomorrow about the 12 boxes."]


@pytest.mark.parametrize("grounded", [None, False])
def test_extract_in_process_and_over_http_agree(app, grounded):
    """``extract`` with a server's URL as its model: the HTTP backend sends the text its values come from
    (``agentkit.grounded_in``) and the call's grounding option, so the server grounds the template in it and settles
    the output as ``extract`` does in process. Before, the server compiled the bare schema: no value was grounded."""
    from agentkit.sdk import extract

    engine, asgi = app
    remote = HTTPGenerator("http://test", transport=httpx.ASGITransport(app=asgi))
    body = remote.request_body([], DecodeConfig(), _template(TEXTS[0], grounded))
    assert body["agentkit"]["grounded_in"] == TEXTS[0] and body["agentkit"].get("grounded") == grounded
    for text in TEXTS:
        kw = {"mode": "ar", "decode": DecodeConfig(max_new_tokens=48, copy_first_digit=True), "grounded": grounded}
        assert extract(PERSON, text, model=remote, **kw) == extract(PERSON, text, model=engine, **kw), text


def _template(text, grounded):
    from agentkit.steps.grounded import GroundedOutput

    return GroundedOutput(PERSON, text, grounded).template(None, True)
