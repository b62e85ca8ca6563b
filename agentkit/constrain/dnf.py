"""Schemas in disjunctive normal form: a list of :class:`Flat` alternatives, each a plain conjunction of keywords.

``$ref``, ``allOf`` (merged keyword by keyword), ``anyOf``, ``oneOf`` (only when its branches are provably
disjoint, or made disjoint with negations), ``not`` (pushed down to keyword level), ``if``/``then``/``else`` and the
dependency keywords are all rewritten here, so the compiler only ever sees flat alternatives. Subschemas of
properties and items stay raw ``(schema, pointer)`` pairs, expanded when their own value is compiled.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from ..errors import UnsupportedSchemaError

ALL_TYPES = ("object", "array", "string", "number", "boolean", "null")
KNOWN_TYPES = set(ALL_TYPES) | {"integer"}
MAX_ALTS = 256
# assertion keywords we do not implement: anything else unknown is an annotation
UNSUPPORTED = ("unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef", "dependentSchemas_",)


def vkey(v: Any) -> str:
    """A key equal for JSON-equal values (1 == 1.0, True != 1)."""
    if isinstance(v, str):
        return "s" + v
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, int):
        return f"i{v}"
    if isinstance(v, float):
        return f"i{int(v)}" if v.is_integer() else f"f{v!r}"

    def norm(x):
        if isinstance(x, bool) or x is None or isinstance(x, str):
            return x
        if isinstance(x, float) and x.is_integer():
            return int(x)
        if isinstance(x, (int, float)):
            return x
        if isinstance(x, list):
            return [norm(i) for i in x]
        return {k: norm(i) for k, i in x.items()}

    return json.dumps(norm(v), sort_keys=True, ensure_ascii=False) + ("#b" if isinstance(v, bool) else "")


def dec(v: Any, kw: str, ptr: str) -> Decimal:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise UnsupportedSchemaError(kw, ptr, f"not a number: {v!r}")
    if isinstance(v, float) and not math.isfinite(v):  # 1e999 parses to inf; NaN/Infinity are not JSON
        raise UnsupportedSchemaError(kw, ptr, f"{v!r} is not a finite JSON number")
    try:
        return Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
    except (InvalidOperation, ValueError):
        raise UnsupportedSchemaError(kw, ptr, f"bad number {v!r}") from None


@dataclass(frozen=True)
class Flat:
    """One conjunction of keyword constraints (each keyword constrains only values of its own type)."""

    types: tuple | None = None  # ordered; None = every type
    nonint: bool = False  # numbers must not be integers
    enum: tuple | None = None  # allowed values
    not_values: tuple = ()
    min_len: int = 0
    max_len: int | None = None
    patterns: tuple = ()  # (pattern, ptr)
    not_patterns: tuple = ()
    formats: tuple = ()  # (format, ptr)
    not_formats: tuple = ()
    lo: Decimal | None = None
    lo_ex: bool = False
    hi: Decimal | None = None
    hi_ex: bool = False
    mults: tuple = ()  # (Decimal, ptr)
    # (props {name: (schema, ptr)}, pats ((regex, (schema, ptr)), ...), addl (schema, ptr) or None if absent, ptr)
    oclauses: tuple = ()
    required: tuple = ()
    min_props: int = 0
    max_props: int | None = None
    pnames: tuple = ()  # (schema, ptr)
    aclauses: tuple = ()  # (prefix ((schema, ptr), ...), rest (schema, ptr)|None, ptr)
    min_items: int = 0
    max_items: int | None = None
    unique: str | None = None  # ptr of uniqueItems: true
    contains: tuple = ()  # (schema, ptr)
    deps: tuple = ()  # (name, (names required when name is present), ptr)
    need: tuple = ()  # (key spec, (schema, ptr)): some property with such a key must have such a value (from not)
    refs: frozenset = field(default_factory=frozenset)

TOP = Flat()


def _types_and(a: tuple | None, b: tuple | None) -> tuple | None:
    if a is None:
        return b
    if b is None:
        return a
    out = []
    for t in a:
        if t in b:
            out.append(t)
        elif t == "integer" and "number" in b or t == "number" and "integer" in b:
            out.append("integer")
    return tuple(dict.fromkeys(out))


def _bound(x, x_ex, y, y_ex, pick_max: bool):
    if x is None:
        return y, y_ex
    if y is None:
        return x, x_ex
    if x == y:
        return x, x_ex or y_ex
    return (x, x_ex) if (x > y) == pick_max else (y, y_ex)


def merge(a: Flat, b: Flat) -> Flat | None:
    """The conjunction of two flats; None when trivially contradictory."""
    if a is TOP:
        return b
    if b is TOP:
        return a
    types = _types_and(a.types, b.types)
    if types is not None and not types:
        return None
    enum = a.enum
    if b.enum is not None:
        if enum is None:
            enum = b.enum
        else:
            keys = {vkey(v) for v in b.enum}
            enum = tuple(v for v in enum if vkey(v) in keys)
    if enum is not None and not enum:
        return None
    lo, lo_ex = _bound(a.lo, a.lo_ex, b.lo, b.lo_ex, True)
    hi, hi_ex = _bound(a.hi, a.hi_ex, b.hi, b.hi_ex, False)
    return Flat(
        types=types, nonint=a.nonint or b.nonint, enum=enum, not_values=a.not_values + b.not_values,
        min_len=max(a.min_len, b.min_len), max_len=_min(a.max_len, b.max_len),
        patterns=_uniq(a.patterns + b.patterns), not_patterns=_uniq(a.not_patterns + b.not_patterns),
        formats=_uniq(a.formats + b.formats), not_formats=_uniq(a.not_formats + b.not_formats),
        lo=lo, lo_ex=lo_ex, hi=hi, hi_ex=hi_ex, mults=_uniq(a.mults + b.mults),
        oclauses=a.oclauses + b.oclauses, required=tuple(dict.fromkeys(a.required + b.required)),
        min_props=max(a.min_props, b.min_props), max_props=_min(a.max_props, b.max_props),
        pnames=a.pnames + b.pnames, aclauses=a.aclauses + b.aclauses,
        min_items=max(a.min_items, b.min_items), max_items=_min(a.max_items, b.max_items),
        unique=a.unique or b.unique, contains=a.contains + b.contains, deps=_uniq(a.deps + b.deps),
        need=a.need + tuple(x for x in b.need if all(x is not y for y in a.need)),
        refs=a.refs | b.refs)


def _min(x, y):
    return y if x is None else x if y is None else min(x, y)


def _uniq(t: tuple) -> tuple:
    return tuple(dict.fromkeys(t))


def quick_empty(f: Flat) -> bool:
    """Cheap contradiction checks (per-type parts that are empty drop their type)."""
    return effective_types(f) == ()


def effective_types(f: Flat) -> tuple:
    types = f.types if f.types is not None else ALL_TYPES
    if "number" in types and "integer" in types:
        types = tuple(t for t in types if t != "integer")
    out = []
    for t in types:
        if t == "string" and f.max_len is not None and f.min_len > f.max_len:
            continue
        if t in ("number", "integer") and f.lo is not None and f.hi is not None and (
                f.lo > f.hi or (f.lo == f.hi and (f.lo_ex or f.hi_ex))):
            continue
        if t == "integer" and f.nonint:
            continue
        if t == "object" and ((f.max_props is not None and (f.min_props > f.max_props
                                                            or len(f.required) > f.max_props))
                              or _required_conflict(f)):
            continue
        if t == "array" and f.max_items is not None and f.min_items > f.max_items:
            continue
        if f.enum is not None and not any(type_of(v, t) for v in f.enum):
            continue
        out.append(t)
    return tuple(out)


_ANNOT = {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"}


def _lit_sets(s: Any) -> tuple[set | None, set]:
    """(allowed value keys or None for "not only literals", excluded value keys) of a literal-only schema."""
    if s is False:
        return set(), set()
    if not isinstance(s, dict):
        return None, set()
    keys = set(s) - _ANNOT
    if keys and keys <= {"const", "enum", "type"} and ("const" in s or isinstance(s.get("enum"), list)):
        vals = [s["const"]] if "const" in s else s["enum"]
        allowed = {vkey(v) for v in vals}
        if "const" in s and isinstance(s.get("enum"), list):
            allowed &= {vkey(v) for v in s["enum"]}
        return allowed, set()
    if keys == {"not"}:
        inner, _ = _lit_sets(s["not"])
        return None, inner or set()
    return None, set()


def _required_conflict(f: Flat) -> bool:
    """A required property whose literal constraints (const/enum/not const, from several clauses) leave nothing,
    or that a clause forbids: cheap pruning for if/then/else and discriminated unions."""
    for name in f.required:
        allowed: set | None = None
        excluded: set = set()
        for props, pats, addl, _p in f.oclauses:
            if name in props:
                a, e = _lit_sets(props[name][0])
                excluded |= e
                if a is not None:
                    allowed = a if allowed is None else allowed & a
            elif not pats and addl is not None and addl[0] is False:
                return True
        if allowed is not None and not (allowed - excluded):
            return True
    return False


def type_of(v: Any, t: str) -> bool:
    if t == "null":
        return v is None
    if t == "boolean":
        return isinstance(v, bool)
    if t == "string":
        return isinstance(v, str)
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return t == "number" or float(v).is_integer()


def simple(s: dict, p: str, draft4: bool) -> Flat:
    """The plain keywords of one schema (no combinators, no $ref) as a Flat."""
    kw: dict[str, Any] = {}
    t = s.get("type")
    if t is not None:
        ts = [t] if isinstance(t, str) else t
        if not isinstance(ts, list) or any(x not in KNOWN_TYPES for x in ts):
            raise UnsupportedSchemaError("type", p, f"unknown type {t!r}")
        kw["types"] = tuple(dict.fromkeys(ts))
    if "enum" in s:
        if not isinstance(s["enum"], list):
            raise UnsupportedSchemaError("enum", p, "enum is not a list")
        kw["enum"] = tuple(s["enum"])
    if "const" in s:
        kw["enum"] = (s["const"],) if "enum" not in kw else tuple(
            v for v in kw["enum"] if vkey(v) == vkey(s["const"]))
    if "minLength" in s:
        kw["min_len"] = count_keyword(s, "minLength", p)
    if "maxLength" in s:
        kw["max_len"] = count_keyword(s, "maxLength", p)
    if isinstance(s.get("pattern"), str):
        kw["patterns"] = ((s["pattern"], p),)
    if isinstance(s.get("format"), str):
        kw["formats"] = ((s["format"], p),)
    _number_keywords(s, p, kw)
    if any(k in s for k in ("properties", "patternProperties", "additionalProperties")):
        props = s.get("properties") or {}
        pats = s.get("patternProperties") or {}
        if not isinstance(props, dict) or not isinstance(pats, dict):
            raise UnsupportedSchemaError("properties", p, "not an object")
        addl = s.get("additionalProperties")
        kw["oclauses"] = (({k: (v, f"{p}/properties/{pointer_escape(k)}") for k, v in props.items()},
                           tuple((rx, (v, f"{p}/patternProperties/{pointer_escape(rx)}")) for rx, v in pats.items()),
                           None if addl is None else (addl, f"{p}/additionalProperties"), p),)
    if isinstance(s.get("required"), list):
        kw["required"] = tuple(dict.fromkeys(r for r in s["required"] if isinstance(r, str)))
    for name, attr in (("minProperties", "min_props"), ("maxProperties", "max_props"),
                       ("minItems", "min_items"), ("maxItems", "max_items")):
        if name in s:
            kw[attr] = count_keyword(s, name, p)
    deps = []
    for k in ("dependencies", "dependentRequired"):
        if isinstance(s.get(k), dict):
            deps += [(name, tuple(d for d in dep if isinstance(d, str)), f"{p}/{k}/{pointer_escape(name)}")
                     for name, dep in s[k].items() if isinstance(dep, list)]
    if deps:
        kw["deps"] = tuple(deps)
    if "propertyNames" in s:
        kw["pnames"] = ((s["propertyNames"], f"{p}/propertyNames"),)
    _array_keywords(s, p, kw)
    for k in UNSUPPORTED:
        if k in s and s[k] is not True and not (k.startswith("unevaluated") and s[k] == {}):
            raise UnsupportedSchemaError(k, p)
    return Flat(**kw) if kw else TOP


def _number_keywords(s: dict, p: str, kw: dict[str, Any]) -> None:
    """``simple``'s number keywords: bounds (draft-4 boolean and later numeric exclusives) and ``multipleOf``."""
    for name, attr, is_lo in (("minimum", "lo", True), ("maximum", "hi", False)):
        if name in s:
            kw[attr] = dec(s[name], name, p)
            ex = s.get("exclusiveMinimum" if is_lo else "exclusiveMaximum")
            kw[attr + "_ex"] = ex is True
    for name, is_lo in (("exclusiveMinimum", True), ("exclusiveMaximum", False)):
        v = s.get(name)
        if v is not None and not isinstance(v, bool):
            x = dec(v, name, p)
            cur = Flat(**{k: kw[k] for k in ("lo", "lo_ex", "hi", "hi_ex") if k in kw})
            lo, lo_ex = _bound(cur.lo, cur.lo_ex, x, True, True) if is_lo else (cur.lo, cur.lo_ex)
            hi, hi_ex = (cur.hi, cur.hi_ex) if is_lo else _bound(cur.hi, cur.hi_ex, x, True, False)
            kw.update(lo=lo, lo_ex=lo_ex, hi=hi, hi_ex=hi_ex)
    if "multipleOf" in s:
        kw["mults"] = ((dec(s["multipleOf"], "multipleOf", p), p),)


