"""The tokenizer's vocabulary as bytes, and the outlines-core ``Vocabulary`` built from it (no hub access)."""

from __future__ import annotations

import bisect
import math
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import torch
from outlines_core import Index, Vocabulary

from ..errors import SchemaLimitError, UnsupportedSchemaError
from . import limits
from .automata import from_ast
from .ecma_regex import PatternError, parse
from .limits import CompileLimits


def _byte_decoder() -> dict[str, int]:
    """GPT-2 byte-level alphabet: printable unicode char -> raw byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


@dataclass
class TokenVocab:
    """Token id -> bytes for every ordinary token; special tokens are excluded (never allowed in constrained text)."""

    token_bytes: list[bytes | None]
    eos_ids: tuple[int, ...]
    size: int
    by_bytes: dict[bytes, list[int]] = field(default_factory=dict)
    max_len: int = 1
    _outlines: Vocabulary | None = None
    _sorted: list | None = None
    _sorted_keys: list | None = None
    byte_tokens: list[int] = field(default_factory=list)  # one token per single byte the vocabulary spells alone
    _continuing: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _first_bytes: torch.Tensor | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for i, b in enumerate(self.token_bytes):
            if b:
                self.by_bytes.setdefault(b, []).append(i)
        self.max_len = max((len(b) for b in self.by_bytes), default=1)
        eos = set(self.eos_ids)
        self.byte_tokens = [ids[0] for b in range(1, 256) if (ids := [i for i in self.by_bytes.get(bytes([b]), ())
                                                                       if i not in eos])]

    @property
    def first_bytes(self) -> torch.Tensor:
        """[size] long: each token's first byte, 256 for a token without bytes (EOS, special tokens)."""
        if self._first_bytes is None:
            self._first_bytes = torch.tensor([b[0] if b else 256 for b in self.token_bytes], dtype=torch.long)
        return self._first_bytes

    def outlines_with_sentinel(self, sentinel: int) -> Vocabulary:
        """outlines-core vocabulary of every ordinary token plus the end-of-slot sentinel (id ``sentinel``) and the
        start-of-slot marker (id ``sentinel + 1``) (see SlotDFA)."""
        if self._outlines is None:
            eos = self.eos_ids[0]
            table = {b: ids for b, ids in self.by_bytes.items() if eos not in ids and b"\x00" not in b}
            table[SENTINEL] = [sentinel]
            table[START] = [sentinel + 1]
            self._outlines = Vocabulary(eos, table)
        return self._outlines

    def spell(self, data: bytes) -> list[int]:
        """``data`` as tokens, the longest token that begins the rest each time (one spelling, not necessarily the
        tokenizer's); [] where some byte has no token."""
        out, i = [], 0
        while i < len(data):
            n = next((n for n in range(min(self.max_len, len(data) - i), 0, -1) if data[i:i + n] in self.by_bytes), 0)
            if not n:
                return []
            out.append(self.by_bytes[data[i:i + n]][0])
            i += n
        return out

    def prefix_tokens(self, data: bytes) -> list[int]:
        """Ids of tokens whose bytes are a non-empty prefix of ``data``."""
        out: list[int] = []
        for n in range(1, min(len(data), self.max_len) + 1):
            out.extend(self.by_bytes.get(data[:n], ()))
        return out

    def with_prefix(self, data: bytes) -> list[tuple[int, bytes]]:
        """(id, bytes) of every token whose bytes start with ``data``."""
        if self._sorted is None:
            self._sorted = sorted((b, i) for b, ids in self.by_bytes.items() for i in ids)
            self._sorted_keys = [b for b, _ in self._sorted]
        lo = bisect.bisect_left(self._sorted_keys, data)
        out = []
        for b, i in self._sorted[lo:]:
            if not b.startswith(data):
                break
            out.append((i, b))
        return out

    def continuing(self, data: bytes) -> dict[int, list[tuple[int, bytes]]]:
        """(id, bytes) of every token that starts with ``data`` and runs past it, grouped by the first byte after
        ``data`` (an LRU of 4,096 per vocabulary: pinned text ends in few distinct ways)."""
        hit = self._continuing.get(data)
        if hit is None:
            hit = {}
            for i, b in self.with_prefix(data):
                if len(b) > len(data):
                    hit.setdefault(b[len(data)], []).append((i, b))
            self._continuing[data] = hit
            while len(self._continuing) > 4096:
                self._continuing.popitem(last=False)
        return hit

    def mask(self, ids) -> torch.Tensor:
        m = torch.zeros(self.size, dtype=torch.bool)
        if len(ids):
            m[torch.as_tensor(list(ids), dtype=torch.long)] = True
        return m


