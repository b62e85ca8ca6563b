"""Engine callbacks turned into run events: canvas drafts and committed tokens, from any thread, in order."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from ._events import AgentEvent, CanvasDraft, TextDelta

Emit = Callable[[AgentEvent], None]


def threadsafe(emit: Emit | None) -> Emit | None:
    """``emit`` callable from any thread (in order with the events emitted on the loop)."""
    if emit is None:
        return None
    loop, loop_thread = asyncio.get_running_loop(), threading.get_ident()

    def send(event: AgentEvent) -> None:
        if threading.get_ident() == loop_thread:
            emit(event)
        else:
            loop.call_soon_threadsafe(emit, event)

    return send


def draft_callback(emit: Emit | None, generator: Any, iteration: int) -> Callable[[list[int], list[bool]], None] | None:
    """Canvas snapshots -> ``CanvasDraft`` events (with the text when the generator can decode ids)."""
    send = threadsafe(emit)
    if send is None:
        return None
    decode = getattr(generator, "decode", None)

    def on_draft(token_ids: list[int], fixed: list[bool]) -> None:
        try:
            text = decode(list(token_ids)) if decode is not None else None
        except Exception:  # noqa: BLE001 (a draft's text is best effort; mask ids may not decode)
            text = None
        send(CanvasDraft(iteration, list(token_ids), list(fixed), text))

    return on_draft


def text_callback(emit: Emit | None, iteration: int, step: str) -> Callable[[str], None] | None:
    """Text pieces (a generator that streams text, not ids: ``HTTPGenerator``) -> ``TextDelta`` events;
    ``.flush(final_text)`` sends any rest of the final text (the server's stop-string cut can hold a tail back)."""
    send = threadsafe(emit)
    if send is None:
        return None
    sent = [""]

    def on_text(delta: str) -> None:
        if delta:
            sent[0] += delta
            send(TextDelta(iteration, step, delta))

    def flush(final: str) -> None:
        if len(final) > len(sent[0]) and final.startswith(sent[0]):
            send(TextDelta(iteration, step, final[len(sent[0]):]))
            sent[0] = final

    on_text.flush = flush  # type: ignore[attr-defined]
    return on_text


def token_callback(emit: Emit | None, generator: Any, iteration: int, step: str) -> Callable[[list[int]], None] | None:
    """Committed token ids -> ``TextDelta`` events (text decoded incrementally; an incomplete UTF-8 sequence waits
    for the tokens that finish it). ``.flush(final_text)`` sends what was held back once the generation ends."""
    send, decode = threadsafe(emit), getattr(generator, "decode", None)
    if send is None or decode is None:
        return None
    ids: list[int] = []
    sent = [0]

    def on_tokens(new: list[int]) -> None:
        ids.extend(new)
        text = decode(list(ids))
        stable = len(text.rstrip("\ufffd"))
        if stable > sent[0]:
            send(TextDelta(iteration, step, text[sent[0]:stable]))
            sent[0] = stable

    def flush(final: str) -> None:  # what was held back (bytes that never completed a character)
        if len(final) > sent[0] and final.startswith(decode(list(ids))[: sent[0]]):
            send(TextDelta(iteration, step, final[sent[0]:]))
            sent[0] = len(final)

    on_tokens.flush = flush  # type: ignore[attr-defined]
    return on_tokens
