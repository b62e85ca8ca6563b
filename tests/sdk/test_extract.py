import pytest
from pydantic import BaseModel, Field

from agentkit.errors import UnexpectedModelBehavior, UserError
from agentkit.sdk import FunctionModel, RoutingPolicy, TestModel, aextract, extract


class Invoice(BaseModel):
    number: str
    total: float = Field(ge=0)


SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"], "additionalProperties": False}


def script(*outputs):
    it = iter(outputs)
    return FunctionModel(lambda messages, info: next(it))


async def test_aextract_returns_validated_instance_and_sends_schema_prompt():
    model = script({"number": "A-7", "total": 12.5})
    invoice = await aextract(Invoice, "Invoice A-7, total 12.50 EUR", model=model)
    assert invoice == Invoice(number="A-7", total=12.5)
    info = model.calls[0]
    assert (info.step, info.mode) == ("extract", RoutingPolicy().extract)  # the calibrated default
    assert info.template.schema == Invoice.model_json_schema()


async def test_extract_prompt_messages():
    seen = []
    model = FunctionModel(lambda messages, info: seen.append(messages) or {"name": "Ann", "age": 3})
    await aextract(SCHEMA, "Ann is 3.", model=model, instructions="Be exact.")
    assert seen[0] == [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": 'Ann is 3.\n\nAnswer with JSON matching this schema: {"type":"object",'
                                    '"properties":{"name":{"type":"string"},"age":{"type":"integer"}},'
                                    '"required":["name","age"],"additionalProperties":false}'},
    ]  # no "minimum": the template enforces it, and a small model copied bounds as values


def test_the_prompts_schema_drops_numeric_bounds_and_nothing_else():
    from agentkit.steps.kinds import prompt_schema

    schema = {"type": "object", "$defs": {"N": {"type": "number", "exclusiveMaximum": 9.5, "description": "n"}},
              "properties": {"maximum": {"type": "integer", "minimum": 1, "maximum": 50},  # a field named so
                             "tags": {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 3},
                             "n": {"$ref": "#/$defs/N"}, "k": {"const": {"minimum": 2}, "enum": [{"maximum": 1}]},
                             "s": {"type": "string", "maxLength": 20, "pattern": "^a"}},
              "required": ["maximum"]}
    assert prompt_schema(schema) == {
        "type": "object", "$defs": {"N": {"type": "number", "description": "n"}},
        "properties": {"maximum": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "integer"},
                                                                "maxItems": 3},
                       "n": {"$ref": "#/$defs/N"}, "k": {"const": {"minimum": 2}, "enum": [{"maximum": 1}]},
                       "s": {"type": "string", "maxLength": 20, "pattern": "^a"}},
        "required": ["maximum"]}


async def test_aextract_dict_schema_returns_dict_validated_with_jsonschema():
    assert await aextract(SCHEMA, "Ann is 3.", model=script('{"name":"Ann","age":3}')) == {"name": "Ann", "age": 3}


async def test_invalid_output_is_asked_again_then_accepted():
    outputs = iter([{"name": "Ann", "age": -1}, {"name": "Ann", "age": 3}])
    sent = []
    model = FunctionModel(lambda messages, info: sent.append(messages) or next(outputs))
    assert await aextract(SCHEMA, "Ann is 3.", model=model, retries=1) == {"name": "Ann", "age": 3}
    assert sent[1][-2] == {"role": "assistant", "content": '{"name":"Ann","age":-1}'}
    assert sent[1][-1]["content"].startswith(
        "That answer was not usable: /age: -1 is less than the minimum of 0. Answer again.\n\nAnswer with JSON")


async def test_invalid_output_after_retries_raises_typed_error_with_trace():
    model = script({"number": "A-7", "total": -1}, "not json at all")
    with pytest.raises(UnexpectedModelBehavior) as exc:
        await aextract(Invoice, "Invoice A-7", model=model, retries=1, mode="ar")
    assert str(exc.value).startswith("extract output unusable 2 time(s) in a row (output_retries=1); last error: "
                                     "output is not JSON")
    assert [(r.step, r.mode) for r in exc.value.trace] == [("extract", "ar"), ("extract", "ar")]
    assert exc.value.trace[0].error == "total: Input should be greater than or equal to 0"


def test_extract_sync_with_test_model():
    assert extract(Invoice, "anything", model=TestModel()) == Invoice(number="a", total=0.0)
    assert extract(SCHEMA, "anything", model=TestModel(output_value={"name": "Bo", "age": 1})) == {
        "name": "Bo", "age": 1}


def test_extract_rejects_bad_input():
    with pytest.raises(UserError, match="non-empty string"):
        extract(Invoice, "  ", model=TestModel())
    with pytest.raises(UserError, match="output_type must be a JSON Schema dict or a type pydantic can validate"):
        extract(42, "text", model=TestModel())