_VOCABS: weakref.WeakKeyDictionary[object, TokenVocab] = weakref.WeakKeyDictionary()


def token_vocab(tokenizer, eos_ids: tuple[int, ...] | None = None) -> TokenVocab:
    """Build (once per tokenizer object) the byte vocabulary of a byte-level or sentencepiece tokenizer."""
    cached = _VOCABS.get(tokenizer)
    if cached is not None:
        return cached
    size = len(tokenizer)
    special = set(tokenizer.all_special_ids)
    added = set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    dec = _byte_decoder()
    pieces = tokenizer.convert_ids_to_tokens(list(range(size)))
    token_bytes: list[bytes | None] = []
    for i, piece in enumerate(pieces):
        if piece is None or i in special or i in added:
            token_bytes.append(None)
            continue
        if all(ch in dec for ch in piece):  # byte-level BPE (GPT-2 / SmolLM2 / Llama-3 / Qwen)
            token_bytes.append(bytes(dec[ch] for ch in piece))
        elif piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:  # sentencepiece byte fallback
            token_bytes.append(bytes([int(piece[3:5], 16)]))
        else:  # sentencepiece piece: '▁' is a space
            token_bytes.append(piece.replace("▁", " ").encode("utf-8"))
    if eos_ids is None:
        eos_ids = (tokenizer.eos_token_id,)
    v = TokenVocab(token_bytes=token_bytes, eos_ids=tuple(i for i in eos_ids if i is not None), size=size)
    _VOCABS[tokenizer] = v
    return v


SENTINEL = b"\x00\x00\x00"  # end-of-slot marker appended to every slot regex (see SlotDFA)
START = b"\x00\x01"  # start-of-slot marker put before every slot regex (see SlotDFA)


class SlotDFA:
    """A slot's token DFA.

    outlines-core 0.2.14 drops some transitions out of accepting states when the regex may end there (e.g. after
    ``1`` in ``[0-9]+(\\.[0-9]+)?`` the token ``.`` is missing). Compiling ``(?:regex)`` followed by a sentinel
    token avoids it; a state is final exactly when the sentinel may follow. Tokens holding a NUL byte are left out
    of slots (JSON strings cannot hold a raw NUL; code edits never need one), so no real token reaches the sentinel.

    outlines-core also builds the *unanchored* search automaton of the regex (``.*?regex``), which it never uses
    and which is exponential when a character can start the match at many places (``1[0-9]{17}``: 1.4 s,
    ``[ab]*a[ab]{20}``: 2 million states). A start marker (``\\x00\\x01``, never inside a slot's text) in front
    of the regex keeps that automaton as small as the anchored one; the slot starts in the state after it.
    """

    def __init__(self, regex: str, vocab: TokenVocab) -> None:
        self.sentinel = vocab.size  # a virtual id past the model's vocabulary
        self.start_token = vocab.size + 1  # the start marker's virtual id
        self.index = Index(f"\\x00\\x01(?:{regex})\\x00\\x00\\x00", vocab.outlines_with_sentinel(self.sentinel))
        self._initial = self.index.get_next_state(self.index.get_initial_state(), self.start_token)
        assert self._initial is not None, "the start marker must lead into the slot"
        self.skip = set(vocab.eos_ids) | {self.sentinel, self.start_token}
        self.vocab = vocab
        self._allowed: dict[int, list[int]] = {}
        self._first: dict[int, frozenset[int]] = {}
        self._close: dict[int, float] = {}
        self._byte_tokens = vocab.byte_tokens

    def initial(self) -> int:
        return self._initial

    def allowed(self, state: int) -> list[int]:
        a = self._allowed.get(state)
        if a is None:
            a = self._allowed[state] = [t for t in self.index.get_allowed_tokens(state) if t not in self.skip]
        return a

    def first_bytes(self, state: int) -> frozenset[int]:
        """The bytes an allowed token from ``state`` can start with."""
        f = self._first.get(state)
        if f is None:
            tb = self.vocab.token_bytes
            f = self._first[state] = frozenset(tb[t][0] for t in self.allowed(state) if t < len(tb) and tb[t])
        return f

    def next(self, state: int, token: int) -> int | None:
        return None if token in self.skip else self.index.get_next_state(state, token)

    def is_final(self, state: int) -> bool:
        # the sentinel must *end* the match: a slot whose regex admits NUL (e.g. ``[^\\n]``) could otherwise read
        # the sentinel's bytes as content and look final mid-value
        nxt = self.index.get_next_state(state, self.sentinel)
        return nxt is not None and self.index.is_final_state(nxt)

    def closing_tokens(self, state: int) -> list[int]:
        """Single-byte tokens that bring the slot one step closer to a final state: what a slot past its
        ``max_tokens`` may still write (it ends as soon as it can)."""
        d = self.close_distance(state)
        out = []
        for t in self._byte_tokens:
            n = self.index.get_next_state(state, t)
            if n is not None and self.close_distance(n) < d:
                out.append(t)
        return out

    def close_distance(self, state: int) -> float:
        """Fewest single-byte tokens from ``state`` to a final state (inf if none): an achievable upper bound on
        the tokens this slot still needs. Breadth-first over byte tokens only, so at most 255 edges a state."""
        d = self._close.get(state)
        if d is not None:
            return d
        frontier, seen, depth, d = [state], {state}, 0, math.inf
        while frontier and depth <= 4096:
            if any(self.is_final(s) for s in frontier):
                d = float(depth)
                break
            nxt_frontier = []
            for s in frontier:
                for t in self._byte_tokens:
                    n = self.index.get_next_state(s, t)
                    if n is not None and n not in seen:
                        seen.add(n)
                        nxt_frontier.append(n)
            frontier, depth = nxt_frontier, depth + 1
        self._close[state] = d
        return d


