"""The keys and values a structured decode leaves behind, kept for one reader that scores after its output.

``extract`` settles a grounded output by scoring each field's candidates after the output so far
(:class:`agentkit.steps.grounded.ValueScorer`). That output is mostly what the decode just wrote, and the decode's
cache holds its keys and values. A decode asked to (``DecodeConfig.keep_cache``) leaves that cache in its engine's
:class:`KeptSlot`; the scorer takes it and copies the positions it shares, where it would otherwise encode them
again (about a fifth of an extraction's time on this CPU).

The slot holds one cache (the last decode that asked), is emptied when a reader takes it or a new decode asks, and
is only filled by decodes on the base weights' own cache (a plain growing full-attention ``DynamicCache``). The
kept positions are what the decode wrote: the prompt and the template's pinned opening from the prompt pass, and
each later token from the decoding pass that committed it. A position's keys and values depend only on the tokens
up to it, so any token prefix the reader shares is valid for it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from transformers import DynamicCache

from .backbone import dynamic_layers_only


@dataclass(frozen=True)
class KeptCache:
    """``cache`` holds the keys and values of ``tokens``, position by position (the reader must not change it)."""

    tokens: tuple[int, ...]
    cache: DynamicCache

    def prefix(self, length: int) -> DynamicCache:
        """A new cache holding a copy of the first ``length`` positions."""
        if not 0 <= length <= len(self.tokens):
            raise ValueError(f"a kept cache of {len(self.tokens)} positions has no prefix of {length}")
        out = DynamicCache()
        for i, layer in enumerate(self.cache.layers):
            out.update(layer.keys[:, :, :length].clone(), layer.values[:, :, :length].clone(), i)
        return out


class KeptSlot:
    """One engine's kept cache (thread-safe): :meth:`put` replaces it, :meth:`take` hands it to one reader."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: KeptCache | None = None

    def put(self, tokens: Sequence[int], cache: DynamicCache) -> bool:
        """Keep ``cache`` as holding the first ``tokens`` (as many as it has positions); False (nothing kept) for a
        cache whose positions cannot be copied out."""
        if not isinstance(cache, DynamicCache) or not dynamic_layers_only(cache):
            return False
        n = cache.get_seq_length()
        if n > len(tokens):
            raise ValueError(f"a cache of {n} positions cannot hold {len(tokens)} tokens")
        with self._lock:
            self._kept = KeptCache(tuple(tokens[:n]), cache) if n else None
        return n > 0

    def take(self, prompt: Sequence[int]) -> KeptCache | None:
        """The kept cache, if its tokens begin with ``prompt`` (the slot is then empty), else None."""
        p = tuple(prompt)
        with self._lock:
            kept = self._kept
            if kept is None or kept.tokens[:len(p)] != p:
                return None
            self._kept = None
            return kept

    def clear(self) -> None:
        with self._lock:
            self._kept = None

    def __bool__(self) -> bool:
        return self._kept is not None
