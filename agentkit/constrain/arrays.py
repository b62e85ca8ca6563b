"""Arrays of the layout: prefix items, then a ``Repeat`` of the rest within ``minItems``/``maxItems``; ``contains`` as a
union over where the first witness sits; ``uniqueItems`` only over a few literal items (all orders enumerated).

Each function takes the builder it works for (``b``, a :class:`~agentkit.constrain.builder.ValueBuilder`: the
:class:`~agentkit.constrain.layout.Layout`) and asks it for the items' nodes (``b.value``) and subschemas
(``b.norm.item_conj``).
"""

from __future__ import annotations

import json
from itertools import permutations

from ..errors import UnsupportedSchemaError
from .builder import ValueBuilder
from .canonical import item_schemas
from .dnf import Flat, vkey
from .nodes import Choice, Lit, Node, Repeat, choice, seq

UNIQUE_ENUM_LIMIT = 4  # uniqueItems over at most this many literal item values is enumerated


def array_node(b: ValueBuilder, f: Flat, order: list, iptr: str, ctx: int) -> Node | None:
    """An array value of flat ``f``."""
    npre = max((len(pre) for pre, _r, _p in f.aclauses), default=0)
    lo, hi = f.min_items, f.max_items
    nodes = [b.value(b.norm.item_conj(f, i), item_schemas(order, b.res, i), f"{iptr}/{i}", ctx)
             for i in range(npre if hi is None else min(npre, hi))]
    rest = b.value(b.norm.item_conj(f, npre), item_schemas(order, b.res, npre), f"{iptr}/*", ctx)
    if f.contains:
        return _contains(b, f, nodes, rest, order, iptr, ctx)
    if f.unique and (hi is None or hi > 1):
        return _unique(b, f, nodes, rest)
    body = _items(nodes, rest, lo, hi, b.style.item_sep, 0)
    return None if body is None else seq(Lit("["), body, Lit("]"))


def _items(nodes: list, rest: Node | None, lo: int, hi: int | None, sep: str, i: int) -> Node | None:
    """Items ``i``.. of an array: the prefix items from ``i`` on, then the rest, ``lo``..``hi`` items in all."""
    if i < len(nodes):
        nxt = _items(nodes, rest, lo, hi, sep, i + 1) if nodes[i] is not None else None
        take = seq(Lit(sep if i else ""), nodes[i], nxt) if nxt is not None else None
        if i < lo:
            return take
        return Lit("") if take is None else Choice((take, Lit("")))
    rlo, rhi = max(0, lo - i), (None if hi is None else hi - i)
    if rest is None or rhi == 0:
        return Lit("") if rlo == 0 else None
    r = Repeat(rest, sep, max(rlo, 1), rhi)
    body = seq(Lit(sep), r) if i else r
    return body if rlo else Choice((body, Lit("")))


def _more(rest: Node | None, sep: str, n_lo: int, n_hi: int | None, lead: bool) -> Node | None:
    """``n_lo``..``n_hi`` more items (``lead``: each after a comma, else each before one)."""
    if n_hi is not None and n_hi < n_lo:
        return None
    if rest is None or n_hi == 0:
        return Lit("") if n_lo == 0 else None
    r = Repeat(rest, sep, max(n_lo, 1), n_hi)
    body = seq(Lit(sep), r) if lead else seq(r, Lit(sep))
    return body if n_lo else Choice((body, Lit("")))


def _contains(b: ValueBuilder, f: Flat, nodes: list, rest: Node | None, order: list, iptr: str,
              ctx: int) -> Node | None:
    p = f.contains[0][1]
    lo, hi = f.min_items, f.max_items
    sep = b.style.item_sep
    if nodes or f.unique or lo > 16 or (hi is not None and hi > 32):
        raise UnsupportedSchemaError("contains", p, "contains with prefixItems, uniqueItems or large bounds")
    hit = b.value(b.norm.item_conj(f, 0) + list(f.contains), item_schemas(order, b.res, 0), f"{iptr}/*", ctx)
    if hit is None or hi == 0:
        return None
    if lo <= 1 and hi is None:  # [I,]* C [,I]*
        return seq(Lit("["), _more(rest, sep, 0, None, False), hit, _more(rest, sep, 0, None, True), Lit("]"))
    opts = []  # b items before the first witness... any item may be a witness: union over b is exact
    top = (hi - 1) if hi is not None else max(lo - 1, 0)
    for k in range(top + 1):
        last = hi is None and k == top
        before = _more(rest, sep, k, None if last else k, False)
        after = _more(rest, sep, max(0, lo - 1 - k), None if hi is None else hi - 1 - k, True)
        if before is not None and after is not None:
            opts.append(seq(Lit("["), before, hit, after, Lit("]")))
    return choice(opts)


def _unique(b: ValueBuilder, f: Flat, nodes: list, rest: Node | None) -> Node | None:
    p = f.unique
    if nodes or rest is None or not isinstance(rest, (Lit, Choice)):
        raise UnsupportedSchemaError("uniqueItems", p, "uniqueItems over non-literal items")
    lits = [rest] if isinstance(rest, Lit) else list(rest.options)
    if not all(isinstance(x, Lit) for x in lits) or len(lits) > UNIQUE_ENUM_LIMIT:
        raise UnsupportedSchemaError("uniqueItems", p, "uniqueItems over more than a few literal values")
    vals = [json.loads(x.text) for x in lits]
    keys = [vkey(v) for v in vals]
    if len(set(keys)) != len(keys):
        raise UnsupportedSchemaError("uniqueItems", p, "equal literals")
    hi = len(lits) if f.max_items is None else min(f.max_items, len(lits))
    opts = []
    for n in range(f.min_items, hi + 1):
        for perm in permutations(lits, n):
            opts.append(Lit("[" + b.style.item_sep.join(x.text for x in perm) + "]"))
    return choice(opts)
