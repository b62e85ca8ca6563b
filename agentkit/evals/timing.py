"""Timing for benchmarks on a shared, loaded machine."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def cold_prompts(engine: object) -> None:
    """Empty ``engine``'s prefix cache and kept decode cache, where it has them, before a request whose latency is
    compared with another's: else it reuses what an earlier request encoded, and its time says where it ran, not
    what it is."""
    prefixes = getattr(engine, "prefixes", None)
    if prefixes is not None:
        prefixes.clear()
    kept = getattr(engine, "kept", None)  # agentkit/engine/kept.py
    if kept is not None:
        kept.clear()


def interleaved_ms(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median ms of each function after one warm-up call each, the rounds interleaved so that load drifts hit every
    one alike."""
    ts: dict[str, list[float]] = {k: [] for k in fns}
    for f in fns.values():
        f()
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            ts[k].append(1000 * (time.perf_counter() - t0))
    return {k: statistics.median(v) for k, v in ts.items()}
