"""JSON styles, number-slot digit caps, optional-property offering, BFCL's array enums, agentkit.toolcall."""

import json

import pytest

from agentkit.constrain.bfcl_dialect import normalize_function_schema
from agentkit.constrain.canonical import STYLES, canonical_json
from agentkit.constrain.compiler import NumberDigits, compile_schema_uncached
from agentkit.constrain.matcher import tree_matches
from agentkit.errors import UnsupportedSchemaError
from agentkit.toolcall import CallShape, call_template, parse_call

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "units": {"enum": ["metric", "imperial"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "loc": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"], "additionalProperties": False},
        "extra": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "const": {"const": {"a": [1, 2], "b": None}},
    },
    "required": ["city"],
    "additionalProperties": False,
}
VALUES = [
    {"city": "Paris"},
    {"city": "Oslo", "days": 3, "units": "metric"},
    {"city": "Rome", "tags": ["a", "b c"], "loc": {"lat": 41.9, "lon": 12.5}},
    {"city": "x", "extra": {"k": True, "j": False}, "const": {"a": [1, 2], "b": None}},
    {"city": "", "days": 14, "tags": [], "extra": {}},
]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_each_style_template_language_is_its_canonical_form(style):
    tpl = compile_schema_uncached(SCHEMA, style=style)
    assert tpl.meta["style"] == style
    for v in VALUES:
        text = canonical_json(v, SCHEMA, style)
        assert tpl.matches(text), text  # the tree walk
        assert tpl.root.to_regex() and tree_matches(tpl, text)
        for other in STYLES:
            if (other_text := canonical_json(v, SCHEMA, other)) != text:
                assert not tpl.matches(other_text), (other, other_text)
    assert not tpl.matches(canonical_json({"city": "Paris", "days": 15}, SCHEMA, style))


ORDERED = {
    "type": "object",
    "properties": {"unit": {"enum": ["C", "F"]}, "city": {"type": "string"}, "days": {"type": "integer"},
                   "when": {"type": "string"}},
    "required": ["days"],
    "allOf": [{"required": ["city"]}],
    "anyOf": [{"required": ["when"]}, {"properties": {"when": {"const": "now"}}}],
    "additionalProperties": False,
}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_required_members_come_first_in_the_named_styles(style):
    v = {"unit": "C", "city": "Oslo", "days": 2, "when": "now"}
    text = canonical_json(v, ORDERED, style)
    # "days" (required) and "city" (required through allOf) first; "when", required in one anyOf branch only, stays
    # with the optional members; each group in schema order
    order = ["city", "days", "unit", "when"] if STYLES[style].required_first else ["unit", "city", "days", "when"]
    assert list(json.loads(text)) == order
    tpl = compile_schema_uncached(ORDERED, style=style)
    assert tpl.matches(text)
    assert tpl.matches(canonical_json({"city": "x", "days": 1, "when": "later"}, ORDERED, style))
    assert not tpl.matches(json.dumps(dict(reversed(list(json.loads(text).items()))),
                                      separators=(STYLES[style].item_sep, STYLES[style].key_sep)))


