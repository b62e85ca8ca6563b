"""Cheap drafts for a causal canvas: prompt lookup (copy what followed the last n-gram earlier in the context).

Agents copy a lot from their context (names, paths, numbers in an extraction), so an n-gram match against
prompt + output is a good guess for the positions a causal canvas has no prediction for yet.
"""

from __future__ import annotations


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
