"""JSON Schema → template compiler: languages (valid in, invalid out), structure, errors, BFCL dialect."""

from __future__ import annotations

import itertools
import json

import jsonschema
import pytest
from pydantic import BaseModel, Field

from agentkit.constrain.bfcl_dialect import normalize_function_schema
from agentkit.constrain.canonical import canonical_json
from agentkit.constrain.compiler import compile_schema, compile_schema_uncached
from agentkit.constrain.json_regex import emit, search_ast
from agentkit.constrain.nodes import Choice, Lit, Repeat, Seq, Slot, Template
from agentkit.errors import UnsupportedSchemaError


@pytest.fixture(autouse=True)
def compact_style(monkeypatch):
    """These tests spell the compiler's output as compact JSON (``{"a":1}``): run them in that style (the default
    style and its own tests: tests/constrain/test_styles.py)."""
    monkeypatch.setattr("agentkit.constrain.canonical.DEFAULT_STYLE", "compact")


OBJ3 = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}}

# (id, schema, valid instances, invalid instances)
CASES = [
    ("null", {"type": "null"}, [None], [0, False, "null"]),
    ("boolean", {"type": "boolean"}, [True, False], [0, None, "true"]),
    ("integer", {"type": "integer"}, [0, -7, 12345678901234567890, 3.0], [1.5, "1", None]),
    ("integer_range", {"type": "integer", "minimum": -5, "maximum": 120}, [-5, 0, 99, 120], [-6, 121, 1000]),
    ("integer_exclusive", {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}, [1, 9], [0, 10]),
    ("integer_draft4_exclusive", {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer",
                                  "minimum": 0, "exclusiveMinimum": True}, [1, 50], [0, -1]),
    ("number", {"type": "number"}, [0, -1.5, 3.25, 1e-07, 2e20, 7], ["1", None]),
    ("number_range", {"type": "number", "minimum": 0.5, "maximum": 2.25}, [0.5, 1, 2.25, 2.2, 0.75],
     [0.49, 2.26, -1, 3]),
    ("number_exclusive", {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, [0.5, 0.001, 0.999],
     [0, 1, -0.5]),
    ("multiple_int", {"type": "integer", "multipleOf": 5, "minimum": 0, "maximum": 50}, [0, 5, 50], [3, 55, -5]),
    ("multiple_int_unbounded", {"type": "integer", "multipleOf": 3}, [0, 3, -9, 300], [1, 10, -4]),
    ("multiple_cents", {"type": "number", "multipleOf": 0.01, "minimum": 0}, [0, 1.5, 12.34], [1.234, -1]),
    ("string", {"type": "string"}, ["", "hi", 'q"uote', "back\\slash", "tab\t", "é😀"], [1, None]),
    ("string_lengths", {"type": "string", "minLength": 2, "maxLength": 4}, ["ab", "abcd", "é😀"],
     ["a", "abcde", ""]),
    ("pattern_anchored", {"type": "string", "pattern": "^[a-z]+-[0-9]{2}$"}, ["ab-12"], ["ab-1", "Ab-12", "x"]),
    ("pattern_search", {"type": "string", "pattern": "[0-9]"}, ["a1b", "9"], ["abc", ""]),
    ("pattern_length", {"type": "string", "pattern": "^[0-9a-f]+$", "minLength": 4, "maxLength": 4},
     ["00ff"], ["0ff", "00fff", "zzzz"]),
    ("pattern_search_length", {"type": "string", "pattern": "[0-9a-f]+", "maxLength": 3}, ["zz1", "a"],
     ["zzz", "0123"]),
    ("pattern_escapes", {"type": "string", "pattern": '^["\\\\]+$'}, ['"\\"'], ["a", ""]),
    ("pattern_lookahead", {"type": "string", "pattern": "^(?!(if|else)$)[a-z]+$"}, ["iff", "els", "x"],
     ["if", "else", "A"]),
    ("date", {"type": "string", "format": "date"}, ["2024-02-29", "1999-12-31"],
     ["2023-02-29", "2024-13-01", "24-01-01"]),
    ("date_time", {"type": "string", "format": "date-time"}, ["2022-01-01T12:00:00Z", "2022-01-01T12:00:00.5+02:00"],
     ["2022-01-01 12:00:00", "2022-01-01T12:00:00"]),
    ("time", {"type": "string", "format": "time"}, ["23:59:60Z", "08:30:00+01:00"], ["24:00:00Z", "08:30"]),
    ("email", {"type": "string", "format": "email"}, ["a.b@example.com"], ["nope", "a@", "@b.com"]),
    ("uuid", {"type": "string", "format": "uuid"}, ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567"]),
    ("uri", {"type": "string", "format": "uri"}, ["https://ex.com/a?b=c#d", "urn:isbn:123"], ["/relative", "a b"]),
    ("ipv4", {"type": "string", "format": "ipv4"}, ["192.168.0.1"], ["256.1.1.1", "1.2.3", "01.2.3.4"]),
    ("ipv6", {"type": "string", "format": "ipv6"}, ["::1", "2001:db8::8a2e:370:7334"], ["1:2", "gggg::"]),
    ("hostname", {"type": "string", "format": "hostname"}, ["example.com", "a-b.c"], ["-a.com", "a..b"]),
    ("format_annotation", {"type": "string", "format": "int32"}, ["anything"], [5]),
    ("enum", {"enum": ["red", "green", 3, None]}, ["red", 3, None, 3.0], ["blue", 4, "3"]),
    ("const", {"const": {"x": [1, 2]}}, [{"x": [1, 2]}], [{"x": [1]}, {"x": [2, 1]}]),
    ("enum_filtered", {"type": "string", "enum": ["a", "bb", 1], "minLength": 2}, ["bb"], ["a", 1]),
    ("object_optional", OBJ3, [{}, {"a": 1}, {"b": "x"}, {"c": True}, {"a": 1, "c": False}, {"b": "", "c": True},
                               {"a": 1, "b": "x", "c": True}, {"z": [1, {"q": None}]}],
     [{"a": "1"}, {"c": 1}, []]),
    ("object_required", {**OBJ3, "required": ["b"], "additionalProperties": False},
     [{"b": "x"}, {"a": 1, "b": "x"}, {"b": "x", "c": True}], [{}, {"a": 1}, {"b": "x", "z": 1}]),
    ("additional_schema", {"type": "object", "properties": {"a": {"type": "integer"}},
                           "additionalProperties": {"type": "string"}},
     [{"a": 1, "x": "y"}, {"x": "y", "zz": ""}, {}], [{"x": 1}, {"a": "s"}]),
    ("pattern_properties", {"type": "object", "patternProperties": {"^x-": {"type": "integer"}},
                            "additionalProperties": False}, [{"x-a": 1}, {}], [{"x-a": "s"}, {"y": 1}]),
    ("pattern_properties_open", {"type": "object", "patternProperties": {"^n_": {"type": "number"}}},
     [{"n_a": 1, "other": "s"}], [{"n_a": "s"}]),
    ("min_max_properties", {"type": "object", "minProperties": 1, "maxProperties": 2},
     [{"a": 1}, {"a": 1, "b": 2}], [{}, {"a": 1, "b": 2, "c": 3}]),
    ("property_names", {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}, [{"ab": 1}, {}],
     [{"A": 1}, {"a1": 2}]),
    ("array", {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
     [[1], [1, 2, 3]], [[], [1, 2, 3, 4], ["a"]]),
    ("prefix_items", {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
     [[], ["a"], ["a", 1]], [[1], ["a", "b"], ["a", 1, 2]]),
    ("tuple_items", {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
                     "items": [{"type": "string"}], "additionalItems": {"type": "integer"}},
     [["a", 1, 2], ["a"]], [[1], ["a", "b"]]),
    ("contains", {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 10}},
     [[10], [1, 20, 3]], [[], [1, 2]]),
    ("contains_bounded", {"type": "array", "items": {"type": "integer"}, "contains": {"const": 7}, "minItems": 2,
                          "maxItems": 3}, [[7, 1], [1, 7], [1, 2, 7], [7, 7]], [[7], [1, 2], [7, 1, 2, 3], ["7", 7]]),
    ("contains_min", {"type": "array", "contains": {"const": 7}, "minItems": 3}, [[7, 1, 1], [1, 1, 7, 1]],
     [[7, 1], [1, 2, 3]]),
    ("unique_enum", {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True},
     [[], ["a"], ["b", "a"]], [["a", "a"], ["c"]]),
    ("any_of", {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 0}]},
     ["ab", 3], ["abc", -1, None]),
    ("one_of_disjoint", {"oneOf": [{"type": "string"}, {"type": "null"}]}, ["s", None], [1]),
    ("one_of_overlap", {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "integer", "maximum": 10}]},
     [-5, 20], [5]),
    ("all_of", {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                          {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     [{"a": 1, "b": "x"}], [{"a": 1}, {"b": "x"}, {"a": "1", "b": "x"}]),
    ("type_array", {"type": ["string", "null"], "minLength": 1}, ["a", None], ["", 0]),
    ("untyped_keywords", {"minLength": 2}, ["ab", 1, None, [], {}], ["a"]),
    ("ref_defs", {"$defs": {"pos": {"type": "integer", "minimum": 1}}, "type": "array",
                  "items": {"$ref": "#/$defs/pos"}}, [[1, 2]], [[0]]),
    ("ref_definitions", {"definitions": {"s": {"type": "string"}}, "properties": {"a": {"$ref": "#/definitions/s"}},
                         "type": "object", "required": ["a"]}, [{"a": "x"}], [{"a": 1}]),
    ("ref_pointer", {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"$ref": "#/properties/a"}}},
     [{"b": True}], [{"b": 1}]),
    ("recursion", {"type": "object", "properties": {"child": {"$ref": "#"}, "v": {"type": "integer"}},
                   "additionalProperties": False}, [{}, {"child": {"child": {"v": 1}}}], [{"child": {"v": "x"}}]),
    ("true_schema", True, [1, "s", None, {"a": [1, {"b": {}}]}], []),
    ("empty_schema", {}, [[], {}, 0.5], []),
    ("not_type", {"not": {"type": "string"}}, [1, None, []], ["s"]),
    ("not_keywords", {"not": {"minLength": 2}}, ["a", ""], ["abc", 1, None]),
    ("not_keywords_object", {"not": {"properties": {"a": {"type": "string"}}}}, [{"a": 1}], [{}, {"a": "s"}, 3]),
    ("not_enum", {"type": "string", "not": {"enum": ["a", "b"]}}, ["c", "ab", ""], ["a", "b"]),
    ("not_pattern", {"type": "string", "not": {"pattern": "^x"}}, ["ax", ""], ["x", "xy"]),
    ("not_required", {"type": "object", "properties": {"a": {}}, "not": {"required": ["a"]}}, [{}], [{"a": 1}]),
    ("not_additional", {"type": "object", "properties": {"a": {}},
                        "not": {"additionalProperties": False, "properties": {"a": {}}}},
     [{"a": 1, "b": 2}, {"b": 2}], [{}, {"a": 1}]),
    ("not_pattern_properties", {"type": "object", "not": {"patternProperties": {"^x": {"type": "integer"}}}},
     [{"x": "s"}, {"y": 1, "xa": None}], [{}, {"x": 1}]),
    ("not_property_names", {"type": "object", "not": {"propertyNames": {"maxLength": 2}}}, [{"abc": 1}],
     [{}, {"ab": 1}]),
    ("not_contains", {"type": "array", "not": {"contains": {"type": "string"}}}, [[], [1, 2]], [["a"], [1, "b"]]),
    ("not_one_of", {"type": "integer", "not": {"oneOf": [{"minimum": 5}, {"maximum": 10}]}}, [5, 7, 10],
     [4, 11]),
    ("draft4_integer", {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}, [3], [3.0]),
    ("multiple_quarter", {"type": "number", "multipleOf": 0.25, "minimum": 0, "maximum": 3},
     [0, 0.25, 2.75, 3, 3.0], [3.25, 1.3, -0.25]),
    ("multiple_lcm", {"allOf": [{"type": "integer", "multipleOf": 2}, {"multipleOf": 3}]}, [0, 6, -18], [4, 9]),
    ("if_then_else", {"type": "object", "properties": {"k": {"enum": ["n", "s"]}, "v": {}}, "required": ["k", "v"],
                      "if": {"properties": {"k": {"const": "n"}}}, "then": {"properties": {"v": {"type": "number"}}},
                      "else": {"properties": {"v": {"type": "string"}}}},
     [{"k": "n", "v": 1}, {"k": "s", "v": "x"}], [{"k": "n", "v": "x"}, {"k": "s", "v": 1}]),
    ("dependent_required", {"type": "object", "properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"]}},
     [{}, {"b": 1}, {"a": 1, "b": 2}], [{"a": 1}]),
    ("unicode_keys", {"type": "object", "properties": {"naïve": {"type": "string"}, "a/b~c": {"type": "null"}},
                      "required": ["naïve"]}, [{"naïve": "ü", "a/b~c": None}], [{"naïve": 1}]),
]


