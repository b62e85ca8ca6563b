"""The server's response_format writes what ``extract`` writes: the same prompt, JSON style, copy source and
number prior, the same settling against the text, so the same schema and text give the same values (tiny random
model, greedy)."""

from __future__ import annotations

import json

import httpx
import pytest
from agentkit.serving.app import create_app
from agentkit.serving.plan import plan_request
from agentkit.serving.protocol import ChatRequest

from agentkit.constrain.canonical import json_style
from agentkit.sdk import extract
from agentkit.sdk._extract import extract_messages
from agentkit.steps import kinds as steps

pytestmark = pytest.mark.usefixtures("one_thread")

CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
                                         "population": {"type": "integer"},
                                         "districts": {"type": "array", "items": {"type": "string", "maxLength": 8}}},
        "required": ["city", "population", "districts"]}
TEXTS = ["Paris has about 2100000 inhabitants. Extract it.", "Oslo: 709,037 people in 15 districts."]


def _body(text: str, schema: dict = CITY, **ext) -> dict:
    return {"model": "agentkit", "messages": [{"role": "user", "content": text}], "max_tokens": 64,
            "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema, "strict": True}},
            "agentkit": {"mode": "ar", **ext}}


def test_plan_writes_extracts_messages_copy_source_and_number_prior():
    plan = plan_request(ChatRequest.model_validate(_body(TEXTS[0])))
    assert plan.messages == extract_messages(CITY, TEXTS[0])
    assert plan.config.copy_source == TEXTS[0] and plan.config.copy_first_digit
    assert json_style(plan.schema.style).name == steps.EXTRACT_STYLE  # extract's JSON style
    assert plan.schema.schema["properties"]["districts"]["maxItems"] == 16  # and its array cap
    as_sent = plan_request(ChatRequest.model_validate(_body(TEXTS[0], schema_prompt=False)))
    assert as_sent.messages == [{"role": "user", "content": TEXTS[0]}] and as_sent.config.copy_source is None
    obj = plan_request(ChatRequest.model_validate({"model": "agentkit", "messages": [{"role": "user", "content": "Ann, 3"}],
                                                   "response_format": {"type": "json_object"}}))
    assert obj.messages[-1]["content"].startswith("Ann, 3\n\nAnswer with one JSON object")


PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": ["string", "null"]},
                                           "age": {"type": ["integer", "null"]},
                                           "email": {"type": ["string", "null"]}}, "required": ["name"]}
PEOPLE = ["Met Ana Silva from Porto at the fair; she is 41 and wrote from ana@silva.pt.",
          "Tom, 29, lives in Leeds.", "Call Rui Costa tomorrow about the 12 boxes."]


@pytest.mark.parametrize("settle", [True, False])
async def test_server_json_schema_gives_extracts_values(monkeypatch, settle):
    """The same grounded template and decode, and with settling on (the default) the same settling of its output
    (the model's scores over the decoded output, agentkit.steps.grounded.settle); each response says which fields
    settling changed. Settling changes some field of these texts on this model, so its part is exercised."""
    from agentkit.engine import tiny_engine
    from agentkit.steps import grounded

    monkeypatch.setattr(grounded, "SETTLE", settle)
    engine = tiny_engine(2)
    take, took = engine.kept.take, []
    monkeypatch.setattr(engine.kept, "take", lambda prompt: took.append(take(prompt)) or took[-1])
    app = create_app(engine)  # decodes batched (max_batch 8): each request at a seat
    changed, read = [], []
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=60) as c:
            for schema, text in [(CITY, t) for t in TEXTS] + [(PERSON, t) for t in PEOPLE]:
                took.clear()
                r = await c.post("/v1/chat/completions", json=_body(text, schema=schema))
                assert r.status_code == 200, r.text
                read.append(any(took))
                body = r.json()
                served = json.loads(body["choices"][0]["message"]["content"])
                assert served == await _extract(engine, text, schema)
                stats = body["agentkit_stats"]
                assert ("settled" in stats) == settle
                changed += stats.get("settled", [])
                assert engine.tokenizer.decode(stats["token_ids"]) == body["choices"][0]["message"]["content"]
    finally:
        app.state.scheduler.close()
    assert bool(changed) == settle
    assert any(read) == settle  # the server's settling read its decode's keys and values, batched as it was
    assert not engine.kept  # no decode's cache is held after a request


def test_grounded_in_grounds_messages_sent_as_they_are():
    """``agentkit.grounded_in`` (the SDK's HTTP backend sends extract's text in it): the messages go as sent, the
    values are grounded in that text and settled; without a response schema it is a 400 naming it."""
    from agentkit.serving.errors import APIError

    plan = plan_request(ChatRequest.model_validate(_body("the step's own prompt", schema_prompt=False,
                                                         grounded_in=TEXTS[1])))
    assert plan.messages == [{"role": "user", "content": "the step's own prompt"}]
    assert plan.schema.source == TEXTS[1] and plan.settle and plan.config.copy_source == TEXTS[1]
    bare = {"model": "agentkit", "messages": [{"role": "user", "content": "hi"}], "agentkit": {"grounded_in": "x"}}
    with pytest.raises(APIError) as e:
        plan_request(ChatRequest.model_validate(bare))
    assert e.value.status == 400 and e.value.param == "agentkit.grounded_in"


def test_settling_is_planned_only_for_whole_grounded_responses():
    """A stream (sent as it was written), a request for logprobs (they describe the decoded tokens), grounding
    turned off, and the messages as sent (no source text) are not settled."""
    assert plan_request(ChatRequest.model_validate(_body(TEXTS[0]))).settle
    assert plan_request(ChatRequest.model_validate(_body(TEXTS[0]))).config.keep_cache
    for body in (dict(_body(TEXTS[0]), stream=True), dict(_body(TEXTS[0]), logprobs=True),
                 _body(TEXTS[0], grounded=False), _body(TEXTS[0], schema_prompt=False)):
        plan = plan_request(ChatRequest.model_validate(body))
        assert not plan.settle and not plan.config.keep_cache


async def _extract(engine, text, schema):
    import asyncio

    from agentkit.config import DecodeConfig

    # extract's own defaults, with the server's token budget; run off the event loop as a user would
    return await asyncio.to_thread(extract, schema, text, model=engine, mode="ar",
                                   decode=DecodeConfig(max_new_tokens=64, copy_first_digit=True))


async def test_a_settled_output_that_does_not_validate_is_not_sent(monkeypatch, caplog):
    """Settling chooses among the template's own values, so its output validates; were it not to, the decoded
    output is sent, with a warning, and no field is reported settled."""
    from agentkit.engine import tiny_engine
    from agentkit.steps import grounded

    monkeypatch.setattr(grounded, "settle", lambda engine, messages, value, spec, slot=None: (
        {**value, "name": 5}, {}))
    app = create_app(tiny_engine(2))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=60) as c:
            r = await c.post("/v1/chat/completions", json=_body(PEOPLE[1], schema=PERSON))
    finally:
        app.state.scheduler.close()
    assert r.status_code == 200, r.text
    assert isinstance(json.loads(r.json()["choices"][0]["message"]["content"])["name"], str)
    assert r.json()["agentkit_stats"]["settled"] == []
    assert "does not validate" in caplog.text
