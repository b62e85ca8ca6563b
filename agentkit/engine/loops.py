"""An output ends at a loop: one piece of tokens written ``n`` times in a row (``DecodeConfig.stop_loops``).

A small model often falls into a loop it never leaves: SmolLM2-135M's coding assistant answered ``... a a a a a`` to
its 256-token budget (11.9 s of a 28.5 s run) and wrote ``# Corrected lines`` 24 times into one edit, and the agent
loop's answers ran on with ``R-6901 R-6901 R-6901 ...``. With ``stop_loops = n`` (0: off) decoding stops as soon as
the output ends with ``n`` copies of one piece of 1..:data:`MAX_PERIOD` tokens that together make at least
:data:`MIN_TOKENS` tokens (finish reason ``"loop"``; a template's output is then incomplete, as one cut by the token
budget is). The copies stay in the output: a stream has already sent them, and the streamed text and the final text
must be the same. The token floor lets numbers be: digits are single tokens, and with ``n = 3`` and no floor a reply
ended at the zeros of ``35000``, before the value it was to carry (evals/results/agent_loop/answer_copy_loops.json). Modes that commit many
tokens at once (diffusion blocks, verified drafts) may pass the loop's end before the check runs; :meth:`LoopStop.cut`
cuts their output at the same place, so every mode returns the same text for the same tokens.

:class:`LoopStop` is the ``should_stop`` check the decoder calls before each forward; :meth:`LoopStop.cut` gives the
token ids to keep once it has fired.
"""

from __future__ import annotations

from collections.abc import Callable

MAX_PERIOD = 32  # the longest piece (in tokens) whose repeats count as a loop: a sentence said again and again
MIN_TOKENS = 12  # a loop's copies together are at least this long (a piece of 1 token: 12 copies)


def loop_at(ids: list[int], end: int, n: int) -> int:
    """The period ``p`` of a loop ending at ``end`` (``ids[:end]`` ends with ``max(n, ceil(MIN_TOKENS / p))``
    copies of one piece of ``p`` tokens; the shortest such ``p``), or 0 when there is none."""
    for p in range(1, MAX_PERIOD + 1):
        copies = max(n, -(-MIN_TOKENS // p))
        start = end - copies * p
        if start < 0:
            continue
        piece = ids[end - p:end]
        if all(ids[start + k * p:start + (k + 1) * p] == piece for k in range(copies - 1)):
            return p
    return 0


class LoopStop:
    """``check()`` is True once the output ends with a loop of ``n`` copies (see :func:`loop_at`)."""

    def __init__(self, out: Callable[[], list[int]], n: int) -> None:
        if n < 2:
            raise ValueError(f"a loop is at least 2 copies, got n={n}")
        self.out, self.n = out, n
        self.seen = 0  # output tokens whose ends were looked at
        self.end: int | None = None  # where the first loop ends, once found

    @property
    def fired(self) -> bool:
        return self.end is not None

    def check(self) -> bool:
        ids = self.out()
        if self.fired or len(ids) == self.seen:
            return self.fired
        # tokens committed since the last check (several at once in diffusion and verify): the first end among them
        first = max(self.seen + 1, self.n)
        self.seen = len(ids)
        self.end = next((end for end in range(first, len(ids) + 1) if loop_at(ids, end, self.n)), None)
        return self.fired

    def cut(self, ids: list[int]) -> list[int] | None:
        """``ids`` (the output, or a prefix of it) up to the end of its first loop (where decoding one token at a
        time stops), or None when it has none. Ends already looked at by :meth:`check` are not looked at again."""
        self.check()  # the tokens committed after the last check
        return ids[:self.end] if self.end is not None and self.end <= len(ids) else None