@pytest.mark.parametrize("case_id, schema, valid, invalid", CASES, ids=[c[0] for c in CASES])
def test_language(case_id, schema, valid, invalid):
    tpl = compile_schema_uncached(schema)
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    cls = jsonschema.validators.validator_for(schema if isinstance(schema, dict) else {})
    small = _regex_size(tpl.root) < 20_000  # the regex of free-form values is huge (the tree shares, a regex copies)
    for v in valid:
        assert cls(schema, format_checker=checker).is_valid(v), f"bad test data: {v!r}"
        text = canonical_json(v, schema)
        assert tpl.matches(text), (case_id, text)
        assert not small or Template.matches(tpl, text)  # the regex says the same
    for v in invalid:
        text = canonical_json(v, schema)
        assert not tpl.matches(text), (case_id, text)
        assert not small or not Template.matches(tpl, text)


def _regex_size(node, memo=None) -> int:
    memo = {} if memo is None else memo
    if id(node) not in memo:
        if isinstance(node, Lit):
            n = len(node.text)
        elif isinstance(node, Slot):
            n = len(node.regex)
        elif isinstance(node, Repeat):
            n = 2 * _regex_size(node.item, memo) + 10
        else:
            n = sum(_regex_size(x, memo) for x in (node.items if isinstance(node, Seq) else node.options)) + 4
        memo[id(node)] = n
    return memo[id(node)]


