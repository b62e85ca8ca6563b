"""JSON Schema → canvas template (:class:`~agentkit.constrain.nodes.Template`).

The output language is canonical JSON in one style (:mod:`agentkit.constrain.canonical`: ``spaced`` by default, as
``json.dumps`` writes it, or ``compact``): braces, keys, quotes, commas and colons are :class:`Lit` (pinned); only
values are :class:`Slot` (numbers, string bodies, keys of additional properties). Enums and consts are choices of
literals. Optional properties are real choices, built so that every combination of present/absent properties is
valid JSON with a tree that stays linear in the number of properties (shared subtrees). Recursion through ``$ref``
is cut after ``max_depth`` turns of a reference cycle.

Two composed parts: the normalise step (:class:`~agentkit.constrain.normalize.Normalizer`, with
:mod:`~agentkit.constrain.negation` and :mod:`~agentkit.constrain.dnf`) turns the schemas that apply at a place into
flat alternatives; the layout builder (:class:`~agentkit.constrain.layout.Layout`, with
:mod:`~agentkit.constrain.scalars`, :mod:`~agentkit.constrain.arrays`, :mod:`~agentkit.constrain.objects` and
:mod:`~agentkit.constrain.extras`) turns those into template nodes, asking the normaliser for each member's
alternatives in turn. :mod:`~agentkit.constrain.ecma_regex`, :mod:`~agentkit.constrain.json_regex` and
:mod:`~agentkit.constrain.automata` translate and combine patterns; :mod:`~agentkit.constrain.formats` holds number
ranges and string formats; :mod:`~agentkit.constrain.canonical` the canonical text; :mod:`~agentkit.constrain.matcher`
decides membership on the tree. This module is the public face: :func:`compile_schema` (cached) and
:func:`compile_schema_uncached`.

Anything that cannot be enforced exactly raises :class:`~agentkit.errors.UnsupportedSchemaError` naming the
keyword and the JSON pointer: the template is never looser than the schema. It may be tighter in a few documented
places: recursion depth, the nesting depth of free-form values (``{}``/``true``), canonical number and string
forms, string formats that are strict subsets of their RFC grammars, control characters other than ``\\b\\f\\n\\r\\t``
in strings.

Formats in JSON Schema's format vocabulary are enforced (see :mod:`agentkit.constrain.formats`); other format
values (``int32``, ``double``, ``byte``, ``url``...) are annotations and are ignored, as JSON Schema says.
``nullable`` (OpenAPI) is an annotation in JSON Schema and is ignored too.
"""

from __future__ import annotations

import json
import time
from functools import lru_cache
from typing import Any

from ..errors import UnsupportedSchemaError
from .canonical import STYLES, JsonStyle, canonical_json, json_style
from .formats import NumberDigits
from .layout import Layout
from .limits import DEFAULT_LIMITS, Cancel, CompileLimits, FailureCache, budget, preflight
from .matcher import tree_matches
from .nodes import Template
from .normalize import Normalizer

__all__ = ["STYLES", "JsonStyle", "JsonTemplate", "NumberDigits", "canonical_json", "compile_schema",
           "compile_schema_cached", "compile_schema_uncached"]

DIGITS = NumberDigits()  # default digit caps of number slots


class JsonTemplate(Template):
    """A compiled JSON template. :meth:`matches` decides the same language as :class:`Template` by walking the
    tree (:func:`~agentkit.constrain.matcher.tree_matches`): the tree shares subtrees (optional-property tails,
    free-form values) that a single regex would have to copy, sometimes into megabytes."""

    def matches(self, text: str) -> bool:
        return tree_matches(self, text)


def _schema_of(schema: Any) -> Any:
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    return schema


