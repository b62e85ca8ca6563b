"""The one interface the SDK needs from a model: ``Generator``, and the adapter for the in-process engine."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from ..config import DecodeConfig
from ..constrain.nodes import Template
from ..decide import calibrates, can_score, name_scores
from ..engine.faces import EngineLike
from ..engine.stats import GenerationResult
from ..errors import UserError

OnDraft = Callable[[list[int], list[bool]], None]  # canvas token ids, which positions are fixed
OnTokens = Callable[[list[int]], None]  # token ids just committed to the output
OnText = Callable[[str], None]  # text just committed to the output (a generator that sees text, not ids: HTTP)


@runtime_checkable
class Generator(Protocol):
    """Anything that turns chat messages into a ``GenerationResult``, optionally under a template.

    ``template.meta["step"]`` names the agent step (plan, tool_call, extract) when the SDK built the template;
    ``template is None`` means free text. ``on_draft`` may be called from any thread.

    A generator may also accept ``on_tokens`` (a keyword argument: called, from any thread, with each run of
    token ids as it is committed to the output) or ``on_text`` (called with each piece of text as it arrives:
    ``HTTPGenerator``, from the server's SSE); the agent passes one when the signature has it, for text streaming.
    """

    async def generate(
        self,
        messages: list[dict[str, str]],
        config: DecodeConfig,
        template: Template | None = None,
        on_draft: OnDraft | None = None,
    ) -> GenerationResult: ...


@runtime_checkable
class Prefiller(Protocol):
    """A generator that can run a prompt's pass alone, ahead of the call that will decode on it: the pass's pieces go
    to its engine's prefix cache, and the call encodes only what comes after them (``Agent(prefetch=...)``,
    ``agentkit/sdk/_prefetch.py``). ``config`` is the call's, so the pass runs on the call's weights; ``stop()``
    True ends the pass at its next piece (the call is not made)."""

    async def prefill(self, messages: list[dict[str, str]], config: DecodeConfig, stop: Callable[[], bool]) -> None: ...


@runtime_checkable
class NameScorer(Protocol):
    """A generator that can score a call's name options with the model (:func:`agentkit.decide.name_scores`):
    ``can_score`` says whether its model has what that needs. The agent's tool step then decides call-or-answer
    and which tool by the model's calibrated scores, and decodes only the arguments (``Agent(decide="scores")``)."""

    can_score: bool  # (an optional ``calibrate`` attribute, read with getattr and True when absent, says whether
    # the decision is calibrated against a content-free question; False: the weights were trained on the loop's
    # decisions, agentkit.decide.calibrates. Not a member: isinstance would then refuse scorers without it)

    async def name_scores(self, messages: list[dict[str, str]], names: list[str], head: str) -> dict[str, float]: ...


class EngineGenerator:
    """Runs a synchronous ``Engine.generate`` in a worker thread (``asyncio.to_thread``).

    Concurrent calls reach the engine concurrently; serialising or batching them is the engine's business, and
    any wait there shows up as ``queue_ms`` in the trace.

    Cancelling the call (a run's ``timeout_s``, a cancelled task) stops the engine before its next forward: the
    engine's ``should_stop`` flag is set, the thread is awaited (at most one forward), and the ``CancelledError``
    carries the partial ``GenerationResult`` as ``.partial``.
    """

    def __init__(self, engine: EngineLike) -> None:
        if not isinstance(engine, EngineLike):
            raise UserError(f"EngineGenerator needs an engine (agentkit.engine.faces.EngineLike: generate() taking "
                            f"template, on_draft, on_tokens, should_stop, ..., and batches), got {engine!r}")
        self.engine = engine
        self.can_score = can_score(engine)
        self.calibrate = calibrates(engine)

    async def name_scores(self, messages: list[dict[str, str]], names: list[str], head: str) -> dict[str, float]:
        """log P(each name | the messages and ``head``) by the engine's model (:func:`agentkit.decide.name_scores`),
        in a worker thread."""
        if not self.can_score:
            raise UserError(f"{self.engine!r} cannot score names (no backbone); decode the choice instead")
        return await asyncio.to_thread(name_scores, self.engine, messages, names, head)

    async def generate(
        self,
        messages: list[dict[str, str]],
        config: DecodeConfig,
        template: Template | None = None,
        on_draft: OnDraft | None = None,
        on_tokens: OnTokens | None = None,
    ) -> GenerationResult:
        stop = threading.Event()
        job = asyncio.ensure_future(asyncio.to_thread(
            self.engine.generate, messages, config, template=template, on_draft=on_draft, on_tokens=on_tokens,
            should_stop=stop.is_set))
        try:
            return await asyncio.shield(job)
        except asyncio.CancelledError as e:
            stop.set()  # the engine stops before its next forward
            with contextlib.suppress(BaseException):
                e.partial = await job  # type: ignore[attr-defined]
            raise

    async def prefill(self, messages: list[dict[str, str]], config: DecodeConfig, stop: Callable[[], bool]) -> None:
        """The prompt pass of ``messages`` in a worker thread, then one AR step: the prompt's pieces stay in the
        engine's prefix cache (:class:`Prefiller`); ``stop()`` is asked before each piece."""
        await asyncio.to_thread(self.engine.generate, messages, replace(config, mode="ar", max_new_tokens=1),
                                should_stop=stop)

    def release(self, template: Template) -> None:
        """Forget the engine's cached constraint for a one-off template (a templated tool's, built per call)."""
        cache = getattr(self.engine, "_constraints", None)
        if isinstance(cache, dict):
            cache.pop(id(template), None)

    def decode(self, token_ids: list[int]) -> str:
        """Token ids as text (for canvas-draft and text-delta events; called on the decoding thread). Under the
        engine's lock when it has one: a fast tokenizer used from two threads at once can fail ("Already
        borrowed")."""
        lock = getattr(self.engine, "lock", None)
        if lock is None:
            return self.engine.tokenizer.decode(token_ids)
        with lock:
            return self.engine.tokenizer.decode(token_ids)

    def __repr__(self) -> str:
        return f"EngineGenerator({self.engine!r})"


@functools.lru_cache(maxsize=64)
def _keywords_of(fn: Any) -> frozenset[str]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return frozenset({"on_tokens", "should_stop", "*"})
    return frozenset(p.name for p in params)


def keywords(fn: Any) -> frozenset[str]:
    """The keyword arguments ``fn`` accepts (bound methods looked up through their function)."""
    return _keywords_of(getattr(fn, "__func__", fn))


def as_generator(model: Any) -> Generator:
    """A ``Generator`` from what a user passes as ``model``.

    - an object with an ``async def generate`` (a ``Generator``: fakes, ``HTTPGenerator``, ...): used as is;
    - an object with a synchronous ``generate`` (an ``Engine``): wrapped in ``EngineGenerator``;
    - a string starting with ``http://`` or ``https://``: an ``HTTPGenerator`` for that base URL.
    """
    if isinstance(model, str):
        if model.startswith(("http://", "https://")):
            from ._http import HTTPGenerator

            return HTTPGenerator(model)
        raise UserError(f"model string must be an http(s) base URL, got {model!r}; pass an Engine or a Generator")
    gen = getattr(model, "generate", None)
    if gen is None or not callable(gen):
        raise UserError(f"model must be an Engine, a Generator or an http(s) URL, got {model!r}")
    if inspect.iscoroutinefunction(gen):
        return model
    return EngineGenerator(model)
