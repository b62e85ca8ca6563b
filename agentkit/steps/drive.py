"""Driving a sans-IO step (:func:`agentkit.steps.tool_step.tool_step`, :func:`agentkit.steps.decision.decide`):
each request it yields is answered by the caller's ``answer``, synchronously (the server's worker thread, on the
engine) or awaited (the SDK, on its generator); the step's return value is returned. An exception raised while
answering ends the step and reaches the caller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["drive", "drive_async"]


def drive(step: Generator[Any, Any, T], answer: Callable[[Any], Any]) -> T:
    """Run ``step`` to its end, answering each request with ``answer(request)``."""
    reply: Any = None
    try:
        while True:
            try:
                request = step.send(reply)
            except StopIteration as done:
                return done.value
            reply = answer(request)
    finally:
        step.close()


async def drive_async(step: Generator[Any, Any, T], answer: Callable[[Any], Awaitable[Any]]) -> T:
    """:func:`drive` with an ``answer`` that is awaited."""
    reply: Any = None
    try:
        while True:
            try:
                request = step.send(reply)
            except StopIteration as done:
                return done.value
            reply = await answer(request)
    finally:
        step.close()
