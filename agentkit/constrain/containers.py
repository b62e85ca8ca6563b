"""Arrays and objects of the JSON Schema compiler (a mixin of :class:`agentkit.constrain.compiler._Compiler`).

Arrays: prefix items, then a ``Repeat`` of the rest within ``minItems``/``maxItems``; ``contains`` as a union over
where the first witness sits; ``uniqueItems`` only over a few literal items (all orders enumerated).

Objects: members in the style's order (:func:`~agentkit.constrain.canonical.order_names`), then additional properties.
Without counting constraints the layout is linear in size (:func:`_linear_body`); ``minProperties``/
``maxProperties``, presence dependencies and the "some property must..." conditions that ``not`` produces use a
memoised chain over (member, started, count, pending, blocked, witnessed) states, which stays a DAG.
"""

from __future__ import annotations

import json
import os
import re
from itertools import permutations

from ..errors import UnsupportedSchemaError
from . import automata
from .canonical import child_schemas, item_schemas, order_names, pattern_matches, walk
from .dnf import Flat, effective_types, vkey
from .ecma_regex import ANY, PatternError, alt, cset, literal, rep
from .json_regex import emit, except_words_regex, search_ast
from .limits import current
from .nodes import DEFAULT_SLOT_TOKENS, Choice, Lit, Node, Repeat, Slot, seq

MAX_REPEAT = 256  # larger counted repetitions in a slot regex raise (outlines-core DFAs grow with the count)
UNIQUE_ENUM_LIMIT = 4  # uniqueItems over at most this many literal item values is enumerated


def _esc(k: str) -> str:
    return k.replace("~", "~0").replace("/", "~1")


def _check_repeats(n, keyword: str, ptr: str) -> None:
    if n[0] == "rep":
        if n[2] > MAX_REPEAT or (n[3] is not None and n[3] > MAX_REPEAT):
            raise UnsupportedSchemaError(keyword, ptr, f"counted repetition over {MAX_REPEAT} in a slot")
        _check_repeats(n[1], keyword, ptr)
    elif n[0] in ("cat", "alt"):
        for x in n[1]:
            _check_repeats(x, keyword, ptr)


def _choice(opts: list) -> Node | None:
    """A Choice of the distinct options (None when there are none). Linear in the options: literals (enum members,
    the bulk of large choices) are compared by text through a set; other nodes by equality among themselves."""
    out: list = []
    texts: set[str] = set()
    others: list = []
    budget = current()
    for o in opts:
        budget.tick(1024)
        if o is None:
            continue
        if isinstance(o, Lit):
            if o.text in texts:
                continue
            texts.add(o.text)
        elif any(o is x or o == x for x in others):
            continue
        else:
            others.append(o)
        out.append(o)
    if len(texts) >= TRIE_MIN:  # a big enum: shared prefixes factored out, so a decoding state holds few threads
        lits = [o.text for o in out if isinstance(o, Lit)]
        out = [o for o in out if not isinstance(o, Lit)] + [lit_trie(lits)]
    return None if not out else out[0] if len(out) == 1 else Choice(tuple(out))


TRIE_MIN = 32  # literal options from which a choice is factored into a trie (below: one thread each is cheap)
_TRIE_DEPTH = 64  # nested branch points at most; deeper groups stay flat choices (no recursion limit on input)


def lit_trie(texts: list[str], depth: int = 0) -> Node:
    """The choice among the distinct ``texts`` as a trie: their common prefix once, then a choice per next
    character. Same language as ``Choice(Lit(t) for t in texts)``, but the token automaton's state inside a
    shared prefix is one thread instead of one per member: a 5,000-member enum whose members share 100
    characters costs masks over at most one branch point's children, not 5,000 literals, at every step."""
    if len(texts) == 1:
        return Lit(texts[0])
    p = os.path.commonprefix(texts)
    rest = [t[len(p):] for t in texts]
    if depth >= _TRIE_DEPTH or len(texts) < 4:
        opts = [Lit(r) for r in rest]
    else:
        current().tick(64)
        groups: dict[str, list[str]] = {}
        for r in rest:
            groups.setdefault(r[:1], []).append(r)
        opts = [Lit("") if k == "" else lit_trie(g, depth + 1) for k, g in groups.items()]
    node = opts[0] if len(opts) == 1 else Choice(tuple(opts))
    return node if not p else seq(Lit(p), node)

