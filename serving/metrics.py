"""Prometheus metrics with ``prometheus_client`` (one registry per app; label values escaped by the library).

Series (names as before the move to the library; counters also get the library's ``_created`` samples):
``agentkit_queue_depth``, ``agentkit_requests_running``, ``agentkit_requests_preparing`` (gauges);
``agentkit_requests_total{mode,status}``, ``agentkit_forwards_total{mode}``, ``agentkit_output_tokens_total{mode}``,
``agentkit_rejected_total{reason}`` (counters); ``agentkit_request_latency_seconds{mode}``,
``agentkit_first_token_seconds{mode}`` (arrival to the first streamed content), ``agentkit_tokens_per_forward{mode}``,
``agentkit_batch_size`` (requests per model forward) and ``agentkit_prepare_seconds`` (schema compilation and
prompt checks per request) (histograms).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_TPF_BUCKETS = (0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 32)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """Updated from the event loop, the worker threads and the batcher (the library's metrics are thread-safe)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
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
        return generate_latest(self.registry)
