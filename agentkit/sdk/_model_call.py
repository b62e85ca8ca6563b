"""The model calls of an agent's steps: the streaming callbacks, the ``chat`` span, the run's usage, and the
trace record of a call stopped by a timeout or a cancellation."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from ..config import DecodeConfig
from ..constrain.nodes import Template
from ..engine.stats import GenerationResult
from ..errors import ContextLengthError, UsageLimitExceeded
from ._callbacks import draft_callback, text_callback, token_callback
from ._context import RunUsage
from ._events import AgentEvent, TextDelta
from ._generator import keywords
from ._otel import end_iteration, genai_finish
from ._result import RunState
from ._trace import IterationRecord

log = logging.getLogger("agentkit.sdk")


def emit(run: RunState, make: Callable[[], AgentEvent]) -> None:
    """Send the event ``make()`` builds to the run's listener (``run_stream``), if it has one."""
    if run.emit is not None:
        run.emit(make())


class ModelCaller:
    """Calls an agent's generator for one step: streams its tokens (``on_tokens``) or text (``on_text``, a
    generator that sees text: HTTP) where the generator takes them."""

    def __init__(self, generator: Any) -> None:
        self.generator = generator
        self.streams_tokens = "on_tokens" in keywords(generator.generate)
        self.streams_text = not self.streams_tokens and "on_text" in keywords(generator.generate)

    def model_name(self) -> str:
        engine = getattr(self.generator, "engine", None)
        return str(getattr(engine, "name", None) or type(self.generator).__name__)

    async def call(self, run: RunState, step: str, iteration: int, config: DecodeConfig,
                   template: Template | None, chat: list[dict[str, str]], t0: float, agent: str) -> GenerationResult:
        """The generator call, in a ``chat`` span; a cancelled call (timeout) leaves a partial trace record."""
        kwargs: dict[str, Any] = {}
        stream = token_callback(run.emit, self.generator, iteration, step) if self.streams_tokens else None
        if stream is not None:
            kwargs["on_tokens"] = stream
        elif self.streams_text and (stream := text_callback(run.emit, iteration, step)) is not None:
            kwargs["on_text"] = stream  # a generator that streams text (HTTP: the server's SSE)
        otel = run.spans.get("otel")
        span = otel.start(f"chat {self.model_name()}", run.spans.get("iteration"), {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "agentkit", "gen_ai.request.model": self.model_name(),
            "gen_ai.request.temperature": config.temperature, "gen_ai.request.top_p": config.top_p,
            "gen_ai.request.max_tokens": config.max_new_tokens, "gen_ai.request.seed": config.seed,
            "agentkit.mode": config.mode, "agentkit.step": step}) if otel else None
        log.debug("run %s: %s step (iteration %d, %s) starts", run.run_id, step, iteration, config.mode)
        try:
            result = await self.generator.generate(chat, config, template,
                                                   draft_callback(run.emit, self.generator, iteration), **kwargs)
        except ContextLengthError as e:  # the conversation outgrew the model: a run limit, with the trace so far
            if otel:
                otel.end(span, error=e)
            raise UsageLimitExceeded(f"the conversation no longer fits the model's context: {e}", run.trace) from e
        except asyncio.CancelledError as e:
            self.partial(run, step, iteration, config.mode, t0, getattr(e, "partial", None), agent)
            if otel:
                otel.end(span, error=e)
            raise
        except BaseException as e:
            if otel:
                otel.end(span, error=e)
            raise
        if stream is not None:
            stream.flush(result.text)  # type: ignore[attr-defined]
        elif result.text:  # a generator that cannot stream tokens: its whole text as one delta
            emit(run, lambda: TextDelta(iteration, step, result.text))
        s = result.stats
        run.usage.incr(RunUsage(requests=1, input_tokens=s.prompt_tokens, output_tokens=s.output_tokens,
                                forwards=s.encoder_forwards + s.decoder_forwards))
        log.debug("run %s: %s step done: %d tokens, %d forwards, %.0f ms, %s", run.run_id, step, s.output_tokens,
                  s.encoder_forwards + s.decoder_forwards, s.latency_ms, s.finish_reason)
        if otel:
            otel.end(span, {"gen_ai.usage.input_tokens": s.prompt_tokens, "gen_ai.usage.output_tokens": s.output_tokens,
                            "gen_ai.response.finish_reasons": [genai_finish(s.finish_reason)],
                            "agentkit.finish_reason": s.finish_reason})
        return result

    def partial(self, run: RunState, step: str, iteration: int, mode: str, t0: float,
                partial: GenerationResult | None, agent: str) -> None:
        """The trace record of a generation stopped by a timeout or a cancellation."""
        rec = IterationRecord(iteration, step, mode, run_id=run.run_id, agent=agent, retries=run.failures)
        if partial is not None:
            rec.add_stats(partial.stats)
        rec.error = (f"cancelled: stopped at the engine's next forward after {rec.output_tokens} output tokens"
                     if partial is not None else "cancelled (the generator could not be stopped early)")
        rec.finish_reason = "cancelled"
        rec.total_ms = (time.perf_counter() - t0) * 1000
        run.trace.add(rec)
        end_iteration(run, rec)
