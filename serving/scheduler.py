"""Request scheduling for the agentkit server: a bounded queue in front of up to ``max_batch`` concurrent requests,
whose model forwards run batched (continuous batching).

What this module does
---------------------
- **Bounded queue.** :meth:`Scheduler.submit` admits a job if fewer than ``max_queue`` jobs are *waiting* for a
  free slot (the ``max_batch`` jobs being decoded are not counted); otherwise it raises :class:`QueueFull` carrying a
  ``Retry-After`` estimate (jobs ahead / ``max_batch`` x the moving average of a job's service time), which the app
  turns into HTTP 429.
- **Up to ``max_batch`` concurrent jobs, admitted in arrival order.** ``max_batch`` worker threads pop jobs first-in
  first-out; each runs its job to completion with ``Engine.generate`` (the normal single-request decode loops).
- **Continuous batching.** With a :class:`~agentkit.engine.batch.Batcher` (the app gives one when the engine
  supports it: ``Engine.generate(..., batch=slot)``), each job gets a seat (``job.slot``) and its backbone calls go
  through it: the batcher runs the pending forwards of all live jobs as one batched forward, as soon as every live
  job is waiting for its next forward (or after a few milliseconds, so one busy with Python work holds nobody
  long). A job that finishes leaves at once; a job that arrives joins at the next forward -- there is no
  request-level batch boundary. Every forward reports how many requests it carried (``/metrics``
  ``agentkit_batch_size``). Without a batcher (an engine without ``batch=`` support) ``max_batch`` is 1: the engine
  is not assumed to be thread-safe, and every request is its own batch of 1.
- **Preparation inside the request's life.** A job may carry a ``prepare`` step (schema compilation, the token
  automaton build, the prompt-length check). It runs on a small, separate pool (``prepare_workers`` threads) so
  that builds never hold a decoding slot and never starve inference; a preparing job counts against the queue
  bound like a waiting one and against its own timeout. A job cancelled while it prepares (timeout, disconnect)
  leaves the queue at once; its build, if it cannot be interrupted, is abandoned and its result dropped (the
  builds themselves are bounded by the compiler's limits, so an abandoned one ends soon). Two lanes keep the
  pool fair: a job submitted with ``lane="fast"`` (a small schema) is built on a thread of its own, cut to a
  time slice; past it (:class:`SliceExpired`) it is queued again on the slow lane, where large schemas are built.
- **Readiness.** :attr:`Scheduler.stalled_s` is how long requests have waited for the engine without any forward
  completing (:meth:`progress` is called after each forward); ``/health/ready`` fails past a bound.
- **Timeouts.** :meth:`Scheduler.wait` bounds the time from arrival to result. On expiry the job is cancelled:
  a queued job is dropped from the queue; a running job aborts at its next forward (the batcher calls
  ``job.check`` before each of its forwards, in every mode; and canvas modes also check in the engine's
  ``on_draft`` hook). Without a batcher a running AR job has no per-token hook, so it runs to its ``max_tokens``
  and its result is discarded. The caller gets :class:`RequestTimeout` (HTTP 504).
- **Disconnects.** ``wait`` polls a ``disconnected()`` coroutine (``Request.is_disconnected``) and treats task
  cancellation (what Starlette does to a streaming response whose client went away) the same way: the job is
  cancelled as above, so a client that leaves frees its queue slot at once (or its decoding slot at its next
  forward) and never costs a forward if it was still waiting.

What it does not do
-------------------
- The requests' decode loops are unchanged single-request code running in threads; only the model forwards are
  shared. Python work between forwards (sampling, constraint masks, canvas layout) runs one thread at a time
  under the GIL, so it does not get faster with concurrency.
- A batched forward pads: every request's cache is copied, left-padded, into one batch cache per forward (no
  paged KV cache), and the new tokens are right-padded to the longest; a long pass (a prefill, a 32-position
  canvas) and 1-token AR steps go into separate forwards when padding would more than double the work.
- No chunked prefill and no priorities: a newcomer's prefill is one forward (batched with other prefills/canvases
  of similar length), and admission is first-in first-out.
- DiffusionGemma (``GemmaBackbone``) and caches with sliding-window layers are not batched: their passes go
  through the batcher one request per forward.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import math
import queue
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


class ShuttingDown(Exception):
    """The scheduler is closed (the server is stopping): HTTP 503."""


class SliceExpired(Exception):
    """A build on the fast preparation lane passed the lane's time slice: it moves to the slow lane."""


