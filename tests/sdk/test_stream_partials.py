"""Streaming (issue 35 item 7): structured partials that never go backwards and fill nested objects as they come,
and ``run_stream`` over HTTP (``HTTPGenerator`` reads the server's SSE)."""

from __future__ import annotations

import httpx
import pytest
from pydantic import BaseModel

from agentkit.sdk import Agent
from agentkit.sdk._http import HTTPGenerator
from agentkit.sdk._stream import _PartialValidator


class Person(BaseModel):
    name: str
    age: int


class Meeting(BaseModel):
    title: str
    organizer: Person
    attendees: list[Person]
    population_millions: float


def test_partials_never_go_backwards_and_nested_objects_fill():
    v = _PartialValidator(Meeting)
    head = '{"title": "Sync", "organizer": {"name": "Ana"'
    got = v(head)
    assert got.title == "Sync" and got.organizer.name == "Ana" and got.organizer.age is None  # nested, partial
    got = v(head + ', "age": 31}, "attendees": [{"name": "Bo"}, {"name": "Cy"')
    assert [a.name for a in got.attendees] == ["Bo", "Cy"]
    full = head + ', "age": 31}, "attendees": [{"name": "Bo"}], "population_millions": 2.0'
    assert v(full).population_millions == 2.0
    assert v(full[:-2]).population_millions == 2.0  # "2." does not parse: the field keeps 2.0, not None
    assert [a.name for a in v(full[:-2]).attendees] == ["Bo", "Cy"]  # a shorter draft list keeps the items seen
    assert v(full[:-1] + "1").population_millions == 2.1  # a changed value replaces it
    w = _PartialValidator(Meeting)
    assert w('{"title": "Lisbon"').title == "Lisbon"
    assert w('{"title": "Lis"').title == "Lisbon"  # a shorter prefix of the same string: kept
    assert w('{"title": "London"').title == "Lisbon"  # a rewrite waits for the final output
    assert w('{"title": "Lisbon office"').title == "Lisbon office"  # an extension replaces it


@pytest.fixture(scope="module")
def app():
    from agentkit.serving.app import create_app

    from agentkit.engine import tiny_engine

    return create_app(tiny_engine(0))


async def test_run_stream_over_http_streams_the_servers_sse(app, one_thread):
    bodies: list[dict] = []

    async def record(request: httpx.Request) -> None:
        import json

        bodies.append(json.loads(request.content))

    transport = httpx.ASGITransport(app=app)
    gen = HTTPGenerator("http://t", transport=transport)
    gen._http().event_hooks["request"].append(record)
    agent = Agent(gen, model_settings={"max_tokens": 12})
    async with agent.run_stream("Hello") as run:
        parts = [t async for t in run.stream_text(delta=True)]
        output = await run.get_output()
    assert len(parts) >= 2 and "".join(parts) == output  # deltas as the server streamed them
    assert bodies[-1]["stream"] is True
    plain = await agent.run("Hello")  # not streamed: one plain request, the same text
    assert plain.output == output and "stream" not in bodies[-1]
    assert plain.trace[-1].output_tokens == run.result.trace[-1].output_tokens == 12