def _array_keywords(s: dict, p: str, kw: dict[str, Any]) -> None:
    """``simple``'s array keywords: items (tuple forms of every draft), ``uniqueItems``, ``contains``."""
    if any(k in s for k in ("items", "prefixItems", "additionalItems")):
        items, prefix = s.get("items"), s.get("prefixItems")
        if isinstance(prefix, list):
            pre = tuple((x, f"{p}/prefixItems/{i}") for i, x in enumerate(prefix))
            rest = None if items is None or items is True else (items, f"{p}/items")
        elif isinstance(items, list):
            pre = tuple((x, f"{p}/items/{i}") for i, x in enumerate(items))
            add = s.get("additionalItems")
            rest = None if add is None or add is True else (add, f"{p}/additionalItems")
        else:
            pre, rest = (), (None if items is None or items is True else (items, f"{p}/items"))
        if pre or rest is not None:
            kw["aclauses"] = ((pre, rest, p),)
    if s.get("uniqueItems") is True:
        kw["unique"] = p
    if "contains" in s:
        mn, mx = s.get("minContains", 1), s.get("maxContains")
        if mx is not None or mn != 1:
            raise UnsupportedSchemaError("minContains" if mn != 1 else "maxContains", p)
        kw["contains"] = ((s["contains"], f"{p}/contains"),)


def count_keyword(s: dict, name: str, p: str) -> int:
    """A counting keyword's value (``minLength``, ``maxItems``...): a non-negative integer (``3.0`` too)."""
    v = s[name]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()) \
            or v < 0:
        raise UnsupportedSchemaError(name, p, f"must be a non-negative integer, not {v!r}")
    return int(v)


def pointer_escape(k: str) -> str:
    return k.replace("~", "~0").replace("/", "~1")
