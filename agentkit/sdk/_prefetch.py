"""The prompt pass of the step a tool step's decision leads to, run ahead (``Agent(prefetch=...)``): while the
decision scores the tools on its own prompt, a second thread encodes the next step's prompt into the engine's
prefix cache, so that step encodes only the assistant's header.

- Before any tool result the pass is the call's (the tool step's own prompt). The decision reads the
  ``tool_choice`` prompt and the call the tool step's (``agentkit/sdk/_decide.py`` says why each), which differ
  from their first line, so without this a first tool call encodes the tools twice, one pass after the other. A
  decision to answer stops the pass at its next piece.
- After a result the pass is the answer's (its own view: the instructions and the task with the results,
  ``RunState.answer_chat``), which the decision after a result leads to most often. A decision to call again stops
  it at its next piece.

A pass ahead changes no output: a piece copied from the prefix cache is the same bits as one encoded in place
(``agentkit/engine/prefix.py``). It is worth it where a core is spare: on a machine whose cores all decode, the two
passes share them, and a pass the decision does not use is work thrown away.
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
    its engine's passes use (``EngineConfig.threads``; unset, torch's default: every core)."""
    engine = getattr(generator, "engine", None)
    if not isinstance(generator, Prefiller) or getattr(engine, "prefixes", None) is None:
        return False
    cores = os.cpu_count() or 1
    return cores >= 2 * max(int(getattr(engine, "threads", None) or cores), 1)


class PassAhead:
    """One step's prompt pass run ahead: :meth:`start` it before the decision; :meth:`ready` waits for it before
    its step, :meth:`cancel` ends it at its next piece when the decision leads elsewhere. ``step``: ``"tool_call"``
    or ``"reply"``."""

    def __init__(self, step: str) -> None:
        self.step = step
        self.job: asyncio.Future[None] | None = None
        self.cancelled = threading.Event()

    def start(self, generator: Prefiller, messages: list[dict[str, str]], config: DecodeConfig) -> None:
        self.job = asyncio.ensure_future(generator.prefill(messages, config, self.cancelled.is_set))
        self.job.add_done_callback(_logged)

    def cancel(self) -> None:
        self.cancelled.set()

    async def ready(self) -> None:
        """Wait for the pass (a failed one is logged and its step encodes its prompt itself)."""
        if self.job is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.job)


def pass_ahead(generator: Any, run: RunState, decode: DecodeConfig) -> PassAhead | None:
    """The pass ahead of a tool step decided by scores (the agent's ``decode``), started where it pays: before any
    result, the call's on the tool step's own prompt (``_decide.CALL_PROMPT``; later the prefix cache holds that
    prompt); after one, the text answer's (not a structured output's); on a ``generator`` that can run one
    (:class:`~agentkit.sdk._generator.Prefiller`). Else None."""
    if not isinstance(generator, Prefiller):
        return None
    if not run.results.calls:
        if _decide.CALL_PROMPT != "tool_step":
            return None
        step, messages = "tool_call", to_chat_with_prompt(run.messages, None)
    elif run.output is None:
        step, messages = "reply", run.answer_chat()
    else:
        return None
    config = step_config(decode, run, step, 1, None)
    if config.weights in ("adapted", "loaded") or (config.weights, config.mode) == ("auto", "diffusion"):
        return None  # a step on other weights than the base's reads none of its pieces
    ahead = PassAhead(step)
    ahead.start(generator, messages, config)
    return ahead


async def before_call(ahead: PassAhead | None) -> None:
    """The decision calls: the call's pass ahead is waited for, the answer's stopped."""
    if ahead is not None and ahead.step == "tool_call":
        await ahead.ready()
    elif ahead is not None:
        ahead.cancel()


def on_answer(ahead: PassAhead | None) -> PassAhead | None:
    """The decision answers: the call's pass ahead is stopped; the answer's is returned, for :func:`ready`."""
    if ahead is not None and ahead.step == "tool_call":
        ahead.cancel()
        return None
    return ahead


async def ready(ahead: PassAhead | None) -> None:
    """:meth:`PassAhead.ready` of ``ahead``, if any."""
    if ahead is not None:
        await ahead.ready()


def _logged(job: asyncio.Future[None]) -> None:
    if not job.cancelled() and job.exception() is not None:
        log.warning("a prompt pass ahead failed (its step encodes the prompt): %r", job.exception())
