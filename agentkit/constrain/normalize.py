"""Schema → list of :class:`~agentkit.constrain.dnf.Flat` alternatives (``$ref``, combinators, ``not``, dependencies).

``ctx`` is the recursion depth of a value's place: how many *recursive* ``$ref`` targets (those that can reach
themselves) were entered on the way down from the root. Past ``max_depth`` turns of the longest reference cycle
(``max_depth`` levels of a self-recursive definition; three definitions that recurse through each other count three
entries a level) a recursive reference becomes an empty alternative: the recursion is cut, which is tighter than
the schema, never looser; under ``not`` a cut would be looser, so it raises. Other references cost nothing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import SchemaLimitError, UnsupportedSchemaError
from . import automata
from .canonical import Resolver, pattern_matches
from .dnf import MAX_ALTS, TOP, Flat, effective_types, merge, quick_empty, simple, type_of, vkey
from .ecma_regex import PatternError
from .formats import format_ast, number_regex
from .json_regex import search_ast
from .limits import current
from .negation import Negator, schema_list


class Normalizer:
    """The normalise step of one compile: ``(schemas, recursion depth)`` → flat alternatives (:meth:`dnf`), with the
    per-key and per-item subschemas of a flat (:meth:`key_conj`, :meth:`item_conj`) and the emptiness checks that
    prove ``oneOf`` branches disjoint. It builds no template nodes; the layout builder asks it for each value's
    alternatives, place by place (the recursion cut depends on the depth ``ctx`` a place is reached at, so the
    whole schema is never rewritten at once). Its answers depend only on the arguments and the root schema: the
    state it keeps is the recursive-target analysis (computed once from the root) and the schemas it synthesises
    for ``not`` (kept alive because memo keys use their ids)."""

    def __init__(self, root: Any, max_depth: int) -> None:
        self.root, self.max_depth = root, max_depth
        self.res = Resolver(root if isinstance(root, dict) else {})
        sch = root.get("$schema", "") if isinstance(root, dict) else ""
        sch = sch if isinstance(sch, str) else ""
        self.old_draft = any(d in sch for d in ("draft-03", "draft-04", "draft-06", "draft-07"))
        self.draft4 = any(d in sch for d in ("draft-03", "draft-04"))
        self.keep: list = []  # synthesized schemas (their ids key memo tables)
        self._recursive: set[str] | None = None
        self.budget = max_depth
        self.neg = Negator(self)

    def negate(self, s: Any, p: str, ctx: int, visiting: frozenset) -> list[Flat]:
        """DNF of ``not s`` (see :class:`~agentkit.constrain.negation.Negator`)."""
        return self.neg.negate(s, p, ctx, visiting)

    # -- DNF ----------------------------------------------------------------------------------------------------
    def dnf(self, conj, ctx: int) -> list[Flat]:
        current().check(conj[0][1] if conj else None)  # every value compiled passes here: deadline, cancel
        flats = [TOP]
        for s, p in conj:
            flats = self.product(flats, self.dnf_one(s, p, ctx, frozenset(), flats if len(conj) > 1 else None), p)
            if not flats:
                break
        return flats

    def product(self, a: list[Flat], b: list[Flat], p: str) -> list[Flat]:
        current().check(p)
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

    def dnf_one(self, s: Any, p: str, ctx: int, visiting: frozenset, context: list | None = None) -> list[Flat]:
        """DNF of ``s``; ``context`` (flats it will be conjoined with) only helps prove oneOf branches disjoint."""
        current().check(p)
        if s is True:
            return [TOP]
        if s is False:
            return []
        if not isinstance(s, dict):
            raise UnsupportedSchemaError("schema", p, f"a schema must be an object or a boolean, not {s!r}")
        ref = s.get("$ref")
        if isinstance(ref, str) and self.old_draft:
            return self.ref(ref, p, ctx, visiting)
        base = simple(s, p, self.draft4)
        alts = [] if quick_empty(base) else [base]
        if isinstance(ref, str):
            alts = self.product(alts, self.ref(ref, p, ctx, visiting), p)
        for i, sub in enumerate(schema_list(s, "allOf", p)):
            sub_ctx = alts if context is None else self.product(context, alts, p)
            alts = self.product(alts, self.dnf_one(sub, f"{p}/allOf/{i}", ctx, visiting, sub_ctx), p)
        if "anyOf" in s:
            union: list[Flat] = []
            for i, sub in enumerate(schema_list(s, "anyOf", p)):
                union += [f for f in self.dnf_one(sub, f"{p}/anyOf/{i}", ctx, visiting) if f not in union]
            alts = self.product(alts, union, p)
        if "oneOf" in s:
            alts = self._one_of(alts, schema_list(s, "oneOf", p), p, ctx, visiting, context)
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

    def ref(self, ref: str, p: str, ctx: int, visiting: frozenset, negate: bool = False) -> list[Flat]:
        target, tp = self.res.resolve(ref, p)
        if tp in visiting:
            raise UnsupportedSchemaError("$ref", p, f"reference cycle through {tp} with no value in between")
        fn = self.negate if negate else self.dnf_one
        if tp not in self.recursive():
            return fn(target, tp, ctx, visiting | {tp})
        if ctx >= self.budget:
            if negate:
                raise UnsupportedSchemaError("$ref", p, "recursion cut under 'not' would be looser")
            return []
        return [replace(f, refs=f.refs | {tp}) for f in fn(target, tp, ctx, visiting | {tp})]

    def recursive(self) -> set[str]:
        """Pointers of the reference targets that can reach themselves (through any keyword); sets the recursion
        budget to ``max_depth`` turns of the longest such cycle."""
        if self._recursive is None:
            self._recursive, longest = recursive_targets(self.root, self.res)
            self.budget = self.max_depth * longest  # recursive entries allowed on a path: max_depth turns of a cycle
        return self._recursive

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
        except SchemaLimitError:
            raise
        except UnsupportedSchemaError as e:
            raise UnsupportedSchemaError("oneOf", p, f"branches may overlap and cannot be negated ({e})") from None

    # -- emptiness and disjointness -------------------------------------------------------------------------------
    def disjoint(self, a: Flat, b: Flat, ctx: int, depth: int = 2) -> bool:
        current().tick(16)
        m = merge(a, b)
        return m is None or self.flat_empty(m, ctx, depth)

    def flat_empty(self, f: Flat, ctx: int, depth: int) -> bool:
        return all(self.type_empty(f, t, ctx, depth) for t in effective_types(f))

    def type_empty(self, f: Flat, t: str, ctx: int, depth: int) -> bool:
        excluded = {vkey(v) for v in f.not_values}
        if f.enum is not None:
            vals = [v for v in f.enum if type_of(v, t) and vkey(v) not in excluded]
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


def _refs_in(res: Resolver, node: Any, out: set[str]) -> None:
    """Add to ``out`` the pointers of the ``$ref`` targets inside ``node`` (not under enum/const/default/examples)."""
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            try:
                out.add(res.resolve(node["$ref"], "#")[1])
            except UnsupportedSchemaError:
                pass
        for k, v in node.items():
            if k not in ("enum", "const", "default", "examples"):
                _refs_in(res, v, out)
    elif isinstance(node, list):
        for v in node:
            _refs_in(res, v, out)


def _ref_edges(root: Any, res: Resolver) -> dict[str, set[str]]:
    """Reference target → the targets its subschema refers to, for every target reachable from ``root``."""
    edges: dict[str, set[str]] = {}
    todo: set[str] = set()
    _refs_in(res, root, todo)
    while todo:
        tp = todo.pop()
        if tp in edges:
            continue
        out: set[str] = set()
        try:
            _refs_in(res, res.resolve(tp, "#")[0], out)
        except (UnsupportedSchemaError, RecursionError):
            pass
        edges[tp] = out
        todo |= out - set(edges)
    return edges


def recursive_targets(root: Any, res: Resolver) -> tuple[set[str], int]:
    """(the reference targets that can reach themselves, the length of the longest shortest cycle through one)."""
    edges = _ref_edges(root, res)
    rec = set()
    longest = 1
    for start, first in edges.items():  # breadth-first: the shortest cycle through each target
        seen, frontier, dist = {start}, set(first), 1
        while frontier and start not in frontier:
            seen |= frontier
            frontier = {y for x in frontier for y in edges.get(x, ()) if y not in seen or y == start}
            dist += 1
        if start in frontier:
            rec.add(start)
            longest = max(longest, dist)
    return rec, longest
