"""Finite automata over code-point intervals: what a regex cannot say directly, an automaton can.

Used when string constraints have to be combined exactly: a ``pattern`` with ``minLength``/``maxLength``, two
patterns (``allOf``), a pattern and a ``format``, ``not: {pattern}``, or "any string except these names" (keys of
additional properties). Regex AST → NFA → DFA; intersection, complement and minimisation on DFAs; then back to a
regex AST by state elimination. Every step is bounded (states: the active build's
:attr:`~agentkit.constrain.limits.CompileLimits.max_states`, :data:`MAX_NFA`, :data:`MAX_AST`) and raises
:class:`~agentkit.constrain.ecma_regex.PatternError` instead of running away; every loop also checks the build's
deadline and cancel flag (:func:`agentkit.constrain.limits.current`).
"""

from __future__ import annotations

from bisect import bisect_right

from .ecma_regex import ANY, EPS, PatternError, alt, cat, cs_and, cs_not, cs_or, cset, rep, size
from .limits import current

MAX_STATES = 4000  # the default of CompileLimits.max_states (the active budget's value is what applies)
MAX_AST = 20000
MAX_NFA = 40000


class DFA:
    """``trans[s]``: list of ``(charset, target)`` with disjoint charsets; missing characters go to a dead state."""

    def __init__(self, trans: list[list[tuple]], acc: list[bool]) -> None:
        self.trans, self.acc = trans, acc

    def __len__(self) -> int:
        return len(self.acc)


# -- AST → NFA → DFA ------------------------------------------------------------------------------------------------
class _NFA:
    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple]] = []

    def new(self) -> int:
        if len(self.eps) >= MAX_NFA:
            raise PatternError(f"automaton too large (over {MAX_NFA} NFA states)")
        if len(self.eps) % 1024 == 0:
            current().check()
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, n) -> tuple[int, int]:
        k = n[0]
        s = self.new()
        if k == "eps":
            return s, s
        if k == "set":
            e = self.new()
            if n[1]:
                self.edges[s].append((n[1], e))
            return s, e
        if k == "cat":
            cur = s
            for x in n[1]:
                a, b = self.build(x)
                self.eps[cur].append(a)
                cur = b
            return s, cur
        if k == "alt":
            e = self.new()
            for x in n[1]:
                a, b = self.build(x)
                self.eps[s].append(a)
                self.eps[b].append(e)
            return s, e
        if k == "rep":
            node, lo, hi = n[1], n[2], n[3]
            cur = s
            for _ in range(lo):
                a, b = self.build(node)
                self.eps[cur].append(a)
                cur = b
            if hi is None:
                a, b = self.build(node)
                e = self.new()
                self.eps[cur] += [a, e]
                self.eps[b] += [a, e]
                return s, e
            e = self.new()
            for _ in range(hi - lo):
                a, b = self.build(node)
                self.eps[cur] += [a, e]
                cur = b
            self.eps[cur].append(e)
            return s, e
        if k == "none":
            return s, self.new()
        raise PatternError(f"anchor {k} inside the pattern")


def _too_large(limit: int) -> PatternError:
    return PatternError(f"automaton too large (over {limit} states)")


def from_ast(n, max_states: int | None = None) -> DFA:
    """Subset construction: the DFA of the AST's language (anchors must have been removed); at most
    ``max_states`` states (default: the active budget's ``max_states``)."""
    b = current()
    limit = b.limits.max_states if max_states is None else max_states
    nfa = _NFA()
    start, final = nfa.build(n)

    def close(states) -> frozenset:
        seen, stack = set(states), list(states)
        while stack:
            for t in nfa.eps[stack.pop()]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        return frozenset(seen)

    init = close([start])
    index = {init: 0}
    order = [init]
    trans: list[list[tuple]] = []
    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        b.tick(64)
        edges = [e for s in cur for e in nfa.edges[s]]
        bounds = sorted({b for cs, _ in edges for lo, hi in cs for b in (lo, hi + 1)})
        segs: dict[int, set] = {}
        for cs, t in edges:
            for lo, hi in cs:
                j = bisect_right(bounds, lo) - 1
                while j < len(bounds) - 1 and bounds[j] <= hi:
                    segs.setdefault(j, set()).add(t)
                    j += 1
        by_target: dict[frozenset, list] = {}
        for j, ts in segs.items():
            by_target.setdefault(close(ts), []).append((bounds[j], bounds[j + 1] - 1))
        row = []
        for tgt, ivs in by_target.items():
            if tgt not in index:
                if len(order) >= limit:
                    raise _too_large(limit)
                index[tgt] = len(order)
                order.append(tgt)
            row.append((cs_or(tuple(ivs), ()), index[tgt]))
        trans.append(row)
    return DFA(trans, [final in st for st in order])