def compile_schema_uncached(schema: dict | type, *, max_depth: int = 3, strict: bool = False,
                            style: str | JsonStyle | None = None, digits: NumberDigits | None = DIGITS,
                            limits: CompileLimits | None = None, cancel: Cancel | None = None) -> Template:
    """Compile a JSON Schema (or a pydantic model class) into a canvas template of canonical JSON in ``style``.

    ``style``: how the pinned punctuation is written, a name in :data:`~agentkit.constrain.canonical.STYLES`
    (``"compact"``: ``{"a":1,"b":2}``; ``"spaced"``: ``{"a": 1, "b": 2}``, as ``json.dumps`` writes by default) or a
    :class:`~agentkit.constrain.canonical.JsonStyle`; None: :data:`~agentkit.constrain.canonical.DEFAULT_STYLE`.
    ``digits``: caps on the digits of number slots where the schema leaves them open (:class:`NumberDigits`:
    20 integer digits, 8 fraction digits by default; None: no caps).

    ``max_depth``: how deep recursive ``$ref`` s unfold (turns of the longest reference cycle); free-form values
    nest at most ``2 * max_depth + 2`` levels. ``strict``: an object that lists properties but never mentions
    ``additionalProperties``/``patternProperties`` gets no other keys (what OpenAI-style strict tool schemas mean;
    tighter than JSON Schema, never looser). Raises UnsupportedSchemaError for anything not enforceable exactly.

    ``limits``: bounds on the build (:class:`~agentkit.constrain.limits.CompileLimits`; defaults when None): past
    one it raises SchemaLimitError naming the limit and the pointer. ``cancel``: an Event (or a callable) that stops
    the build with CompileCancelled when set."""
    t0 = time.perf_counter()
    schema = _schema_of(schema)
    if not isinstance(schema, (dict, bool)):
        raise UnsupportedSchemaError("schema", "#", f"a schema must be an object or a boolean, not {schema!r}")
    st = json_style(style)
    preflight(schema, limits)
    layout = Layout(Normalizer(schema, max_depth), strict, st, digits)
    try:
        with budget(limits, cancel):
            root = layout.value([(schema, "#")], [schema], "", 0)
    except RecursionError:
        raise UnsupportedSchemaError("$ref", "#", "schema nesting too deep") from None
    if root is None:
        raise UnsupportedSchemaError("false", "#", "the schema accepts no JSON value")
    ms = 1000 * (time.perf_counter() - t0)
    return JsonTemplate(root=root, schema=schema, compile_ms=ms, kind="json",
                        meta={"max_depth": max_depth, "strict": strict, "style": st.name})


@lru_cache(maxsize=256)
def _cached(key: str, max_depth: int, strict: bool, style: JsonStyle, digits: NumberDigits | None,
            limits: CompileLimits) -> Template:
    return compile_schema_uncached(json.loads(key), max_depth=max_depth, strict=strict, style=style, digits=digits,
                                   limits=limits)


_FAILED = FailureCache()  # schemas that failed to compile fail again at once


def compile_schema(schema: dict | type, *, max_depth: int = 3, strict: bool = False,
                   style: str | JsonStyle | None = None, digits: NumberDigits | None = DIGITS,
                   limits: CompileLimits | None = None, cancel: Cancel | None = None) -> Template:
    """Compile a JSON Schema (or a pydantic model class) into a canvas template, cached: what
    ``agentkit.compile_schema`` is. :func:`compile_schema_uncached` (same arguments) behind an LRU cache keyed on
    the schema's JSON text (property order kept) and the options; a schema that failed fails again at once (a
    time-out for a minute, see FailureCache). The returned template is shared: do not mutate it."""
    schema = _schema_of(schema)
    lim = limits or DEFAULT_LIMITS
    preflight(schema, lim)  # before json.dumps: depth, NaN/inf and lone surrogates are refused here
    args = (json.dumps(schema, separators=(",", ":"), ensure_ascii=False), max_depth, strict, json_style(style),
            digits, lim)
    with budget(lim, cancel):
        return _FAILED.call(_cached, args)



compile_schema_cached = compile_schema  # the name before compile_schema meant the cached compiler everywhere
