"""Continuous batching: the model forwards of concurrent requests run together, one batched forward at a time.

Every request still decodes in its own thread with the normal :class:`~agentkit.engine.decode.Decoder` (so AR,
diffusion and verify, templates, samplers and stopping rules are exactly the single-request code), but its
backbone is a :class:`BatchedBackbone`: a thin proxy whose ``encode`` / ``denoise`` do not run the model; they
queue the call at the :class:`Batcher` and block. The batcher's loop thread waits until every live request is
blocked in such a call (or until no new call arrived for ``max_wait_s``, at most ``max_delay_s`` after the first:
a request busy with Python work, e.g. building a constraint mask, does not stall the others for long), takes every
pending call, and runs them as few forwards as it can: calls on the same batchable backbone go into one
:meth:`Backbone.forward_many` (encode and denoise passes mixed; a group is split when padding would more than about
double its work), anything else (DiffusionGemma, a cache with sliding-window layers) runs alone. Then it hands
each thread its logits and the thread carries on.

A request joins the live set at its first forward (its prompt templating and constraint compile do not hold
anyone) and leaves it when its :class:`BatchSeat` closes (finished, failed or cancelled); a request that arrives while
others are decoding is simply in the next forward. ``check`` (the server's cancellation test) runs before every
call, so a cancelled request -- AR included -- aborts at its next forward.

Exactness: a batched row sees exactly what the single pass would (its own cache, positions and mask; see
``Backbone.forward_many``), so greedy decoding gives the same tokens inside a batch as alone, up to float
rounding in the matmuls.
"""

from __future__ import annotations

import collections
import inspect
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Self

import torch

from .backbone import Backbone, Pass
from .faces import Batching

log = logging.getLogger(__name__)

_DENOISE_SIG = inspect.signature(Backbone.denoise)
_ENCODE_SIG = inspect.signature(Backbone.encode)


class BatcherClosed(RuntimeError):
    pass


class _Call:
    __slots__ = ("args", "bb", "done", "error", "item", "kind", "kwargs", "result", "slot", "t")

    def __init__(self, slot: BatchSeat, bb: Any, kind: str, args: tuple, kwargs: dict) -> None:
        self.slot, self.bb, self.kind, self.args, self.kwargs = slot, bb, kind, args, kwargs
        self.item: Pass | None = None  # set when the call can join a batched forward
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.t = time.perf_counter()

    def run_alone(self) -> None:
        try:
            self.result = getattr(self.bb, self.kind)(*self.args, **self.kwargs)
        except BaseException as e:  # noqa: BLE001 -- delivered to the calling thread
            self.error = e