def length_dfa(lo: int, hi: int | None) -> DFA:
    """Strings of ``lo``..``hi`` characters."""
    top = lo if hi is None else hi
    if top > current().limits.max_states:
        raise PatternError(f"length bound {top} too large for an automaton (over {current().limits.max_states} "
                           "states)")
    trans = [[(ANY, i + 1)] if i < top else ([(ANY, i)] if hi is None else []) for i in range(top + 1)]
    return DFA(trans, [i >= lo for i in range(top + 1)])


# -- operations -----------------------------------------------------------------------------------------------------
def intersect(a: DFA, b: DFA) -> DFA:
    budget = current()
    limit = budget.limits.max_states
    index = {(0, 0): 0}
    order = [(0, 0)]
    trans = []
    i = 0
    while i < len(order):
        s1, s2 = order[i]
        i += 1
        budget.tick(64)
        row: dict[int, tuple] = {}
        for c1, t1 in a.trans[s1]:
            for c2, t2 in b.trans[s2]:
                c = cs_and(c1, c2)
                if not c:
                    continue
                key = (t1, t2)
                if key not in index:
                    if len(order) >= limit:
                        raise _too_large(limit)
                    index[key] = len(order)
                    order.append(key)
                t = index[key]
                row[t] = cs_or(row.get(t, ()), c)
        trans.append([(c, t) for t, c in row.items()])
    return DFA(trans, [a.acc[x] and b.acc[y] for x, y in order])


def complement(a: DFA) -> DFA:
    n = len(a)
    trans = []
    for row in a.trans:
        covered: tuple = ()
        for c, _ in row:
            covered = cs_or(covered, c)
        rest = cs_and(cs_not(covered), ANY)
        trans.append(list(row) + ([(rest, n)] if rest else []))
    trans.append([(ANY, n)])
    return DFA(trans, [not x for x in a.acc] + [True])


def union(a: DFA, b: DFA) -> DFA:
    return complement(intersect(complement(a), complement(b)))


def trim(a: DFA) -> DFA | None:
    """Drop states that cannot reach acceptance; None for the empty language."""
    rev: list[set] = [set() for _ in a.acc]
    for s, row in enumerate(a.trans):
        for _, t in row:
            rev[t].add(s)
    live = {s for s, f in enumerate(a.acc) if f}
    stack = list(live)
    while stack:
        for p in rev[stack.pop()]:
            if p not in live:
                live.add(p)
                stack.append(p)
    if 0 not in live:
        return None
    keep = sorted(live)
    idx = {s: i for i, s in enumerate(keep)}
    trans = [[(c, idx[t]) for c, t in a.trans[s] if t in live] for s in keep]
    return DFA(trans, [a.acc[s] for s in keep])


