"""BFCL parameter schemas → JSON Schema.

The Berkeley Function Calling Leaderboard writes parameters in a JSON-Schema-like dialect: ``"type": "dict"`` for
objects, Python type names (``float``, ``tuple``, ``any``), and an ``optional`` flag next to ``required``. This
module rewrites such a schema into plain JSON Schema; everything else is copied unchanged.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import UnsupportedSchemaError

TYPE_MAP = {
    "dict": "object", "object": "object", "HashMap": "object", "Map": "object",
    "float": "number", "double": "number", "number": "number", "Float": "number", "Double": "number",
    "integer": "integer", "int": "integer", "long": "integer", "short": "integer", "Integer": "integer",
    "Long": "integer",
    "string": "string", "str": "string", "String": "string", "char": "string",
    "boolean": "boolean", "bool": "boolean", "Boolean": "boolean",
    "array": "array", "list": "array", "tuple": "array", "ArrayList": "array", "List": "array", "Array": "array",
    "null": "null", "None": "null",
}
ANY = {"any", "Any", "Object"}
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_ONE = ("items", "additionalProperties", "additionalItems", "contains", "not", "propertyNames")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def normalize_function_schema(params: dict) -> dict:
    """A JSON Schema for a BFCL function's ``parameters`` (the input is not modified).

    ``dict`` → ``object`` (with ``additionalProperties: false`` unless given: a function takes only the
    arguments it lists, and BFCL's checker rejects others), ``float`` → ``number``, ``tuple`` → ``array``,
    ``any`` → no type (any value); the BFCL-only ``optional`` flag is dropped (``required`` decides), an object
    without ``properties`` gets an empty one, and an ``enum`` written on an ``array`` lists the allowed *items*
    (BFCL's meaning; as JSON Schema it would ask the whole array to equal a string, which nothing can). Unknown type names raise
    :class:`~agentkit.errors.UnsupportedSchemaError`.
    """
    return _norm(copy.deepcopy(params), "#")


def _norm(s: Any, ptr: str) -> Any:
    if not isinstance(s, dict):
        return s
    s.pop("optional", None)
    t = s.get("type")
    if t is not None:
        names = t if isinstance(t, list) else [t]
        out = []
        for name in names:
            if name in ANY:
                out = None
                break
            if name not in TYPE_MAP:
                raise UnsupportedSchemaError("type", ptr, f"unknown BFCL type {name!r}")
            out.append(TYPE_MAP[name])
        if out is None:
            del s["type"]
        else:
            out = list(dict.fromkeys(out))
            s["type"] = out[0] if len(out) == 1 else out
    if s.get("type") == "array" and isinstance(s.get("enum"), list) and not all(isinstance(v, list) for v in s["enum"]):
        _enum_to_items(s, ptr)
    if s.get("type") == "object":
        s.setdefault("properties", {})
        if t in ("dict", "HashMap", "Map"):  # a Python/Java signature: only the listed arguments
            s.setdefault("additionalProperties", False)
    for k in _SCHEMA_MAPS:
        if isinstance(s.get(k), dict):
            s[k] = {name: _norm(sub, f"{ptr}/{k}/{name}") for name, sub in s[k].items()}
    for k in _SCHEMA_ONE:
        if isinstance(s.get(k), dict):
            s[k] = _norm(s[k], f"{ptr}/{k}")
        elif k == "items" and isinstance(s.get(k), list):
            s[k] = [_norm(sub, f"{ptr}/{k}/{i}") for i, sub in enumerate(s[k])]
    for k in _SCHEMA_LISTS:
        if isinstance(s.get(k), list):
            s[k] = [_norm(sub, f"{ptr}/{k}/{i}") for i, sub in enumerate(s[k])]
    return s


def _enum_to_items(s: dict, ptr: str) -> None:
    """Move an array's ``enum`` of item values onto its ``items`` (intersected with an ``enum`` already there)."""
    allowed = [v for v in s.pop("enum") if not isinstance(v, list)]
    items = s.get("items")
    if items is None or items is True:
        items = {}
    if not isinstance(items, dict):
        raise UnsupportedSchemaError("enum", f"{ptr}/enum", "an array enum with a list of item schemas")
    if isinstance(items.get("enum"), list):
        allowed = [v for v in allowed if v in items["enum"]]
    s["items"] = {**items, "enum": allowed}
