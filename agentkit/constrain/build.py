"""One bounded, abandonable constraint build: schema → template → the engine's token automaton.

:func:`build_constraint` is what a server runs in a bounded worker before a request takes a decoding slot: the whole
build runs under one :class:`~agentkit.constrain.limits.CompileLimits` budget (one deadline for both halves), stops
with :class:`~agentkit.errors.CompileCancelled` when ``cancel`` is set (the client left, the request timed out), and
never takes the engine's lock while it works (the engine only files the finished automaton). Both halves are
cached: the template by the schema's text, each slot's token DFA by its regex; failures are remembered too.
"""

from __future__ import annotations

from typing import Any

from ..errors import UnsupportedSchemaError
from .compiler import compile_schema
from .limits import DEFAULT_LIMITS, Cancel, CompileLimits, budget
from .nodes import Template


def build_constraint(schema: dict | type | Template, *, engine: Any = None, limits: CompileLimits | None = None,
                     cancel: Cancel | None = None, **compile_options: Any) -> Template:
    """Compile ``schema`` (a JSON Schema, a pydantic model class, or an already compiled Template) and, with an
    ``engine``, build its token automaton for that engine's vocabulary, all within ``limits`` (defaults when None).

    Returns the template; ``engine.generate(..., template=it)`` then finds its automaton ready. ``compile_options``
    go to :func:`~agentkit.constrain.compiler.compile_schema` (``strict``, ``style``, ``max_depth``,
    ``digits``). Raises UnsupportedSchemaError (SchemaLimitError past a limit: its ``limit`` names which, its
    ``pointer`` where) or CompileCancelled. Thread-safe; meant to run in a worker thread, off the event loop."""
    lim = limits or DEFAULT_LIMITS
    with budget(lim, cancel) as b:
        if isinstance(schema, Template):
            template = schema
        elif isinstance(schema, (dict, bool)) or (isinstance(schema, type) and hasattr(schema, "model_json_schema")):
            template = compile_schema(schema, limits=lim, **compile_options)
        else:
            raise UnsupportedSchemaError("schema", "#", f"a schema must be an object or a boolean, not {schema!r}")
        if engine is not None:
            b.check("#")
            engine.constraint(template, limits=lim, cancel=cancel)
    return template