class Job:
    """One unit of work: ``prepare(job)`` (optional) runs on the preparation pool, then ``fn(job)`` on a decoding
    worker; ``job.cancelled`` tells either to stop early."""

    def __init__(self, fn: Callable[[Job], Any], prepare: Callable[[Job], Any] | None = None,
                 timeout_s: float | None = None) -> None:
        self.fn = fn
        self.prepare = prepare
        self.prepared: Any = None  # what prepare returned
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self.cancelled = threading.Event()
        self.enqueued = time.perf_counter()
        self.deadline = self.enqueued + timeout_s if timeout_s is not None else math.inf
        self.ready: float | None = None  # when it entered the decoding queue (after preparing)
        self.started: float | None = None
        self.first_token: float | None = None  # when the engine committed its first output token
        self.finished: float | None = None
        self.slot: Any = None  # the job's seat at the batcher while it runs (None without one)
        self.lane: str | None = None  # the preparation lane it is on ("fast": its build is cut to a time slice)

    @property
    def queue_ms(self) -> float:
        end = self.started if self.started is not None else time.perf_counter()
        return 1000 * (end - self.enqueued)

    def check(self) -> None:
        """Raise :class:`Aborted` if the job was cancelled (call from engine hooks)."""
        if self.cancelled.is_set():
            raise Aborted("request cancelled")

    @property
    def time_left_s(self) -> float:
        return self.deadline - time.perf_counter()


