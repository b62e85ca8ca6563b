"""OpenTelemetry spans for agent runs, opt-in, after the GenAI semantic conventions.

Span tree of one run::

    invoke_agent {agent}            gen_ai.operation.name=invoke_agent, gen_ai.agent.name, agentkit.run_id
    └── iteration {n} {step}        agentkit.* = the iteration's trace record (step, mode, forwards, ms, ...)
        ├── chat {model}            gen_ai.operation.name=chat, gen_ai.provider.name=agentkit, gen_ai.request.*,
        │                           gen_ai.usage.*, gen_ai.response.finish_reasons (stop | length | error; agentkit's
        │                           own reason in agentkit.finish_reason)
        └── execute_tool {tool}     gen_ai.operation.name=execute_tool, gen_ai.tool.name, gen_ai.tool.call.*

Turn it on per agent (``Agent(..., instrument=True)``) or for every agent (``Agent.instrument_all()``); spans go
to the global tracer provider (or ``Instrumentation(tracer_provider=...)``). Needs ``pip install agentkit[otel]``.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import UserError

MAX_ATTR = 1000  # characters of tool arguments / results kept on a span


class Instrumentation:
    """Where spans go and whether tool arguments and results are recorded on them (``include_content``)."""

    def __init__(self, tracer_provider: Any = None, include_content: bool = True) -> None:
        try:
            from opentelemetry import trace
        except ImportError as e:  # pragma: no cover (the otel extra is in dev)
            raise UserError("OpenTelemetry spans need opentelemetry-api/sdk: pip install 'agentkit[otel]'") from e
        self._trace = trace
        provider = tracer_provider or trace.get_tracer_provider()
        self.tracer = provider.get_tracer("agentkit")
        self.include_content = include_content

    def start(self, name: str, parent: Any = None, attributes: dict[str, Any] | None = None) -> Any:
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(name, context=context, attributes=_clean(attributes or {}))

    def end(self, span: Any, attributes: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
        if span is None:
            return
        if attributes:
            span.set_attributes(_clean(attributes))
        if error is not None:
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", type(error).__name__)
            span.set_status(Status(StatusCode.ERROR, str(error)[:MAX_ATTR]))
        span.end()

    def content(self, value: Any) -> str | None:
        if not self.include_content:
            return None
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        return text if len(text) <= MAX_ATTR else text[: MAX_ATTR - 1] + "…"


def genai_finish(reason: str) -> str:
    """A finish reason in the GenAI conventions' words: ``template`` (the output is complete under its template)
    is ``stop``; ``cancelled`` (a time limit or cancellation stopped it) is ``error``; the rest as they are."""
    return {"template": "stop", "loop": "stop", "cancelled": "error"}.get(reason, reason)


def as_instrumentation(instrument: bool | Instrumentation | None) -> Instrumentation | None:
    if instrument is None or instrument is False:
        return None
    if instrument is True:
        return Instrumentation()
    if isinstance(instrument, Instrumentation):
        return instrument
    raise UserError(f"instrument must be a bool or an Instrumentation, got {instrument!r}")


def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    """OpenTelemetry attribute values: str, bool, int, float or sequences of them; None dropped."""
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if v is None:
            continue
        out[k] = list(v) if isinstance(v, tuple) else v
    return out


# the span tree of a run (``RunState.spans``: "otel", "run", "iteration") -------------------------------------------


def start_iteration(run: Any, iteration: int, step: str, mode: str) -> None:
    otel = run.spans.get("otel")
    if otel:
        run.spans["iteration"] = otel.start(f"iteration {iteration} {step}", run.spans["run"], {
            "agentkit.iteration": iteration, "agentkit.step": step, "agentkit.mode": mode})


def end_iteration(run: Any, rec: Any) -> None:
    """End the iteration's span with every field of its trace record as an ``agentkit.*`` attribute."""
    otel, span = run.spans.get("otel"), run.spans.pop("iteration", None)
    if otel and span is not None:
        otel.end(span, {f"agentkit.{k}": v for k, v in rec.to_dict().items()})


def end_run(run: Any, error: BaseException | None) -> None:
    otel = run.spans.get("otel")
    if not otel:
        return
    otel.end(run.spans.pop("iteration", None), error=error)
    otel.end(run.spans.pop("run"), {
        "gen_ai.usage.input_tokens": run.usage.input_tokens, "gen_ai.usage.output_tokens": run.usage.output_tokens,
        "agentkit.iterations": len(run.trace), "agentkit.forwards": run.usage.forwards}, error=error)
