"""The token automaton of a grounded slot: the spans of a source text, intersected with the slot's own language.

A state of the text's substring automaton is the set of byte offsets where the bytes read so far end in the text
(the *endpos* set of a suffix automaton's state: two strings with the same end offsets have the same futures, so
these sets are exactly its states, built lazily), and no span crosses a clause break
(:data:`~agentkit.constrain.ground.BREAKS`: ``, ``, ``; ``, ``. ``...). Before the first byte every allowed start is open
(:func:`~agentkit.constrain.ground.span_edges`). A token is allowed when its bytes continue the span at one of the
offsets *and* the slot's own token DFA (:class:`~agentkit.constrain.vocab.SlotDFA`: pattern, format, lengths)
allows it; tokens cross the text's word boundaries freely (``" Lis"`` + ``"bon"`` and ``" Lisbon"`` both read
``Lisbon``), since both automata walk bytes. The slot may end where a span may end, the slot's DFA is final, and
at least one byte was read.

:class:`SpanDFA` has :class:`SlotDFA`'s interface, so :class:`~agentkit.constrain.runtime.TokenConstraint` uses it
as any slot's automaton.
"""

from __future__ import annotations

import math

from .fences import Fence
from .ground import span_breaks, span_edges
from .vocab import SlotDFA, TokenVocab

_START = None  # the positions before the first byte: every allowed start


class SpanDFA:
    """Spans of ``source`` (a JSON string body: the text JSON-escaped) that ``inner`` accepts, over ``vocab``,
    within the field's ``fence`` (:class:`~agentkit.constrain.fences.Fence`)."""

    def __init__(self, source: str, inner: SlotDFA, vocab: TokenVocab, fence: Fence | None = None) -> None:
        self.text = source.encode("utf-8")
        self.inner, self.vocab = inner, vocab
        fence = fence or Fence()
        starts, ends = span_edges(self.text)
        self.starts, self.ends = starts - fence.no_start, ends - fence.no_end
        self.stop = span_breaks(self.text, fence.walls)  # a span from p ends by stop[p] (it crosses no break or wall)
        self._states: list[tuple[frozenset[int] | None, int]] = []
        self._ids: dict[tuple[frozenset[int] | None, int], int] = {}
        self._allowed: dict[int, list[int]] = {}
        self._next: dict[tuple[int, int], int | None] = {}
        self._close: dict[int, float] = {}
        self._first: dict[int, frozenset[int]] = {}
        self._initial = self._intern(_START, inner.initial())

    def _intern(self, ends: frozenset[int] | None, inner: int) -> int:
        key = (ends, inner)
        i = self._ids.get(key)
        if i is None:
            i = self._ids[key] = len(self._states)
            self._states.append(key)
        return i

    def _open(self, ends: frozenset[int] | None) -> frozenset[int] | set[int]:
        return self.starts if ends is None else ends

    def initial(self) -> int:
        return self._initial

    def allowed(self, state: int) -> list[int]:
        """Tokens whose bytes continue a span at one of the state's offsets and that the slot's DFA allows, from
        which the slot can still end."""
        hit = self._allowed.get(state)
        if hit is None:
            ends, _s = self._states[state]
            cands: set[int] = set()
            by_bytes, text, longest = self.vocab.by_bytes, self.text, self.vocab.max_len
            for p in self._open(ends):
                for n in range(1, min(longest, self.stop[p] - p) + 1):
                    cands.update(by_bytes.get(text[p:p + n], ()))
            hit = self._allowed[state] = sorted(
                t for t in cands if (nxt := self.next(state, t)) is not None and self.close_distance(nxt) < math.inf)
        return hit

    def next(self, state: int, token: int) -> int | None:
        key = (state, token)
        if key in self._next:
            return self._next[key]
        out = None
        tb = self.vocab.token_bytes[token] if 0 <= token < len(self.vocab.token_bytes) else None
        if tb:
            ends, s = self._states[state]
            reach = frozenset(p + len(tb) for p in self._open(ends) if self.text.startswith(tb, p)
                              and p + len(tb) <= self.stop[p])
            if reach:
                inner = self.inner.next(s, token)
                if inner is not None:
                    out = self._intern(reach, inner)
        self._next[key] = out
        return out

    def is_final(self, state: int) -> bool:
        ends, s = self._states[state]
        return ends is not None and not ends.isdisjoint(self.ends) and self.inner.is_final(s)

    def first_bytes(self, state: int) -> frozenset[int]:
        f = self._first.get(state)
        if f is None:
            tb = self.vocab.token_bytes
            f = self._first[state] = frozenset(tb[t][0] for t in self.allowed(state) if tb[t])
        return f

    def closing_tokens(self, state: int) -> list[int]:
        """Single-byte tokens that bring the slot one step closer to where it may end."""
        d = self.close_distance(state)
        return [t for t in self._byte_steps(state) if (n := self.next(state, t)) is not None
                and self.close_distance(n) < d]

    def _byte_steps(self, state: int) -> list[int]:
        """One single-byte token per byte the text has at the state's offsets."""
        ends, _ = self._states[state]
        out = []
        for b in {self.text[p] for p in self._open(ends) if p < len(self.text)}:
            ids = [i for i in self.vocab.by_bytes.get(bytes([b]), ()) if i not in self.vocab.eos_ids]
            if ids:
                out.append(ids[0])
        return out

    def close_distance(self, state: int) -> float:
        """Fewest single-byte tokens from ``state`` to where the slot may end (inf: nowhere): breadth-first over
        the bytes of the text, so at most one edge per distinct byte at the state's offsets."""
        d = self._close.get(state)
        if d is not None:
            return d
        frontier, seen, depth, d = [state], {state}, 0, math.inf
        while frontier and depth <= len(self.text):
            if any(self.is_final(s) for s in frontier):
                d = float(depth)
                break
            nxt = []
            for s in frontier:
                for t in self._byte_steps(s):
                    n = self.next(s, t)
                    if n is not None and n not in seen:
                        seen.add(n)
                        nxt.append(n)
            frontier, depth = nxt, depth + 1
        self._close[state] = d
        return d


