"""Prometheus metrics, written by hand (no client library needed)."""

from __future__ import annotations

import threading

# ----------------------------------------------------------------------------------------------------------------
# metrics (Prometheus text format, written by hand: no extra dependency)

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_TPF_BUCKETS = (0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 32)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)


class _Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        for i, b in enumerate(self.buckets):
            if v <= b:
                self.counts[i] += 1
        self.sum += v
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        sep = "," if labels else ""
        out = [f'{name}_bucket{{{labels}{sep}le="{b:g}"}} {c}' for b, c in zip(self.buckets, self.counts)]
        out.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {self.count}')
        lab = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{lab} {self.sum:.6f}", f"{name}_count{lab} {self.count}"]
        return out


class Metrics:
    """Counters and histograms, updated from the event loop, the worker threads and the batcher (hence the lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str], int] = {}  # (mode, status code) -> count
        self.latency: dict[str, _Histogram] = {}  # mode -> request latency (s)
        self.tpf: dict[str, _Histogram] = {}  # mode -> tokens per forward
        self.forwards: dict[str, int] = {}
        self.output_tokens: dict[str, int] = {}
        self.batch = _Histogram(_BATCH_BUCKETS)
        self.rejected: dict[str, int] = {"queue_full": 0, "timeout": 0, "disconnect": 0}

    def request(self, mode: str, status: int, seconds: float) -> None:
        with self._lock:
            key = (mode, str(status))
            self.requests[key] = self.requests.get(key, 0) + 1
            self.latency.setdefault(mode, _Histogram(_LATENCY_BUCKETS)).observe(seconds)

    def generation(self, mode: str, forwards: int, output_tokens: int, tpf: float) -> None:
        with self._lock:
            self.forwards[mode] = self.forwards.get(mode, 0) + forwards
            self.output_tokens[mode] = self.output_tokens.get(mode, 0) + output_tokens
            self.tpf.setdefault(mode, _Histogram(_TPF_BUCKETS)).observe(tpf)

    def batch_forward(self, size: int, n: int = 1) -> None:
        """``n`` model forwards that carried ``size`` requests each (the batcher calls it after every forward)."""
        with self._lock:
            for _ in range(n):
                self.batch.observe(size)

    def reject(self, reason: str) -> None:
        with self._lock:
            self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def render(self, depth: int, running: int) -> str:
        with self._lock:
            out = [
                "# HELP agentkit_queue_depth Requests waiting for a decoding slot (not counting those decoding).",
                "# TYPE agentkit_queue_depth gauge", f"agentkit_queue_depth {depth}",
                "# HELP agentkit_requests_running Requests being decoded.",
                "# TYPE agentkit_requests_running gauge", f"agentkit_requests_running {running}",
                "# HELP agentkit_requests_total Chat completion requests by decoding mode and HTTP status.",
                "# TYPE agentkit_requests_total counter",
            ]
            out += [f'agentkit_requests_total{{mode="{m}",status="{s}"}} {n}' for (m, s), n in
                    sorted(self.requests.items())]
            out += ["# HELP agentkit_request_latency_seconds Request latency, arrival to response.",
                    "# TYPE agentkit_request_latency_seconds histogram"]
            for m, h in sorted(self.latency.items()):
                out += h.lines("agentkit_request_latency_seconds", f'mode="{m}"')
            out += ["# HELP agentkit_forwards_total Model forwards after prefill (AR steps, commits, denoiser passes).",
                    "# TYPE agentkit_forwards_total counter"]
            out += [f'agentkit_forwards_total{{mode="{m}"}} {n}' for m, n in sorted(self.forwards.items())]
            out += ["# HELP agentkit_output_tokens_total Output tokens produced.",
                    "# TYPE agentkit_output_tokens_total counter"]
            out += [f'agentkit_output_tokens_total{{mode="{m}"}} {n}' for m, n in sorted(self.output_tokens.items())]
            out += ["# HELP agentkit_tokens_per_forward Output tokens per forward, per request.",
                    "# TYPE agentkit_tokens_per_forward histogram"]
            for m, h in sorted(self.tpf.items()):
                out += h.lines("agentkit_tokens_per_forward", f'mode="{m}"')
            out += ["# HELP agentkit_batch_size Requests per model forward (continuous batching; one sample per forward).",
                    "# TYPE agentkit_batch_size histogram"]
            out += self.batch.lines("agentkit_batch_size", "")
            out += ["# HELP agentkit_rejected_total Requests not served: queue full (429), timeout (504), disconnect.",
                    "# TYPE agentkit_rejected_total counter"]
            out += [f'agentkit_rejected_total{{reason="{r}"}} {n}' for r, n in sorted(self.rejected.items())]
            return "\n".join(out) + "\n"
