"""``not`` pushed down to keyword level: the :class:`Negator` a :class:`~agentkit.constrain.normalize.Normalizer` owns.

A schema is a conjunction, so its negation is the union of its parts' negations. A type-specific keyword holds for
every value of another type, so its negation only holds values of its own type (``not {minLength: 2}`` is the
strings shorter than 2). "Some property must..." negations (of ``additionalProperties``, ``patternProperties``,
``propertyNames``) become :attr:`Flat.need` conditions the object compiler enforces. What has no exact complement
here (``multipleOf``, ``uniqueItems``, tuple ``items``, ``if``...) raises.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import UnsupportedSchemaError
from .dnf import ALL_TYPES, MAX_ALTS, TOP, Flat, count_keyword, simple
from .ecma_regex import PatternError
from .formats import format_ast
from .limits import current

_STRING_KW = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KW = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_OBJECT_KW = ("properties", "required", "additionalProperties", "patternProperties", "minProperties",
              "maxProperties", "propertyNames", "dependencies", "dependentRequired", "dependentSchemas")
_ARRAY_KW = ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains")


def _others(*types: str) -> Flat | None:
    rest = tuple(t for t in ALL_TYPES if t not in types)
    return Flat(types=rest) if rest else None




class Negator:
    """``not s`` as flat alternatives. ``not`` and the positive form recurse into each other (``not {anyOf}``,
    ``not {not}``, ``$ref``), so the negator works for one :class:`~agentkit.constrain.normalize.Normalizer` (its
    ``norm``: ``product``, ``dnf_one``, ``ref``, ``synth`` and the draft flags)."""

    def __init__(self, norm: Any) -> None:
        self.norm = norm

    def negate(self, s: Any, p: str, ctx: int, visiting: frozenset) -> list[Flat]:
        """DNF of ``not s``; raises UnsupportedSchemaError where the complement is not expressible.

        ``s`` is a conjunction, so its negation is the union of its parts' negations. A type-specific keyword holds
        for every value of another type, so its negation only contains values of its own type."""
        current().check(p)
        if s is True:
            return []
        if s is False:
            return [TOP]
        if not isinstance(s, dict):
            raise UnsupportedSchemaError("not", p, "bad schema")
        ref = s.get("$ref")
        if isinstance(ref, str) and self.norm.old_draft:
            return self.norm.ref(ref, p, ctx, visiting, negate=True)
        out: list[Flat] = []

        def add(*fs: Flat | None) -> None:
            out.extend(f for f in fs if f is not None and f not in out)

        if "type" in s:
            ts = [s["type"]] if isinstance(s["type"], str) else list(s["type"])
            if "integer" in ts and "number" not in ts:
                add(Flat(types=("number",), nonint=True))
            add(_others(*ts, *(("number",) if "integer" in ts else ())))
        if "enum" in s or "const" in s:
            add(Flat(not_values=tuple(s["enum"]) if "enum" in s else (s["const"],)))
        if any(k in s for k in _STRING_KW):
            add(*self._not_string(s, p))
        if any(k in s for k in _NUMBER_KW):
            add(*self._not_number(s, p))
        if any(k in s for k in _OBJECT_KW):
            add(*self._not_object(s, p, ctx, visiting))
        if any(k in s for k in _ARRAY_KW):
            add(*self._not_array(s, p))
        add(*self._not_combined(s, p, ctx, visiting))
        for k in ("if", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"):
            if k in s:
                raise UnsupportedSchemaError("not", p, f"not {k}")
        if len(out) > MAX_ALTS:
            raise UnsupportedSchemaError("not", p, "too many alternatives")
        return out

    def _not_string(self, s: dict, p: str) -> list[Flat | None]:
        """``not`` of the string keywords (values of other types pass)."""
        out: list[Flat | None] = []
        if "minLength" in s and count_keyword(s, "minLength", p) > 0:
            out.append(Flat(types=("string",), max_len=count_keyword(s, "minLength", p) - 1))
        if "maxLength" in s:
            out.append(Flat(types=("string",), min_len=count_keyword(s, "maxLength", p) + 1))
        if isinstance(s.get("pattern"), str):
            out.append(Flat(types=("string",), not_patterns=((s["pattern"], p),)))
        if isinstance(s.get("format"), str) and self.format_enforced(s["format"], p):
            out.append(Flat(types=("string",), not_formats=((s["format"], p),)))
        return out

    def _not_number(self, s: dict, p: str) -> list[Flat | None]:
        """``not`` of the number keywords."""
        out: list[Flat | None] = []
        if "multipleOf" in s:
            raise UnsupportedSchemaError("not", p, "not multipleOf")
        f = simple({k: s[k] for k in _NUMBER_KW if k in s}, p, self.norm.draft4)
        if f.lo is not None:
            out.append(Flat(types=("number",), hi=f.lo, hi_ex=not f.lo_ex))
        if f.hi is not None:
            out.append(Flat(types=("number",), lo=f.hi, lo_ex=not f.hi_ex))
        return out

    def _not_object(self, s: dict, p: str, ctx: int, visiting: frozenset) -> list[Flat | None]:
        """``not`` of the object keywords: some property, extra key or count breaks them."""
        out: list[Flat | None] = []
        obj = ("object",)
        addl = s.get("additionalProperties")
        if addl is not None and addl is not True and addl != {}:  # some extra property breaks it
            spec = ("extra", tuple(s.get("properties") or {}), tuple(s.get("patternProperties") or {}))
            val = True if addl is False else self.norm.synth({"not": addl})
            out.append(Flat(types=obj, need=((spec, (val, f"{p}/additionalProperties")),)))
        for rx, sub in (s.get("patternProperties") or {}).items():
            if sub is not True and sub != {}:
                val = True if sub is False else self.norm.synth({"not": sub})
                out.append(Flat(types=obj, need=((("pattern", rx), (val, f"{p}/patternProperties")),)))
        if "propertyNames" in s and s["propertyNames"] not in (True, {}):
            spec = ("pname", (s["propertyNames"], f"{p}/propertyNames"))
            out.append(Flat(types=obj, need=((spec, (True, f"{p}/propertyNames")),)))
        for k in ("dependencies", "dependentRequired", "dependentSchemas"):
            for name, dep in (s.get(k) or {}).items():
                need = Flat(types=("object",), required=(name,))
                if isinstance(dep, list):
                    out.extend(replace(need, oclauses=(({d: (False, p)}, (), None, p),)) for d in dep)
                else:
                    out.extend(self.norm.product([need], self.negate(dep, f"{p}/{k}/{name}", ctx, visiting), p))
        for name in s.get("required") or ():
            out.append(Flat(types=("object",), oclauses=(({name: (False, p)}, (), None, p),)))
        for name, sub in (s.get("properties") or {}).items():
            if sub is True or sub == {}:
                continue
            neg = False if sub is False else self.norm.synth({"not": sub})
            out.append(Flat(types=("object",), required=(name,), oclauses=(({name: (neg, f"{p}/properties/{name}")},
                                                                      (), None, p),)))
        if "minProperties" in s and count_keyword(s, "minProperties", p) > 0:
            out.append(Flat(types=("object",), max_props=count_keyword(s, "minProperties", p) - 1))
        if "maxProperties" in s:
            out.append(Flat(types=("object",), min_props=count_keyword(s, "maxProperties", p) + 1))
        return out

    def _not_array(self, s: dict, p: str) -> list[Flat | None]:
        """``not`` of the array keywords."""
        out: list[Flat | None] = []
        for k in ("prefixItems", "additionalItems", "uniqueItems"):
            if k in s and s[k] not in (False, True, {}) or (k == "uniqueItems" and s.get(k) is True):
                raise UnsupportedSchemaError("not", p, f"not {k}")
        if "contains" in s:
            if "minContains" in s or "maxContains" in s:
                raise UnsupportedSchemaError("not", p, "not minContains/maxContains")
            c = s["contains"]
            if c is True:
                out.append(Flat(types=("array",), max_items=0))
            elif c is False:
                out.append(Flat(types=("array",)))
            else:
                out.append(Flat(types=("array",), aclauses=(((), (self.norm.synth({"not": c}), f"{p}/contains"), p),)))
        items = s.get("items")
        if isinstance(items, list):
            raise UnsupportedSchemaError("not", p, "not items (tuple)")
        if items is not None and items is not True and items != {}:
            neg = True if items is False else self.norm.synth({"not": items})
            out.append(Flat(types=("array",), contains=((neg, f"{p}/items"),)))
        if "minItems" in s and count_keyword(s, "minItems", p) > 0:
            out.append(Flat(types=("array",), max_items=count_keyword(s, "minItems", p) - 1))
        if "maxItems" in s:
            out.append(Flat(types=("array",), min_items=count_keyword(s, "maxItems", p) + 1))
        return out

    def _not_combined(self, s: dict, p: str, ctx: int, visiting: frozenset) -> list[Flat | None]:
        """``not`` of ``allOf`` / ``anyOf`` / ``not`` / ``$ref`` / ``oneOf`` (none of the branches, or two of them)."""
        out: list[Flat | None] = []
        for i, sub in enumerate(schema_list(s, "allOf", p)):
            out.extend(self.negate(sub, f"{p}/allOf/{i}", ctx, visiting))
        if "anyOf" in s:
            acc = [TOP]
            for i, sub in enumerate(schema_list(s, "anyOf", p)):
                acc = self.norm.product(acc, self.negate(sub, f"{p}/anyOf/{i}", ctx, visiting), p)
            out.extend(acc)
        if "not" in s:
            out.extend(self.norm.dnf_one(s["not"], f"{p}/not", ctx, visiting))
        ref = s.get("$ref")
        if isinstance(ref, str):
            out.extend(self.norm.ref(ref, p, ctx, visiting, negate=True))
        if "oneOf" in s:  # none of the branches, or at least two of them
            subs = schema_list(s, "oneOf", p)
            acc = [TOP]
            for i, sub in enumerate(subs):
                acc = self.norm.product(acc, self.negate(sub, f"{p}/oneOf/{i}", ctx, visiting), p)
            out.extend(acc)
            pos = [self.norm.dnf_one(sub, f"{p}/oneOf/{i}", ctx, visiting) for i, sub in enumerate(subs)]
            for i in range(len(pos)):
                for j in range(i + 1, len(pos)):
                    out.extend(self.norm.product(pos[i], pos[j], p))
        return out

    def format_enforced(self, name: str, p: str) -> bool:
        try:
            return format_ast(name) is not None
        except KeyError:
            raise UnsupportedSchemaError("format", p, f"format {name!r} cannot be enforced") from None
        except PatternError as e:
            raise UnsupportedSchemaError("format", p, str(e)) from None


def schema_list(s: dict, k: str, p: str) -> list:
    v = s.get(k, [])
    if not isinstance(v, list):
        raise UnsupportedSchemaError(k, p, f"{k} must be a list")
    return v
