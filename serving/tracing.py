"""OpenTelemetry: one span per request, after the GenAI semantic conventions, in the client's trace.

``{operation} {model}`` (kind SERVER) with ``gen_ai.operation.name`` (``chat`` for chat completions and responses,
``text_completion`` for completions), ``gen_ai.provider.name`` (``agentkit``), ``gen_ai.request.model``,
``gen_ai.request.max_tokens`` / ``temperature`` / ``top_p`` / ``seed``; when it ends, ``gen_ai.response.id``,
``gen_ai.response.model``, ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens`` /
``output_tokens``, ``http.response.status_code`` and agentkit's own numbers as ``agentkit.*`` (mode, forwards,
tokens per forward, queue and preparation ms, cached prompt tokens); an error sets ``error.type`` (the error's
code) and the span's status. A request with a W3C ``traceparent`` header gets its span in that trace, under the
client's span (``opentelemetry.propagate.extract``). A streamed response's span ends with its stream.

Spans go to the global tracer provider: configure one in the process (``opentelemetry-instrument agentkit serve``
with the ``OTEL_*`` variables, or ``trace.set_tracer_provider(...)`` before ``create_app``). Without
``opentelemetry-api`` installed (the ``otel`` extra) nothing is recorded, at no cost.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import Response, StreamingResponse

from .errors import APIError

OPERATIONS = {"chat": "chat", "completions": "text_completion", "responses": "chat"}
_STATS = ("mode", "forwards", "tokens_per_forward", "queue_ms", "prepare_ms", "cached_prompt_tokens")


class Tracer:
    """Starts and ends the request spans (a no-op without opentelemetry)."""

    def __init__(self) -> None:
        try:
            from opentelemetry import propagate, trace
        except ImportError:
            self._trace = None
            return
        self._trace, self._propagate = trace, propagate

    def start(self, headers: Any, route: str, model: str | None, params: dict[str, Any]) -> Span | None:
        if self._trace is None:
            return None
        operation = OPERATIONS[route]
        attrs = {"gen_ai.operation.name": operation, "gen_ai.provider.name": "agentkit",
                 "gen_ai.request.model": model, **{f"gen_ai.request.{k}": v for k, v in params.items()}}
        span = self._trace.get_tracer("agentkit.serving").start_span(
            f"{operation} {model or 'agentkit'}", context=self._propagate.extract(dict(headers)),
            kind=self._trace.SpanKind.SERVER, attributes={k: v for k, v in attrs.items() if v is not None})
        return Span(span, self._trace)


class Span:
    def __init__(self, span: Any, trace: Any) -> None:
        self.span, self._trace = span, trace
        self.finish_reasons: list[str] = []

    def fail(self, err: APIError) -> None:
        self.span.set_attribute("error.type", err.code or err.type)
        self.span.set_attribute("http.response.status_code", err.status)
        self.span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, err.message[:500]))
        self.span.end()

    def read(self, body: dict[str, Any]) -> None:
        """Attributes from a response body or a streamed chunk (chat, completions or a Responses event)."""
        body = body.get("response", body) if isinstance(body.get("response"), dict) else body
        self.finish_reasons += [c["finish_reason"] for c in body.get("choices") or [] if c.get("finish_reason")]
        if body.get("object") == "response" and body.get("status") not in (None, "in_progress"):
            self.finish_reasons.append(body["status"])
        usage = body.get("usage") or {}
        attrs = {"gen_ai.response.id": body.get("id"), "gen_ai.response.model": body.get("model"),
                 "gen_ai.usage.input_tokens": usage.get("prompt_tokens", usage.get("input_tokens")),
                 "gen_ai.usage.output_tokens": usage.get("completion_tokens", usage.get("output_tokens"))}
        stats = body.get("agentkit_stats") or {}
        attrs.update({f"agentkit.{k}": stats.get(k) for k in _STATS})
        self.span.set_attributes({k: v for k, v in attrs.items() if v is not None})

    def end(self, status: int = 200) -> None:
        if self.finish_reasons:
            self.span.set_attribute("gen_ai.response.finish_reasons", self.finish_reasons)
        self.span.set_attribute("http.response.status_code", status)
        self.span.end()

    def response(self, resp: Response) -> Response:
        """Record ``resp`` on the span and end it (a stream: as its last event is sent)."""
        if isinstance(resp, StreamingResponse):
            resp.body_iterator = self._watch(resp.body_iterator)
            return resp
        try:
            self.read(json.loads(resp.body))
        finally:
            self.end(resp.status_code)
        return resp

    async def _watch(self, events: AsyncIterator[Any]) -> AsyncIterator[Any]:
        try:
            async for ev in events:
                for line in (ev if isinstance(ev, str) else ev.decode()).splitlines():
                    # only the events that carry what the span records (usage at the end, an error): not every
                    # token's chunk is parsed again
                    if line.startswith("data: {") and ('"usage"' in line or '"error"' in line):
                        data = json.loads(line[6:])
                        if "error" in data and isinstance(data["error"], dict):
                            self.span.set_attribute("error.type", data["error"].get("code") or "error")
                        elif data.get("type") in (None, "response.completed", "response.incomplete", "response.failed"):
                            self.read(data)
                yield ev
        finally:
            self.end()