class Containers:
    """Array and object nodes; needs ``value``, ``string_ast``, ``valid``, ``key_conj``, ``item_conj``, ``dnf``."""

    # -- arrays -------------------------------------------------------------------------------------------------
    def array(self, f: Flat, order: list, iptr: str, ctx: int) -> Node | None:
        npre = max((len(pre) for pre, _r, _p in f.aclauses), default=0)
        has_rest = all(rest is not None for _pre, rest, _p in f.aclauses) or not f.aclauses
        lo, hi = f.min_items, f.max_items
        nodes = [self.value(self.item_conj(f, i), item_schemas(order, self.res, i), f"{iptr}/{i}", ctx)
                 for i in range(npre if hi is None else min(npre, hi))]
        rest = self.value(self.item_conj(f, npre), item_schemas(order, self.res, npre), f"{iptr}/*", ctx)
        _ = has_rest
        if f.contains:
            return self._contains(f, nodes, rest, order, iptr, ctx)
        if f.unique and (hi is None or hi > 1):
            return self._unique(f, nodes, rest)
        sep = self.style.item_sep

        def arr(i: int) -> Node | None:
            if i < len(nodes):
                nxt = arr(i + 1) if nodes[i] is not None else None
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

        body = arr(0)
        return None if body is None else seq(Lit("["), body, Lit("]"))

    def _contains(self, f: Flat, nodes, rest, order, iptr, ctx) -> Node | None:
        p = f.contains[0][1]
        lo, hi = f.min_items, f.max_items
        sep = self.style.item_sep
        if nodes or f.unique or lo > 16 or (hi is not None and hi > 32):
            raise UnsupportedSchemaError("contains", p, "contains with prefixItems, uniqueItems or large bounds")
        hit = self.value(self.item_conj(f, 0) + list(f.contains), item_schemas(order, self.res, 0),
                         f"{iptr}/*", ctx)
        if hit is None or hi == 0:
            return None

        def items(n_lo: int, n_hi: int | None, lead: bool) -> Node | None:
            """``n_lo``..``n_hi`` more items (``lead``: each after a comma, else each before one)."""
            if n_hi is not None and n_hi < n_lo:
                return None
            if rest is None or n_hi == 0:
                return Lit("") if n_lo == 0 else None
            r = Repeat(rest, sep, max(n_lo, 1), n_hi)
            body = seq(Lit(sep), r) if lead else seq(r, Lit(sep))
            return body if n_lo else Choice((body, Lit("")))

        if lo <= 1 and hi is None:  # [I,]* C [,I]*
            return seq(Lit("["), items(0, None, False), hit, items(0, None, True), Lit("]"))
        opts = []  # b items before the first witness... any item may be a witness: union over b is exact
        top = (hi - 1) if hi is not None else max(lo - 1, 0)
        for b in range(top + 1):
            last = hi is None and b == top
            before = items(b, None if last else b, False)
            after = items(max(0, lo - 1 - b), None if hi is None else hi - 1 - b, True)
            if before is not None and after is not None:
                opts.append(seq(Lit("["), before, hit, after, Lit("]")))
        return _choice(opts)

    def _unique(self, f: Flat, nodes, rest) -> Node | None:
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
                opts.append(Lit("[" + self.style.item_sep.join(x.text for x in perm) + "]"))
        return _choice(opts)

    # -- objects ------------------------------------------------------------------------------------------------
    def object(self, f: Flat, order: list, iptr: str, ctx: int) -> Node | None:
        names = order_names(order, self.res, self.style.required_first)
        names += [r for r in f.required if r not in names]
        required, rules = _closure(set(f.required), [(a, ds) for a, ds, _p in f.deps])
        members = []  # (key literal, value node, required, name)
        pn = [(s, p) for s, p in f.pnames]
        for name in names:
            req = name in required
            conj = self.key_conj(f, name)
            ok = not pn or self.valid(name, pn, pn[0][1])
            node = self.value(conj, child_schemas(order, self.res, name), f"{iptr}/{_esc(name)}", ctx) if ok else None
            if node is None:
                if req:
                    return None
                continue
            members.append((json.dumps(name, ensure_ascii=False) + self.style.key_sep, node, req, name))
        while True:  # a property whose dependency can never be there cannot be there either
            present = {m[3] for m in members}
            blocked = {a for a, ds in rules if a in present and not set(ds) <= present}
            if not blocked:
                break
            if any(m[2] for m in members if m[3] in blocked):
                return None
            members = [m for m in members if m[3] not in blocked]
        rules = [(a, ds) for a, ds in rules if a in present]
        extra = self._extras(f, names, order, iptr, ctx)
        lo, hi = f.min_props, f.max_props
        nreq = sum(1 for m in members if m[2])
        counted = lo > nreq or (hi is not None and (extra is not None or hi < len(members)))
        if len(f.need) > 1 or (f.need and counted):
            raise UnsupportedSchemaError("not", f.need[0][1][1], "several conditions on some property")
        need = f.need[0] if f.need else None
        special = [None] * len(members)  # member values that also meet the need condition
        need_extra = None
        if need:
            special = [self.value(self.key_conj(f, m[3]) + [need[1]], child_schemas(order, self.res, m[3]),
                                  f"{iptr}/{_esc(m[3])}", ctx) if self._need_member(need, m[3]) else None
                       for m in members]
            need_extra = self._extras(f, names, order, iptr, ctx, need)
        if counted and hi is not None and len(members) - nreq > 12 and hi - nreq > 3:
            raise UnsupportedSchemaError("maxProperties", f.oclauses[0][3] if f.oclauses else "#",
                                         "maxProperties over many optional properties")
        sep = self.style.item_sep
        if not counted and not rules and not need:
            body = _linear_body(members, extra, sep)
            return None if body is None else seq(Lit("{"), body, Lit("}"))
        pos = {m[3]: i for i, m in enumerate(members)}
        later = [frozenset(d for a, ds in rules if a == m[3] for d in ds if pos[d] > i) for i, m in enumerate(members)]
        earlier = [frozenset(d for a, ds in rules if a == m[3] for d in ds if pos[d] < i)
                   for i, m in enumerate(members)]
        watch = frozenset().union(*earlier) if earlier else frozenset()
        if len(rules) > 12:
            raise UnsupportedSchemaError("dependentRequired", f.deps[0][2], "too many dependencies")
        cap = max(lo, (hi or 0) + 1)
        memo: dict[tuple, Node | None] = {}

        def chain(i: int, started: bool, count: int, pending: frozenset, blocked: frozenset,
                  wit: bool = True) -> Node | None:
            key = (i, started, count, pending, blocked, wit)
            if key in memo:
                return memo[key]
            if i == len(members):
                rlo = max(0, lo - count) if counted else 0
                rhi = (hi - count if hi is not None else None) if counted else None
                if pending or (rhi is not None and rhi < rlo):
                    res = None
                elif not wit:  # an extra property must meet the need condition
                    if need_extra is None:
                        res = None
                    else:
                        pre = Lit("") if extra is None else Choice((seq(Repeat(extra, sep, 1), Lit(sep)), Lit("")))
                        post = Lit("") if extra is None else Choice((seq(Lit(sep), Repeat(extra, sep, 1)), Lit("")))
                        res = seq(Lit(sep if started else ""), pre, need_extra, post)
                elif extra is None or rhi == 0:
                    res = Lit("") if rlo == 0 else None
                else:
                    r = Repeat(extra, sep, max(rlo, 1), rhi)
                    body = seq(Lit(sep), r) if started else r
                    res = body if rlo else Choice((body, Lit("")))
            else:
                k, node, req, name = members[i]
                item = seq(Lit((sep if started else "") + k), node)
                nc = min(count + 1, cap) if counted else 0
                free = (not counted or (hi is None and count >= lo)) and not rules and wit
                if started and free and not req:  # factor the tail: linear size
                    tail = chain(i + 1, True, count, pending, blocked)
                    res = None if tail is None else seq(Choice((item, Lit(""))), tail)
                else:
                    take = None
                    if not ((hi is not None and counted and count >= hi) or earlier[i] & blocked):
                        npend = (pending - {name}) | later[i]
                        nxt = chain(i + 1, True, nc, npend, blocked, wit)
                        take = None if nxt is None else seq(item, nxt)
                        if not wit and special[i] is not None:
                            nxt2 = chain(i + 1, True, nc, npend, blocked, True)
                            if nxt2 is not None:
                                alt2 = seq(Lit((sep if started else "") + k), special[i], nxt2)
                                take = alt2 if take is None else Choice((take, alt2))
                    if req or name in pending:
                        res = take
                    else:
                        skip = chain(i + 1, started, count, pending, blocked | ({name} & watch), wit)
                        res = take if skip is None else skip if take is None else Choice((take, skip))
            memo[key] = res
            return res

        body = chain(0, False, 0, frozenset(), frozenset(), need is None)
        return None if body is None else seq(Lit("{"), body, Lit("}"))

    def _pname_ast(self, s, p: str, ctx: int):
        pf = self.dnf([(s, p)], ctx)
        return alt(*(self._key_lang(x) for x in pf)) if pf else ("none",)

    def _need_key(self, need, ctx: int) -> tuple[list, list]:
        """(ASTs the key must be in, ASTs it must not be in) for a ``Flat.need`` key spec."""
        spec = need[0]
        try:
            if spec[0] == "extra":
                return [], [search_ast(rx) for rx in spec[2]]
            if spec[0] == "pattern":
                return [search_ast(spec[1])], []
            return [], [self._pname_ast(spec[1][0], spec[1][1], ctx)]
        except PatternError as e:
            raise UnsupportedSchemaError("not", need[1][1], str(e)) from None

    def _need_member(self, need, name: str) -> bool:
        spec = need[0]
        if spec[0] == "extra":
            return name not in spec[1] and not any(pattern_matches(rx, name) for rx in spec[2])
        if spec[0] == "pattern":
            return pattern_matches(spec[1], name)
        return not self.valid(name, [spec[1]], spec[1][1])

    def _extras(self, f: Flat, names: list, order: list, iptr: str, ctx: int, need=None) -> Node | None:
        """One additional property (``"key":value``) or None when none is allowed; with ``need``, one that also
        meets that ``Flat.need`` condition."""
        clauses = [c for c in f.oclauses if c[1] or (c[2] is not None and c[2][0] is not True)]
        if self.strict and names and not any(c[1] or c[2] is not None for c in f.oclauses):
            return None  # strict: properties listed and extras never mentioned -> none
        branches = []  # (key AST, value conj, order schemas for the value, pointer)
        anykey = rep(cset(ANY), 0, None)
        ws = walk(order, self.res)
        addl_order = [s["additionalProperties"] for s in ws if isinstance(s.get("additionalProperties"), dict)]
        if not clauses:
            branches.append((anykey, [], addl_order, "#"))
        elif len(clauses) == 1 or all(not c[1] for c in clauses):
            pats = clauses[0][1] if len(clauses) == 1 else ()
            cp = clauses[0][3]
            pasts, porders = [], []
            for rx, sch in pats:
                try:
                    pasts.append(search_ast(rx))
                except PatternError as e:
                    raise UnsupportedSchemaError("patternProperties", sch[1], str(e)) from None
                porders.append([s["patternProperties"][rx] for s in ws
                                if isinstance(s.get("patternProperties"), dict) and rx in s["patternProperties"]])
            overlap = any(pats[i][1][0] != pats[j][1][0] and not automata.ast_empty([pasts[i], pasts[j]])
                          for i in range(len(pasts)) for j in range(i + 1, len(pasts)))
            if not overlap:
                branches += [(a, [sch], o, sch[1]) for a, (_rx, sch), o in zip(pasts, pats, porders)]
            elif len(pats) > 4:
                raise UnsupportedSchemaError("patternProperties", cp, "more than 4 overlapping patterns")
            else:  # one branch per region of keys matching exactly the patterns in S
                for bits in range(1, 1 << len(pats)):
                    ins = [i for i in range(len(pats)) if bits >> i & 1]
                    outs = [pasts[i] for i in range(len(pats)) if not bits >> i & 1]
                    try:
                        region = automata.lang_and([pasts[i] for i in ins], not_asts=outs)
                    except PatternError as e:
                        raise UnsupportedSchemaError("patternProperties", cp, str(e)) from None
                    if region[0] != "none":
                        branches.append((region, [pats[i][1] for i in ins], [x for i in ins for x in porders[i]],
                                         pats[ins[0]][1][1]))
            addls = [c[2] for c in clauses if c[2] is not None and c[2][0] is not True]
            if not any(s is False for s, _ in addls):
                key = anykey if not pasts else ("not", pasts)
                branches.append((key, addls, addl_order, addls[0][1] if addls else cp))
        else:
            raise UnsupportedSchemaError("patternProperties", clauses[0][3], "several objects constrain extra keys")
        pn_asts = [self._pname_ast(s, p, ctx) for s, p in f.pnames]
        need_in, need_out = self._need_key(need, ctx) if need else ([], [])
        opts = []
        for key, conj, vorder, p in branches:
            nots = []
            if key[0] == "not":
                key, nots = anykey, key[1]
            words = [n for n in names if key is anykey or _in_lang(key, n)]
            if need:
                conj = [*conj, need[1]]
            try:
                if key is anykey and not nots and not pn_asts and not need:
                    regex = except_words_regex(words)
                else:
                    ka = automata.lang_and([key] + pn_asts + need_in, not_asts=nots + need_out, not_words=words)
                    if ka[0] == "none":
                        continue
                    _check_repeats(ka, "propertyNames", p)
                    regex = emit(ka)
            except PatternError as e:
                raise UnsupportedSchemaError("additionalProperties", p, str(e)) from None
            node = self.value(conj, vorder, f"{iptr}/*", ctx)
            if node is None:
                continue
            opts.append(seq(Lit('"'), Slot(regex, DEFAULT_SLOT_TOKENS, f"{iptr}/*key"), Lit('"' + self.style.key_sep),
                            node))
        return _choice(opts)

    def _key_lang(self, f: Flat):
        if "string" not in effective_types(f):
            return ("none",)
        if f.enum is not None:
            return alt(*(literal(v) for v in f.enum if isinstance(v, str)))
        return self.string_ast(f)



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