@pytest.mark.parametrize("present", list(itertools.product([False, True], repeat=3)))
def test_optional_properties_every_subset_is_valid_json(present):
    tpl = compile_schema_uncached({**OBJ3, "additionalProperties": False})
    value = {k: v for k, v, p in zip("abc", (1, "x", True), present) if p}
    text = json.dumps(value, separators=(",", ":"))
    assert tpl.matches(text)
    # and the template's own texts with a comma in the wrong place are rejected
    assert not tpl.matches(text.replace("{", "{,", 1))
    assert not tpl.matches(text[:-1] + ",}")


@pytest.mark.parametrize("present", list(itertools.product([False, True], repeat=3)))
@pytest.mark.parametrize("extra", [False, True])
def test_optional_around_required_with_extras(present, extra):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "null"},
                                               "c": {"type": "integer"}, "d": {"type": "integer"}},
              "required": ["c"], "additionalProperties": {"type": "string"}}
    tpl = compile_schema_uncached(schema)
    value = {k: v for k, v, p in zip("abd", (1, None, 2), present) if p}
    value["c"] = 3
    if extra:
        value["zz"] = "s"
    text = canonical_json(value, schema)
    assert tpl.matches(text) and Template.matches(tpl, text)
    assert not tpl.matches(text.replace("{", "{,", 1)) and not tpl.matches(text[:-1] + ",}")
    assert not tpl.matches(text.replace('"c":3', '"c":3,"c":3'))


