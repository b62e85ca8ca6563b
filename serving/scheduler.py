"""Request scheduling for the agentkit server: a bounded queue in front of one engine worker thread.

What this module does
---------------------
- **Bounded queue.** :meth:`Scheduler.submit` admits a job if fewer than ``max_queue`` jobs are *waiting* (the one
  being decoded is not counted); otherwise it raises :class:`QueueFull` carrying a ``Retry-After`` estimate
  (waiting jobs x the moving average of service time), which the app turns into HTTP 429.
- **One worker, arrival order.** A single daemon thread pops jobs first-in first-out and runs each to completion
  with ``Engine.generate`` (the engine is synchronous and single-request). Every job is recorded in the metrics
  with ``batch_size`` 1, because that is what it is.
- **Timeouts.** :meth:`Scheduler.wait` bounds the time from arrival to result. On expiry the job is cancelled:
  a queued job is dropped from the queue; a running diffusion/verify job aborts at its next canvas step (the
  engine's ``on_draft`` hook raises :class:`Aborted`); a running AR job has no per-token hook in the engine, so it
  runs to its ``max_tokens`` and its result is discarded. The caller gets :class:`RequestTimeout` (HTTP 504).
- **Disconnects.** ``wait`` polls a ``disconnected()`` coroutine (``Request.is_disconnected``) and treats task
  cancellation (what Starlette does to a streaming response whose client went away) the same way: the job is
  cancelled as above, so a client that leaves frees its queue slot at once and never costs a forward if it was
  still waiting.

What this module does NOT do: continuous batching
-------------------------------------------------
Requests are *not* batched: concurrent requests wait their turn, so throughput is flat in concurrency and latency
grows linearly with it. Batching canvases of different requests into one forward needs engine work that does
not exist yet:

1. ``Backbone.encode`` / ``Backbone.denoise`` over a batch ``[B, T]``, each row with its **own KV cache** (or one
   paged/padded cache with per-row lengths), since the requests' prefixes differ in length and content. The
   denoiser must also crop each row's cache back to *its* own committed length after a canvas pass.
2. **Left-padding** (or packing with per-row position ids) so that rows with different prefix lengths line up,
   plus a 4-D attention mask per row: causal over its own prefix, padding masked out, and within the canvas
   either causal (Jacobi) or bidirectional (mask sampler) as that request asked.
3. **Per-sequence pinned masks and constraint state**: each row carries its own template automaton state,
   pinned positions (template literals placed, never predicted), frozen positions, open rows whose logits are
   needed, stopping state (EOS / template end / budget) and sampler settings (temperature, seed, mode).
4. A **step-level scheduler** instead of this request-level one: the ``Decoder`` loops (``ar``/``diffusion``/
   ``verify``) turned inside out into resumable per-request state machines, so that every iteration collects
   "the next forward" of every live request (AR steps and canvas denoise/commit passes, possibly as two
   sub-batches of different shapes), runs them together, scatters logits back, retires finished requests and
   admits newly arrived ones at the next step (prefill of newcomers chunked or run as its own sub-batch).

Until then, ``batch_size`` in ``/metrics`` is honestly always 1.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


class QueueFull(Exception):
    def __init__(self, retry_after_s: int, depth: int) -> None:
        super().__init__(f"server queue is full ({depth} requests waiting); retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s
        self.depth = depth


class RequestTimeout(Exception):
    pass


class ClientDisconnected(Exception):
    pass


class Aborted(Exception):
    pass


class Job:
    """One unit of work: ``fn(job)`` runs on the worker thread; ``job.cancelled`` tells it to stop early."""

    def __init__(self, fn: Callable[[Job], Any]) -> None:
        self.fn = fn
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self.cancelled = threading.Event()
        self.enqueued = time.perf_counter()
        self.started: float | None = None
        self.finished: float | None = None

    @property
    def queue_ms(self) -> float:
        end = self.started if self.started is not None else time.perf_counter()
        return 1000 * (end - self.enqueued)

    def check(self) -> None:
        """Raise :class:`Aborted` if the job was cancelled (call from engine hooks)."""
        if self.cancelled.is_set():
            raise Aborted("request cancelled")


class Scheduler:
    """FIFO bounded queue served by one worker thread (see the module docstring)."""

    def __init__(self, max_queue: int = 64, *, on_done: Callable[[Job, float], None] | None = None) -> None:
        if max_queue < 0:
            raise ValueError("max_queue must be >= 0")
        self.max_queue = max_queue
        self._on_done = on_done
        self._waiting: collections.deque[Job] = collections.deque()
        self._cond = threading.Condition()
        self._running: Job | None = None
        self._closed = False
        self._service_ewma_s = 1.0
        self.dropped = 0  # cancelled before they ran (timeouts, disconnects)
        self._thread = threading.Thread(target=self._loop, name="agentkit-engine-worker", daemon=True)
        self._thread.start()

    # -- introspection ----------------------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """Jobs waiting (not counting the one being decoded)."""
        return len(self._waiting)

    @property
    def running(self) -> int:
        return 1 if self._running is not None else 0

    # -- producer side ----------------------------------------------------------------------------------------
    def submit(self, fn: Callable[[Job], Any]) -> Job:
        job = Job(fn)
        with self._cond:
            if self._closed:
                raise RuntimeError("scheduler is closed")
            if len(self._waiting) >= self.max_queue and (self._running is not None or self._waiting):
                ahead = len(self._waiting) + (1 if self._running is not None else 0)
                raise QueueFull(max(1, math.ceil(ahead * self._service_ewma_s)), len(self._waiting))
            self._waiting.append(job)
            self._cond.notify()
        return job

    def cancel(self, job: Job) -> None:
        """Stop ``job``: drop it if it is still queued, else ask the engine hook to abort it."""
        job.cancelled.set()
        with self._cond:
            try:
                self._waiting.remove(job)
            except ValueError:
                return
            self.dropped += 1
        job.future.cancel()

    async def wait(self, job: Job, timeout_s: float,
                   disconnected: Callable[[], Awaitable[bool]] | None = None, poll_s: float = 0.1) -> Any:
        """The job's result; :class:`RequestTimeout` after ``timeout_s`` from arrival, :class:`ClientDisconnected`
        if ``disconnected()`` turns true. Either way (and on task cancellation) the job is cancelled."""
        fut = asyncio.wrap_future(job.future)
        fut.add_done_callback(_retrieve)
        deadline = job.enqueued + timeout_s
        try:
            while True:
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise RequestTimeout(f"request exceeded the server timeout of {timeout_s:g} s")
                done, _ = await asyncio.wait({fut}, timeout=min(poll_s, left))
                if done:
                    return fut.result()
                if disconnected is not None and await disconnected():
                    raise ClientDisconnected("client disconnected")
        except BaseException:
            if not job.future.done():
                self.cancel(job)
            raise

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for job in self._waiting:
                job.cancelled.set()
                job.future.cancel()
            self._waiting.clear()
            self._cond.notify_all()
        if self._running is not None:
            self._running.cancelled.set()
        self._thread.join(timeout=5)

    # -- worker -----------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                job = self._waiting.popleft()
                if job.cancelled.is_set() or not job.future.set_running_or_notify_cancel():
                    self.dropped += 1
                    continue
                self._running = job
            job.started = time.perf_counter()
            try:
                job.check()
                result = job.fn(job)
            except BaseException as e:  # noqa: BLE001 -- delivered to the waiting request
                job.future.set_exception(e)
            else:
                job.future.set_result(result)
            finally:
                job.finished = time.perf_counter()
                service = job.finished - job.started
                with self._cond:
                    self._running = None
                    self._service_ewma_s = 0.8 * self._service_ewma_s + 0.2 * service
                if self._on_done is not None:
                    try:
                        self._on_done(job, service)
                    except Exception:
                        log.exception("metrics callback failed")


def _retrieve(f: asyncio.Future) -> None:
    """Mark a late exception as retrieved (the request may have timed out and stopped listening)."""
    if not f.cancelled():
        f.exception()