def test_required_first_follows_refs():
    schema = {"$defs": {"base": {"required": ["b"]}}, "type": "object", "allOf": [{"$ref": "#/$defs/base"}],
              "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "additionalProperties": False}
    assert canonical_json({"a": 1, "b": 2}, schema, "spaced") == '{"b": 2, "a": 1}'
    assert canonical_json({"a": 1, "b": 2}, schema, "spaced-schema-order") == '{"a": 1, "b": 2}'
    assert compile_schema_uncached(schema, style="spaced").matches('{"b": 2, "a": 1}')

def test_spaced_style_is_json_dumps_default():
    v = {"city": "Oslo", "days": 3, "tags": ["a", "b"], "loc": {"lat": 1.5, "lon": -2.0}}
    assert canonical_json(v, SCHEMA, "spaced") == json.dumps(v)
    assert canonical_json(v, SCHEMA, "compact") == json.dumps(v, separators=(",", ":"))
    tpl = compile_schema_uncached(SCHEMA, style="spaced")
    assert tpl.matches(json.dumps(v)) and not tpl.matches(json.dumps(v, separators=(",", ":")))


def test_unknown_style_is_a_typed_error():
    with pytest.raises(UnsupportedSchemaError, match="unknown JSON style 'pretty'"):
        compile_schema_uncached(SCHEMA, style="pretty")


# -- number slots ---------------------------------------------------------------------------------------------------


def test_open_numbers_are_capped_by_default():
    ints, nums = compile_schema_uncached({"type": "integer"}), compile_schema_uncached({"type": "number"})
    assert ints.matches("9" * 20) and not ints.matches("9" * 21) and ints.matches("-" + "9" * 20)
    assert ints.matches("12345678901234567890")  # a 64-bit id copied from a prompt stays reachable
    assert nums.matches("1.12345678") and not nums.matches("1.123456789")
    assert not nums.matches("1.5000000000000002") and nums.matches("1.5")
    assert nums.matches("1.25e-05") and not nums.matches("1.123456789e-05")  # exponent mantissas too


def test_digit_caps_are_configurable_and_schema_bounds_win():
    free = compile_schema_uncached({"type": "integer"}, digits=None)
    assert free.matches("9" * 40)
    small = compile_schema_uncached({"type": "number"}, digits=NumberDigits(integer=3, fraction=2))
    assert small.matches("999.25") and not small.matches("1000") and not small.matches("0.125")
    big = compile_schema_uncached({"type": "integer", "minimum": 10 ** 24})
    assert big.matches(str(10 ** 24)) and big.matches("9" * 25)
    with pytest.raises(ValueError):
        NumberDigits(integer=0)


def test_integer_slots_write_digits_only():
    """An integer slot writes plain digits, never a float form, as the peers' integer grammars do: ``3.0`` let a
    model that started ``1.`` (meaning 1.2) only finish ``1.0`` (BFCL multiple_12), and large float forms such as
    ``77777777777777777777.0`` read back as a double that is not the integer written. Every integer stays
    reachable in digits, and the canonical form writes an integral float at an integer place as digits too."""
    for schema in ({"type": "integer"}, {"type": "integer", "multipleOf": 7}, {"type": "integer", "minimum": 0}):
        for digits in (NumberDigits(), None):
            tpl = compile_schema_uncached(schema, digits=digits)
            assert tpl.matches("7") and tpl.matches("7" * 20), schema
            for bad in ("7.0", "7" * 20 + ".0", "1e+16", "7.777777777777777e+19", str(2 ** 53) + ".0"):
                assert not tpl.matches(bad), (schema, bad)
            assert canonical_json(7.0, schema) == "7" and tpl.matches(canonical_json(7.0, schema))
    assert compile_schema_uncached({"type": "number"}).matches("7.5e+19")  # a number slot keeps its float forms
    number = {"type": "number"}
    assert compile_schema_uncached(number).matches("3.0") and canonical_json(3.0, number) == "3.0"
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}
    assert canonical_json(3.0, draft4) == "3.0" and not compile_schema_uncached(draft4).matches("3.0")  # invalid there


def test_multiple_of_never_forces_long_digit_runs():
    """A multiple can always be closed within a digit or two of any prefix, and its slot's token budget is the
    integer cap (digits are single tokens in the default model's tokenizer)."""
    for k in (5, 7, 12):
        tpl = compile_schema_uncached({"type": "integer", "multipleOf": k})
        assert tpl.matches(str(k * 123)) and not tpl.matches(str(k * 123 + 1))
        for prefix in ("1", "12348", "1234899999", "-99999999999999"):
            assert any(tpl.matches(prefix + str(d)) or tpl.matches(prefix + f"{d:02d}") for d in range(100))
        assert tpl.root.max_tokens == 1 + NumberDigits().integer


# -- optional properties --------------------------------------------------------------------------------------------


def test_optional_property_and_closing_are_offered_at_the_same_token(tiny):
    """After a required value, ``, "opt"`` and the object's close are both allowed next and nothing is pinned:
    the model's logits choose between them."""
    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9},
                                               "b": {"type": "boolean"}},
              "required": ["a"], "additionalProperties": False}
    for style in STYLES:
        tpl = compile_schema_uncached(schema, style=style)
        c = tiny.constraint(tpl)
        state = c.start()
        for t in tiny.tokenizer.encode('{"a"' + STYLES[style].key_sep + "5", add_special_tokens=False):
            state = c.advance(state, t)
            assert state is not None
        assert c.forced(state) == []
        allowed = {tiny.tokenizer.decode([i]) for i in c.allowed(state).nonzero().flatten().tolist()}
        assert any(a.startswith("}") for a in allowed), allowed
        assert any(a.startswith(",") for a in allowed), allowed


# -- BFCL dialect ---------------------------------------------------------------------------------------------------


def test_bfcl_enum_on_an_array_lists_its_items():
    params = {"type": "dict", "properties": {"amenities": {"type": "array", "items": {"type": "string"},
                                                           "enum": ["Wifi", "Pool", "Gym"]}},
              "required": ["amenities"]}
    schema = normalize_function_schema(params)
    assert schema["properties"]["amenities"] == {"type": "array", "items": {"type": "string",
                                                                            "enum": ["Wifi", "Pool", "Gym"]}}
    tpl = compile_schema_uncached(schema, style="spaced")
    assert tpl.matches('{"amenities": ["Pool", "Wifi"]}') and tpl.matches('{"amenities": []}')
    assert not tpl.matches('{"amenities": ["Sauna"]}')
    nested = normalize_function_schema({"type": "array", "items": {"enum": ["a", "b"]}, "enum": ["b", "c"]})
    assert nested["items"]["enum"] == ["b"]


