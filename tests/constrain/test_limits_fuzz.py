"""Property-based fuzz of the schema compiler and token automaton (hypothesis): random schemas with NaN/inf/huge
bounds, long enums, surrogates, pathological patterns and deep nesting only ever build or raise a typed error
(UnsupportedSchemaError), each within a time bound. Small example counts and derandomized: CI stays fast."""

from __future__ import annotations

import math
import time

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit.constrain import CompileLimits
from agentkit.constrain.compiler import compile_schema_uncached
from agentkit.constrain.runtime import TokenConstraint
from agentkit.errors import UnsupportedSchemaError

LIMITS = CompileLimits(max_seconds=3.0)
BOUND_S = 8.0  # one example: compile + token automaton, with slack for a loaded CI machine

numbers = st.one_of(
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 2 ** 53 + 1, 1e20, 1e308, -1e308, 5e-324, 1e999, -9223372036854775808,
                     9223372036854775807, 0.1, 2.5]),
)
texts = st.one_of(st.text(max_size=8), st.sampled_from(["\ud800", "a\udcff", "", "x" * 40]))
patterns = st.sampled_from(["^[a-z]+$", "^[ab]*a[ab]{20}$", "^[\\s\\S]{256}$", "(a+)+$", "^\\d{3}-\\d{4}$",
                            "[", "^(?=a)", "^.{0,300}$", "\\ud800", "^x{1000}$"])
counts = st.one_of(st.integers(min_value=-2, max_value=400), st.sampled_from([1e300, 2.5, "3", True]))
formats = st.sampled_from(["date-time", "email", "uri", "ipv6", "int64", "regex"])

scalars = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["integer", "number"])},
                          optional={"minimum": numbers, "maximum": numbers, "exclusiveMinimum": numbers,
                                    "exclusiveMaximum": numbers, "multipleOf": numbers}),
    st.fixed_dictionaries({"type": st.just("string")},
                          optional={"pattern": patterns, "minLength": counts, "maxLength": counts, "format": formats}),
    st.fixed_dictionaries({"enum": st.lists(st.one_of(texts, numbers, st.booleans(), st.none()), max_size=30)}),
    st.builds(lambda n: {"enum": [f"v{i}" for i in range(n)]}, st.sampled_from([1, 500, 5000])),
    st.fixed_dictionaries({"const": st.one_of(texts, numbers)}),
    st.sampled_from([{}, True, False, {"type": "boolean"}, {"type": "null"}]),
)


def _extend(children):
    return st.one_of(
        st.builds(lambda props, req: {"type": "object", "properties": props, "required": req},
                  st.dictionaries(texts, children, max_size=4), st.lists(texts, max_size=2)),
        st.builds(lambda item, lo: {"type": "array", "items": item, "minItems": lo}, children, counts),
        st.builds(lambda xs: {"anyOf": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda xs: {"oneOf": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda xs: {"allOf": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda x: {"not": x}, children),
    )


schemas = st.recursive(scalars, _extend, max_leaves=12)


def _nested(depth: int, key: str) -> dict:
    d: dict = {"type": "integer"}
    for _ in range(depth):
        d = {"type": "object", "properties": {key: d}} if key != "items" else {"type": "array", "items": d}
    return d


deep = st.builds(_nested, st.sampled_from([10, 63, 200, 3000]), st.sampled_from(["a", "items"]))
wide = st.builds(lambda n: {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)},
                            "additionalProperties": False}, st.sampled_from([10, 300, 1000]))


def _check(schema, vocab) -> None:
    tok, v = vocab
    t0 = time.monotonic()
    try:
        tpl = compile_schema_uncached(schema, limits=LIMITS)
        c = TokenConstraint(tpl, v, tok, limits=LIMITS)
        s = c.start()
        c.allowed(s)
        assert math.isfinite(c.min_tokens(s)) or not c.can_end(s)
    except UnsupportedSchemaError:
        pass  # typed: the only failure allowed
    assert time.monotonic() - t0 < BOUND_S


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(schema=schemas)
def test_random_schemas_build_or_raise_typed_errors(vocab, schema):
    _check(schema, vocab)


@settings(max_examples=10, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(schema=st.one_of(deep, wide))
def test_deep_and_wide_schemas_build_or_raise_typed_errors(vocab, schema):
    _check(schema, vocab)