def _linear_body(members: list, extra: Node | None, sep: str = ",") -> Node | None:
    """Object members (``(key literal, value, required)`` in order) then extras, every subset of the optional
    ones joined by commas, in a tree linear in size: before the first required member, ``Y_k = Y_{k-1}(,m_k)? | m_k``
    (the non-empty lists over the first k members); after it, each optional member is ``(,m)?``."""
    def item(i: int, started: bool) -> Node:
        k, node = members[i][0], members[i][1]
        return seq(Lit((sep if started else "") + k), node)

    more = None if extra is None else Choice((seq(Lit(sep), Repeat(extra, sep, 1, None)), Lit("")))
    q = next((i for i, m in enumerate(members) if m[2]), None)
    y = None
    for i in range(len(members) if q is None else q):
        y = item(i, False) if y is None else Choice((seq(y, Choice((item(i, True), Lit("")))), item(i, False)))
    if q is None:
        if extra is not None:
            y = extra if y is None else Choice((y, extra))
            y = seq(y, more)
        return Lit("") if y is None else Choice((y, Lit("")))
    head = item(q, False) if y is None else seq(Choice((seq(y, Lit(sep)), Lit(""))), item(q, False))
    parts = [head] + [item(i, True) if members[i][2] else Choice((item(i, True), Lit("")))
                      for i in range(q + 1, len(members))]
    return seq(*parts, *([more] if more is not None else []))


def _in_lang(a, word: str) -> bool:
    """Whether ``word`` is in the language of AST ``a``."""
    return re.fullmatch(emit(a), json.dumps(word, ensure_ascii=False)[1:-1]) is not None