# -- agentkit.toolcall ----------------------------------------------------------------------------------------------

TOOLS = [("get_weather", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
         ("get_time", {"type": "object", "properties": {"tz": {"type": "string"}}}),
         ("noop", None)]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_call_template_language_is_the_styled_call(style):
    st = STYLES[style]
    tpl = call_template(TOOLS, style=style)
    for call in [{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "get_time", "arguments": {}},
                 {"name": "noop", "arguments": {}}]:
        text = json.dumps(call, separators=(st.item_sep, st.key_sep))
        assert tpl.matches(text), text
        assert parse_call("Sure: " + text + " done") == (call["name"], call["arguments"])
    assert not tpl.matches(json.dumps({"name": "rm", "arguments": {}}, separators=(st.item_sep, st.key_sep)))
    assert not tpl.matches(json.dumps({"name": "noop", "arguments": {"x": 1}}, separators=(st.item_sep, st.key_sep)))


def test_call_template_shape_and_parser_keys():
    shape = CallShape(name_key="tool")
    tpl = call_template(TOOLS[:1], style="compact", shape=shape)
    assert tpl.matches('{"tool":"get_weather","arguments":{"city":"x"}}')
    assert parse_call("", {"tool": "get_weather", "arguments": '{"city": "x"}'}, shape=shape) == (
        "get_weather", {"city": "x"})
    assert parse_call("no call here") is None
    with pytest.raises(ValueError, match="duplicate"):
        call_template([TOOLS[2], TOOLS[2]])


def test_number_slots_may_end_a_fraction_with_zeros():
    """A fraction may end with zeros, as a prompt may spell it (BFCL multiple_5: ``1.8883340``, where a model that
    wanted to stop after the zero had to write another digit); the value is the canonical one's, so bounds hold,
    and the canonical form keeps none."""
    free = compile_schema_uncached({"type": "number"})
    for text in ("1.8883340", "1.5000", "-0.250", "3.0", "3.00", "12.0"):
        assert free.matches(text), text
    assert not free.matches("1.5" + "0" * 8) and not free.matches("15.")  # bounded, and never a bare point
    bounded = compile_schema_uncached({"type": "number", "minimum": 1.25, "exclusiveMaximum": 2.5})
    assert bounded.matches("1.250") and bounded.matches("2.4990") and not bounded.matches("2.50")
    assert not bounded.matches("1.240") and bounded.matches("2.0")
    assert canonical_json(1.50, {"type": "number"}) == "1.5"
    assert not compile_schema_uncached({"type": "integer"}).matches("15.0")


def test_exponent_forms_a_model_may_write_can_be_finished():
    """Once ``1e`` is allowed (tiny values), what the model meant must stay reachable: ``1e-9`` (repr: 1e-09; a
    model that wrote ``1e-9`` had to go on to ``1e-90``, BFCL simple_python_38), ``1e-3``, ``2.5e+6``, ``1e6``; a
    bounded slot keeps only values in range."""
    free = compile_schema_uncached({"type": "number"})
    for text in ("1e-9", "1e-09", "1e-3", "2.5e+6", "1e6", "1e+16", "-1e-9", "1.5e-05"):
        assert free.matches(text), text
    assert not free.matches("1e-0") and not free.matches("1e") and not free.matches("1e+400")
    bounded = compile_schema_uncached({"type": "number", "minimum": 0, "maximum": 1})
    assert bounded.matches("1e-9") and not bounded.matches("1e6") and not bounded.matches("5e-1")
    assert not compile_schema_uncached({"type": "integer"}).matches("1e6")
    for text in ("1e-9", "1e-3", "2.5e+6", "1e6"):
        assert json.loads(text) == float(text)


def test_a_literal_entered_inside_a_character_pins_its_remaining_bytes(tiny):
    """A token may take the first bytes of a pinned character (an emoji in an enum's one value): what is pinned
    next is the character's next byte, not a decode error."""
    tpl = compile_schema_uncached({"type": "string", "enum": ["ok 🙄 now"]})
    c = tiny.constraint(tpl)
    state = c.start()
    data = b'"ok ' + "🙄".encode()[:1]
    for b in data:
        state = c.advance(state, c.vocab.by_bytes[bytes([b])][0])
        assert state is not None
    forced = c.forced(state)
    assert forced and b"".join(c.vocab.token_bytes[t] for t in forced).startswith("🙄".encode()[1:])