class Scheduler:
    """FIFO bounded queue served by up to ``max_batch`` worker threads (see the module docstring)."""

    def __init__(self, max_queue: int = 64, *, max_batch: int = 1, batcher: Any = None,
                 on_done: Callable[[Job, float, Any], None] | None = None, prepare_workers: int = 2) -> None:
        if max_queue < 0:
            raise ValueError("max_queue must be >= 0")
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self.max_queue = max_queue
        self.max_batch = max_batch
        self.batcher = batcher  # an agentkit.engine.batch.Batcher, closed with the scheduler
        self._on_done = on_done
        self._waiting: collections.deque[Job] = collections.deque()
        self._cond = threading.Condition()
        self._running: set[Job] = set()
        self._preparing: set[Job] = set()
        # two lanes: small schemas on one thread of their own, never behind slow builds (see :meth:`submit`)
        self._prepare_pool = _DaemonPool(max(1, prepare_workers), "agentkit-prepare")
        self._fast_pool = _DaemonPool(1, "agentkit-prepare-fast")
        self._last_progress = time.perf_counter()
        self._closed = False
        self._service_ewma_s = 1.0
        self.dropped = 0  # cancelled before they ran (timeouts, disconnects)
        self._threads = [threading.Thread(target=self._loop, name=f"agentkit-engine-worker-{i}", daemon=True)
                         for i in range(max_batch)]
        for t in self._threads:
            t.start()

    # -- introspection ----------------------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """Jobs waiting (not counting the ones being decoded)."""
        return len(self._waiting)

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def preparing(self) -> int:
        return len(self._preparing)

    @property
    def retry_after_s(self) -> int:
        """A ``Retry-After`` estimate: a request's moving-average service time, at least 1 s."""
        return max(1, math.ceil(self._service_ewma_s))

    def progress(self) -> None:
        """A forward (or a request) completed: the engine is making progress."""
        self._last_progress = time.perf_counter()

    @property
    def stalled_s(self) -> float:
        """Seconds requests have been waiting for the engine with no forward completing (0 when none waits)."""
        with self._cond:
            entered = [j.ready for j in (*self._waiting, *self._running) if j.ready is not None]
        if not entered:
            return 0.0
        return max(0.0, time.perf_counter() - max(self._last_progress, min(entered)))

    # -- producer side ----------------------------------------------------------------------------------------
    def submit(self, fn: Callable[[Job], Any], prepare: Callable[[Job], Any] | None = None,
               timeout_s: float | None = None, lane: str | None = None) -> Job:
        """Admit a job (or raise :class:`QueueFull`); ``prepare`` runs first, on the preparation pool: on the fast
        lane (one thread of its own) when ``lane`` is ``"fast"``, where a ``prepare`` that raises
        :class:`SliceExpired` is queued again on the slow lane (``prepare_workers`` threads)."""
        job = Job(fn, prepare, timeout_s)
        job.lane = lane
        with self._cond:
            if self._closed:
                raise ShuttingDown("the server is shutting down")
            free = max(0, self.max_batch - len(self._running))  # slots that will take waiting jobs at once
            queued = len(self._waiting) + len(self._preparing)
            if queued >= self.max_queue + free:
                ahead = queued + len(self._running)
                retry = max(1, math.ceil(ahead / self.max_batch * self._service_ewma_s))
                raise QueueFull(retry, queued)
            if prepare is None:
                self._enqueue(job)
            else:
                self._preparing.add(job)
        if prepare is not None:
            (self._fast_pool if lane == "fast" else self._prepare_pool).submit(self._prepare, job)
        return job

    def _enqueue(self, job: Job) -> None:  # under self._cond
        job.ready = time.perf_counter()
        self._waiting.append(job)
        self._cond.notify()

    def _prepare(self, job: Job) -> None:
        try:
            job.check()
            job.prepared = job.prepare(job)
        except SliceExpired:
            job.lane = "slow"
            self._prepare_pool.submit(self._prepare, job)
            return
        except BaseException as e:  # noqa: BLE001 -- delivered to the waiting request
            with self._cond:
                self._preparing.discard(job)
            with contextlib.suppress(concurrent.futures.InvalidStateError):  # cancelled meanwhile
                job.future.set_exception(e)
            return
        with self._cond:
            if job not in self._preparing:  # cancelled meanwhile: its result is dropped
                return
            self._preparing.discard(job)
            self._enqueue(job)

    def cancel(self, job: Job) -> None:
        """Stop ``job``: drop it if it is still queued, else ask the engine hooks to abort it."""
        job.cancelled.set()
        with self._cond:
            if job in self._preparing:
                self._preparing.discard(job)
            else:
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
        deadline = min(job.enqueued + timeout_s, job.deadline)
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
            for job in (*self._waiting, *self._preparing):
                job.cancelled.set()
                job.future.cancel()
            self._waiting.clear()
            self._preparing.clear()
            for job in self._running:
                job.cancelled.set()
            self._cond.notify_all()
        deadline = time.monotonic() + 5
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        self._prepare_pool.close()
        self._fast_pool.close()
        if self.batcher is not None:
            self.batcher.close()

    # -- workers ----------------------------------------------------------------------------------------------
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
                self._running.add(job)
            job.started = time.perf_counter()
            result: Any = None
            error: BaseException | None = None
            try:
                job.check()
                if self.batcher is not None:
                    with self.batcher.slot(job.check) as job.slot:
                        result = job.fn(job)
                else:
                    result = job.fn(job)
            except BaseException as e:  # noqa: BLE001 -- delivered to the waiting request
                error = e
            job.finished = time.perf_counter()
            service = job.finished - job.started
            self.progress()
            with self._cond:
                self._running.discard(job)
                self._service_ewma_s = 0.8 * self._service_ewma_s + 0.2 * service
            if self._on_done is not None:  # before the future: a client that reads /metrics after its answer sees it
                try:
                    self._on_done(job, service, None if error is not None else result)
                except Exception:
                    log.exception("metrics callback failed")
            if error is not None:
                job.future.set_exception(error)
            else:
                job.future.set_result(result)


class _DaemonPool:
    """A fixed set of daemon threads running submitted calls in order. Unlike ``ThreadPoolExecutor`` (whose
    threads the interpreter joins at exit), an abandoned build never delays the process's exit (SIGTERM)."""

    def __init__(self, n: int, name: str) -> None:
        self._q: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._loop, name=f"{name}-{i}", daemon=True) for i in range(n)]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        self._q.put(lambda: fn(*args))

    def close(self) -> None:
        for _ in self._threads:
            self._q.put(None)

    def _loop(self) -> None:
        while (fn := self._q.get()) is not None:
            try:
                fn()
            except Exception:  # _prepare delivers its own errors; this is a last resort
                log.exception("preparation task failed")


def _retrieve(f: asyncio.Future) -> None:
    """Mark a late exception as retrieved (the request may have timed out and stopped listening)."""
    if not f.cancelled():
        f.exception()