def _nested(n: int) -> dict:
    props = {f"p{i}": {"type": "object", "properties": {f"q{j}": {"type": "boolean"} for j in range(n)},
                       "additionalProperties": False} for i in range(n)}
    return {"type": "object", "properties": props, "additionalProperties": False}


def test_optional_properties_tree_is_linear():
    small, big = compile_schema_uncached(_nested(10)), compile_schema_uncached(_nested(20))
    # n*n properties in all: linear growth is 4x from 10 to 20, a quadratic layout would be 8x or more
    assert len(big.regex) < 5 * len(small.regex)
    assert big.matches('{"p19":{"q19":true}}') and big.matches('{"p0":{},"p19":{"q0":false,"q19":true}}')
    assert not big.matches('{"p19":{"q19":true},"p0":{}}')  # canonical order only


def test_structure_is_pinned():
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                               "kind": {"enum": ["a", "b"]}, "n": {"type": "integer"}},
              "required": ["name", "kind", "n"], "additionalProperties": False}
    root = compile_schema_uncached(schema).root
    assert isinstance(root, Seq)
    assert root.items[0] == Lit('{"name":"')
    slot = root.items[1]
    assert isinstance(slot, Slot) and slot.name == "/name" and slot.max_tokens == 8
    assert root.items[2] == Lit('","kind":')
    assert root.items[3] == Choice((Lit('"a"'), Lit('"b"')))
    assert root.items[4] == Lit(',"n":')
    assert isinstance(root.items[5], Slot) and root.items[5].name == "/n"
    assert root.items[6] == Lit("}")


