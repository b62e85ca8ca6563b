"""Streaming a run: ``StreamedRunResult`` (``async with agent.run_stream(...) as s``).

``s.stream_text(delta=True)`` yields the reply's text as the engine commits it (AR: a token at a time);
``s.stream_output()`` yields the structured output as partial, validated objects while its canvas settles (the
committed text plus the final prefix of the canvas in progress, parsed as partial JSON), then the output itself;
``s.stream_events()`` (or ``async for event in agent.run_stream(...)``) yields every ``AgentEvent``, ``Final``
last. One stream per run: they read the same events.
"""

from __future__ import annotations

import asyncio
import functools
import operator
import types
import typing
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Self

import pydantic_core
from pydantic import BaseModel, ValidationError, create_model

from ..errors import UserError
from ..steps.kinds import RESPONSE_KEY
from ._events import AgentEvent, CanvasDraft, Final, StepStarted, TextDelta

if TYPE_CHECKING:
    from ._agent import Agent
    from ._result import RunResult

_DONE = object()


class StreamedRunResult:
    """A run in progress, and its result once it ends (``get_output()``, ``result``, ``all_messages()``)."""

    def __init__(self, agent: Agent[Any, Any], task: str, kwargs: dict[str, Any]) -> None:
        self.agent, self.task, self.kwargs = agent, task, kwargs
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._job: asyncio.Task[Any] | None = None
        self._reading = False
        self.result: RunResult[Any] | None = None

    # lifecycle ---------------------------------------------------------------------------------------------------
    def _start(self) -> None:
        if self._job is None:
            self._job = asyncio.create_task(self.agent.run_events(self.task, emit=self._queue.put_nowait, **self.kwargs))
            self._job.add_done_callback(lambda _: self._queue.put_nowait(_DONE))

    async def __aenter__(self) -> Self:
        self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stop()

    async def _stop(self) -> None:
        if self._job is not None and not self._job.done():
            self._job.cancel()  # the engine stops at its next forward
            await asyncio.gather(self._job, return_exceptions=True)

    # streams -------------------------------------------------------------------------------------------------------
    async def stream_events(self) -> AsyncIterator[AgentEvent]:
        """Every event of the run in order; the last is ``Final``. Run errors are raised here."""
        if self._reading:
            raise UserError("a StreamedRunResult can be streamed once (stream_text, stream_output or the events)")
        self._reading = True
        self._start()
        assert self._job is not None
        try:
            while (event := await self._queue.get()) is not _DONE:
                yield event
            self.result = self._job.result()
            yield Final(self.result)
        finally:
            await self._stop()

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        return self.stream_events()

    async def stream_text(self, *, delta: bool = False) -> AsyncIterator[str]:
        """The reply's text as it is committed: each new piece (``delta=True``) or the text so far."""
        if self.agent.output_type is not None:
            raise UserError("stream_text() streams a free-text reply; this agent has an output_type: use "
                            "stream_output()")
        text = ""
        async for event in self.stream_events():
            if isinstance(event, TextDelta) and event.step == "reply":
                text += event.delta
                yield event.delta if delta else text
            elif isinstance(event, StepStarted) and event.step == "reply":
                text = ""

    async def stream_output(self) -> AsyncIterator[Any]:
        """Partial structured outputs as the extract step's canvas settles (each validated against the output
        type with every field optional; only changes are yielded), then the validated output itself."""
        if self.agent._output is None:
            raise UserError("stream_output() streams a structured output; this agent has no output_type: use "
                            "stream_text()")
        partial = _PartialValidator(self.agent.output_type, wrapped=self.agent._output.wrapped)
        decode = getattr(self.agent.generator, "decode", None)
        committed, last, step_of = "", None, {}
        async for event in self.stream_events():
            if isinstance(event, StepStarted):
                committed, step_of[event.iteration] = "", event.step
                continue
            if isinstance(event, Final):
                yield event.result.output
                return
            if isinstance(event, TextDelta) and event.step == "extract":
                committed += event.delta
                text = committed
            elif isinstance(event, CanvasDraft) and decode is not None and step_of.get(event.iteration) == "extract":
                k = next((j for j, f in enumerate(event.fixed) if not f), len(event.fixed))
                text = committed + _decode(decode, event.token_ids[:k])
            else:
                continue
            value = partial(text)
            if value is not None and value != last:
                last = value
                yield value

    async def get_output(self) -> Any:
        """Wait for the run to end; its output."""
        if not self._reading:
            async for _ in self.stream_events():
                pass
        elif self._job is not None:
            self.result = await self._job
        assert self.result is not None
        return self.result.output

    def all_messages(self) -> list[Any]:
        return self._done().all_messages()

    def new_messages(self) -> list[Any]:
        return self._done().new_messages()

    def usage(self) -> Any:
        return self._done().usage()

    def _done(self) -> RunResult[Any]:
        if self.result is None:
            raise UserError("the run has not finished: stream it to the end (or await get_output()) first")
        return self.result


