"""Bounded constraint builds (issue 18): each reproduction either builds (schema → template → token automaton on the
tiny vocabulary) or gives a typed error, within a wall-clock bound; limits, cancellation and failure caching."""

from __future__ import annotations

import json
import threading
import time

import pytest

from agentkit.constrain import CompileLimits, build_constraint
from agentkit.constrain.compiler import compile_schema, compile_schema_uncached
from agentkit.constrain.runtime import TokenConstraint
from agentkit.constrain.vocab import token_vocab
from agentkit.errors import CompileCancelled, SchemaLimitError, UnsupportedSchemaError
from agentkit.models.tiny import tiny_tokenizer

BOUND_S = 10  # every reproduction answers (built or typed error) within this
INT64 = {"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807}


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def build(schema, tok, **kw):
    """Compile and build the token automaton; returns (template, constraint, seconds)."""
    t0 = time.monotonic()
    tpl = compile_schema_uncached(schema, **kw)
    c = TokenConstraint(tpl, token_vocab(tok), tok, limits=kw.get("limits"))
    s = c.start()
    c.allowed(s)
    c.min_tokens(s)
    return tpl, c, time.monotonic() - t0


def accepts(c, tok, text: str) -> bool:
    return c.accepts_tokens(tok.encode(text, add_special_tokens=False))


def test_int64_range_builds_fast_and_exactly(tok):
    tpl, c, secs = build(INT64, tok)
    assert secs < BOUND_S
    for ok in ("-9223372036854775808", "9223372036854775807", "0", "-1", "4611686018427387904"):
        assert tpl.matches(ok) and accepts(c, tok, ok), ok
    for bad in ("9223372036854775808", "-9223372036854775809", "92233720368547758070", "01"):
        assert not tpl.matches(bad) and not accepts(c, tok, bad), bad


def test_int64_tool_argument_builds(tok):
    schema = {"type": "object", "properties": {"x": INT64, "y": {"type": "integer", "minimum": -2147483648,
                                                                 "maximum": 2147483647}}, "required": ["x", "y"]}
    tpl, c, secs = build(schema, tok, strict=True)
    assert secs < BOUND_S
    doc = json.dumps({"x": -9223372036854775808, "y": 2147483647})
    assert tpl.matches(doc) and accepts(c, tok, doc)


@pytest.mark.parametrize("schema", [
    {"type": "number", "maximum": 9007199254740993},
    {"type": "number", "exclusiveMaximum": 1e20},
    {"type": "string", "pattern": "^[\\s\\S]{256}$"},
    {"type": "string", "maxLength": 256},
    {"type": "integer", "minimum": -2147483648, "maximum": 2147483647},
    {"type": "string", "pattern": "^[ab]*a[ab]{20}$"},
    {"type": "number", "minimum": 1e308},
])
def test_slow_reproductions_build_or_refuse_within_the_bound(tok, schema):
    t0 = time.monotonic()
    try:
        build(schema, tok)
    except SchemaLimitError as e:
        assert e.limit in ("max_slot_states", "max_states", "max_seconds") and e.pointer.startswith("#")
    assert time.monotonic() - t0 < BOUND_S


def test_exponential_pattern_is_refused_naming_the_limit(tok):
    with pytest.raises(SchemaLimitError) as e:
        build({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[ab]*a[ab]{20}$"}}}, tok)
    assert e.value.limit == "max_slot_states" and e.value.pointer == "#/code"
    assert "max_slot_states=3000" in str(e.value)


@pytest.mark.parametrize("text,keyword", [
    ('{"type": "number", "maximum": 1e999}', "maximum"),
    ('{"type": "number", "minimum": -1e999}', "minimum"),
    ('{"type": "number", "maximum": NaN}', "maximum"),
    ('{"type": "number", "exclusiveMinimum": Infinity}', "exclusiveMinimum"),
    ('{"type": "number", "multipleOf": Infinity}', "multipleOf"),
    ('{"properties": {"a": {"enum": [1, NaN]}}}', "item"),
])
def test_non_finite_numbers_are_typed_errors(text, keyword):
    schema = json.loads(text)  # Python's json reads 1e999 as inf and accepts NaN/Infinity
    for fn in (compile_schema_uncached, compile_schema):
        with pytest.raises(UnsupportedSchemaError) as e:
            fn(schema)
        assert e.value.keyword == keyword


@pytest.mark.parametrize("schema", [
    {"const": "\ud800"}, {"enum": ["ok", "a\udcff"]}, {"properties": {"\ud800": {"type": "string"}}},
    {"type": "string", "pattern": "\ud800"},
])
def test_lone_surrogates_are_typed_errors(schema):
    with pytest.raises(UnsupportedSchemaError, match="surrogate"):
        compile_schema(schema)


def test_thousand_optional_properties(tok):
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(1000)},
              "additionalProperties": False}
    _tpl, c, secs = build(schema, tok)
    assert secs < BOUND_S
    assert accepts(c, tok, "{}") and accepts(c, tok, '{"p3": 1, "p999": 2}')
    assert not accepts(c, tok, '{"p999": 2, "p3": 1}')  # members in schema order
    try:  # open objects: the extra key must differ from 1,000 names (a large automaton): built or refused
        build({**schema, "additionalProperties": True}, tok)
    except SchemaLimitError as e:
        assert e.limit == "max_slot_states"


def test_deep_nesting_is_iterative_or_a_typed_error(tok):
    def nest(n):
        d = {"type": "integer"}
        for _ in range(n):
            d = {"type": "object", "properties": {"a": d}, "required": ["a"]}
        return d

    tpl, _c, _ = build(nest(60), tok)
    assert tpl.matches('{"a": ' * 60 + "1" + "}" * 60)
    t0 = time.monotonic()
    with pytest.raises(SchemaLimitError) as e:
        compile_schema(nest(5000))
    assert e.value.limit == "max_schema_depth" and time.monotonic() - t0 < BOUND_S


def test_long_enums_are_linear(tok):
    t0 = time.monotonic()
    schema = {"type": "object", "properties": {f"p{j}": {"enum": [f"v{j}-{i}" for i in range(15000)]}
                                               for j in range(6)}, "required": [f"p{j}" for j in range(6)]}
    tpl, c, _ = build(schema, tok)
    doc = json.dumps({f"p{j}": f"v{j}-{14999 - j}" for j in range(6)})
    assert tpl.matches(doc) and accepts(c, tok, doc)
    assert time.monotonic() - t0 < 3 * BOUND_S
    with pytest.raises(SchemaLimitError) as e:
        compile_schema_uncached({"enum": list(range(20))}, limits=CompileLimits(max_enum=10))
    assert e.value.limit == "max_enum"


def _one_of_chain(n):
    d = {"type": "integer"}
    for _ in range(n):
        d = {"oneOf": [d, {"type": "null"}]}
    return d


def test_time_budget_names_max_seconds():
    t0 = time.monotonic()
    with pytest.raises(SchemaLimitError) as e:
        compile_schema_uncached(_one_of_chain(30), limits=CompileLimits(max_seconds=0.2))
    assert e.value.limit == "max_seconds" and e.value.value == 0.2
    assert time.monotonic() - t0 < 5


def test_cancel_stops_a_build_from_another_thread():
    cancel = threading.Event()
    out: list = []

    def work():
        try:
            compile_schema_uncached(_one_of_chain(30), limits=CompileLimits(max_seconds=None), cancel=cancel)
        except BaseException as e:  # noqa: BLE001
            out.append(e)

    th = threading.Thread(target=work)
    th.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    cancel.set()
    th.join(BOUND_S)
    assert not th.is_alive() and time.monotonic() - t0 < 2
    assert isinstance(out[0], CompileCancelled)


def test_failures_are_remembered():
    schema = {"type": "string", "allOf": [{"pattern": "^[ab]*a[ab]{30}$"}, {"pattern": "^a"}]}
    lim = CompileLimits(max_states=500)
    with pytest.raises(UnsupportedSchemaError, match="over 500 states"):
        compile_schema(schema, limits=lim)
    t0 = time.monotonic()
    with pytest.raises(UnsupportedSchemaError):
        compile_schema(schema, limits=lim)
    assert time.monotonic() - t0 < 0.05


def test_limits_are_validated():
    for bad in ({"max_seconds": 0}, {"max_seconds": float("nan")}, {"max_states": 0}, {"max_enum": -1}):
        with pytest.raises(ValueError):
            CompileLimits(**bad)


def test_build_constraint_with_an_engine_is_ready_and_never_takes_the_engine_lock():
    from agentkit.engine.engine import Engine
    from agentkit.models.tiny import tiny_llama

    eng = Engine.from_loaded(tiny_llama(1))
    done = threading.Event()
    result: list = []

    def work():
        result.append(build_constraint({"type": "object", "properties": {"x": INT64}, "required": ["x"]},
                                       engine=eng, strict=True))
        done.set()

    with eng.lock:  # a decode holding the engine: the build still finishes
        th = threading.Thread(target=work)
        th.start()
        assert done.wait(BOUND_S)
    tpl = result[0]
    assert eng.constraint(tpl) is eng.constraint(tpl)
    with pytest.raises(SchemaLimitError):
        build_constraint({"type": "string", "pattern": "^[ab]*a[ab]{20}$"}, engine=eng)
    with pytest.raises(CompileCancelled):
        ev = threading.Event()
        ev.set()
        build_constraint({"type": "integer", "minimum": 3}, engine=eng, cancel=ev)


def test_huge_bounds_are_linear_and_never_looser(tok):
    tpl, _c, secs = build({"type": "number", "minimum": 1e308}, tok)
    assert secs < BOUND_S and tpl.matches("1" + "0" * 308) and not tpl.matches("1" + "0" * 307)
    tpl = compile_schema_uncached({"type": "number", "minimum": 1e20})
    assert not tpl.matches("1e+16") and tpl.matches("1e+21") and tpl.matches("1" + "0" * 20)
    tpl = compile_schema_uncached({"type": "number", "maximum": -1e20})
    assert not tpl.matches("-1e+16") and tpl.matches("-1e+21")
    tpl = compile_schema_uncached({"type": "number", "maximum": 1e300})
    assert tpl.matches("1" + "0" * 300) and not tpl.matches("1" + "0" * 300 + "1") and tpl.matches("2.5")
