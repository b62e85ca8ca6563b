"""Prompt-prefix reuse across requests: the keys and values of recent requests, so a prompt that starts with the
same tokens encodes only the rest.

An agent sends the model its whole conversation at every iteration: the system prompt, the tools, and every
earlier turn (which ends with the model's own previous reply). On a CPU the prompt is most of a request (on BFCL
with the default model, 2.1 s of a 4.0 s mean request). :class:`PrefixCache` keeps the KV caches of the last
``entries`` requests (their prompt and what was decoded after it) and, for a new prompt, copies the longest
common prefix it holds into the request's cache; only the tokens after it go through the prompt pass.

Reused keys/values were computed in a pass over more (or fewer) tokens than a fresh prompt pass would group them
into, so a prompt's logits can differ from a fresh encode's in the last bits (outputs part only at near ties, as
between any two pass groupings on the dense weights). That is why it is opt-in (``EngineConfig.prefix_cache``),
and why the evals, which compare modes on identical prompts, leave it off.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

import torch
from transformers import DynamicCache

from .backbone import dynamic_layers_only


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    return len(os.path.commonprefix([list(a), list(b)]))


def reusable(cache) -> bool:
    """Whether ``cache`` is a plain growing transformers cache (full-attention ``DynamicLayer``s), the kind whose
    first positions can be copied out and back."""
    return type(cache) is DynamicCache and dynamic_layers_only(cache)


class PrefixCache:
    """The KV caches of the last ``entries`` requests (LRU), keyed by their tokens; prefixes shorter than
    ``min_tokens`` are not worth a copy. Thread-safe (requests decode concurrently in the server)."""

    def __init__(self, entries: int, min_tokens: int = 16) -> None:
        if entries < 1:
            raise ValueError(f"a prefix cache needs at least one entry, got {entries}")
        self.entries, self.min_tokens = entries, min_tokens
        self._store: OrderedDict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.lookups = self.reused_tokens = 0

    def restore(self, ids: Sequence[int], cache: DynamicCache) -> int:
        """Copy the longest prefix of ``ids`` held here (at most ``len(ids) - 1`` tokens: the last one is always
        encoded, its logits are the prompt's) into the empty ``cache``; returns how many tokens it holds now."""
        if not reusable(cache) or cache.get_seq_length() != 0:
            return 0
        with self._lock:
            self.lookups += 1
            best, n = None, 0
            for key in self._store:
                m = common_prefix(key, ids)
                if m > n:
                    best, n = key, m
            n = min(n, len(ids) - 1)
            if best is None or n < self.min_tokens:
                return 0
            self._store.move_to_end(best)
            layers = self._store[best]
            self.hits += 1
            self.reused_tokens += n
        for i, (k, v) in enumerate(layers):
            cache.update(k[:, :, :n].clone(), v[:, :, :n].clone(), i)
        return n

    def store(self, ids: Sequence[int], cache: DynamicCache) -> None:
        """Keep a copy of ``cache``, whose positions hold ``ids`` (the request's prompt and what followed it)."""
        n = cache.get_seq_length()
        if not reusable(cache) or n < self.min_tokens or n > len(ids):
            return
        key = tuple(ids[:n])
        layers = [(layer.keys[:, :, :n].clone(), layer.values[:, :, :n].clone()) for layer in cache.layers]
        with self._lock:
            self._store.pop(key, None)
            self._store[key] = layers
            for old in [k for k in self._store if k != key and key[: len(k)] == k]:
                del self._store[old]  # a prefix of the new entry: everything it holds, the new one holds too
            while len(self._store) > self.entries:
                self._store.popitem(last=False)