def test_array_uses_repeat_with_bounds():
    root = compile_schema_uncached({"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 4}).root
    assert root == Seq((Lit("["), Repeat(Choice((Lit("true"), Lit("false"))), ",", 2, 4), Lit("]")))


class Meeting(BaseModel):
    person: str = Field(max_length=20)
    city: str
    attendees: int = Field(ge=1)
    note: str | None = None


def test_pydantic_model():
    tpl = compile_schema_uncached(Meeting)
    assert tpl.schema == Meeting.model_json_schema()
    assert tpl.kind == "json" and tpl.compile_ms > 0
    ok = Meeting(person="Ann", city="Lisbon", attendees=4)
    assert tpl.matches(canonical_json(ok.model_dump(), Meeting))
    assert tpl.matches('{"person":"Ann","city":"Lisbon","attendees":4,"note":null}')
    assert not tpl.matches('{"person":"Ann","city":"Lisbon","attendees":0}')
    assert not tpl.matches('{"city":"Lisbon","person":"Ann","attendees":4}')


def test_cache_returns_same_template_and_keeps_property_order():
    props = {"x": {"type": "integer"}, "y": {"type": "integer"}}
    a = compile_schema({"type": "object", "properties": props, "additionalProperties": False})
    b = compile_schema({"type": "object", "properties": dict(props), "additionalProperties": False})
    c = compile_schema({"type": "object", "properties": {"y": props["y"], "x": props["x"]},
                               "additionalProperties": False})
    assert a is b and a is not c
    assert a.matches('{"x":1,"y":2}') and c.matches('{"y":2,"x":1}') and not c.matches('{"x":1,"y":2}')


def test_strict_drops_unmentioned_additional_properties():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "object"}}}
    loose, strict = compile_schema_uncached(schema), compile_schema_uncached(schema, strict=True)
    for text, ok in (('{"a":1}', True), ('{"a":1,"z":2}', False), ('{"b":{"free":[1]}}', True)):
        assert strict.matches(text) == ok and loose.matches(text)
    explicit = {**schema, "additionalProperties": {"type": "string"}}
    assert compile_schema_uncached(explicit, strict=True).matches('{"a":1,"z":"s"}')
    assert compile_schema(schema, strict=True) is not compile_schema(schema)


def test_canonical_json_orders_keys_by_schema():
    schema = {"type": "object", "properties": {"b": {"type": "object", "properties": {"z": {}, "y": {}}}, "a": {}}}
    assert canonical_json({"extra": 1, "a": 2.0, "b": {"y": 1, "z": 0.5}}, schema) == \
        '{"b":{"z":0.5,"y":1},"a":2.0,"extra":1}'


