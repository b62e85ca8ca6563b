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
from typing import Any

from ..config import DecodeConfig
from ..errors import UserError
from . import _decide
from ._generator import Prefiller
from ._messages import to_chat_with_prompt
from ._result import RunState
from ._step_config import step_config

log = logging.getLogger("agentkit.sdk")


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
    :meth:`cancel` it when the decision answers (it ends at its next piece, freeing the core for the answer)."""

    def __init__(self) -> None:
        self.job: asyncio.Future[None] | None = None
        self.cancelled = threading.Event()

    def start(self, generator: Prefiller, messages: list[dict[str, str]], config: DecodeConfig) -> None:
        """Start the pass; it is also cancelled when the asyncio task that started it ends (``run_sync``'s run, or
        a caller's task ended by a timeout), so a run stopped in its decision leaves no pass behind it."""
        self.job = asyncio.ensure_future(generator.prefill(messages, config, self.cancelled.is_set))
        self.job.add_done_callback(_logged)
        run = asyncio.current_task()
        if run is not None:  # dropped once the pass is over: a caller's task may start many runs
            run.add_done_callback(self._run_ended)
            self.job.add_done_callback(lambda _: run.remove_done_callback(self._run_ended))

    def _run_ended(self, _task: asyncio.Task[Any]) -> None:
        self.cancel()

    def cancel(self) -> None:
        self.cancelled.set()

    async def ready(self) -> None:
        """Wait for the pass (a failed one is logged and the call encodes its prompt itself)."""
        if self.job is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.job)


async def ready(ahead: CallPrefetch | None) -> None:
    """:meth:`CallPrefetch.ready` of ``ahead``, if any."""
    if ahead is not None:
        await ahead.ready()


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
    ahead = CallPrefetch()
    ahead.start(generator, to_chat_with_prompt(run.messages, None), config)
    return ahead