_CACHE_SIZE = 1024
_DFAS: OrderedDict[tuple[str, int], SlotDFA] = OrderedDict()  # (regex, id(vocab)) -> SlotDFA, least recent first
_REFUSED: OrderedDict[tuple[str, CompileLimits], SchemaLimitError] = OrderedDict()  # regexes over a limit
_LOCK = threading.Lock()


def slot_index(regex: str, vocab: TokenVocab, where: str = "") -> SlotDFA:
    """Token DFA for ``regex`` over ``vocab`` (an LRU of 1,024 per process). A regex not yet built is first
    checked against the active build's :class:`~agentkit.constrain.limits.CompileLimits` (its length, the states
    of its automaton over characters); one over a limit raises :class:`~agentkit.errors.SchemaLimitError` naming
    ``where`` (the slot's JSON pointer), and is remembered so that asking again costs nothing."""
    key = (regex, id(vocab))
    dfa = _DFAS.get(key)
    if dfa is not None and dfa.vocab is vocab:
        return dfa
    b = limits.current()
    b.check(where or None)
    refused = _REFUSED.get((regex, b.limits))
    if refused is not None:
        raise SchemaLimitError(refused.limit, where or refused.pointer, refused.value, refused.detail)
    try:
        check_slot_regex(regex, b)
    except SchemaLimitError as e:
        with _LOCK:
            _REFUSED[(regex, b.limits)] = e
            while len(_REFUSED) > 256:
                _REFUSED.popitem(last=False)
        raise
    try:
        dfa = SlotDFA(regex, vocab)  # native code: bounded by the check above, not interruptible
    except ValueError as e:  # outlines-core: regex over its NFA size limit, or no token spells a needed character
        raise UnsupportedSchemaError("slot", where or b.where, f"the slot's token index cannot be built: "
                                     f"{str(e)[:200]}") from None
    with _LOCK:
        _DFAS[key] = dfa
        while len(_DFAS) > _CACHE_SIZE:
            _DFAS.popitem(last=False)
    b.check()
    return dfa


def check_slot_regex(regex: str, b: limits.Budget) -> None:
    """Raise SchemaLimitError when ``regex`` is too long or its automaton over characters has more than
    ``max_slot_states`` states: its token index would take too long to build. A regex outside the syntax the
    checker parses (none the compiler writes) is only length-checked."""
    lim = b.limits
    if len(regex) > lim.max_regex_chars:
        raise b.fail("max_regex_chars", f"a slot regex of {len(regex)} characters")
    try:
        ast = parse(regex)
    except (PatternError, RecursionError):
        return
    try:
        dfa = from_ast(ast, max_states=lim.max_slot_states)
    except PatternError as e:
        raise b.fail("max_slot_states", f"a slot's automaton is too large to index ({e})") from None
    # the token index walks bytes: a state leaving on non-ASCII characters stands for ~3 (UTF-8 continuations)
    weight = sum(3 if any(hi >= 0x80 for cs, _t in row for _lo, hi in cs) else 1 for row in dfa.trans)
    if weight > lim.max_slot_states:
        raise b.fail("max_slot_states", f"a slot's automaton is too large to index (~{weight} byte states)")
