"""Admission by work: what a request may ask for, and what the server takes on at once.

- **Bounds** (:func:`check_bounds`): ``agentkit.canvas_length`` at most ``max_canvas_length`` (the model's useful
  block, 64 by default) and ``agentkit.max_denoising_steps`` at most ``max_denoising_steps``: a 400 naming the field
  and the bound, before anything is queued.
- **Work** (:func:`estimate_work`): an upper bound on the positions the request makes the model process: AR
  ``max_tokens``; diffusion / verify ``max_tokens`` x the steps a block may take (at most its canvas) -- plus the
  prompt's tokens (estimated from its characters) and the template's size (the schema's JSON text / 16). Over
  ``max_request_work`` the request is a 400 naming the estimate and the bound.
- **Budget** (:class:`WorkBudget`): the work of the requests in flight (admitted, not finished) is held under
  ``max_work``; a request that would pass it is a 429 with ``Retry-After``. With ``max_memory_mb`` set, a new
  request is also a 429 while the process's resident memory is over that bound.
- **Readiness** (:func:`not_ready_reason`): ``/health/ready`` is 503 while a small request (16 tokens, a short
  prompt) could not be admitted at once: the budget is spent, the queue is full, or memory is over its bound.
"""

from __future__ import annotations

import math
import os
import threading
from typing import Any

from .errors import APIError
from .plan import RequestPlan

TEMPLATE_CHARS = 16  # schema JSON characters per unit of template work (a template node per ~16 characters)
SMALL_REQUEST_WORK = 16 + 64  # a 16-token AR answer to a short prompt: what readiness must be able to take
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class WorkBudgetFull(Exception):
    def __init__(self, message: str, retry_after_s: int, code: str = "work_budget_spent") -> None:
        super().__init__(message)
        self.retry_after_s, self.code = retry_after_s, code


def check_bounds(plan: RequestPlan, cfg: Any) -> None:
    """400 when the request's canvas or step count passes the server's bound (in any mode; the engine's defaults,
    32 and 48, are within the default bounds)."""
    c = plan.config
    for name, bound in (("canvas_length", cfg.max_canvas_length), ("max_denoising_steps", cfg.max_denoising_steps)):
        v = getattr(c, name)
        if v > bound:
            raise APIError(400, f"agentkit.{name} is {v}, over this server's bound of {bound} (server setting "
                                f"--max-{name.replace('_', '-')})", param=f"agentkit.{name}",
                           code="limit_exceeded", limit=name, limit_value=bound)


def estimate_work(plan: RequestPlan, prompt_chars: int) -> int:
    """Positions the model may process for ``plan`` (an upper bound; see the module docstring)."""
    c = plan.config
    out = c.max_new_tokens
    if plan.mode != "ar":
        out *= max(1, min(c.max_denoising_steps, c.canvas_length))
    template = len(plan.schema.key) // TEMPLATE_CHARS if plan.schema is not None else 0
    return out + math.ceil(prompt_chars / 4) + template


def check_request_work(work: int, cfg: Any) -> None:
    if work > cfg.max_request_work:
        raise APIError(400, f"the request's estimated work is {work} positions (max_tokens x denoising steps + "
                            f"prompt + template), over this server's bound of {cfg.max_request_work} per request "
                            "(server setting --max-request-work); lower max_tokens, canvas_length or "
                            "max_denoising_steps", param="max_tokens", code="limit_exceeded",
                       limit="max_request_work", limit_value=cfg.max_request_work, work=work)


def rss_mb() -> float | None:
    """This process's resident memory in MiB (None where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE / 2**20
    except (OSError, ValueError, IndexError):
        return None


class WorkBudget:
    """The work of the requests in flight, held under ``limit`` (thread-safe)."""

    def __init__(self, limit: int, max_memory_mb: float | None = None) -> None:
        self.limit, self.max_memory_mb = limit, max_memory_mb
        self.used = 0
        self._lock = threading.Lock()

    def charge(self, work: int, retry_after_s: int) -> None:
        """Take ``work`` or raise :class:`WorkBudgetFull`."""
        mem = self.memory_over()
        if mem is not None:
            raise WorkBudgetFull(f"server memory is {mem:.0f} MiB, over its bound of {self.max_memory_mb:g} MiB "
                                 "(server setting --max-memory-mb); retry later", retry_after_s, "memory_over")
        with self._lock:
            if self.used + work > self.limit:
                raise WorkBudgetFull(f"the server's work budget is spent: {self.used} of {self.limit} positions in "
                                     f"flight and this request needs {work} (server setting --max-work); retry "
                                     f"after {retry_after_s} s", retry_after_s)
            self.used += work

    def release(self, work: int) -> None:
        with self._lock:
            self.used = max(0, self.used - work)

    def memory_over(self) -> float | None:
        if self.max_memory_mb is None:
            return None
        mb = rss_mb()
        return mb if mb is not None and mb > self.max_memory_mb else None

    @property
    def left(self) -> int:
        return self.limit - self.used


def not_ready_reason(budget: WorkBudget, scheduler: Any, max_queue: int) -> tuple[str, str] | None:
    """(code, message) while a small request could not be admitted at once; None when it could."""
    if budget.left < SMALL_REQUEST_WORK:
        return "work_budget_spent", (f"not ready: the work budget is spent ({budget.used} of {budget.limit} "
                                     "positions in flight)")
    free = max(0, scheduler.max_batch - scheduler.running)
    if scheduler.depth + scheduler.preparing >= max_queue + free:
        return "queue_full", f"not ready: the queue is full ({scheduler.depth + scheduler.preparing} waiting)"
    mem = budget.memory_over()
    if mem is not None:
        return "memory_over", f"not ready: memory {mem:.0f} MiB is over its bound of {budget.max_memory_mb:g} MiB"
    return None