class _PartialValidator:
    """Partial JSON text -> a partial output: a model with every field optional, nested models (and lists of them)
    partial too, so they fill as the text does; the ``response`` value so far for a type asked for wrapped
    (``int``, ``list[T]``; see ``OutputSpec``), or the parsed value otherwise; None when nothing parses yet.

    Partials never go backwards (:func:`_merge`): a field once seen stays until it grows (a string that extends
    it, a list that gets longer) or changes to another value; a canvas whose next draft shortens a prefix, or drops
    a number it is rewriting, leaves the field as it was. The final output is validated apart, whatever the
    partials said."""

    def __init__(self, output_type: Any, wrapped: bool = False) -> None:
        self.wrapped = wrapped
        self.model: type[BaseModel] | None = None
        self.last: Any = None
        if isinstance(output_type, type) and issubclass(output_type, BaseModel):
            self.model = _partial_model(output_type)

    def __call__(self, text: str) -> Any:
        text = text.strip()
        if not text:
            return None
        try:
            value = pydantic_core.from_json(text, allow_partial="trailing-strings")
        except ValueError:
            return None
        if self.wrapped:
            value = value.get(RESPONSE_KEY) if isinstance(value, dict) else None
        self.last = value = _merge(self.last, value)
        if self.wrapped or self.model is None:
            return value
        if not isinstance(value, dict):
            return None
        try:
            return self.model.model_validate(value)
        except ValidationError:  # a value that does not validate yet: keep the fields that validate alone
            good = {}
            for k, v in value.items():
                try:
                    self.model.model_validate({k: v})
                    good[k] = v
                except ValidationError:
                    continue
            return self.model.model_validate(good)


def _merge(old: Any, new: Any) -> Any:
    """``new`` over ``old`` without going backwards: keys and list items ``old`` had and ``new`` lacks stay; a
    string stays unless ``new`` extends it (a draft's rewrite waits for the final output); None never replaces."""
    if new is None:
        return old
    if isinstance(old, dict) and isinstance(new, dict):
        out = dict(old)
        for k, v in new.items():
            out[k] = _merge(old.get(k), v)
        return out
    if isinstance(old, list) and isinstance(new, list):
        merged = [_merge(o, n) for o, n in zip(old, new)]
        return merged + (old[len(new):] if len(old) > len(new) else new[len(old):])
    if isinstance(old, str) and isinstance(new, str):
        return new if new.startswith(old) else old
    return new


_PARTIAL: dict[type, type[BaseModel]] = {}


def _partial_model(model: type[BaseModel]) -> type[BaseModel]:
    """``model`` with every field optional (default None), its nested models partial too."""
    if model not in _PARTIAL:
        fields = {k: (_partial_type(f.annotation) | None, None) for k, f in model.model_fields.items()}
        _PARTIAL[model] = create_model(f"Partial{model.__name__}", **fields)  # type: ignore[call-overload]
    return _PARTIAL[model]


def _partial_type(tp: Any) -> Any:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _partial_model(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and args:
        return list[_partial_type(args[0])]  # type: ignore[misc]
    if origin in (typing.Union, types.UnionType) and args:
        return functools.reduce(operator.or_, [_partial_type(a) for a in args])
    return tp


def _decode(decode: Any, ids: list[int]) -> str:
    try:
        return str(decode(list(ids))).rstrip("\ufffd")
    except Exception:  # noqa: BLE001 (mask ids may not decode)
        return ""