class Batcher:
    """The rendezvous of concurrent requests' model calls (see the module docstring).

    ``max_batch``: at most this many requests per forward (more pending calls make more forwards).
    ``on_forward(n)``: called after every forward with the number of requests it carried (metrics).
    """

    def __init__(self, *, max_batch: int = 32, max_wait_s: float = 0.003, max_delay_s: float = 0.02,
                 on_forward: Callable[[int], None] | None = None) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self.max_batch, self.max_wait_s, self.max_delay_s = max_batch, max_wait_s, max_delay_s
        self.on_forward = on_forward
        self._cond = threading.Condition()
        self._pending: list[_Call] = []
        self._live = 0
        self._closed = False
        self.forwards = 0  # forwards run
        self.sizes: collections.Counter[int] = collections.Counter()  # requests per forward -> count
        self._thread = threading.Thread(target=self._loop, name="agentkit-batcher", daemon=True)
        self._thread.start()

    # -- request side ---------------------------------------------------------------------------------------
    def slot(self, check: Callable[[], None] | None = None, *, live: bool = False) -> BatchSeat:
        """A seat for one request (use as a context manager). ``check`` raises to cancel the request; it runs
        before each of its forwards. ``live`` makes the seat count as live at once instead of at its first call
        (so the batcher waits for its first call too, as for any live request's: for tests that want full
        batches from the first forward)."""
        s = BatchSeat(self, check)
        if live:
            with self._cond:
                self._join(s)
        return s

    @property
    def live(self) -> int:
        return self._live

    def _join(self, slot: BatchSeat) -> None:
        if self._closed:
            raise BatcherClosed("batcher is closed")
        if not slot._live:
            slot._live = True
            self._live += 1

    def _submit(self, call: _Call) -> Any:
        with self._cond:
            self._join(call.slot)
            self._pending.append(call)
            self._cond.notify_all()
        call.done.wait()
        if call.error is not None:
            raise call.error
        return call.result

    def _leave(self, slot: BatchSeat) -> None:
        with self._cond:
            if slot._live:
                slot._live = False
                self._live -= 1
                self._cond.notify_all()

    def close(self) -> None:
        """Stop the loop; calls still pending (and later ones) raise :class:`BatcherClosed`."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=5)
        with self._cond:
            pending, self._pending = self._pending, []
        for c in pending:
            c.error = BatcherClosed("batcher is closed")
            c.done.set()

    # -- the loop -------------------------------------------------------------------------------------------
    def _take(self) -> list[_Call] | None:
        with self._cond:
            while not self._pending and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            first = self._pending[0].t
            while len(self._pending) < self._live and not self._closed:
                now = time.perf_counter()
                deadline = min(first + self.max_delay_s, self._pending[-1].t + self.max_wait_s)
                if now >= deadline:
                    break
                self._cond.wait(deadline - now)
            if self._closed:
                return None
            calls, self._pending = self._pending, []
            return calls

    def _loop(self) -> None:
        while True:
            calls = self._take()
            if calls is None:
                return
            try:
                for group in self._groups(calls):
                    self._run(group)
            except BaseException as e:  # noqa: BLE001 -- never leave a request blocked
                for c in calls:
                    if not c.done.is_set():
                        c.error = e
                        c.done.set()

    def _groups(self, calls: list[_Call]) -> list[list[_Call]]:
        """Split pending calls into forwards: one per batchable backbone, split again where a short pass would
        be padded to a much longer one (padded tokens > 2x real + 32) or past ``max_batch``."""
        by_bb: dict[int, list[_Call]] = {}
        out: list[list[_Call]] = []
        for c in calls:
            if c.item is not None:
                by_bb.setdefault(id(c.bb), []).append(c)
            else:
                out.append([c])
        for group in by_bb.values():
            group.sort(key=lambda c: len(c.item.ids), reverse=True)
            cur: list[_Call] = []
            real = 0
            for c in group:
                q = len(c.item.ids)
                if cur and (len(cur) >= self.max_batch
                            or (len(cur) + 1) * len(cur[0].item.ids) > 2 * (real + q) + 32):
                    out.append(cur)
                    cur, real = [], 0
                cur.append(c)
                real += q
            if cur:
                out.append(cur)
        return out

    def _run(self, group: list[_Call]) -> None:
        if len(group) == 1:
            group[0].run_alone()  # exactly the single-request pass
        else:
            self._run_batched(group)
        self.forwards += 1
        self.sizes[len(group)] += 1
        for c in group:
            c.slot.sizes.append(len(group))
        if self.on_forward is not None:
            try:
                self.on_forward(len(group))
            except Exception:  # metrics must not break decoding
                log.exception("on_forward callback failed")
        for c in group:
            c.done.set()

    @staticmethod
    def _run_batched(group: list[_Call]) -> None:
        try:
            outs = group[0].bb.forward_many([c.item for c in group])
        except Exception:
            log.warning("a batched forward of %d requests failed; running them one by one", len(group),
                        exc_info=True)
            for c in group:  # caches are only written after a successful forward, so each pass can rerun
                c.run_alone()
            return
        for c, o in zip(group, outs):
            c.result = o


class BatchSeat:
    """One request's seat at a :class:`Batcher`: wraps backbones, counts the batch size of each of its forwards,
    and leaves the live set when closed."""

    def __init__(self, batcher: Batcher, check: Callable[[], None] | None = None) -> None:
        self.batcher, self.check = batcher, check
        self.sizes: list[int] = []  # requests in each forward this request took part in
        self._live = False

    def wrap(self, bb: Any) -> BatchedBackbone:
        return BatchedBackbone(self, bb)

    def close(self) -> None:
        self.batcher._leave(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, bb: Any, kind: str, args: tuple, kwargs: dict) -> Any:
        if self.check is not None:
            self.check()
        c = _Call(self, bb, kind, args, kwargs)
        if isinstance(bb, Batching) and bb.batchable():
            a = (_ENCODE_SIG if kind == "encode" else _DENOISE_SIG).bind(bb, *args, **kwargs)
            a.apply_defaults()
            p = a.arguments
            if bb.batchable(p["cache"]):
                c.item = Pass(list(p["ids"]), p["cache"], list(p["rows"]), kind == "encode",
                              bool(p.get("bidirectional", False)))
        return self.batcher._submit(c)


class BatchedBackbone:
    """A backbone whose ``encode`` / ``denoise`` go through the request's :class:`BatchSeat` (everything else is the
    wrapped backbone's)."""

    def __init__(self, slot: BatchSeat, bb: Any) -> None:
        self._slot, self._bb = slot, bb

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bb, name)

    def encode(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self._slot.call(self._bb, "encode", args, kwargs)

    def denoise(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self._slot.call(self._bb, "denoise", args, kwargs)


class Locked:
    """``obj`` with every method call made under ``lock``: for state shared by concurrent requests that is not
    thread-safe on its own (a template's token automaton fills its caches lazily, with a recursion guard)."""

    def __init__(self, obj: Any, lock: threading.RLock) -> None:
        self._obj, self._lock = obj, lock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._obj, name)
        if not callable(attr):
            return attr
        lock = self._lock

        def locked(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return attr(*args, **kwargs)

        return locked
