"""The canonical JSON text of a value under a schema, and the schema walking both it and the compiler share.

The compiler's output language is canonical JSON in one :class:`JsonStyle`: ``compact`` is ``json.dumps(...,
separators=(",", ":"), ensure_ascii=False)`` text, ``spaced`` is ``json.dumps(..., ensure_ascii=False)`` text
(``", "`` and ``": "``, as ``json.dumps`` writes by default and as most models saw JSON in training), with

- object keys in *schema order*: the names of ``properties`` met in a fixed walk of the schemas that apply at that
  place (``$ref``, ``allOf``, ``anyOf``, ``oneOf``, ``if``/``then``/``else``, dependent schemas, ``not`` are
  followed), then ``required`` and dependency names, then any other keys in the value's own order -- with, in the
  named styles, the names every value there must have (``required`` reached through ``$ref``/``allOf`` only) moved
  first, as llama.cpp's JSON-schema grammar orders them (``spaced-schema-order`` keeps plain schema order);
- numbers as ``json.dumps`` writes them (ints as digits, floats as Python's ``repr``: ``3.0``, ``1e-05``).

:func:`canonical_json` writes that form; the compiler orders properties with the same :func:`order_names` and
:func:`child_schemas`, so a valid value's canonical text is in its template's language.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from ..errors import UnsupportedSchemaError
from .ecma_regex import PatternError
from .json_regex import emit, search_ast

_FOLLOW_LISTS = ("allOf", "anyOf", "oneOf")


@dataclass(frozen=True)
class JsonStyle:
    """How pinned JSON is written: ``item_sep`` between members and items, ``key_sep`` after a key, and the order of
    an object's members."""

    name: str
    item_sep: str
    key_sep: str
    # object members: the ones every value must have first, then the optional ones (each group in schema order).
    # The model then writes what the call needs before it decides whether to add optional arguments: on BFCL's
    # 600 questions this scored above plain schema order (README, "JSON style")
    required_first: bool = True


STYLES: dict[str, JsonStyle] = {
    "compact": JsonStyle("compact", ",", ":"),
    "spaced": JsonStyle("spaced", ", ", ": "),
    "spaced-schema-order": JsonStyle("spaced-schema-order", ", ", ": ", required_first=False),
}
DEFAULT_STYLE = "spaced"  # chosen on BFCL with the default model (README: "JSON style")


def json_style(style: str | JsonStyle | None) -> JsonStyle:
    """The :class:`JsonStyle` named ``style`` (None: :data:`DEFAULT_STYLE`); raises UnsupportedSchemaError for an
    unknown name."""
    if isinstance(style, JsonStyle):
        return style
    name = DEFAULT_STYLE if style is None else style
    if name not in STYLES:
        raise UnsupportedSchemaError("style", "#", f"unknown JSON style {name!r}; known: {', '.join(STYLES)}")
    return STYLES[name]
_FOLLOW_ONE = ("if", "then", "else", "not")
_FOLLOW_DEPS = ("dependentSchemas", "dependencies")


class Resolver:
    """Local ``$ref`` resolution inside one root document (JSON pointers, ``$id``/``$anchor`` names)."""

    def __init__(self, root: Any) -> None:
        self.root = root
        rid = (root.get("$id") or root.get("id")) if isinstance(root, dict) else None
        self.base = rid.split("#")[0] if isinstance(rid, str) else ""
        self._names: dict[str, tuple[Any, str]] | None = None

    def resolve(self, ref: str, ptr: str) -> tuple[Any, str]:
        """The target schema and its pointer; raises UnsupportedSchemaError for remote or dangling refs."""
        base, _, frag = ref.partition("#")
        if base and base != self.base:
            hit = self._by_name().get(ref) or self._by_name().get(base)
            if hit is not None and not frag:
                return hit
            raise UnsupportedSchemaError("$ref", ptr, f"remote reference {ref!r}")
        if not frag or frag.startswith("/"):
            node: Any = self.root
            for part in frag.split("/")[1:] if frag else []:
                part = unquote(part).replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and part in node:
                    node = node[part]
                elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                    node = node[int(part)]
                else:
                    raise UnsupportedSchemaError("$ref", ptr, f"dangling reference {ref!r}")
            return node, "#" + frag
        hit = self._by_name().get("#" + frag)
        if hit is None:
            raise UnsupportedSchemaError("$ref", ptr, f"unknown anchor {ref!r}")
        return hit

    def _by_name(self) -> dict[str, tuple[Any, str]]:
        if self._names is None:
            self._names = {}
            stack: list[tuple[Any, str]] = [(self.root, "#")]
            while stack:
                node, p = stack.pop()
                if isinstance(node, dict):
                    for idk in ("$id", "id"):  # draft 4 spells it "id" (and may name a plain "#anchor")
                        if isinstance(node.get(idk), str) and node is not self.root:
                            self._names.setdefault(node[idk], (node, p))
                    if isinstance(node.get("$anchor"), str):
                        self._names.setdefault("#" + node["$anchor"], (node, p))
                    for k, v in node.items():
                        if k not in ("enum", "const", "examples", "default"):
                            stack.append((v, f"{p}/{k}"))
                elif isinstance(node, list):
                    stack.extend((v, f"{p}/{i}") for i, v in enumerate(node))
        return self._names


