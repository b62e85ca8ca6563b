"""Schema → list of :class:`~agentkit.constrain.dnf.Flat` alternatives (``$ref``, combinators, ``not``, dependencies).

``ctx`` is the recursion context of a value's place: how many times each ``$ref`` target has been entered on the
way down from the root. A reference entered ``max_depth`` times becomes an empty alternative (the recursion is
cut, which is tighter than the schema, never looser); under ``not`` a cut would be looser, so it raises.
"""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from typing import Any

import jsonschema

from ..errors import UnsupportedSchemaError
from . import automata
from .canonical import Resolver, pattern_matches
from .dnf import ALL_TYPES, MAX_ALTS, TOP, Flat, dec, effective_types, merge, quick_empty, simple
from .ecma_regex import PatternError, search_ast
from .formats import format_ast, number_regex

_STRING_KW = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KW = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_OBJECT_KW = ("properties", "required", "additionalProperties", "patternProperties", "minProperties",
              "maxProperties", "propertyNames", "dependencies", "dependentRequired", "dependentSchemas")
_ARRAY_KW = ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains")


def _others(*types: str) -> Flat | None:
    rest = tuple(t for t in ALL_TYPES if t not in types)
    return Flat(types=rest) if rest else None


class Normalizer:
    def __init__(self, root: Any, max_depth: int) -> None:
        self.root, self.max_depth = root, max_depth
        self.res = Resolver(root if isinstance(root, dict) else {})
        sch = root.get("$schema", "") if isinstance(root, dict) else ""
        sch = sch if isinstance(sch, str) else ""
        self.old_draft = any(d in sch for d in ("draft-03", "draft-04", "draft-06", "draft-07"))
        self.draft4 = any(d in sch for d in ("draft-03", "draft-04"))
        self.keep: list = []  # synthesized schemas (their ids key memo tables)
        self._validator = None

    # -- DNF ----------------------------------------------------------------------------------------------------
    def dnf(self, conj, ctx: tuple) -> list[Flat]:
        flats = [TOP]
        for s, p in conj:
            flats = self.product(flats, self.dnf_one(s, p, ctx, frozenset(), flats if len(conj) > 1 else None), p)
            if not flats:
                break
        return flats

    def product(self, a: list[Flat], b: list[Flat], p: str) -> list[Flat]:
        out: list[Flat] = []
        for x in a:
            for y in b:
                m = merge(x, y)
                if m is not None and not quick_empty(m) and m not in out:
                    out.append(m)
        if len(out) > MAX_ALTS:
            raise UnsupportedSchemaError("anyOf", p, f"more than {MAX_ALTS} alternatives after normalisation")
        return out

    def synth(self, s: dict) -> dict:
        self.keep.append(s)
        return s

    def dnf_one(self, s: Any, p: str, ctx: tuple, visiting: frozenset, context: list | None = None) -> list[Flat]:
        """DNF of ``s``; ``context`` (flats it will be conjoined with) only helps prove oneOf branches disjoint."""
        if s is True:
            return [TOP]
        if s is False:
            return []
        if not isinstance(s, dict):
            raise UnsupportedSchemaError("schema", p, f"a schema must be an object or a boolean, not {s!r}")
        ref = s.get("$ref")
        if isinstance(ref, str) and self.old_draft:
            return self._ref(ref, p, ctx, visiting)
        base = simple(s, p, self.draft4)
        alts = [] if quick_empty(base) else [base]
        if isinstance(ref, str):
            alts = self.product(alts, self._ref(ref, p, ctx, visiting), p)
        for i, sub in enumerate(_list(s, "allOf", p)):
            sub_ctx = alts if context is None else self.product(context, alts, p)
            alts = self.product(alts, self.dnf_one(sub, f"{p}/allOf/{i}", ctx, visiting, sub_ctx), p)
        if "anyOf" in s:
            union: list[Flat] = []
            for i, sub in enumerate(_list(s, "anyOf", p)):
                union += [f for f in self.dnf_one(sub, f"{p}/anyOf/{i}", ctx, visiting) if f not in union]
            alts = self.product(alts, union, p)
        if "oneOf" in s:
            alts = self._one_of(alts, _list(s, "oneOf", p), p, ctx, visiting, context)
        if "not" in s:
            alts = self.product(alts, self.negate(s["not"], f"{p}/not", ctx, visiting), p)
        if "if" in s and ("then" in s or "else" in s):
            cond = self.dnf_one(s["if"], f"{p}/if", ctx, visiting)
            then = self.product(cond, self.dnf_one(s.get("then", True), f"{p}/then", ctx, visiting), p)
            neg = self.negate(s["if"], f"{p}/if", ctx, visiting)
            other = self.product(neg, self.dnf_one(s.get("else", True), f"{p}/else", ctx, visiting), p)
            alts = self.product(alts, then + [f for f in other if f not in then], p)
        for k in ("dependencies", "dependentRequired", "dependentSchemas"):
            deps = s.get(k)
            if not isinstance(deps, dict):
                continue
            for name, dep in deps.items():
                if isinstance(dep, list):  # presence implications: kept in the Flat (see Flat.deps)
                    continue
                dp = f"{p}/{k}/{name}"
                absent = Flat(oclauses=(({name: (False, dp)}, (), None, p),))
                need = [Flat(required=(name,))]
                present = self.product(need, self.dnf_one(dep, dp, ctx, visiting, self.product(need, alts, dp)), dp)
                alts = self.product(alts, [absent] + present, dp)
        return alts

    def _ref(self, ref: str, p: str, ctx: tuple, visiting: frozenset, negate: bool = False) -> list[Flat]:
        target, tp = self.res.resolve(ref, p)
        if tp in visiting:
            raise UnsupportedSchemaError("$ref", p, f"reference cycle through {tp} with no value in between")
        if dict(ctx).get(tp, 0) >= self.max_depth:
            if negate:
                raise UnsupportedSchemaError("$ref", p, "recursion cut under 'not' would be looser")
            return []
        fn = self.negate if negate else self.dnf_one
        return [replace(f, refs=f.refs | {tp}) for f in fn(target, tp, ctx, visiting | {tp})]

    def _one_of(self, alts, branches, p, ctx, visiting, context=None) -> list[Flat]:
        parts = [self.product(alts, self.dnf_one(sub, f"{p}/oneOf/{i}", ctx, visiting), p)
                 for i, sub in enumerate(branches)]
        seen = parts if context is None else [self.product(context, part, p) for part in parts]
        overlap = any(not self.disjoint(a, b, ctx) for i in range(len(seen)) for j in range(i + 1, len(seen))
                      for a in seen[i] for b in seen[j])
        if not overlap:
            out: list[Flat] = []
            for part in parts:
                out += [f for f in part if f not in out]
            return out
        try:
            negs = [self.negate(sub, f"{p}/oneOf/{i}", ctx, visiting) for i, sub in enumerate(branches)]
            out = []
            for i, part in enumerate(parts):
                acc = part
                for j, neg in enumerate(negs):
                    if j != i and acc:
                        acc = self.product(acc, neg, p)
                out += [f for f in acc if f not in out]
            return out
        except UnsupportedSchemaError as e:
            raise UnsupportedSchemaError("oneOf", p, f"branches may overlap and cannot be negated ({e})") from None

    # -- negation -----------------------------------------------------------------------------------------------
    def negate(self, s: Any, p: str, ctx: tuple, visiting: frozenset) -> list[Flat]:
        """DNF of ``not s``; raises UnsupportedSchemaError where the complement is not expressible."""
        if s is True:
            return []
        if s is False:
            return [TOP]
        if not isinstance(s, dict):
            raise UnsupportedSchemaError("not", p, "bad schema")
        ref = s.get("$ref")
        if isinstance(ref, str) and self.old_draft:
            return self._ref(ref, p, ctx, visiting, negate=True)
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
            if s.get("minLength", 0) > 0:
                add(Flat(types=("string",), max_len=int(s["minLength"]) - 1))
            if "maxLength" in s:
                add(Flat(types=("string",), min_len=int(s["maxLength"]) + 1))
            if isinstance(s.get("pattern"), str):
                add(Flat(types=("string",), not_patterns=((s["pattern"], p),)))
            if isinstance(s.get("format"), str) and self.format_enforced(s["format"], p):
                add(Flat(types=("string",), not_formats=((s["format"], p),)))
            add(_others("string"))
        if any(k in s for k in _NUMBER_KW):
            if "multipleOf" in s:
                raise UnsupportedSchemaError("not", p, "not multipleOf")
            f = simple({k: s[k] for k in _NUMBER_KW if k in s}, p, self.draft4)
            if f.lo is not None:
                add(Flat(types=("number",), hi=f.lo, hi_ex=not f.lo_ex))
            if f.hi is not None:
                add(Flat(types=("number",), lo=f.hi, lo_ex=not f.hi_ex))
            add(_others("number", "integer"))
        if any(k in s for k in _OBJECT_KW):
            obj = ("object",)
            addl = s.get("additionalProperties")
            if addl is not None and addl is not True and addl != {}:  # some extra property breaks it
                spec = ("extra", tuple(s.get("properties") or {}), tuple(s.get("patternProperties") or {}))
                val = True if addl is False else self.synth({"not": addl})
                add(Flat(types=obj, need=((spec, (val, f"{p}/additionalProperties")),)))
            for rx, sub in (s.get("patternProperties") or {}).items():
                if sub is not True and sub != {}:
                    val = True if sub is False else self.synth({"not": sub})
                    add(Flat(types=obj, need=((("pattern", rx), (val, f"{p}/patternProperties")),)))
            if "propertyNames" in s and s["propertyNames"] not in (True, {}):
                spec = ("pname", (s["propertyNames"], f"{p}/propertyNames"))
                add(Flat(types=obj, need=((spec, (True, f"{p}/propertyNames")),)))
            for k in ("dependencies", "dependentRequired", "dependentSchemas"):
                for name, dep in (s.get(k) or {}).items():
                    need = Flat(types=("object",), required=(name,))
                    if isinstance(dep, list):
                        add(*(replace(need, oclauses=(({d: (False, p)}, (), None, p),)) for d in dep))
                    else:
                        add(*self.product([need], self.negate(dep, f"{p}/{k}/{name}", ctx, visiting), p))
            for name in s.get("required") or ():
                add(Flat(types=("object",), oclauses=(({name: (False, p)}, (), None, p),)))
            for name, sub in (s.get("properties") or {}).items():
                if sub is True or sub == {}:
                    continue
                neg = False if sub is False else self.synth({"not": sub})
                add(Flat(types=("object",), required=(name,), oclauses=(({name: (neg, f"{p}/properties/{name}")},
                                                                          (), None, p),)))
            if s.get("minProperties", 0) > 0:
                add(Flat(types=("object",), max_props=int(s["minProperties"]) - 1))
            if "maxProperties" in s:
                add(Flat(types=("object",), min_props=int(s["maxProperties"]) + 1))
            add(_others("object"))
        if any(k in s for k in _ARRAY_KW):
            for k in ("prefixItems", "additionalItems", "uniqueItems"):
                if k in s and s[k] not in (False, True, {}) or (k == "uniqueItems" and s.get(k) is True):
                    raise UnsupportedSchemaError("not", p, f"not {k}")
            if "contains" in s:
                if "minContains" in s or "maxContains" in s:
                    raise UnsupportedSchemaError("not", p, "not minContains/maxContains")
                c = s["contains"]
                if c is True:
                    add(Flat(types=("array",), max_items=0))
                elif c is False:
                    add(Flat(types=("array",)))
                else:
                    add(Flat(types=("array",), aclauses=(((), (self.synth({"not": c}), f"{p}/contains"), p),)))
            items = s.get("items")
            if isinstance(items, list):
                raise UnsupportedSchemaError("not", p, "not items (tuple)")
            if items is not None and items is not True and items != {}:
                neg = True if items is False else self.synth({"not": items})
                add(Flat(types=("array",), contains=((neg, f"{p}/items"),)))
            if s.get("minItems", 0) > 0:
                add(Flat(types=("array",), max_items=int(s["minItems"]) - 1))
            if "maxItems" in s:
                add(Flat(types=("array",), min_items=int(s["maxItems"]) + 1))
            add(_others("array"))
        for i, sub in enumerate(_list(s, "allOf", p)):
            add(*self.negate(sub, f"{p}/allOf/{i}", ctx, visiting))
        if "anyOf" in s:
            acc = [TOP]
            for i, sub in enumerate(_list(s, "anyOf", p)):
                acc = self.product(acc, self.negate(sub, f"{p}/anyOf/{i}", ctx, visiting), p)
            add(*acc)
        if "not" in s:
            add(*self.dnf_one(s["not"], f"{p}/not", ctx, visiting))
        if isinstance(ref, str):
            add(*self._ref(ref, p, ctx, visiting, negate=True))
        if "oneOf" in s:  # none of the branches, or at least two of them
            subs = _list(s, "oneOf", p)
            acc = [TOP]
            for i, sub in enumerate(subs):
                acc = self.product(acc, self.negate(sub, f"{p}/oneOf/{i}", ctx, visiting), p)
            add(*acc)
            pos = [self.dnf_one(sub, f"{p}/oneOf/{i}", ctx, visiting) for i, sub in enumerate(subs)]
            for i in range(len(pos)):
                for j in range(i + 1, len(pos)):
                    add(*self.product(pos[i], pos[j], p))
        for k in ("if", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"):
            if k in s:
                raise UnsupportedSchemaError("not", p, f"not {k}")
        if len(out) > MAX_ALTS:
            raise UnsupportedSchemaError("not", p, "too many alternatives")
        return out

    def format_enforced(self, name: str, p: str) -> bool:
        try:
            return format_ast(name) is not None
        except KeyError:
            raise UnsupportedSchemaError("format", p, f"format {name!r} cannot be enforced") from None
        except PatternError as e:
            raise UnsupportedSchemaError("format", p, str(e)) from None

    # -- emptiness and disjointness -------------------------------------------------------------------------------
    def disjoint(self, a: Flat, b: Flat, ctx: tuple, depth: int = 2) -> bool:
        m = merge(a, b)
        return m is None or self.flat_empty(m, ctx, depth)

    def flat_empty(self, f: Flat, ctx: tuple, depth: int) -> bool:
        return all(self.type_empty(f, t, ctx, depth) for t in effective_types(f))

    def type_empty(self, f: Flat, t: str, ctx: tuple, depth: int) -> bool:
        from .dnf import _type_of, vkey

        excluded = {vkey(v) for v in f.not_values}
        if f.enum is not None:
            vals = [v for v in f.enum if _type_of(v, t) and vkey(v) not in excluded]
            if not vals:
                return True
            if t == "string" and not f.patterns and not f.formats:
                return not any(f.min_len <= len(v) <= (f.max_len if f.max_len is not None else len(v))
                               for v in vals)
            return False
        if t == "null":
            return vkey(None) in excluded
        if t == "boolean":
            return vkey(True) in excluded and vkey(False) in excluded
        if t in ("number", "integer"):
            return number_regex(f.lo, f.lo_ex, f.hi, f.hi_ex, integer=t == "integer", nonint=f.nonint) is None
        if t == "string":
            if not (f.patterns or f.formats or f.not_patterns or f.not_formats):
                return False
            try:
                asts = [search_ast(x) for x, _ in f.patterns] + [format_ast(x) for x, _ in f.formats]
                nots = [search_ast(x) for x, _ in f.not_patterns] + [format_ast(x) for x, _ in f.not_formats]
            except (PatternError, KeyError):
                return False
            return automata.ast_empty([a for a in asts if a is not None], lengths=(f.min_len, f.max_len),
                                      not_asts=[a for a in nots if a is not None])
        if t == "object":
            for name in f.required:
                conj = self.key_conj(f, name)
                if any(s is False for s, _ in conj):
                    return True
                if depth > 0 and all(self.flat_empty(x, ctx, depth - 1) for x in self.dnf(conj, ctx)):
                    return True
            return False
        if t == "array":
            for i in range(min(f.min_items, 8)):
                conj = self.item_conj(f, i)
                if depth > 0 and all(self.flat_empty(x, ctx, depth - 1) for x in self.dnf(conj, ctx)):
                    return True
            return False
        return False

    # -- per-key / per-item subschemas ----------------------------------------------------------------------------
    def key_conj(self, f: Flat, name: str) -> list:
        conj = []
        for props, pats, addl, _p in f.oclauses:
            if name in props:
                conj.append(props[name])
                continue
            hit = [sch for rx, sch in pats if pattern_matches(rx, name)]
            conj += hit
            if not hit and addl is not None:
                conj.append(addl)
        return conj

    def item_conj(self, f: Flat, i: int) -> list:
        conj = []
        for prefix, rest, _p in f.aclauses:
            if i < len(prefix):
                conj.append(prefix[i])
            elif rest is not None:
                conj.append(rest)
        return conj

    # -- validation of literal values (enum members, property names) ---------------------------------------------
    def _literal_only(self, conj) -> list | None:
        """The schemas behind ``conj`` when they hold only type/enum/const and annotations, else None."""
        out, todo, seen = [], [s for s, _ in conj], set()
        while todo:
            s = todo.pop()
            if s is True:
                continue
            if not isinstance(s, dict) or id(s) in seen or not set(s) <= _LITERAL_KEYS:
                return None
            seen.add(id(s))
            if isinstance(s.get("$ref"), str):
                try:
                    todo.append(self.res.resolve(s["$ref"], "#")[0])
                except UnsupportedSchemaError:
                    return None
            if isinstance(s.get("type"), (str, list)) and not set([s["type"]] if isinstance(s["type"], str)
                                                                  else s["type"]) <= {*ALL_TYPES, "integer"}:
                return None
            out.append(s)
        return out

    def valid_values(self, values, conj, p: str) -> list:
        """The members of ``values`` that every schema in ``conj`` accepts."""
        if not conj:
            return list(values)
        simple_conj = self._literal_only(conj)
        if simple_conj is None:
            return [v for v in values if self.valid(v, conj, p)]
        from .dnf import _type_of, vkey

        out = list(values)
        for s in simple_conj:  # only type/enum/const/annotations: no need for a validator
            ts = s.get("type")
            ts = [ts] if isinstance(ts, str) else ts
            keys = {vkey(v) for v in s["enum"]} if isinstance(s.get("enum"), list) else None
            out = [v for v in out if (ts is None or any(_type_of(v, t) for t in ts))
                   and (keys is None or vkey(v) in keys) and ("const" not in s or vkey(v) == vkey(s["const"]))]
        return out

    def valid(self, value: Any, conj, p: str) -> bool:
        if not conj:
            return True
        if self._validator is None:
            cls = jsonschema.validators.validator_for(self.root if isinstance(self.root, dict) else {},
                                                      default=jsonschema.Draft202012Validator)
            self._validator = cls(self.root if isinstance(self.root, (dict, bool)) else {},
                                  format_checker=cls.FORMAT_CHECKER)
        try:
            return self._validator.evolve(schema={"allOf": [s for s, _ in conj]}).is_valid(value)
        except Exception as e:  # noqa: BLE001 -- an unresolvable $ref, a bad regex...
            raise UnsupportedSchemaError("enum", p, f"cannot check a literal value: {type(e).__name__}") from None


_LITERAL_KEYS = {"type", "enum", "const", "title", "description", "default", "examples", "$comment", "$id",
                 "$schema", "deprecated", "readOnly", "writeOnly", "nullable", "$ref", "definitions", "$defs",
                 "x-nullable", "example"}


def _list(s: dict, k: str, p: str) -> list:
    v = s.get(k, [])
    if not isinstance(v, list):
        raise UnsupportedSchemaError(k, p, f"{k} must be a list")
    return v


_ = (json, Decimal, dec)
