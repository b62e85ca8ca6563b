"""A ``"jsonl"`` template's output ends at its first repeated value.

A ``jsonl`` template (``agentkit.toolcall.calls_template``: one to N tool calls, one per line) lets the model either
end or write another value after each one. A small model often goes on writing the value it just wrote: SmolLM2-135M
repeated its one call up to the template's bound on BFCL questions that need one call, at 1.9x the single call's p50
(``evals/parallel_calls_server.py``). A value equal to an earlier one adds nothing (a call made twice in one reply
is made once), so decoding stops as soon as a line completes with a repeated value, and that line is dropped: the
output is the lines before it, complete (its finish reason ``template``). Modes that commit many tokens at once
(diffusion blocks, verified drafts) may pass the repeat before the check runs; their output is cut at the same line,
so every mode returns the same lines.

:class:`RepeatedLine` is the ``should_stop`` check the decoder calls before each forward; :meth:`RepeatedLine.cut`
gives the text and token ids to keep once it has fired.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..constrain.nodes import json_lines


class RepeatedLine:
    """``check()`` is True once the output's last line is a complete JSON value equal to an earlier line's."""

    def __init__(self, decode: Callable[[list[int]], str], out: Callable[[], list[int]], sep: str = "\n") -> None:
        self.decode, self.out, self.sep = decode, out, sep
        self.seen = 0  # tokens looked at
        self.fired = False

    def check(self) -> bool:
        ids = self.out()
        if self.fired or len(ids) == self.seen:
            return self.fired
        self.seen = len(ids)
        lines = self.decode(ids).split(self.sep)
        if len(lines) < 2:
            return False
        last = _value(lines[-1])
        self.fired = last is not None and any(_value(x) == last for x in lines[:-1])
        return self.fired

    def cut(self, ids: list[int]) -> tuple[str, list[int]] | None:
        """The output up to its first repeated line (that line and any after it dropped): (text, the longest token
        prefix whose text it starts), or None when no line repeats an earlier one. Also after a mode that commits
        many tokens at once (a diffusion block, a verified draft) passed the repeat before a check could stop it."""
        text = self.decode(ids)
        lines, seen = text.split(self.sep), set()
        for i, line in enumerate(lines):
            v = _value(line)
            if v is not None and v in seen:
                keep = self.sep.join(lines[:i])
                n = len(ids)
                while n and not keep.startswith(self.decode(ids[:n])):
                    n -= 1
                return keep, ids[:n]
            if v is not None:
                seen.add(v)
        return None


def _value(line: str) -> str | None:
    """The line's JSON value in canonical form (key order and spacing do not matter); None if it is not one yet."""
    try:
        values = json_lines(line)
    except json.JSONDecodeError:
        return None
    if len(values) != 1:
        return None
    return json.dumps(values[0], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_str)


def _str(x: Any) -> str:
    return str(x)