@pytest.mark.parametrize("schema, keyword", [
    (False, "false"),
    ({"type": "array", "items": {"type": "object"}, "uniqueItems": True}, "uniqueItems"),
    ({"type": "string", "pattern": "(a)\\1"}, "pattern"),
    ({"type": "string", "pattern": "a(?=b)"}, "pattern"),
    ({"type": "string", "pattern": "(?<=a)b"}, "pattern"),
    ({"type": "string", "maxLength": 1000}, "maxLength"),
    ({"type": "string", "format": "idn-email"}, "format"),
    ({"not": {"multipleOf": 2}}, "not"),
    ({"oneOf": [{"type": "integer"}, {"multipleOf": 2}]}, "oneOf"),
    ({"$ref": "https://example.com/s.json"}, "$ref"),
    ({"$ref": "#/definitions/missing"}, "$ref"),
    ({"type": "dict"}, "type"),
    ({"unevaluatedProperties": False, "type": "object"}, "unevaluatedProperties"),
    ({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"}, "$ref"),
])
def test_unsupported_raises(schema, keyword):
    with pytest.raises(UnsupportedSchemaError) as e:
        compile_schema_uncached(schema)
    assert e.value.keyword == keyword
    assert e.value.pointer.startswith("#")


def test_recursion_is_cut_at_max_depth():
    schema = {"type": "object", "properties": {"c": {"$ref": "#"}}, "additionalProperties": False}
    deep = '{"c":{"c":{"c":{}}}}'
    assert compile_schema_uncached(schema, max_depth=3).matches(deep)
    assert not compile_schema_uncached(schema, max_depth=2).matches(deep)
    assert compile_schema_uncached(schema, max_depth=2).matches('{"c":{"c":{}}}')


SAMPLE_SCHEMAS = [c[1] for c in CASES] + [Meeting]


def _slots(node, out):
    if isinstance(node, Slot):
        out.add(node.regex)
    elif isinstance(node, (Seq, Choice)):
        for x in node.items if isinstance(node, Seq) else node.options:
            _slots(x, out)
    elif isinstance(node, Repeat):
        _slots(node.item, out)
    return out


def test_every_slot_regex_compiles_in_outlines_core():
    from outlines_core import Index, Vocabulary

    chars = sorted(set(' !"#$%&\'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz'
                       '{|}~'))
    vocab = {c.encode(): [i] for i, c in enumerate(chars)}
    vocab.update({b"\\n": [len(vocab)], "é".encode(): [len(vocab) + 1], b"\xf0\x9f\x98\x80": [len(vocab) + 2]})
    voc = Vocabulary(len(vocab) + 10, vocab)
    regexes: set[str] = set()
    for s in SAMPLE_SCHEMAS:
        _slots(compile_schema_uncached(s).root, regexes)
    assert len(regexes) > 30
    for rx in regexes:
        Index(rx, voc)  # raises on syntax outlines-core does not accept


@pytest.mark.parametrize("pattern, text, hit", [
    ("^a.c$", "abc", True), ("^a.c$", "a\nc", False), ("\\d{2}", "x12y", True), ("^\\w+$", "ab_9", True),
    ("^\\w+$", "é", False), ("^[^a]*$", '"\\', True), ("colou?r", "my color", True), ("^(foo|bar)$", "foobar", False),
    ("^\\u00e9$", "é", True), ("^[\\s]+$", " \t", True), ("a{2,}", "caab", True), ("x{", "x{", True),
])
def test_ecma_pattern_translation(pattern, text, hit):
    import re

    assert (re.fullmatch(emit(search_ast(pattern)), json.dumps(text, ensure_ascii=False)[1:-1]) is not None) == hit


def test_bfcl_dialect_on_real_files(shared_data):
    n = 0
    for name in ("BFCL_v4_simple_python.json", "BFCL_v4_multiple.json"):
        for line in (shared_data / "bfcl" / name).read_text().splitlines():
            for fn in json.loads(line)["function"]:
                schema = normalize_function_schema(fn["parameters"])
                jsonschema.Draft202012Validator.check_schema(schema)
                assert '"type": "dict"' not in json.dumps(schema)
                tpl = compile_schema_uncached(schema)
                assert tpl.root is not None
                n += 1
    assert n == 957


def test_bfcl_dialect_conversions():
    params = {"type": "dict", "properties": {
        "x": {"type": "float", "description": "d"}, "p": {"type": "tuple", "items": {"type": "float"}},
        "d": {"type": "any"}, "o": {"type": "boolean", "optional": True, "default": True},
        "nested": {"type": "dict", "properties": {"k": {"type": "integer"}}}}, "required": ["x"]}
    out = normalize_function_schema(params)
    assert out == {"type": "object", "additionalProperties": False, "properties": {
        "x": {"type": "number", "description": "d"}, "p": {"type": "array", "items": {"type": "number"}},
        "d": {}, "o": {"type": "boolean", "default": True},
        "nested": {"type": "object", "additionalProperties": False, "properties": {"k": {"type": "integer"}}}},
        "required": ["x"]}
    assert params["type"] == "dict"  # input untouched
    tpl = compile_schema_uncached(out)
    assert tpl.matches('{"x":1.5,"p":[1,2.5],"d":{"any":[1]},"nested":{"k":3}}')
    assert not tpl.matches('{"x":1.5,"unknown":1}')
    with pytest.raises(UnsupportedSchemaError):
        normalize_function_schema({"type": "dict", "properties": {"a": {"type": "complex"}}})