def walk(schemas, res: Resolver, always: bool = False) -> list[dict]:
    """The dict schemas reachable at one place, in a fixed pre-order, each once; ``always``: only those that apply
    to every value there (reached through ``$ref`` and ``allOf``). Memoised on ``res`` (one compile): the caller
    must not change the list."""
    schemas = tuple(schemas)
    memo = res.__dict__.setdefault("_walks", {})  # one compile's walks: an N-way anyOf asks N times per key
    key = (tuple(map(id, schemas)), always)
    hit = memo.get(key)
    if hit is not None:
        return hit[1]
    lists, ones, deps = (("allOf",), (), ()) if always else (_FOLLOW_LISTS, _FOLLOW_ONE, _FOLLOW_DEPS)
    out: list[dict] = []
    seen: set[int] = set()

    def visit(s: Any) -> None:
        if not isinstance(s, dict) or id(s) in seen:
            return
        seen.add(id(s))
        out.append(s)
        if isinstance(s.get("$ref"), str):
            try:
                visit(res.resolve(s["$ref"], "#")[0])
            except UnsupportedSchemaError:
                pass
        for k in lists:
            if isinstance(s.get(k), list):
                for sub in s[k]:
                    visit(sub)
        for k in ones:
            visit(s.get(k))
        for k in deps:
            if isinstance(s.get(k), dict):
                for sub in s[k].values():
                    visit(sub)

    for s in schemas:
        visit(s)
    memo[key] = (schemas, out)  # the schemas kept alive: their ids cannot be reused while the key is held
    return out


def order_names(schemas, res: Resolver, required_first: bool = False) -> list[str]:
    """Object keys in schema order at one place: ``properties`` names, then required and dependency names;
    ``required_first``: the names :func:`always_required` there first."""
    names = _schema_order(schemas, res)
    if not required_first:
        return names
    must = always_required(schemas, res)
    return [n for n in names if n in must] + [n for n in names if n not in must]


def always_required(schemas, res: Resolver) -> set[str]:
    """The names every object at this place must have: ``required`` of the schemas reached through ``$ref`` and
    ``allOf`` only (a name required in one ``anyOf`` branch is not)."""
    return {r for s in walk(schemas, res, always=True) if isinstance(s.get("required"), list)
            for r in s["required"] if isinstance(r, str)}


def _schema_order(schemas, res: Resolver) -> list[str]:
    seen: dict[str, None] = {}
    ws = walk(schemas, res)
    for s in ws:
        if isinstance(s.get("properties"), dict):
            seen.update(dict.fromkeys(s["properties"]))
    for s in ws:
        if isinstance(s.get("required"), list):
            seen.update(dict.fromkeys(r for r in s["required"] if isinstance(r, str)))
    for s in ws:
        for k in ("dependentRequired", "dependencies"):
            if isinstance(s.get(k), dict):
                for name, dep in s[k].items():
                    seen[name] = None
                    if isinstance(dep, list):
                        seen.update(dict.fromkeys(d for d in dep if isinstance(d, str)))
    return list(seen)