def minimize(a: DFA) -> DFA:
    """Moore partition refinement (state 0 stays the start)."""
    block = [int(f) for f in a.acc]
    budget = current()
    while True:
        budget.check()
        sigs: dict[tuple, int] = {}
        new = []
        for s, row in enumerate(a.trans):
            merged: dict[int, tuple] = {}
            for c, t in row:
                merged[block[t]] = cs_or(merged.get(block[t], ()), c)
            sig = (block[s], tuple(sorted((b, c) for b, c in merged.items())))
            new.append(sigs.setdefault(sig, len(sigs)))
        if len(sigs) == len(set(block)):
            break
        block = new
    remap: dict[int, int] = {block[0]: 0}
    for b in block:
        remap.setdefault(b, len(remap))
    trans: list = [None] * len(remap)
    acc = [False] * len(remap)
    for s, row in enumerate(a.trans):
        b = remap[block[s]]
        if trans[b] is None:
            merged: dict[int, tuple] = {}
            for c, t in row:
                tb = remap[block[t]]
                merged[tb] = cs_or(merged.get(tb, ()), c)
            trans[b] = [(c, t) for t, c in merged.items()]
            acc[b] = a.acc[s]
    return DFA(trans, acc)


# -- DFA → regex AST (state elimination) ----------------------------------------------------------------------------
def to_ast(a: DFA):
    """A regex AST for the DFA's language; ``("none",)`` when empty."""
    t = trim(a)
    if t is None:
        return ("none",)
    a = minimize(t)
    n = len(a)
    S, F = n, n + 1
    out: dict[int, dict[int, tuple]] = {i: {} for i in range(n + 2)}
    inc: dict[int, set] = {i: set() for i in range(n + 2)}

    def add(i: int, j: int, r) -> None:
        out[i][j] = alt(out[i][j], r) if j in out[i] else r
        inc[j].add(i)

    add(S, 0, EPS)
    for s, row in enumerate(a.trans):
        for c, t in row:
            add(s, t, cset(c))
        if a.acc[s]:
            add(s, F, EPS)
    remaining = set(range(n))
    budget = current()
    while remaining:
        budget.tick(16)
        k = min(remaining, key=lambda s: (len(inc[s] - {s}) * len(set(out[s]) - {s}), s))
        remaining.discard(k)
        loop = out[k].pop(k, None)
        inc[k].discard(k)
        star = rep(loop, 0, None) if loop is not None else EPS
        for i in inc[k]:
            rik = out[i].pop(k)
            for j, rkj in out[k].items():
                add(i, j, cat(rik, star, rkj))
                if size(out[i][j]) > MAX_AST:
                    raise PatternError("regex from automaton too large")
        for j in out[k]:
            inc[j].discard(k)
        out[k] = {}
        inc[k] = set()
    return out[S].get(F, ("none",))


def words_dfa(words) -> DFA:
    """A trie DFA accepting exactly ``words``."""
    trans: list[dict[int, int]] = [{}]
    acc = [False]
    for w in words:
        s = 0
        for ch in w:
            c = ord(ch)
            if c not in trans[s]:
                trans.append({})
                acc.append(False)
                trans[s][c] = len(trans) - 1
            s = trans[s][c]
        acc[s] = True
    return DFA([[(((c, c),), t) for c, t in row.items()] for row in trans], acc)


def combine(asts, *, lengths: tuple[int, int | None] | None = None, not_asts=(), not_words=()) -> DFA | None:
    """Minimal DFA for the intersection of ``asts`` (whole-string languages), within ``lengths``, minus
    ``not_asts`` and ``not_words``; None when empty."""
    dfa: DFA | None = None
    parts = [from_ast(x) for x in asts]
    if lengths is not None and lengths != (0, None):
        parts.append(length_dfa(*lengths))
    parts += [complement(from_ast(x)) for x in not_asts]
    if not_words:
        parts.append(complement(words_dfa(not_words)))
    if not parts:
        parts.append(from_ast(rep(cset(ANY), 0, None)))
    for p in parts:
        dfa = p if dfa is None else intersect(dfa, p)
        t = trim(dfa)
        if t is None:
            return None
        dfa = minimize(t)
    return dfa


def lang_and(asts, **kw):
    """AST for :func:`combine`'s language; ``("none",)`` when empty."""
    dfa = combine(asts, **kw)
    return ("none",) if dfa is None else to_ast(dfa)


def ast_empty(asts, **kw) -> bool:
    """Whether :func:`combine`'s language is provably empty (False when the automaton is too large to tell)."""
    try:
        return combine(asts, **kw) is None
    except PatternError:
        return False
