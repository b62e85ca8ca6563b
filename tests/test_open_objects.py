"""``open_objects`` (agentkit/settings.py): object schemas that list properties and say nothing of
additionalProperties generate closed by default, in the SDK and the server alike; True opens them."""

from __future__ import annotations

import pytest
from agentkit.serving.plan import plan_request
from agentkit.serving.protocol import ChatRequest

from agentkit.constrain.matcher import tree_matches
from agentkit.sdk import Agent, FunctionModel, tool

OPEN_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
EXTRA = '{"name": "Ann", "x": 1}'


@pytest.mark.parametrize("open_objects", [False, True])
async def test_sdk_extract_template_is_closed_unless_open_objects(open_objects):
    seen = []

    def fn(messages, info):
        seen.append(info.template)
        return {"name": "Ann"}

    settings = {"open_objects": True} if open_objects else None
    await Agent(FunctionModel(fn), output_type=OPEN_SCHEMA, model_settings=settings).run("Ann")
    template = seen[-1]  # the matcher walks the tree (an open object's regex is too big to build)
    assert tree_matches(template, '{"name": "Ann"}')
    assert tree_matches(template, EXTRA) is open_objects


@tool
def greet(person: dict) -> str:
    """Greet a person."""
    return "hi"


@pytest.mark.parametrize("open_objects", [False, True])
def test_server_schema_jobs_are_closed_unless_open_objects(open_objects):
    ext = {"open_objects": True} if open_objects else {}
    msgs = [{"role": "user", "content": "hi"}]
    rf = {"type": "json_schema", "json_schema": {"name": "p", "schema": OPEN_SCHEMA}}  # no "strict"
    plan = plan_request(ChatRequest.model_validate({"model": "m", "messages": msgs,
                                                   "response_format": rf, "agentkit": ext}))
    assert plan.schema.strict is not open_objects
    tools = [{"type": "function", "function": {"name": "f", "parameters": OPEN_SCHEMA}}]
    plan = plan_request(ChatRequest.model_validate({"model": "m", "messages": msgs,
                                                   "tools": tools, "tool_choice": "required",
                                                   "agentkit": ext}))
    assert plan.schema.strict is not open_objects
    strict = {"type": "json_schema", "json_schema": {"name": "p", "schema": OPEN_SCHEMA, "strict": True}}
    plan = plan_request(ChatRequest.model_validate({"model": "m", "messages": msgs,
                                                   "response_format": strict, "agentkit": ext}))
    assert plan.schema.strict  # a strict request stays closed
