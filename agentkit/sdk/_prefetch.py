"""The call's prompt pass run ahead (``Agent(prefetch=...)``): while the tool step's decision scores the tools on
its own prompt, a second thread encodes the prompt the call would be decoded on, into the engine's prefix cache.
A call then encodes only the assistant's header and the pinned text after it; an answer leaves the pass unused.

The two prompts differ from their first line (the decision reads the ``tool_choice`` prompt, the call the tool
step's own: ``agentkit/sdk/_decide.py`` says why each), so without this a first tool call encodes the tools twice,
one pass after the other. The pass ahead changes no output: a piece copied from the prefix cache is the same bits
as one encoded in place (``agentkit/engine/prefix.py``). It is worth it where a core is spare: on a machine whose
cores all decode, the two passes share them and the answer's pass is work thrown away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..config import DecodeConfig
from ..errors import UserError
from . import _decide
from ._generator import Prefiller
from ._messages import answer_prefix, to_chat_with_prompt
from ._result import RunState
from ._step_config import step_config

log = logging.getLogger("agentkit.sdk")

#: Whether the first call's pass ahead is followed by the answer step's opening (:func:`answer_prefix`), encoded
#: on the spare core while the call decodes.
ANSWER_AHEAD = True

T = TypeVar("T")


def resolve(value: bool | None, generator: Any) -> bool:
    """An agent's ``prefetch``: True, False, or None for :func:`spare_core`. True needs a generator that can run a
    pass ahead (a :class:`~agentkit.sdk._generator.Prefiller`: the in-process engine)."""
    if value is not None and not isinstance(value, bool):
        raise UserError(f"prefetch must be True, False or None, got {value!r}")
    if value and not isinstance(generator, Prefiller):
        raise UserError(f"prefetch=True needs a generator that can run a prompt pass ahead (agentkit.sdk._generator."
                        f"Prefiller: the in-process engine), not {type(generator).__name__}")
    return spare_core(generator) if value is None else value


def spare_core(generator: Any) -> bool:
    """Whether ``generator`` can run a prompt pass ahead and the machine has a core for it: a
    :class:`~agentkit.sdk._generator.Prefiller` whose engine keeps a prefix cache, on at least twice the cores
    its engine's passes use (``EngineConfig.threads``; unset, torch's default: every core). The cores are those
    this process may run on (its CPU affinity, where the platform says)."""
    engine = getattr(generator, "engine", None)
    if not isinstance(generator, Prefiller) or getattr(engine, "prefixes", None) is None:
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores >= 2 * max(int(getattr(engine, "threads", None) or cores), 1)


class CallPrefetch:
    """One tool step's pass ahead: :meth:`start` it before the decision, :meth:`ready` before the call, or
    :meth:`cancel` it when the decision answers (it ends at its next piece, freeing the core for the answer).
    With ``answer`` given, the answer step's opening (:func:`~agentkit.sdk._messages.answer_prefix`) is encoded
    after the call's pass, while the call decodes; :meth:`answer_ready` before the answer."""

    def __init__(self) -> None:
        self.job: asyncio.Future[None] | None = None
        self.answer: asyncio.Future[None] | None = None
        self.cancelled = threading.Event()

    def start(self, generator: Prefiller, messages: list[dict[str, str]], config: DecodeConfig,
              answer: tuple[list[dict[str, str]], DecodeConfig] | None = None) -> None:
        """Start the pass (and the answer's after it); they are also cancelled when the asyncio task that started
        them ends (``run_sync``'s run, or a caller's task ended by a timeout), so a run stopped in its decision
        leaves no pass behind it."""
        self.job = asyncio.ensure_future(generator.prefill(messages, config, self.cancelled.is_set))
        self.job.add_done_callback(_logged)
        if answer is not None:
            self.answer = asyncio.ensure_future(self._then(generator, *answer))
            self.answer.add_done_callback(_logged)
        run, last = asyncio.current_task(), self.answer or self.job
        if run is not None:  # dropped once the passes are over: a caller's task may start many runs
            run.add_done_callback(self._run_ended)
            last.add_done_callback(lambda _: run.remove_done_callback(self._run_ended))

    async def _then(self, generator: Prefiller, messages: list[dict[str, str]], config: DecodeConfig) -> None:
        await self.ready()
        if not self.cancelled.is_set():
            await generator.prefill(messages, config, self.cancelled.is_set)

    def _run_ended(self, _task: asyncio.Task[Any]) -> None:
        self.cancel()

    def cancel(self) -> None:
        self.cancelled.set()

    async def ready(self) -> None:
        """Wait for the call's pass (a failed one is logged and the call encodes its prompt itself)."""
        await _settled(self.job)

    async def answer_ready(self) -> None:
        """Wait for the answer's pass, if it was started (the answer then encodes only what follows it)."""
        await _settled(self.answer)


async def _settled(job: asyncio.Future[None] | None) -> None:
    if job is not None:
        with contextlib.suppress(Exception):
            await asyncio.shield(job)


async def ready(ahead: CallPrefetch | None) -> None:
    """:meth:`CallPrefetch.ready` of ``ahead``, if any."""
    if ahead is not None:
        await ahead.ready()


async def answer_ready(run: RunState, answer: Coroutine[Any, Any, T]) -> T:
    """The answer step (``answer``, not yet started) once the run's answer pass ahead, if it has one, is over:
    the answer then encodes only what follows the opening that pass encoded."""
    try:
        if run.ahead is not None:
            await run.ahead.answer_ready()
    except BaseException:
        answer.close()  # cancelled while waiting: the answer never started
        raise
    return await answer


def _logged(job: asyncio.Future[None]) -> None:
    if not job.cancelled() and job.exception() is not None:
        log.warning("the call's prompt pass ahead failed (the call encodes it): %r", job.exception())


def call_ahead(generator: Any, run: RunState, decode: DecodeConfig) -> CallPrefetch | None:
    """The pass ahead of a tool step's call decided by scores (the agent's ``decode``), started where it pays: the
    run's first tool step (after it the prefix cache holds the tool step's prompt already), its call on the tool
    step's own prompt (``_decide.CALL_PROMPT``) and a ``generator`` that can run one
    (:class:`~agentkit.sdk._generator.Prefiller`); else None."""
    if run.results.calls or _decide.CALL_PROMPT != "tool_step" or not isinstance(generator, Prefiller):
        return None
    config = step_config(decode, run, "tool_call", 1, None)
    if config.weights in ("adapted", "loaded") or (config.weights, config.mode) == ("auto", "diffusion"):
        return None  # a call on other weights than the base's reads none of its pieces
    answer = answer_prefix(run.instructions, run.messages[:run.new_message_index], run.prompt)
    run.ahead = ahead = CallPrefetch()
    ahead.start(generator, to_chat_with_prompt(run.messages, None), config,
                (answer, step_config(decode, run, "reply", 1, None)) if ANSWER_AHEAD else None)
    return ahead
