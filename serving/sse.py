"""Server-sent events in OpenAI's ``chat.completion.chunk`` format, and incremental text for content deltas.

- :func:`event` frames one SSE event; :data:`DONE` ends the stream;
- :class:`Chunks` builds the chunk objects of one response (same id, created time and model in each);
- :class:`TextDeltas` turns committed token ids into text deltas: it decodes the output so far, holds back an
  incomplete UTF-8 sequence (``\\ufffd`` at the end) and any tail that could be the start of a stop string, and
  cuts at a stop string as the engine does, so the deltas always concatenate to a prefix of the final text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

DONE = "data: [DONE]\n\n"


def event(obj: dict[str, Any], name: str | None = None) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(obj)}\n\n"


class Chunks:
    def __init__(self, cid: str, created: int, model: str, index: int = 0) -> None:
        self.cid, self.created, self.model, self.index = cid, created, model, index

    def for_choice(self, index: int) -> Chunks:
        """The chunks of choice ``index`` of the same response (``n`` > 1)."""
        return Chunks(self.cid, self.created, self.model, index)

    def chunk(self, delta: dict[str, Any] | None, finish: str | None = None, logprobs: Any = None,
              **extra: Any) -> dict[str, Any]:
        """A chunk with one choice (``delta``), or with none (``delta`` None: extension events, as OpenAI's own
        usage chunk carries ``choices: []``)."""
        choices = [] if delta is None else [{"index": self.index, "delta": delta, "logprobs": logprobs,
                                             "finish_reason": finish}]
        return {"id": self.cid, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "system_fingerprint": None, "choices": choices, **extra}


class TextDeltas:
    """Text deltas of a growing token sequence (see the module docstring). ``decode(ids) -> str``."""

    def __init__(self, decode: Callable[[list[int]], str], stop: list[str] | None = None) -> None:
        self.decode = decode
        self.stop = [s for s in (stop or []) if s]
        self.ids: list[int] = []
        self.sent = ""
        self.stopped = False

    def _safe(self, text: str) -> str:
        """The part of ``text`` that can be sent now."""
        cut = min((i for i in (text.find(s) for s in self.stop) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            return text[:cut]
        text = text.rstrip("\ufffd")  # an incomplete UTF-8 sequence: wait for the next token
        hold = 0
        for s in self.stop:  # a tail that may grow into a stop string
            for k in range(min(len(s) - 1, len(text)), 0, -1):
                if text.endswith(s[:k]):
                    hold = max(hold, k)
                    break
        return text[: len(text) - hold]

    def feed(self, ids: list[int]) -> str:
        """The new text after ``ids`` are appended ('' while nothing new is certain)."""
        if self.stopped:
            return ""
        self.ids.extend(ids)
        return self._advance(self._safe(self.decode(self.ids)))

    def finish(self, final_text: str) -> str:
        """What remains to send once the final text (already cut at a stop string) is known."""
        return self._advance(final_text)

    def _advance(self, text: str) -> str:
        if not text.startswith(self.sent) or len(text) <= len(self.sent):
            return ""  # nothing new (or a re-tokenised earlier span: wait for the final text)
        delta, self.sent = text[len(self.sent):], text
        return delta