@lru_cache(maxsize=4096)
def _pattern_re(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(emit(search_ast(pattern)))
    except (PatternError, re.error, RecursionError):
        return None


def pattern_matches(pattern: str, text: str) -> bool:
    """ECMA ``pattern`` search semantics on ``text`` (Python ``re`` as a fallback for untranslatable patterns)."""
    rx = _pattern_re(pattern)
    if rx is None:
        try:
            return re.search(pattern, text) is not None
        except re.error:
            return False
    return rx.fullmatch(json.dumps(text, ensure_ascii=False)[1:-1]) is not None


def child_schemas(schemas, res: Resolver, key: str) -> list:
    """Schemas that apply to the value under ``key`` (for ordering: every branch's), in the walk's order. Indexed
    once per walk (names -> where they are listed), so an N-way ``anyOf`` of objects costs O(N) per key, not
    O(N) walks of N schemas."""
    ws = walk(schemas, res)
    by_name, special = _child_index(ws, res)
    out: list[tuple[int, int, Any]] = list(by_name.get(key, ()))
    listed = {i for i, _, _ in out}
    for i in special:  # schemas with patternProperties or a schema for additional properties
        if i in listed:
            continue
        s = ws[i]
        pats = s.get("patternProperties") if isinstance(s.get("patternProperties"), dict) else {}
        hit = [v for p, v in pats.items() if pattern_matches(p, key)]
        out += [(i, j, v) for j, v in enumerate(hit)]
        if not hit and isinstance(s.get("additionalProperties"), dict):
            out.append((i, 0, s["additionalProperties"]))
    out.sort(key=lambda t: (t[0], t[1]))
    return [v for _, _, v in out]


def _child_index(ws: list[dict], res: Resolver) -> tuple[dict[str, list[tuple[int, int, Any]]], list[int]]:
    memo = res.__dict__.setdefault("_child_index", {})
    hit = memo.get(id(ws))
    if hit is not None and hit[0] is ws:
        return hit[1], hit[2]
    by_name: dict[str, list[tuple[int, int, Any]]] = {}
    special: list[int] = []
    for i, s in enumerate(ws):
        props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
        for name, v in props.items():
            by_name.setdefault(name, []).append((i, 0, v))
        if isinstance(s.get("patternProperties"), dict) or isinstance(s.get("additionalProperties"), dict):
            special.append(i)
    memo[id(ws)] = (ws, by_name, special)
    return by_name, special


def item_schemas(schemas, res: Resolver, i: int) -> list:
    """Schemas that apply to array item ``i`` (for ordering)."""
    out = []
    for s in walk(schemas, res):
        prefix = s.get("prefixItems")
        items = s.get("items")
        if isinstance(prefix, list):
            out.append(prefix[i] if i < len(prefix) else items)
        elif isinstance(items, list):
            out.append(items[i] if i < len(items) else s.get("additionalItems"))
        else:
            out.append(items)
        if isinstance(s.get("contains"), dict):
            out.append(s["contains"])
    return [x for x in out if isinstance(x, dict)]


def number_text(v: float) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if not math.isfinite(v):
        raise ValueError(f"{v!r} is not a JSON number")
    return repr(v)


def canonical_json(value: Any, schema: Any, style: str | JsonStyle | None = None) -> str:
    """``value`` as canonical JSON in ``style`` (None: :data:`DEFAULT_STYLE`, the compiler's default) under
    ``schema`` (a JSON Schema dict or a pydantic model class)."""
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        schema = schema.model_json_schema()
    res = Resolver(schema)
    return canon(value, [schema], res, json_style(style))


def canon(v: Any, schemas: list, res: Resolver, st: JsonStyle = STYLES["compact"]) -> str:
    if isinstance(v, dict):
        names = order_names(schemas, res, st.required_first)
        named = set(names)
        keys = [n for n in names if n in v] + [k for k in v if k not in named]
        return "{" + st.item_sep.join(json.dumps(k, ensure_ascii=False) + st.key_sep
                                      + canon(v[k], child_schemas(schemas, res, k), res, st) for k in keys) + "}"
    if isinstance(v, list):
        return "[" + st.item_sep.join(canon(x, item_schemas(schemas, res, i), res, st) for i, x in enumerate(v)) + "]"
    if v is None:
        return "null"
    if isinstance(v, float) and v.is_integer() and abs(v) <= 2 ** 53 and _integer_place(schemas, res):
        return str(int(v))  # an integral value where the schema wants an integer: integer slots write digits only
    if isinstance(v, (bool, int, float)):
        return number_text(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    raise TypeError(f"not a JSON value: {type(v).__name__}")


def _integer_place(schemas, res: Resolver) -> bool:
    """Whether a schema at this place types its value as an integer (and not as any number)."""
    root = res.root if isinstance(res.root, dict) else {}
    sch = root.get("$schema") if isinstance(root.get("$schema"), str) else ""
    if "draft-03" in sch or "draft-04" in sch:  # there 3.0 is not an integer: it stays invalid, as written
        return False
    for s in walk(schemas, res):
        t = s.get("type")
        types = t if isinstance(t, list) else [t] if isinstance(t, str) else []
        if "integer" in types and "number" not in types:
            return True
    return False
