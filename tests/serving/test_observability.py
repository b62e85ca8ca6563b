"""The server's observability (issue 35 item 6): one OpenTelemetry span per request after the GenAI conventions,
in the client's trace (``traceparent``), and the Prometheus series a vLLM dashboard reads."""

from __future__ import annotations

import httpx
import pytest
from agentkit.serving.app import create_app

pytestmark = pytest.mark.usefixtures("one_thread")
MSG = [{"role": "user", "content": "What is the weather in Paris?"}]
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@pytest.fixture(scope="module")
def engine():
    from agentkit.engine import tiny_engine

    return tiny_engine(0)


@pytest.fixture
def spans(monkeypatch):
    """Spans the server ends, from an in-memory exporter on a fresh provider."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer", provider.get_tracer)
    return exporter


async def _post(app, path, body, headers=None):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=60) as c:
        served = [m["id"] for m in (await c.get("/v1/models", headers=headers or {})).json()["data"]]
        model = "agentkit" if "agentkit" in served else served[0]  # OpenAI requires one (test_model_required)
        return await c.post(path, json={"model": model, **body}, headers=headers or {})


async def test_a_span_per_request_in_the_clients_trace(engine, spans):
    app = create_app(engine)
    head = {"traceparent": f"00-{TRACE_ID}-{PARENT}-01"}
    r = await _post(app, "/v1/chat/completions", {"model": "agentkit", "messages": MSG, "max_tokens": 4,
                                                 "temperature": 0.5, "seed": 3}, head)
    assert r.status_code == 200
    (span,) = spans.get_finished_spans()
    a = span.attributes
    assert span.name == "chat agentkit" and span.kind.name == "SERVER"
    assert format(span.context.trace_id, "032x") == TRACE_ID and format(span.parent.span_id, "016x") == PARENT
    assert (a["gen_ai.operation.name"], a["gen_ai.provider.name"], a["gen_ai.request.model"]) == (
        "chat", "agentkit", "agentkit")
    assert (a["gen_ai.request.max_tokens"], a["gen_ai.request.temperature"], a["gen_ai.request.seed"]) == (4, 0.5, 3)
    assert a["gen_ai.usage.output_tokens"] == 4 and a["gen_ai.usage.input_tokens"] == r.json()["usage"]["prompt_tokens"]
    assert tuple(a["gen_ai.response.finish_reasons"]) == ("length",) and a["gen_ai.response.id"] == r.json()["id"]
    from agentkit.calibration import step_mode

    assert a["agentkit.mode"] == step_mode("reply") and a["http.response.status_code"] == 200


async def test_streams_errors_and_the_other_routes(engine, spans):
    app = create_app(engine)
    await _post(app, "/v1/completions", {"prompt": "Once", "max_tokens": 3, "stream": True})
    await _post(app, "/v1/responses", {"input": "Hi", "max_output_tokens": 3, "stream": True})
    await _post(app, "/v1/chat/completions", {"model": "nope", "messages": MSG})
    done = {s.name: s for s in spans.get_finished_spans()}
    comp, resp, err = done["text_completion agentkit"], done["chat agentkit"], done["chat nope"]
    assert comp.attributes["gen_ai.usage.output_tokens"] == 3
    assert tuple(comp.attributes["gen_ai.response.finish_reasons"]) == ("length",)
    assert resp.attributes["gen_ai.usage.output_tokens"] == 3
    assert tuple(resp.attributes["gen_ai.response.finish_reasons"]) == ("incomplete",)
    assert err.attributes["error.type"] == "model_not_found" and err.status.status_code.name == "ERROR"


async def test_vllm_series(engine):
    app = create_app(engine, served_model_names=("smol",))
    await _post(app, "/v1/chat/completions", {"messages": MSG, "max_tokens": 5})
    await _post(app, "/v1/chat/completions", {"messages": MSG, "max_tokens": 5, "stream": True})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        text = (await c.get("/metrics")).text
    series = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
              if line.startswith("vllm:")}
    m = '{model_name="smol"}'
    assert series["vllm:generation_tokens_total" + m] == 10
    assert series["vllm:prompt_tokens_total" + m] == series["vllm:request_prompt_tokens_sum" + m] > 0
    assert series["vllm:time_to_first_token_seconds_count" + m] == 2
    assert series["vllm:time_per_output_token_seconds_count" + m] == 2
    assert series["vllm:e2e_request_latency_seconds_count" + m] == 2
    assert series['vllm:request_success_total{finished_reason="length",model_name="smol"}'] == 2
    assert series["vllm:num_requests_running" + m] == 0
    assert series["vllm:e2e_request_latency_seconds_sum" + m] >= series["vllm:time_to_first_token_seconds_sum" + m]
