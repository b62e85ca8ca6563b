"""The clients people already use, against the server on the tiny model (a real uvicorn on a loopback port):
the ``openai`` client streaming, pydantic-ai (``OpenAIChatModel`` with ``base_url``) calling a tool and returning
a structured ``output_type``, instructor (``instructor.from_openai``) with a ``response_model``."""

from __future__ import annotations

import json
from typing import Annotated

import pytest
from agentkit.serving.app import create_app
from pydantic import BaseModel, Field

pytestmark = pytest.mark.usefixtures("one_thread")


class City(BaseModel):
    name: str = Field(max_length=10)
    population: int = Field(ge=0, le=999)


@pytest.fixture(scope="module")
def engine():
    from agentkit.engine import tiny_engine

    return tiny_engine(0)


@pytest.fixture(scope="module")
def base_url(engine, on_loopback):
    with on_loopback(create_app(engine)) as url:
        yield url + "/v1"


def test_openai_streams_content_deltas(base_url):
    """SSE yields a content chunk per committed token: >= 5 chunks for a 20-token reply, and they add up to the
    same text as the non-streamed answer."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="none", max_retries=0)
    kw = {"model": "agentkit", "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
          "max_tokens": 20, "extra_body": {"agentkit": {"mode": "ar"}}}
    whole = client.chat.completions.create(**kw)
    assert whole.usage.completion_tokens == 20  # the tiny model runs to max_tokens on this prompt
    chunks, finish = [], None
    for ch in client.chat.completions.create(stream=True, **kw):
        if ch.choices:
            if ch.choices[0].delta.content:
                chunks.append(ch.choices[0].delta.content)
            finish = ch.choices[0].finish_reason or finish
    assert len(chunks) >= 5 and "".join(chunks) == whole.choices[0].message.content and finish == "length"
    streamed = client.chat.completions.create(
        model="agentkit", messages=kw["messages"], max_tokens=48, stream=True,
        extra_body={"agentkit": {"canvas_length": 4, "canvas": False}},
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": City.model_json_schema()}})
    parts = [c.choices[0].delta.content for c in streamed if c.choices and c.choices[0].delta.content]
    assert len(parts) >= 2  # diffusion: a delta per committed block
    City.model_validate_json("".join(parts))


def test_pydantic_ai_tool_call_and_structured_output(base_url):
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("agentkit", provider=OpenAIProvider(base_url=base_url, api_key="none"))
    calls: list[dict] = []

    def record_city(name: Annotated[str, Field(max_length=10)], population: Annotated[int, Field(ge=0, le=999)]
                    ) -> City:
        """Record a city.

        Args:
            name: the city's name (at most 10 characters)
            population: thousands of inhabitants, 0-999
        """
        calls.append({"name": name, "population": population})
        return City(name=name[:10], population=max(0, min(999, population)))

    # an output function: the model's tool call runs it, its return value is the output
    agent = Agent(model, output_type=record_city, model_settings={"max_tokens": 160})
    result = agent.run_sync("Tell me about Paris.")
    assert len(calls) == 1 and isinstance(result.output, City)
    sent = [p for m in result.all_messages() for p in getattr(m, "parts", []) if p.part_kind == "tool-call"]
    # the function ran on the first call's arguments (parallel_tool_calls is on: the tiny model may write more)
    assert sent and json.loads(sent[0].args) == calls[0]
    one = Agent(model, output_type=record_city, model_settings={"max_tokens": 160, "parallel_tool_calls": False})
    sent = [p for m in one.run_sync("Tell me about Paris.").all_messages() for p in getattr(m, "parts", [])
            if p.part_kind == "tool-call"]
    assert len(sent) == 1  # pydantic-ai's parallel_tool_calls=False reaches the server: one call
    structured = Agent(model, output_type=City, model_settings={"max_tokens": 160}).run_sync("Paris?")
    assert isinstance(structured.output, City) and len(structured.output.name) <= 10


def test_instructor_response_model(base_url):
    import instructor
    import openai

    client = instructor.from_openai(openai.OpenAI(base_url=base_url, api_key="none", max_retries=0))
    city = client.chat.completions.create(model="agentkit", response_model=City, max_tokens=160, max_retries=0,
                                          messages=[{"role": "user", "content": "Paris?"}])
    assert isinstance(city, City) and 0 <= city.population <= 999
    json.dumps(city.model_dump())


def test_openai_completions_and_responses(base_url):
    """The openai client's completions and Responses calls, plain, streamed and parsed (issue 35 item 5)."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="none", max_retries=0)
    whole = client.completions.create(model="agentkit", prompt="Once upon a time", max_tokens=8)
    assert whole.usage.completion_tokens == 8 and whole.choices[0].finish_reason == "length"
    parts = [c.choices[0].text for c in client.completions.create(model="agentkit", prompt="Once upon a time",
                                                                   max_tokens=8, stream=True) if c.choices]
    assert "".join(parts) == whole.choices[0].text
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="gpt-4o", prompt="x", max_tokens=1)

    tool = {"type": "function", "name": "record_city", "description": "Record a city.", "strict": True,
            "parameters": City.model_json_schema() | {"additionalProperties": False}}
    r = client.responses.create(model="agentkit", input="Tell me about Paris.", tools=[tool], tool_choice="required",
                                max_output_tokens=160)
    (call,) = r.output
    assert call.type == "function_call" and call.name == "record_city"
    City.model_validate_json(call.arguments)
    parsed = client.responses.parse(model="agentkit", input="Paris?", text_format=City, max_output_tokens=160)
    assert isinstance(parsed.output_parsed, City)
    # cut at max_output_tokens: the stream ends with response.incomplete, as OpenAI's (the SDK's stream() helper
    # waits for response.completed only, so the events are read as they come)
    events = list(client.responses.create(model="agentkit", input="Paris?", max_output_tokens=12, stream=True))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    final = events[-1]
    assert final.type == "response.incomplete" and final.response.incomplete_details.reason == "max_output_tokens"
    assert deltas and "".join(deltas) == final.response.output_text and final.response.usage.output_tokens == 12


def test_pydantic_ai_responses_model(base_url):
    """pydantic-ai's ``OpenAIResponsesModel`` against the server: an output function called as a tool, a
    structured ``output_type`` and ``run_stream``."""
    import asyncio

    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIResponsesModel("agentkit", provider=OpenAIProvider(base_url=base_url, api_key="none"))
    calls: list[dict] = []

    def record_city(name: Annotated[str, Field(max_length=10)], population: Annotated[int, Field(ge=0, le=999)]
                    ) -> City:
        """Record a city."""
        calls.append({"name": name, "population": population})
        return City(name=name[:10], population=max(0, min(999, population)))

    result = Agent(model, output_type=record_city, model_settings={"max_tokens": 160}).run_sync("Paris?")
    assert len(calls) == 1 and isinstance(result.output, City)
    structured = Agent(model, output_type=City, model_settings={"max_tokens": 160}).run_sync("Paris?")
    assert isinstance(structured.output, City)

    async def stream() -> tuple[list[str], str]:
        async with Agent(model, model_settings={"max_tokens": 12}).run_stream("Hello") as run:
            parts = [t async for t in run.stream_text(delta=True, debounce_by=None)]
            return parts, await run.get_output()

    parts, text = asyncio.run(stream())
    assert len(parts) >= 2 and "".join(parts) == text