def test_extract_any_type_pydantic_validates():
    """Scalars, lists, unions, Literal, TypedDict and dataclasses: a non-object type is asked for as
    {"response": ...} and unwrapped (pydantic-ai's convention); the output is an instance of the type."""
    import dataclasses
    from typing import Literal

    from typing_extensions import TypedDict

    class Movie(TypedDict):
        title: str
        year: int

    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    def answer(value):
        return FunctionModel(lambda m, info: value)

    assert extract(int, "Maria is 41.", model=answer({"response": 41})) == 41
    assert extract(list[str], "a, b", model=answer({"response": ["a", "b"]})) == ["a", "b"]
    assert extract(int | str, "x", model=answer({"response": "x"})) == "x"
    assert extract(Literal["yes", "no"], "no", model=answer({"response": "no"})) == "no"
    assert extract(Movie, "Heat (1995)", model=answer({"title": "Heat", "year": 1995})) == {"title": "Heat",
                                                                                           "year": 1995}
    assert extract(Point, "(1, 2)", model=answer({"x": 1, "y": 2})) == Point(1, 2)
    with pytest.raises(UnexpectedModelBehavior, match="expected"):
        extract(int, "x", model=answer({"value": 3}), retries=0)


async def test_per_run_output_type_overrides_the_agents():
    from agentkit.sdk import Agent

    agent = Agent(FunctionModel(lambda m, info: {"response": [1, 2]} if "response" in str(info.schema) else
                                {"number": "7", "total": 1.0}), output_type=Invoice)
    assert (await agent.run("x", output_type=list[int])).output == [1, 2]
    assert isinstance((await agent.run("x")).output, Invoice)


def test_grounded_counts_the_values_the_text_states():
    from agentkit.sdk._extract import values_in_text as grounded

    text = "Ann Lee paid $1,200 in Oslo."
    assert grounded({"name": "ann lee", "amount": 1200, "city": "Oslo", "tags": ["Oslo"], "ok": True}, text) == (4, 4)
    assert grounded({"name": "Bob", "amount": 12, "nested": {"city": "oslo"}}, text) == (1, 3)


async def test_fallback_mode_decodes_again_when_a_value_is_not_in_the_text():
    answers = {"ar": {"name": "Ann", "age": 22}, "diffusion": {"name": "Ann", "age": 41}}
    model = FunctionModel(lambda messages, info: answers[info.mode])
    out, usage = await aextract(SCHEMA, "Ann is 41.", model=model, mode="ar", fallback_mode="diffusion",
                                return_usage=True)
    assert out == {"name": "Ann", "age": 41} and [c.mode for c in model.calls] == ["ar", "diffusion"]
    assert usage.requests == 2
    model = FunctionModel(lambda messages, info: answers[info.mode])
    assert await aextract(SCHEMA, "Ann is 22.", model=model, mode="ar", fallback_mode="diffusion") == answers["ar"]
    assert [c.mode for c in model.calls] == ["ar"]  # every value in the text: no second decode


async def test_extract_copies_from_the_text_with_the_number_prior_from_its_first_digit():
    model = script({"name": "Ann", "age": 3})
    await aextract(SCHEMA, "Ann is 3.", model=model)
    config = model.calls[0].config
    assert config.copy_source == "Ann is 3." and config.copy_first_digit


async def test_an_agents_output_step_copies_from_the_prompt_as_extract_does():
    """An Agent with an output type decodes its output step with extract's copy settings: values copied from the
    user's prompt (and any tool results' values), numbers from their first digit. The step's own message holds
    the schema, whose words are not a source (``day='Weekday of the Meeting'`` came from a description)."""
    from agentkit.sdk import Agent

    model = script({"number": "A-7", "total": 12.5})
    await Agent(model, output_type=Invoice).run("Invoice A-7, total 12.50 EUR")
    info = model.calls[0]
    assert info.step == "extract"
    assert (info.config.copy_source, info.config.copy_first_digit) == ("Invoice A-7, total 12.50 EUR", True)


class Booking(BaseModel):
    guest: str
    nights: int
    phone: str = Field(description="the guest's phone")
    note: str | None = Field(None, json_schema_extra={"grounded": False})
    city: str | None = None


async def test_extract_grounds_by_default_with_per_call_and_per_field_overrides():
    from agentkit.constrain.nodes import slots as template_slots

    text = "Room for Eero Väänänen, 3 nights, from Turku."
    model = script({"guest": "Eero Väänänen", "nights": 3, "phone": "123", "note": None, "city": "Turku"})
    out, usage = await aextract(Booking, text, model=model, return_usage=True)
    assert out.city == "Turku" and usage.ungrounded == ["phone"]  # no phone in the text: flagged
    meta = model.calls[0].template.meta
    assert meta["grounded"] == {"/city": "string", "/guest": "string", "/nights": "number"}  # note: its own "off"
    assert meta["grounded_schema"]["properties"]["nights"]["enum"] == [3]
    slots = {s.name: s for s in template_slots(model.calls[0].template.root)}
    assert "123-456-7890" in slots["/phone"].exclude and "Phone" in slots["/phone"].exclude  # ungrounded: no stock
    assert slots["/guest"].source is not None and slots["/guest"].exclude == ("nights",)  # a span: no field name
    off = script({"guest": "Eero", "nights": 4, "phone": "1", "note": None, "city": None})
    _, usage = await aextract(Booking, text, model=off, grounded=False, return_usage=True)
    assert off.calls[0].template.meta["grounded"] == {} and usage.ungrounded == []
    with pytest.raises(UserError, match="grounded"):
        await aextract(Booking, text, model=off, grounded="yes")
