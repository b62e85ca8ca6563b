"""Prometheus metrics with ``prometheus_client`` (one registry per app; label values escaped by the library).

Series (names as before the move to the library; counters also get the library's ``_created`` samples):
``agentkit_queue_depth``, ``agentkit_requests_running``, ``agentkit_requests_preparing`` (gauges);
``agentkit_requests_total{mode,status}``, ``agentkit_forwards_total{mode}``, ``agentkit_output_tokens_total{mode}``,
``agentkit_rejected_total{reason}`` (counters); ``agentkit_request_latency_seconds{mode}``,
``agentkit_first_token_seconds{mode}`` (arrival to the first streamed content), ``agentkit_tokens_per_forward{mode}``,
``agentkit_batch_size`` (requests per model forward) and ``agentkit_prepare_seconds`` (schema compilation and
prompt checks per request) (histograms).

Beside them, the series a vLLM dashboard reads, under vLLM's names and its ``model_name`` label (the served model):
``vllm:num_requests_running``, ``vllm:num_requests_waiting`` (gauges); ``vllm:prompt_tokens_total``,
``vllm:generation_tokens_total``, ``vllm:prefix_cache_hits_total`` (prompt tokens reused from the prefix cache),
``vllm:prefix_cache_queries_total`` (prompt tokens looked up), ``vllm:request_success_total{finished_reason}``
(``stop`` | ``length`` | ``abort``) (counters); ``vllm:e2e_request_latency_seconds``,
``vllm:time_to_first_token_seconds`` (arrival to the first committed output token, streamed or not),
``vllm:time_per_output_token_seconds`` (first token to the last, per output token after the first),
``vllm:request_queue_time_seconds`` (arrival to its decoding slot, preparation included),
``vllm:request_prompt_tokens``, ``vllm:request_generation_tokens`` (histograms), one sample per finished request.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_TPF_BUCKETS = (0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 32)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
# vLLM's buckets for these series (vllm/v1/metrics/loggers.py)
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                 40.0, 80.0, 160.0, 640.0, 2560.0)
_TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                 80.0)
_E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
                960.0, 1920.0, 7680.0)
_TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """Updated from the event loop, the worker threads and the batcher (the library's metrics are thread-safe)."""

    def __init__(self, model_name: str = "agentkit") -> None:
        r = self.registry = CollectorRegistry()
        self.model_name = model_name
        self._vllm(r)
        self.depth = Gauge("agentkit_queue_depth", "Requests waiting for a decoding slot (not counting those "
                           "decoding).", registry=r)
        self.running = Gauge("agentkit_requests_running", "Requests being decoded.", registry=r)
        self.preparing = Gauge("agentkit_requests_preparing", "Requests compiling their schema / checking their "
                               "prompt.", registry=r)
        self.requests = Counter("agentkit_requests", "Chat completion requests by decoding mode and HTTP status.",
                                ["mode", "status"], registry=r)
        self.latency = Histogram("agentkit_request_latency_seconds", "Request latency, arrival to response.",
                                 ["mode"], buckets=_LATENCY_BUCKETS, registry=r)
        self.first_token = Histogram("agentkit_first_token_seconds", "Streaming: arrival to the first content "
                                     "chunk.", ["mode"], buckets=_LATENCY_BUCKETS, registry=r)
        self.forwards = Counter("agentkit_forwards", "Model forwards after prefill (AR steps, commits, denoiser "
                                "passes).", ["mode"], registry=r)
        self.output_tokens = Counter("agentkit_output_tokens", "Output tokens produced.", ["mode"], registry=r)
        self.cached_tokens = Counter("agentkit_cached_prompt_tokens", "Prompt tokens reused from the prefix cache "
                                     "instead of encoded.", ["mode"], registry=r)
        self.tpf = Histogram("agentkit_tokens_per_forward", "Output tokens per forward, per request.", ["mode"],
                             buckets=_TPF_BUCKETS, registry=r)
        self.batch = Histogram("agentkit_batch_size", "Requests per model forward (continuous batching; one "
                               "sample per forward).", buckets=_BATCH_BUCKETS, registry=r)
        self.prepare = Histogram("agentkit_prepare_seconds", "Per-request preparation: schema compilation, token "
                                 "automaton build, prompt check.", buckets=_LATENCY_BUCKETS, registry=r)
        self.rejected = Counter("agentkit_rejected", "Requests not served: queue full or work budget spent (429), timeout (504), "
                                "disconnect.", ["reason"], registry=r)
        for reason in ("queue_full", "work_budget", "timeout", "disconnect"):
            self.rejected.labels(reason)

    def _vllm(self, r: CollectorRegistry) -> None:
        m = ["model_name"]
        self.v_running = Gauge("vllm:num_requests_running", "Requests being decoded.", m, registry=r)
        self.v_waiting = Gauge("vllm:num_requests_waiting", "Requests waiting (preparing or queued).", m, registry=r)
        self.v_prompt = Counter("vllm:prompt_tokens", "Prompt tokens of finished requests.", m, registry=r)
        self.v_generation = Counter("vllm:generation_tokens", "Generated tokens of finished requests.", m, registry=r)
        self.v_cache_hits = Counter("vllm:prefix_cache_hits", "Prompt tokens reused from the prefix cache.", m,
                                    registry=r)
        self.v_cache_queries = Counter("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.",
                                       m, registry=r)
        self.v_success = Counter("vllm:request_success", "Finished requests by finish reason.",
                                 [*m, "finished_reason"], registry=r)
        self.v_e2e = Histogram("vllm:e2e_request_latency_seconds", "Arrival to the last token.", m,
                               buckets=_E2E_BUCKETS, registry=r)
        self.v_ttft = Histogram("vllm:time_to_first_token_seconds", "Arrival to the first output token.", m,
                                buckets=_TTFT_BUCKETS, registry=r)
        self.v_tpot = Histogram("vllm:time_per_output_token_seconds", "Per output token after the first.", m,
                                buckets=_TPOT_BUCKETS, registry=r)
        self.v_queue = Histogram("vllm:request_queue_time_seconds", "Arrival to a decoding slot.", m,
                                 buckets=_E2E_BUCKETS, registry=r)
        self.v_req_prompt = Histogram("vllm:request_prompt_tokens", "Prompt tokens per request.", m,
                                      buckets=_TOKEN_BUCKETS, registry=r)
        self.v_req_gen = Histogram("vllm:request_generation_tokens", "Generated tokens per request.", m,
                                   buckets=_TOKEN_BUCKETS, registry=r)

    def finished(self, job: Any, usage: dict[str, Any], finish_reason: str) -> None:
        """One finished request (a decoding job) in vLLM's series: ``usage`` is OpenAI's (``Outcome.usage``)."""
        name = self.model_name
        prompt, out = usage["prompt_tokens"], usage["completion_tokens"]
        cached = usage["prompt_tokens_details"]["cached_tokens"]
        self.v_prompt.labels(name).inc(prompt)
        self.v_generation.labels(name).inc(out)
        self.v_cache_queries.labels(name).inc(prompt)
        self.v_cache_hits.labels(name).inc(cached)
        reason = {"length": "length", "cancelled": "abort"}.get(finish_reason, "stop")  # template, stop: stop
        self.v_success.labels(name, reason).inc()
        self.v_req_prompt.labels(name).observe(prompt)
        self.v_req_gen.labels(name).observe(out)
        end = job.finished or time.perf_counter()
        self.v_e2e.labels(name).observe(end - job.enqueued)
        if job.started is not None:
            self.v_queue.labels(name).observe(job.started - job.enqueued)
        if job.first_token is not None:
            self.v_ttft.labels(name).observe(job.first_token - job.enqueued)
            if out > 1:
                self.v_tpot.labels(name).observe((end - job.first_token) / (out - 1))

    def request(self, mode: str, status: int, seconds: float) -> None:
        self.requests.labels(mode, str(status)).inc()
        self.latency.labels(mode).observe(seconds)

    def generation(self, mode: str, forwards: int, output_tokens: int, tpf: float, cached_tokens: int = 0) -> None:
        self.forwards.labels(mode).inc(forwards)
        self.output_tokens.labels(mode).inc(output_tokens)
        self.cached_tokens.labels(mode).inc(cached_tokens)
        self.tpf.labels(mode).observe(tpf)

    def batch_forward(self, size: int, n: int = 1) -> None:
        """``n`` model forwards that carried ``size`` requests each (the batcher calls it after every forward)."""
        for _ in range(n):
            self.batch.observe(size)

    def reject(self, reason: str) -> None:
        self.rejected.labels(reason).inc()

    def render(self, depth: int, running: int, preparing: int = 0) -> bytes:
        self.depth.set(depth)
        self.running.set(running)
        self.preparing.set(preparing)
        self.v_running.labels(self.model_name).set(running)
        self.v_waiting.labels(self.model_name).set(depth + preparing)
        return generate_latest(self.registry)
