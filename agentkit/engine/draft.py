"""Cheap drafts for a causal canvas: prompt lookup (copy what followed the last n-gram earlier in the context).

Agents copy a lot from their context (names, paths, numbers in an extraction), so an n-gram match against
prompt + output is a good guess for the positions a causal canvas has no prediction for yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..constrain.vocab import TokenVocab


def lookup(context: list[int], n: int, max_ngram: int = 3) -> list[int]:
    """Up to ``n`` tokens that followed the most recent earlier occurrence of the context's last k-gram."""
    if n <= 0 or len(context) < 2:
        return []
    for k in range(min(max_ngram, len(context) - 1), 0, -1):
        tail = context[-k:]
        for start in range(len(context) - k - 1, -1, -1):
            if context[start:start + k] == tail:
                follow = context[start + k:start + k + n]
                if follow:
                    return follow
    return []


class PromptSpelling:
    """Bytes as the prompt's tokens spell them: a model copies its prompt's spelling (``HA Z EL`` where a vocabulary's
    longest tokens give ``HA ZE L``), so a copy draft spelled another way is rejected even where its bytes are right."""

    def __init__(self, prompt: Sequence[int], vocab: TokenVocab) -> None:
        self.prompt, self.vocab = list(prompt), vocab
        pieces = [(vocab.token_bytes[t] if t < len(vocab.token_bytes) else None) or b"\0" for t in self.prompt]
        self.text = b"".join(pieces)
        self.token_at: dict[int, int] = {}  # byte offset -> the prompt token that begins there
        at = 0
        for i, b in enumerate(pieces):
            self.token_at[at] = i
            at += len(b)

    def spell(self, text: bytes) -> list[int]:
        """``text`` in the prompt's tokens, from the first occurrence at a token's start of its longest beginning that
        the prompt writes so (or, where that covers more, of the longest beginning after a first token of the
        vocabulary's: ``e iden`` for ``eiden`` of a prompt that writes ``Le iden``), as far as whole tokens reach;
        the rest (all of it where the prompt writes none of it so) in the vocabulary's longest tokens, as far as
        they spell it."""
        skip, n = self._aligned(text)
        toks = self.vocab.spell(text[:skip]) if skip else []
        used = skip
        if n:
            for t in self.prompt[self.token_at[self._at_token(text[skip:skip + n])]:]:
                k = len(self.vocab.token_bytes[t] or b"")
                if not k or used + k > skip + n:
                    break
                toks.append(t)
                used += k
        return toks + self.vocab.spell(text[used:]) if used < len(text) else toks

    def _aligned(self, text: bytes) -> tuple[int, int]:
        """(skip, n): ``text[skip:skip + n]`` is the longest run the prompt writes from a token's start, after a
        first ``skip`` bytes that are one token of the vocabulary (0: none), the most bytes covered (the fewest
        skipped at a tie); (0, 0) where the prompt writes none of it so."""
        best = (0, 0)
        for skip in range(min(self.vocab.max_len, len(text))):
            if skip and text[:skip] not in self.vocab.by_bytes:
                continue
            n = next((n for n in range(len(text) - skip, 0, -1) if self._at_token(text[skip:skip + n]) is not None), 0)
            if n and skip + n > sum(best):
                best = (skip, n)
            if sum(best) == len(text):
                break
        return best

    def _at_token(self, text: bytes) -> int | None:
        """The first offset where the prompt writes ``text`` from a token's start, or None."""
        i = self.text.find(text)
        while i >= 0 and i not in self.token_at:
            i = self.text.find(text, i + 1)
        return i if i >= 0 else None
