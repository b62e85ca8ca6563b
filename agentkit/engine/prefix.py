"""Exact prompt-prefix reuse across requests: the keys and values of earlier prompts, in token blocks, so a prompt
that starts with the same tokens encodes only the rest -- and gets the same bits as if it had encoded everything.

An agent sends the model its whole conversation at every iteration: the system prompt, the tools, and every
earlier turn. A server sees many requests that share a system prompt and tools. :class:`PrefixCache` keeps the
keys/values of earlier prompts as a tree of fixed-width token blocks (a radix tree whose edges are whole blocks, as
vLLM's automatic prefix caching hashes block chains and SGLang's RadixAttention shares prefixes between requests),
one tree for all requests of an engine.

Exactness: the prompt pass always runs in pieces cut by one rule (:class:`Chunking`), with the cache on *and* off:
at absolute positions 0, block, 2*block, ... and before every token that starts a chat message (the chat
template's message-start token, ``<|im_start|>`` for ChatML); the last piece is what is left. Where a cut falls
depends only on the position and the token there, so two prompts that share a prefix cut it the same way. A piece's
keys/values depend only on its tokens and the keys/values before it, so a piece encoded now and the same piece
copied from the tree are the same bits, and a prompt's logits with the cache on equal those with it off, bit for
bit. Only pieces of the prompt pass that end at a cut are kept (never positions written by decoding steps, whose
passes are grouped differently), and a prompt always encodes at least its last token (its logits are the prompt's).

The message cuts are what make an agent's next iteration cheap: its prompt is the last one plus the call and the
result, and the last prompt's final message (the assistant header) starts at a cut, so everything before it is
reused, not just the whole blocks before it (which re-encoded on average half a block of the old prompt).

Memory: a byte bound (``EngineConfig.prefix_cache_bytes``, default :func:`default_bytes`) with LRU eviction of
leaf blocks; the blocks a request restored from are pinned (never evicted) until its prompt pass has stored its own
blocks under them. Thread-safe: the tree is changed under one lock; block tensors are immutable once stored, so
copying them out of a pinned path runs outside it.

A request drafted by the block drafter (``agentkit/engine/drafter.py``) reads the base's hidden features at every
prompt position, so a piece it restores must keep them beside its keys/values (:class:`FeatureSource`): it reuses the
longest run of held pieces that carry features. Once an engine has loaded its drafter, every request on the base
weights keeps the features of the pieces its prompt pass stores, so an agent's reply drafted after an undrafted tool
call reuses that call's prompt. The features of a piece
depend on its tokens and the keys/values before it, as its keys/values do, so reused ones are the same bits too.

Where it does not apply (:func:`unsupported`): backbones with their own passes (llama.cpp, DiffusionGemma, the
fixed-shape backbone) and caches that are not plain growing full-attention layers (sliding windows). Those run the
prompt in one pass and reuse nothing; the engine logs why and keeps it in ``Engine.prefix_status``.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch
from transformers import DynamicCache

from .backbone import Backbone, dynamic_layers_only

MIB = 1 << 20
DEFAULT_CAP = 512 * MIB  # the default bound on a machine with 8 GiB of memory or more


def default_bytes() -> int:
    """The default byte bound: 1/16 of physical memory, at most 512 MiB (on the 2-core 23 GiB dev machine: 512 MiB,
    about 170 blocks of 128 tokens of the default model in bf16)."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return DEFAULT_CAP
    return max(16 * MIB, min(DEFAULT_CAP, ram // 16))


def chunks(start: int, end: int, block: int) -> list[tuple[int, int]]:
    """The prompt pass's pieces over positions ``[start, end)``: cut at every multiple of ``block`` (``start`` is
    one); ``block`` 0: one piece."""
    if not block:
        return [(start, end)]
    return [(i, min(end, (i // block + 1) * block)) for i in itertools.chain([start], range(
        (start // block + 1) * block, end, block))]


@dataclass(frozen=True)
class Chunking:
    """Where the prompt pass cuts (see the module docstring): before position ``i`` when ``i`` is a multiple of
    ``block`` or ``ids[i]`` is one of ``marks`` (message-start tokens); ``block`` 0: one pass, no cuts."""

    block: int
    marks: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return self.block > 0

    def cut(self, ids: Sequence[int], i: int) -> bool:
        """Whether a piece ends before position ``i`` (known only from ``ids[i]``, so False past the end unless
        ``i`` is a multiple of the block)."""
        return bool(self.block) and (i % self.block == 0 or (i < len(ids) and ids[i] in self.marks))

    def pieces(self, ids: Sequence[int], start: int, end: int) -> list[tuple[int, int]]:
        """The pieces of positions ``[start, end)`` (``start`` is a cut)."""
        if not self.block:
            return [(start, end)]
        if not self.marks:
            return chunks(start, end, self.block)
        bounds = [start, *(i for i in range(start + 1, end) if i % self.block == 0 or ids[i] in self.marks), end]
        return list(itertools.pairwise(bounds))


def as_chunking(c: Chunking | int) -> Chunking:
    return c if isinstance(c, Chunking) else Chunking(c)


def message_marks(tokenizer) -> frozenset[int]:
    """The special token a chat template starts each message with (``<|im_start|>`` in ChatML), found by
    rendering one and two messages; empty when the template has none (or no chat template)."""
    def ids(msgs: list[dict[str, str]]) -> list[int]:
        out = tokenizer.apply_chat_template(msgs, tokenize=True)
        return list(out["input_ids"] if hasattr(out, "keys") else out)
    try:
        one = ids([{"role": "user", "content": "a"}])
        two = ids([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    except Exception:  # noqa: BLE001 -- no chat template (or one that refuses these): no message cuts
        return frozenset()
    if len(two) <= len(one) or two[:len(one)] != one:
        return frozenset()
    start = two[len(one)]
    return frozenset({start}) if start in set(getattr(tokenizer, "all_special_ids", ())) else frozenset()


class FeatureSource(Protocol):
    """The base's features of a request's prompt pass, kept with the pieces it stores; ``reads_prompt``: the request
    reads them at every prompt position (the block drafter's draft source), so it restores only pieces that have
    them and is primed with them."""

    reads_prompt: bool

    def prime(self, feats: torch.Tensor) -> None:
        """Take the features of the restored positions (the prompt pass then runs over the rest only)."""

    def encoded(self) -> torch.Tensor | None:
        """The features of the positions this request's prompt pass encoded ([T, F]), or None when they could not
        be kept whole (a batched pass)."""

    def prompt_done(self) -> None:
        """The prompt pass and its store are over."""


def prompt_pass(bb, cache: DynamicCache, seq: Sequence[int], start: int, chunking: Chunking | int,
                stop: Callable[[], bool] | None = None) -> torch.Tensor | None:
    """Encode ``seq[start:]`` after the ``start`` positions already in ``cache``, in ``chunking``'s pieces (each
    one pass: ``whole``, never row-exact pieces; a ``Chunking`` of block 0, or 0: one pass); the last position's
    logits. ``stop()``, asked before each piece: True ends the pass there (None returned; the pieces encoded stay
    in ``cache``)."""
    chunking = as_chunking(chunking)
    if not chunking:
        return bb.encode(list(seq[start:]), cache)[0]
    pieces = chunking.pieces(seq, start, len(seq))
    for lo, hi in pieces[:-1]:
        if stop is not None and stop():
            return None
        bb.encode(list(seq[lo:hi]), cache, rows=[], whole=True)
    if stop is not None and stop():
        return None
    lo, hi = pieces[-1]
    return bb.encode(list(seq[lo:hi]), cache, whole=True)[0]


def cached_prompt_pass(bb, cache: DynamicCache, seq: Sequence[int], prefix: PrefixCache | None,
                       chunking: Chunking | int, features: FeatureSource | None = None,
                       stop: Callable[[], bool] | None = None) -> tuple[torch.Tensor | None, int]:
    """The prompt pass into the empty ``cache`` with ``prefix``'s held pieces copied in first and the new ones stored
    after (None: no reuse); returns the last position's logits (None where ``stop`` ended the pass early:
    :func:`prompt_pass`; the pieces it encoded are stored) and how many positions were reused. ``features``:
    a request that reads the base's features; only pieces that carry them are reused, and they are primed into it."""
    reads = features is not None and features.reads_prompt
    lease = prefix.restore(seq, cache, features=reads) if prefix is not None else None
    try:
        reused = lease.tokens if lease is not None else 0
        if reads and lease is not None and lease.feats is not None:
            features.prime(lease.feats)
        logits = prompt_pass(bb, cache, seq, reused, prefix.chunking if prefix is not None else chunking, stop)
        if lease is not None:
            prefix.store(seq, cache, lease, feats=features.encoded() if features is not None else None)
    finally:
        if lease is not None:
            prefix.release(lease)
        if features is not None:
            features.prompt_done()
    return logits, reused


def unsupported(bb) -> str | None:
    """Why ``bb``'s prompts cannot be reused exactly, or None when they can: a torch :class:`Backbone` whose prompt
    passes may be cut into pieces (``Backbone.piecewise_prompts``) and whose caches are plain growing
    full-attention layers."""
    if not (isinstance(bb, Backbone) and bb.piecewise_prompts):
        return f"the {type(bb).__name__} backbone runs its own passes (not chunked prompt passes over a DynamicCache)"
    cache = bb.new_cache()
    if type(cache) is not DynamicCache:
        return f"its KV cache is a {type(cache).__name__}, not a growing DynamicCache"
    if cache.layers and not dynamic_layers_only(cache):
        return "its KV cache has sliding-window or static layers"
    return None


def _piece(feats: torch.Tensor | None, lo: int, hi: int) -> torch.Tensor | None:
    """Rows ``lo:hi`` of ``feats`` as a piece's own tensor, or None where ``feats`` does not hold them all."""
    return feats[lo:hi].clone() if feats is not None and 0 <= lo and hi <= len(feats) else None


class _Node:
    """One block: its tokens, its keys/values per layer (and the base's features there, where a drafted request
    stored or restored it), the blocks that follow it."""

    __slots__ = ("children", "feats", "kv", "nbytes", "parent", "pins", "tokens")

    def __init__(self, parent: _Node | None, tokens: tuple[int, ...], kv: list[tuple[torch.Tensor, torch.Tensor]],
                 feats: torch.Tensor | None = None):
        self.parent, self.tokens, self.kv, self.feats = parent, tokens, kv, feats
        self.children: dict[tuple[int, ...], _Node] = {}
        self.pins = 0
        self.nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        self.nbytes += feats.numel() * feats.element_size() if feats is not None else 0


@dataclass
class Lease:
    """The pieces a request restored or stored (pinned until :meth:`PrefixCache.release`); ``tokens``: the positions
    restored."""

    nodes: list[_Node] = field(default_factory=list)
    tokens: int = 0
    released: bool = False
    feats: torch.Tensor | None = None  # restore(features=True): the restored positions' features


class PrefixCache:
    """A tree of prompt pieces (cut by ``chunking``: a :class:`Chunking`, or a block width alone) and their
    keys/values, at most ``max_bytes`` of tensors (LRU eviction of unpinned leaves). Use: ``lease = restore(ids,
    cache)``, the prompt pass over the rest in ``chunking``'s pieces, ``store(ids, cache, lease)``,
    ``release(lease)``."""

    def __init__(self, chunking: Chunking | int, max_bytes: int) -> None:
        block = chunking.block if isinstance(chunking, Chunking) else chunking
        if not isinstance(block, int) or isinstance(block, bool) or block < 1:
            raise ValueError(f"a prefix cache needs a block of at least one token, got {block!r}")
        if not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"a prefix cache needs a byte bound >= 0, got {max_bytes!r}")
        self.chunking = as_chunking(chunking)
        self.block, self.max_bytes = block, max_bytes
        self._root = _Node(None, (), [])
        self._lru: OrderedDict[int, _Node] = OrderedDict()  # id(node) -> node, least recently used first
        self._lock = threading.Lock()
        self.bytes = self.peak_bytes = 0
        self.lookups = self.hits = self.cached_tokens = self.evicted = self.skipped = 0

    @property
    def blocks(self) -> int:
        return len(self._lru)

    def _touch(self, node: _Node) -> None:
        self._lru.move_to_end(id(node))

    def restore(self, ids: Sequence[int], cache: DynamicCache, features: bool = False) -> Lease:
        """Copy the longest run of held pieces that starts ``ids`` (leaving at least its last token to encode) into
        the empty ``cache``; the lease pins them. ``features``: only pieces that carry the base's features, which
        the lease holds."""
        lease = Lease()
        if cache.get_seq_length() != 0:
            raise ValueError("PrefixCache.restore needs an empty cache")
        pieces = self.chunking.pieces(ids, 0, len(ids) - 1) if len(ids) > 1 else []
        with self._lock:
            self.lookups += 1
            node = self._root
            for lo, hi in pieces:
                if not self.chunking.cut(ids, hi):  # the last piece before the last token: whole only at a cut
                    break
                node = node.children.get(tuple(ids[lo:hi]))
                if node is None or (features and node.feats is None):
                    break
                node.pins += 1
                self._touch(node)
                lease.nodes.append(node)
                lease.tokens = hi
            if lease.nodes:
                self.hits += 1
                self.cached_tokens += lease.tokens
        if lease.nodes:
            if features:
                lease.feats = torch.cat([n.feats for n in lease.nodes])
            for i in range(len(lease.nodes[0].kv)):
                cache.update(torch.cat([n.kv[i][0] for n in lease.nodes], dim=2),
                             torch.cat([n.kv[i][1] for n in lease.nodes], dim=2), i)
        return lease

    def store(self, ids: Sequence[int], cache: DynamicCache, lease: Lease, feats: torch.Tensor | None = None) -> int:
        """Keep the pieces of ``ids`` that ``cache`` holds (written by the prompt pass) beyond those ``lease``
        restored and that end at a cut; returns how many were added. A piece that does not fit in the bound once
        every unpinned leaf is gone is not kept (nor any after it). ``feats``: the base's features at the positions
        the prompt pass encoded (from ``lease.tokens`` on), kept with the new pieces and given to held ones that
        lack them."""
        end = min(len(ids), cache.get_seq_length())
        added, restored = 0, lease.tokens  # feats start at the first position the prompt pass encoded
        parent = lease.nodes[-1] if lease.nodes else self._root
        for lo, hi in self.chunking.pieces(ids, lease.tokens, end) if end > lease.tokens else []:
            if not self.chunking.cut(ids, hi):
                break
            tokens = tuple(ids[lo:hi])
            with self._lock:
                node = parent.children.get(tokens)
            piece_feats = _piece(feats, lo - restored, hi - restored)
            if node is None:
                kv = [(layer.keys[:, :, lo:hi].clone(), layer.values[:, :, lo:hi].clone()) for layer in cache.layers]
                node = self._insert(parent, tokens, kv, lease, piece_feats)
                if node is None:
                    break
                added += 1
            else:
                with self._lock:
                    node.pins += 1
                    self._touch(node)
                    lease.nodes.append(node)
                    self._add_feats(node, piece_feats)
            parent = node
        return added

    def _add_feats(self, node: _Node, feats: torch.Tensor | None) -> None:
        """Give a held piece the features it lacks, where they fit in the bound (caller holds the lock)."""
        if feats is None or node.feats is not None:
            return
        nbytes = feats.numel() * feats.element_size()
        if self._make_room(nbytes):
            node.feats = feats
            node.nbytes += nbytes
            self.bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self.bytes)

    def _insert(self, parent: _Node, tokens: tuple[int, ...], kv, lease: Lease,
                feats: torch.Tensor | None = None) -> _Node | None:
        node = _Node(parent, tokens, kv, feats)
        with self._lock:
            if tokens in parent.children:  # a concurrent request stored it meanwhile: keep that one
                node = parent.children[tokens]
            else:
                if not self._make_room(node.nbytes):
                    self.skipped += 1
                    return None
                parent.children[tokens] = node
                self._lru[id(node)] = node
                self.bytes += node.nbytes
                self.peak_bytes = max(self.peak_bytes, self.bytes)
            node.pins += 1  # held by this request's lease until release (so its children can hang off it)
            self._touch(node)
            lease.nodes.append(node)
            self._add_feats(node, feats)  # a concurrent request's piece may lack them (pinned now: never evicted)
            return node

    def _make_room(self, nbytes: int) -> bool:
        """Evict least recently used unpinned leaves until ``nbytes`` more fit (caller holds the lock)."""
        if nbytes > self.max_bytes:
            return False
        while self.bytes + nbytes > self.max_bytes:
            victim = next((n for n in self._lru.values() if not n.children and not n.pins), None)
            if victim is None:
                return False
            del self._lru[id(victim)]
            del victim.parent.children[victim.tokens]
            self.bytes -= victim.nbytes
            self.evicted += 1
        return True

    def release(self, lease: Lease) -> None:
        """Unpin the lease's blocks (once)."""
        with self._lock:
            if lease.released:
                return
            lease.released = True
            for node in lease.nodes:
                node.pins -= 1

    def clear(self) -> None:
        """Forget every held piece (a request holding a lease keeps its own copies; its release is harmless)."""
        with self._lock:
            self._root = _Node(None, (), [])
            self._lru.clear()
            self.bytes = 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"block": self.block, "max_bytes": self.max_bytes, "bytes": self.bytes,
                    "peak_bytes": self.peak_bytes, "blocks": len(self._lru), "lookups": self.lookups,
                    "hits": self.hits, "cached_tokens": self.cached_tokens, "evicted": self.evicted,
                    "skipped": self.skipped}