class ExcludeDFA:
    """``inner`` (a slot's automaton) without the exact values in ``words`` (JSON string bodies): a value may not
    *end* as one of them, and may go on past one (``Titles`` stays allowed when ``Title`` is excluded). The state
    is ``inner``'s and the bytes read so far while they begin one of the words."""

    def __init__(self, inner: SlotDFA | SpanDFA, words: tuple[str, ...], vocab: TokenVocab) -> None:
        self.inner, self.vocab = inner, vocab
        self.words = frozenset(w.encode("utf-8") for w in words)
        self._prefixes = frozenset(w[:i] for w in self.words for i in range(len(w) + 1))
        self._states: list[tuple[int, bytes | None]] = []
        self._ids: dict[tuple[int, bytes | None], int] = {}
        self._next: dict[tuple[int, int], int | None] = {}
        self._allowed: dict[int, list[int]] = {}
        self._close: dict[int, float] = {}
        self._initial = self._intern(inner.initial(), b"")

    def _intern(self, s: int, seen: bytes | None) -> int:
        key = (s, seen)
        i = self._ids.get(key)
        if i is None:
            i = self._ids[key] = len(self._states)
            self._states.append(key)
        return i

    def initial(self) -> int:
        return self._initial

    def next(self, state: int, token: int) -> int | None:
        key = (state, token)
        if key not in self._next:
            s, seen = self._states[state]
            n = self.inner.next(s, token)
            tb = self.vocab.token_bytes[token] if 0 <= token < len(self.vocab.token_bytes) else None
            if n is None or not tb:
                self._next[key] = None
            else:
                more = seen + tb if seen is not None and seen + tb in self._prefixes else None
                self._next[key] = self._intern(n, more)
        return self._next[key]

    def is_final(self, state: int) -> bool:
        s, seen = self._states[state]
        return self.inner.is_final(s) and seen not in self.words

    def allowed(self, state: int) -> list[int]:
        hit = self._allowed.get(state)
        if hit is None:
            s, _ = self._states[state]
            hit = self._allowed[state] = [t for t in self.inner.allowed(s) if (n := self.next(state, t)) is not None
                                          and self.close_distance(n) < math.inf]
        return hit

    def first_bytes(self, state: int) -> frozenset[int]:
        tb = self.vocab.token_bytes
        return frozenset(tb[t][0] for t in self.allowed(state) if tb[t])

    def closing_tokens(self, state: int) -> list[int]:
        d = self.close_distance(state)
        return [t for t in self.vocab.byte_tokens if (n := self.next(state, t)) is not None
                and self.close_distance(n) < d]

    def close_distance(self, state: int) -> float:
        """Fewest single-byte tokens to an allowed end: breadth-first while the bytes read begin an excluded
        word, then ``inner``'s own distance (past the words, nothing is excluded)."""
        d = self._close.get(state)
        if d is not None:
            return d
        best, frontier, seen, depth = math.inf, [state], {state}, 0
        while frontier and depth < best:
            nxt = []
            for st in frontier:
                s, pre = self._states[st]
                if self.is_final(st):
                    best = min(best, depth)
                elif pre is None:
                    best = min(best, depth + self.inner.close_distance(s))
                else:
                    for t in self.vocab.byte_tokens:
                        n = self.next(st, t)
                        if n is not None and n not in seen:
                            seen.add(n)
                            nxt.append(n)
            frontier, depth = nxt, depth + 1
        self._close[state] = best
        return best
