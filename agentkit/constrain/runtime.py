"""Token-level constraint over a template: which tokens may come next, and which are forced.

A *state* is the set of places the template may be in after the tokens so far (an NFA over the template tree,
so ambiguous choices resolve themselves as tokens arrive). Each place ("thread") is one of:

- in a literal, at a byte offset          -> the next bytes are pinned; tokens that are a prefix of them fit
- in a slot, at an outlines-core DFA state -> tokens the slot's DFA allows fit
- at the end of the template              -> only EOS fits

Every object here is interned, so states hash by identity and all queries are memoised.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from .limits import Cancel, CompileLimits, budget
from .nodes import Choice, Lit, Repeat, Seq, Slot, Template, slots
from .spans import ExcludeDFA, SpanDFA
from .vocab import SlotDFA, TokenVocab, slot_index


@dataclass(frozen=True, eq=False)
class _RepTail:
    """Inside a Repeat after ``count`` items: stop, or ``sep`` + another item."""

    rep: Repeat
    count: int


class _Cont:
    """Immutable, interned continuation (cons list of nodes still to produce)."""

    __slots__ = ("node", "nxt")

    def __init__(self, node, nxt: _Cont | None) -> None:
        self.node, self.nxt = node, nxt


END = ("end",)
MAX_CONSUMED = 100_000  # memoized _consume results kept per constraint (cleared past this)


class TokenConstraint:
    """The template's language as a token automaton over ``vocab``."""

    def __init__(self, template: Template, vocab: TokenVocab, tokenizer, *, limits: CompileLimits | None = None,
                 cancel: Cancel | None = None) -> None:
        """Builds every slot's token DFA now (a compile cost, not a decode cost) under ``limits`` (default
        :class:`~agentkit.constrain.limits.CompileLimits`, or the budget of an enclosing build): raises
        SchemaLimitError for a slot over a limit, CompileCancelled when ``cancel`` is set."""
        self.template, self.vocab, self.tokenizer = template, vocab, tokenizer
        self._conts: dict[tuple[int, int], _Cont] = {}
        self._tails: dict[tuple[int, int], _RepTail] = {}
        self._threads: dict[tuple, tuple] = {}
        self._closure: dict[int, frozenset] = {}
        self._allowed: dict[frozenset, torch.Tensor] = {}
        self._advance: dict[tuple[frozenset, int], frozenset | None] = {}
        self._forced: dict[frozenset, list[int]] = {}
        self._lit_bytes: dict[int, bytes] = {}
        self._seps: dict[int, Lit] = {}
        self._span: dict[tuple, list[int]] = {}
        # _consume's results by (state, data): a slot reads raw bytes as every split into tokens, and without the
        # memo the splits of a long run (the 16-space token of an edit's REPLACE) were explored once per path,
        # exponentially (an edit template's pinned run took minutes at one position)
        self._consumed: dict[tuple[frozenset, bytes], frozenset] = {}
        self._keep: list[object] = []  # keeps interned objects' ids stable
        self._cost: dict[int, float] = {}  # id(node or cont) -> tokens to produce it (budget bounds)
        self._state_cost: dict[frozenset, float] = {}
        self._opts: dict[int, list] = {}  # id(Choice) -> the options its cost is taken over
        self._closing: dict[frozenset, list[tuple[float, int]]] = {}
        self._encoded: dict[str, list[int]] = {}
        # this template's slot automata by regex (and source, for a grounded slot); never rebuilt mid-decode
        self._dfas: dict[str | tuple, SlotDFA | SpanDFA | ExcludeDFA] = {}
        t0 = time.perf_counter()
        with budget(limits, cancel) as b:
            for slot in slots(template.root):
                b.check(_pointer(slot.name))
                if _dfa_key(slot) not in self._dfas:
                    dfa: SlotDFA | SpanDFA | ExcludeDFA = slot_index(slot.regex, vocab, _pointer(slot.name))
                    if slot.source is not None:
                        dfa = SpanDFA(slot.source, dfa, vocab, slot.fence)
                    if slot.exclude:
                        dfa = ExcludeDFA(dfa, slot.exclude, vocab)
                    self._dfas[_dfa_key(slot)] = dfa
        self.index_ms = 1000 * (time.perf_counter() - t0)

    def _dfa(self, slot: Slot) -> SlotDFA | SpanDFA | ExcludeDFA:
        """The slot's token automaton: its regex's DFA; for a grounded slot (``source``) the spans of its text
        that the regex accepts (:class:`~agentkit.constrain.spans.SpanDFA`); without the values in ``exclude``
        (:class:`~agentkit.constrain.spans.ExcludeDFA`). All built in ``__init__``."""
        return self._dfas[_dfa_key(slot)]

    # -- public ---------------------------------------------------------------------------------------------
    def start(self) -> frozenset:
        return self._close(self._cons(self.template.root, None))

    def is_done(self, state: frozenset) -> bool:
        """Nothing but the end remains: the output is complete."""
        return state == self._end_state

    def can_end(self, state: frozenset) -> bool:
        return END in state

    def allowed(self, state: frozenset) -> torch.Tensor:
        """Bool mask [V] of tokens allowed next (EOS where the template may end)."""
        m = self._allowed.get(state)
        if m is None:
            m = self._allowed[state] = self.vocab.mask(self._candidates(
                state, lambda index, s, count, slot: index.allowed(s) if count < slot.max_tokens
                else index.closing_tokens(s)))
        return m

    def _candidates(self, state: frozenset, slot_tokens) -> set[int]:
        """Token ids each thread of ``state`` could take: EOS at the end, the pinned text's own tokens (and those
        crossing its end) in a literal, ``slot_tokens(index, dfa_state, count, slot)`` in a slot."""
        ids: set[int] = set()
        for th in state:
            if th is END:
                ids.update(self.vocab.eos_ids)
            elif th[0] == "lit":
                ids.update(self.vocab.prefix_tokens(self._lit_bytes[id(th[1])][th[2]:]))
                ids.update(self._spanning(th))
            else:
                _, slot, s, count, _ = th
                ids.update(slot_tokens(self._dfa(slot), s, count, slot))
        return ids

    def advance(self, state: frozenset, token: int) -> frozenset | None:
        """State after ``token``; None if the token is not allowed."""
        key = (state, token)
        if key in self._advance:
            return self._advance[key]
        out: set = set()
        tb = self.vocab.token_bytes[token] if token < len(self.vocab.token_bytes) else None
        for th in state:
            if th is END:
                if token in self.vocab.eos_ids:
                    out.add(END)
                continue
            if tb is None:
                continue
            if th[0] == "lit":
                _, lit, off, cont = th
                data = self._lit_bytes[id(lit)]
                if data.startswith(tb, off):
                    off2 = off + len(tb)
                    out.update(self._close(cont) if off2 == len(data) else {self._thread("lit", lit, off2, cont)})
                elif tb.startswith(data[off:]):  # token runs past the literal into what follows
                    out.update(self._consume(self._close(cont), tb[len(data) - off:]))
            else:
                _, slot, s, count, cont = th
                nxt = self._dfa(slot).next(s, token)
                if nxt is not None:
                    out.update(self._slot_threads(slot, nxt, count + 1, cont))
        res = frozenset(out) if out else None
        self._advance[key] = res
        return res

    def forced(self, state: frozenset) -> list[int]:
        """Tokens that are the only way forward from ``state`` (a pinned run); [] if there is a choice.

        Defined one token at a time (the first pinned token, then the pinned run from the state after it), so a
        decoder that takes the whole run in one step (AR jump-forward, prefill) and one that re-asks after every
        token (verify, the canvas walk) pin exactly the same tokens. This matters at seams: in ``"stops":[`` the
        ``[`` is pinned from the literal's start, but from just before it ``["`` (a token crossing into the next
        value) is a real choice the model must make."""
        if state in self._forced:
            return self._forced[state]
        chain: list[tuple[frozenset, int]] = []
        s: frozenset | None = state
        while s is not None and s not in self._forced:
            first = self._forced_first(s)
            if first is None:
                self._forced[s] = []
                break
            chain.append((s, first))
            s = self.advance(s, first)
        tail = self._forced.get(s, []) if s is not None else []
        for st, tok in reversed(chain):
            tail = [tok, *tail]
            self._forced[st] = tail
        return self._forced[state]

    def _forced_first(self, state: frozenset) -> int | None:
        """The first token of the pinned run at ``state``: the tokenizer's first piece of the literal's remaining
        text, unless the literal's end is one piece away and a token crossing it is possible (a choice)."""
        if len(state) != 1:
            return None
        (th,) = state
        if th is END or th[0] != "lit":
            return None
        rest = self._lit_bytes[id(th[1])][th[2]:]
        if rest and 0x80 <= rest[0] < 0xC0:  # inside a character (a token took its first bytes): its next byte alone
            return next(iter(self.vocab.by_bytes.get(rest[:1], ())), None)
        text = rest.decode("utf-8", errors="strict")
        pieces = self._pieces(text)
        assert b"".join(self.vocab.token_bytes[t] or b"" for t in pieces) == text.encode(), "pinned text must round-trip"
        if len(pieces) == 1 and self._spanning(th):  # the last piece may merge with what follows: the model decides
            return None
        return pieces[0] if pieces else None

    def accepts_tokens(self, tokens: list[int]) -> bool:
        s = self.start()
        for t in tokens:
            s = self.advance(s, t)
            if s is None:
                return False
        return self.is_done(s) or self.can_end(s)

    # -- length budget -------------------------------------------------------------------------------------------
    # ``min_tokens(state)`` is an *upper bound* on the tokens needed to finish from ``state`` along a path that
    # really exists: pinned text as the tokenizer encodes it, slot text one byte-token at a time. Keeping
    # ``1 + min_tokens(next) <= budget`` at every step therefore always leaves a way to close the output in time:
    # no truncated JSON at ``max_new_tokens``.
    def min_tokens(self, state: frozenset) -> float:
        c = self._state_cost.get(state)
        if c is None:
            c = self._state_cost[state] = min((self._thread_cost(th) for th in _cheapest(state, self._rem_len)),
                                              default=math.inf)
        return c

    def _rem_len(self, th) -> int:
        return 0 if th is END or th[0] != "lit" else len(self._lit_bytes[id(th[1])]) - th[2]

    def fits(self, state: frozenset, token: int, budget: int) -> bool:
        """Whether ``token`` is allowed at ``state`` and still leaves a completion within ``budget`` tokens
        (``budget`` counts this token)."""
        if token in self.vocab.eos_ids:
            return END in state
        nxt = self.advance(state, token)
        return nxt is not None and 1 + self.min_tokens(nxt) <= budget

    def closing(self, state: frozenset, budget: int) -> torch.Tensor:
        """Mask of tokens that keep a completion within ``budget``: pinned text's own tokens, single-byte slot
        tokens and EOS, each checked. Never empty: if nothing fits (a budget already too small), the tokens
        with the shortest completion are allowed."""
        ranked = self._closing.get(state)
        if ranked is None:
            cands = self._candidates(state, lambda index, s, count, slot: [
                t for t in self.vocab.byte_tokens if index.next(s, t) is not None])
            ranked = []
            for t in cands:
                if t in self.vocab.eos_ids:
                    ranked.append((0.0, t))
                elif (nxt := self.advance(state, t)) is not None:
                    ranked.append((self.min_tokens(nxt), t))
            ranked.sort()
            self._closing[state] = ranked
        ids = [t for cost, t in ranked if 1 + cost <= budget]
        if not ids and ranked:
            ids = [t for cost, t in ranked if cost == ranked[0][0]]
        return self.vocab.mask(ids)

    def _pieces(self, text: str) -> list[int]:
        """The tokenizer's encoding of pinned ``text`` (cached: forced runs and budget costs both need it)."""
        p = self._encoded.get(text)
        if p is None:
            p = self._encoded[text] = self.tokenizer.encode(text, add_special_tokens=False) if text else []
        return p

    def _thread_cost(self, th) -> float:
        if th is END:
            return 0.0
        if th[0] == "lit":
            _, lit, off, cont = th
            rem = self._lit_bytes[id(lit)][off:].decode("utf-8", errors="replace")
            return len(self._pieces(rem)) + self._cont_cost(cont)
        _, slot, s, _count, cont = th
        return self._dfa(slot).close_distance(s) + self._cont_cost(cont)

    def _cont_cost(self, cont: _Cont | None) -> float:
        """Tokens to produce everything in ``cont`` (iterative: a chain of 1,000 optional properties is fine)."""
        chain = []
        c = cont
        while c is not None and id(c) not in self._cost:
            chain.append(c)
            c = c.nxt
        total = 0.0 if c is None else self._cost[id(c)]
        for c in reversed(chain):
            total = self._cost[id(c)] = self._node_cost(c.node) + total
        return total

    def _node_cost(self, node) -> float:
        """Tokens to produce ``node`` along a real path (post-order over the tree, with an explicit stack)."""
        c = self._cost.get(id(node))
        if c is not None:
            return c
        stack = [node]
        while stack:
            n = stack[-1]
            if id(n) in self._cost:
                stack.pop()
                continue
            missing = [k for k in self._cost_kids(n) if id(k) not in self._cost]
            if missing:
                stack.extend(missing)
                continue
            self._cost[id(n)] = self._own_cost(n)
            self._keep.append(n)
            stack.pop()
        return self._cost[id(node)]

    def _cost_kids(self, node) -> list:
        if isinstance(node, Seq):
            return list(node.items)
        if isinstance(node, Choice):
            return self._cost_options(node)
        if isinstance(node, Repeat):
            return [node.item, self._sep(node)]
        if isinstance(node, _RepTail):
            return [node.rep.item, self._sep(node.rep)]
        return []

    def _cost_options(self, node: Choice) -> list:
        """The options a Choice's cost is taken over: all of them, or for a large enum the shortest few literals
        and every other option (the minimum over a subset is still the cost of a real path: an upper bound)."""
        opts = self._opts.get(id(node))
        if opts is None:
            opts = self._opts[id(node)] = _cheapest(node.options, lambda o: len(o.text) if isinstance(o, Lit) else 0)
        return opts

    def _own_cost(self, node) -> float:
        """``node``'s cost from its children's (already in ``_cost``)."""
        cost = self._cost
        if isinstance(node, Lit):
            return float(len(self._pieces(node.text)))
        if isinstance(node, Slot):
            index = self._dfa(node)
            return index.close_distance(index.initial())
        if isinstance(node, Seq):
            return sum(cost[id(i)] for i in node.items)
        if isinstance(node, Choice):
            return min(cost[id(o)] for o in self._cost_options(node))
        if isinstance(node, Repeat):
            return node.min * cost[id(node.item)] + max(0, node.min - 1) * cost[id(self._sep(node))]
        if isinstance(node, _RepTail):
            rep, more = node.rep, max(0, node.rep.min - node.count)
            return more * (cost[id(rep.item)] + cost[id(self._sep(rep))])
        raise AssertionError(f"unknown template node {node!r}")  # pragma: no cover - nodes are a closed set

    # -- tokens that cross a literal's end ------------------------------------------------------------------
    def _spanning(self, th: tuple) -> list[int]:
        """Tokens that finish the literal of ``th`` and continue validly into what follows it."""
        key = ("span", th)
        hit = self._span.get(key)
        if hit is None:
            _, lit, off, cont = th
            rem = self._lit_bytes[id(lit)][off:]
            nxt = self._close(cont)
            groups = self.vocab.continuing(rem)
            firsts = self._first_bytes(nxt)
            cands = groups.values() if firsts is None else [groups[b] for b in firsts if b in groups]
            hit = sorted(t for toks in cands for t, tb in toks if self._consume(nxt, tb[len(rem):]))
            self._span[key] = hit
        return hit

    def _first_bytes(self, state: frozenset) -> set[int] | None:
        """The bytes anything read from ``state`` can start with (a filter that keeps every token ``_consume``
        accepts); None where a thread cannot say."""
        out: set[int] = set()
        for th in state:
            if th is END:
                continue
            if th[0] == "lit":
                lb, off = self._lit_bytes[id(th[1])], th[2]
                if off >= len(lb):
                    return None
                out.add(lb[off])
            else:
                out |= self._dfa(th[1]).first_bytes(th[2])
        return out

    def _consume(self, state: frozenset, data: bytes) -> frozenset:
        """Threads after reading raw ``data`` from ``state`` (slots read it as whole tokens), memoized."""
        key = (state, data)
        hit = self._consumed.get(key)
        if hit is None:
            if len(self._consumed) > MAX_CONSUMED:
                self._consumed.clear()
            hit = self._consumed[key] = frozenset(self._consume_once(state, data))
        return hit

    def _consume_once(self, state: frozenset, data: bytes) -> set:
        out: set = set()
        for th in state:
            if th is END:
                continue
            if th[0] == "lit":
                _, lit, off, cont = th
                lb = self._lit_bytes[id(lit)]
                n = min(len(lb) - off, len(data))
                if lb[off:off + n] != data[:n]:
                    continue
                if off + n < len(lb):
                    out.add(self._thread("lit", lit, off + n, cont))
                elif n == len(data):
                    out.update(self._close(cont))
                else:
                    out.update(self._consume(self._close(cont), data[n:]))
            else:
                _, slot, s, count, cont = th
                index = self._dfa(slot)
                for n in range(len(data), 0, -1):
                    for t in self.vocab.by_bytes.get(data[:n], ()):
                        nxt = index.next(s, t)
                        if nxt is None:
                            continue
                        threads = self._slot_threads(slot, nxt, count + 1, cont)
                        out.update(threads if n == len(data) else self._consume(frozenset(threads), data[n:]))
        return out

    # -- construction -----------------------------------------------------------------------------------------
    @property
    def _end_state(self) -> frozenset:
        return frozenset({END})

    def _cons(self, node, nxt: _Cont | None) -> _Cont:
        key = (id(node), id(nxt))
        c = self._conts.get(key)
        if c is None:
            c = self._conts[key] = _Cont(node, nxt)
            self._keep.append(node)
        return c

    def _tail(self, rep: Repeat, count: int) -> _RepTail:
        key = (id(rep), count)
        t = self._tails.get(key)
        if t is None:
            t = self._tails[key] = _RepTail(rep, count)
        return t

    def _sep(self, rep: Repeat) -> Lit:
        lit = self._seps.get(id(rep))
        if lit is None:
            lit = self._seps[id(rep)] = Lit(rep.sep)
        return lit

    def _thread(self, *parts) -> tuple:
        key = tuple(p if isinstance(p, (int, str)) else id(p) for p in parts)
        th = self._threads.get(key)
        if th is None:
            th = self._threads[key] = parts
            if parts[0] == "lit" and id(parts[1]) not in self._lit_bytes:
                self._lit_bytes[id(parts[1])] = parts[1].text.encode("utf-8")
        return th

    def _slot_threads(self, slot: Slot, s: int, count: int, cont: _Cont | None) -> set:
        index = self._dfa(slot)
        out: set = set()
        final = index.is_final(s)
        if not (final and count >= slot.max_tokens) and index.allowed(s):
            out.add(self._thread("slot", slot, s, count, cont))
        if final:
            out.update(self._close(cont))
        return out

    def _close(self, cont: _Cont | None) -> frozenset:
        """Epsilon closure: every place reachable from ``cont`` without consuming a byte.

        Depth-first with an explicit stack (templates nest as deep as the schema, and a chain of optional
        properties nests once per property): a continuation's closure is its own threads plus the closures of the
        continuations it expands to. One still being computed counts as empty (left recursion cannot occur in
        templates)."""
        hit = self._closure.get(id(cont))
        if hit is not None:
            return hit
        stack: list = [cont]
        pending: dict[int, tuple[set, list]] = {}
        while stack:
            c = stack[-1]
            k = id(c)
            if k in self._closure:
                stack.pop()
                continue
            if k not in pending:
                pending[k] = direct_deps = self._expand(c)
                missing = [d for d in direct_deps[1] if id(d) not in self._closure and id(d) not in pending]
                if missing:
                    stack.extend(missing)
                    continue
            direct, deps = pending.pop(k)
            out = set(direct)
            for d in deps:
                out.update(self._closure.get(id(d), ()))
            self._closure[k] = frozenset(out)
            stack.pop()
        return self._closure[id(cont)]

    def _expand(self, cont: _Cont | None) -> tuple[set, list]:
        """(threads ``cont`` starts with, continuations whose closures belong to its closure)."""
        if cont is None:
            return {END}, []
        node, nxt = cont.node, cont.nxt
        if isinstance(node, Lit):
            return ({self._thread("lit", node, 0, nxt)}, []) if node.text else (set(), [nxt])
        if isinstance(node, Slot):
            index = self._dfa(node)
            s0 = index.initial()
            final = index.is_final(s0)
            own = {self._thread("slot", node, s0, 0, nxt)} if not (final and node.max_tokens <= 0) and \
                index.allowed(s0) else set()
            return own, [nxt] if final else []
        if isinstance(node, Seq):
            c = nxt
            for item in reversed(node.items):
                c = self._cons(item, c)
            return set(), [c]
        if isinstance(node, Choice):
            return set(), [self._cons(opt, nxt) for opt in node.options]
        if isinstance(node, Repeat):
            deps = [self._cons(node.item, self._cons(self._tail(node, 1), nxt))] if node.max != 0 else []
            return set(), deps + ([nxt] if node.min == 0 else [])
        if isinstance(node, _RepTail):
            rep, n = node.rep, node.count
            deps = [nxt] if n >= rep.min else []
            if rep.max is None or n < rep.max:
                again = self._cons(rep.item, self._cons(self._tail(rep, n + 1), nxt))
                deps.append(self._cons(self._sep(rep), again) if rep.sep else again)
            return set(), deps
        raise AssertionError(f"unknown template node {node!r}")  # pragma: no cover - nodes are a closed set


COST_OPTIONS = 256  # a length-budget cost is a minimum over at most this many literal options (large enums)


def _cheapest(items, size) -> list:
    """``items``, or when there are more than COST_OPTIONS of them, the COST_OPTIONS smallest by ``size`` plus every
    item whose size is 0 (not a literal)."""
    items = list(items)
    if len(items) <= COST_OPTIONS:
        return items
    sized = sorted(((size(x), i) for i, x in enumerate(items)))
    keep = {i for n, i in sized[:COST_OPTIONS]} | {i for n, i in sized if n == 0}
    return [items[i] for i in sorted(keep)]


def _dfa_key(slot: Slot) -> str | tuple:
    return slot.regex if slot.source is None and not slot.exclude else (slot.regex, slot.source, slot.exclude,
                                                                         slot.fence)


def _pointer(name: str) -> str:
    """A slot's name (the instance pointer of its value, ``/a/0``) as a JSON pointer for errors."""
    if name in ("", "/"):
        return "#"
    return "#" + name if name.startswith("/") else name


