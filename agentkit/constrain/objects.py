"""Objects of the layout: members in the style's order (:func:`~agentkit.constrain.canonical.order_names`), then
additional properties (:mod:`~agentkit.constrain.extras`).

Without counting constraints the layout is linear in size (:func:`_linear_body`); ``minProperties``/
``maxProperties``, presence dependencies and the "some property must..." conditions that ``not`` produces use a
memoised chain over (member, started, count, pending, blocked, witnessed) states (:class:`_Chain`), which stays a
DAG. Each function takes the builder it works for (``b``, a :class:`~agentkit.constrain.builder.ValueBuilder`: the
:class:`~agentkit.constrain.layout.Layout`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import UnsupportedSchemaError
from .builder import ValueBuilder
from .canonical import child_schemas, order_names
from .dnf import Flat, pointer_escape
from .extras import extra_node, need_member
from .nodes import Choice, Lit, Node, Repeat, seq


class Member(NamedTuple):
    key: str  # the pinned key text with its separator: '"name": '
    node: Node  # the value
    required: bool
    name: str


def object_node(b: ValueBuilder, f: Flat, order: list, iptr: str, ctx: int) -> Node | None:
    """An object value of flat ``f``; None when no object can satisfy it."""
    names = order_names(order, b.res, b.style.required_first)
    names += [r for r in f.required if r not in names]
    got = _members(b, f, names, order, iptr, ctx)
    if got is None:
        return None
    members, rules = got
    extra = extra_node(b, f, names, order, iptr, ctx)
    lo, hi = f.min_props, f.max_props
    nreq = sum(1 for m in members if m.required)
    counted = lo > nreq or (hi is not None and (extra is not None or hi < len(members)))
    if len(f.need) > 1 or (f.need and counted):
        raise UnsupportedSchemaError("not", f.need[0][1][1], "several conditions on some property")
    need = f.need[0] if f.need else None
    special: list[Node | None] = [None] * len(members)  # member values that also meet the need condition
    need_extra = None
    if need:
        special = [b.value(b.norm.key_conj(f, m.name) + [need[1]], child_schemas(order, b.res, m.name),
                           f"{iptr}/{pointer_escape(m.name)}", ctx) if need_member(b, need, m.name) else None
                   for m in members]
        need_extra = extra_node(b, f, names, order, iptr, ctx, need)
    if counted and hi is not None and len(members) - nreq > 12 and hi - nreq > 3:
        raise UnsupportedSchemaError("maxProperties", f.oclauses[0][3] if f.oclauses else "#",
                                     "maxProperties over many optional properties")
    sep = b.style.item_sep
    if not counted and not rules and not need:
        body = _linear_body(members, extra, sep)
    else:
        if len(rules) > 12:
            raise UnsupportedSchemaError("dependentRequired", f.deps[0][2], "too many dependencies")
        chain = _Chain(members, rules, extra, need_extra, special, sep, counted, lo, hi)
        body = chain.at(0, False, 0, frozenset(), frozenset(), need is None)
    return None if body is None else seq(Lit("{"), body, Lit("}"))


def _members(b: ValueBuilder, f: Flat, names: list[str], order: list, iptr: str,
             ctx: int) -> tuple[list[Member], list] | None:
    """The members that can be there, in order, and the presence rules still open among them; None when a
    required member cannot be there."""
    required, rules = _closure(set(f.required), [(a, ds) for a, ds, _p in f.deps])
    members = []
    pn = [(s, p) for s, p in f.pnames]
    for name in names:
        req = name in required
        conj = b.norm.key_conj(f, name)
        ok = not pn or b.literals.valid(name, pn, pn[0][1])
        node = b.value(conj, child_schemas(order, b.res, name), f"{iptr}/{pointer_escape(name)}", ctx) if ok else None
        if node is None:
            if req:
                return None
            continue
        members.append(Member(json.dumps(name, ensure_ascii=False) + b.style.key_sep, node, req, name))
    while True:  # a property whose dependency can never be there cannot be there either
        present = {m.name for m in members}
        blocked = {a for a, ds in rules if a in present and not set(ds) <= present}
        if not blocked:
            break
        if any(m.required for m in members if m.name in blocked):
            return None
        members = [m for m in members if m.name not in blocked]
    return members, [(a, ds) for a, ds in rules if a in present]


def _closure(required: set, rules: list) -> tuple[set, list]:
    """Required names closed under the presence rules ``(name, needs)``, and the rules still left open."""
    changed = True
    while changed:
        changed = False
        for a, ds in rules:
            if a in required and not set(ds) <= required:
                required |= set(ds)
                changed = True
    return required, [(a, ds) for a, ds in rules if a not in required and not set(ds) <= required]


def _linear_body(members: list[Member], extra: Node | None, sep: str = ",") -> Node | None:
    """Object members (in order) then extras, every subset of the optional ones joined by commas, in a tree linear
    in size: before the first required member, ``Y_k = Y_{k-1}(,m_k)? | m_k`` (the non-empty lists over the first k
    members); after it, each optional member is ``(,m)?``."""
    def item(i: int, started: bool) -> Node:
        return seq(Lit((sep if started else "") + members[i].key), members[i].node)

    more = None if extra is None else Choice((seq(Lit(sep), Repeat(extra, sep, 1, None)), Lit("")))
    q = next((i for i, m in enumerate(members) if m.required), None)
    y = None
    for i in range(len(members) if q is None else q):
        y = item(i, False) if y is None else Choice((seq(y, Choice((item(i, True), Lit("")))), item(i, False)))
    if q is None:
        if extra is not None:
            y = extra if y is None else Choice((y, extra))
            y = seq(y, more)
        return Lit("") if y is None else Choice((y, Lit("")))
    head = item(q, False) if y is None else seq(Choice((seq(y, Lit(sep)), Lit(""))), item(q, False))
    parts = [head] + [item(i, True) if members[i].required else Choice((item(i, True), Lit("")))
                      for i in range(q + 1, len(members))]
    return seq(*parts, *([more] if more is not None else []))


@dataclass
class _Chain:
    """The members of a counted or conditional object as a memoised chain of states: member ``i``, whether one was
    written (``started``), how many (``count``, capped), the dependencies still owed (``pending``), the skipped
    members others depend on (``blocked``), and whether the need condition was met (``wit``)."""

    members: list[Member]
    rules: list
    extra: Node | None
    need_extra: Node | None
    special: list[Node | None]
    sep: str
    counted: bool
    lo: int
    hi: int | None
    later: list[frozenset] = field(init=False)
    earlier: list[frozenset] = field(init=False)
    watch: frozenset = field(init=False)
    cap: int = field(init=False)
    memo: dict[tuple, Node | None] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        pos = {m.name: i for i, m in enumerate(self.members)}
        rules = self.rules
        self.later = [frozenset(d for a, ds in rules if a == m.name for d in ds if pos[d] > i)
                      for i, m in enumerate(self.members)]
        self.earlier = [frozenset(d for a, ds in rules if a == m.name for d in ds if pos[d] < i)
                        for i, m in enumerate(self.members)]
        self.watch = frozenset().union(*self.earlier) if self.earlier else frozenset()
        self.cap = max(self.lo, (self.hi or 0) + 1)

    def at(self, i: int, started: bool, count: int, pending: frozenset, blocked: frozenset,
           wit: bool = True) -> Node | None:
        """The rest of the object from member ``i`` in this state; None when it cannot be completed."""
        key = (i, started, count, pending, blocked, wit)
        if key in self.memo:
            return self.memo[key]
        if i == len(self.members):
            res = self._end(started, count, pending, wit)
        else:
            res = self._member(i, started, count, pending, blocked, wit)
        self.memo[key] = res
        return res

    def _end(self, started: bool, count: int, pending: frozenset, wit: bool) -> Node | None:
        """After the last member: the extra properties the count (and the need condition) still allow."""
        sep, extra = self.sep, self.extra
        rlo = max(0, self.lo - count) if self.counted else 0
        rhi = (self.hi - count if self.hi is not None else None) if self.counted else None
        if pending or (rhi is not None and rhi < rlo):
            return None
        if not wit:  # an extra property must meet the need condition
            if self.need_extra is None:
                return None
            pre = Lit("") if extra is None else Choice((seq(Repeat(extra, sep, 1), Lit(sep)), Lit("")))
            post = Lit("") if extra is None else Choice((seq(Lit(sep), Repeat(extra, sep, 1)), Lit("")))
            return seq(Lit(sep if started else ""), pre, self.need_extra, post)
        if extra is None or rhi == 0:
            return Lit("") if rlo == 0 else None
        r = Repeat(extra, sep, max(rlo, 1), rhi)
        body = seq(Lit(sep), r) if started else r
        return body if rlo else Choice((body, Lit("")))

    def _member(self, i: int, started: bool, count: int, pending: frozenset, blocked: frozenset,
                wit: bool) -> Node | None:
        """Member ``i`` written or skipped, then the rest."""
        m = self.members[i]
        item = seq(Lit((self.sep if started else "") + m.key), m.node)
        free = (not self.counted or (self.hi is None and count >= self.lo)) and not self.rules and wit
        if started and free and not m.required:  # factor the tail: linear size
            tail = self.at(i + 1, True, count, pending, blocked)
            return None if tail is None else seq(Choice((item, Lit(""))), tail)
        take = None
        if not ((self.hi is not None and self.counted and count >= self.hi) or self.earlier[i] & blocked):
            take = self._take(i, item, started, count, pending, blocked, wit)
        if m.required or m.name in pending:
            return take
        skip = self.at(i + 1, started, count, pending, blocked | ({m.name} & self.watch), wit)
        return take if skip is None else skip if take is None else Choice((take, skip))

    def _take(self, i: int, item: Node, started: bool, count: int, pending: frozenset, blocked: frozenset,
              wit: bool) -> Node | None:
        """Member ``i`` written (its value meeting the need condition too, where that is still owed), then the rest."""
        m = self.members[i]
        nc = min(count + 1, self.cap) if self.counted else 0
        npend = (pending - {m.name}) | self.later[i]
        nxt = self.at(i + 1, True, nc, npend, blocked, wit)
        take = None if nxt is None else seq(item, nxt)
        if not wit and self.special[i] is not None:
            nxt2 = self.at(i + 1, True, nc, npend, blocked, True)
            if nxt2 is not None:
                alt2 = seq(Lit((self.sep if started else "") + m.key), self.special[i], nxt2)
                take = alt2 if take is None else Choice((take, alt2))
        return take
