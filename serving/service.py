"""The chat service: one engine, its scheduler, preparer and metrics; runs a planned request to a response.

A request's life: plan (pure, ``serving/plan.py``) -> admitted to the scheduler (or 429) -> prepared on the
preparation pool (``serving/prepare.py``: compile, build automata, prompt check) -> decoded on a worker, its
forwards batched with other requests' -> answered as JSON (``serving/outcome.py``), or streamed as SSE (``serving/sse.py``) with a content
delta per committed run of tokens (an AR token, a diffusion block, a verified prefix). The timeout covers the
whole life; a client that leaves cancels the request at its next forward (or drops it from the queue).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from agentkit.engine.faces import EngineLike, Scoring, Tokenizing, plain_weights
from agentkit.steps import grounded as grounded_
from agentkit.steps.runner import StepIO, run_step

from .admission import WorkBudget, WorkBudgetFull, check_bounds, check_request_work, estimate_work
from .config import ServerConfig
from .errors import APIError, from_exception
from .metrics import Metrics
from .outcome import Outcome, completion_body
from .plan import RequestPlan, plan_request
from .prepare import Preparer, longest_token_chars
from .protocol import ChatRequest
from .scheduler import ClientDisconnected, Job, QueueFull, Scheduler, ShuttingDown
from .settle import settled
from .streaming import open_stream
from .tracing import Tracer


class ChatService:
    def __init__(self, engine: EngineLike, cfg: ServerConfig, compile_schema: Callable | None = None) -> None:
        if not isinstance(engine, EngineLike):
            raise TypeError(f"the server's engine must have generate() and batches (agentkit.engine.faces."
                            f"EngineLike), got {type(engine).__name__}")
        self.engine, self.cfg = engine, cfg
        self.model_name = str(engine.name) if isinstance(engine, Tokenizing) else "agentkit"
        self.served_names = cfg.served_model_names or tuple(dict.fromkeys((self.model_name, "agentkit")))
        self.metrics = Metrics(self.served_names[0])  # vLLM's model_name label: the served name
        self.tracer = Tracer()  # a span per request when opentelemetry is installed (serving/tracing.py)
        batcher = None
        if engine.batches:
            from agentkit.engine.batch import Batcher

            batcher = Batcher(max_batch=cfg.max_batch, on_forward=self._on_forward)
        self.max_batch = cfg.max_batch if batcher is not None else 1
        self.scheduler = Scheduler(cfg.max_queue, max_batch=self.max_batch, batcher=batcher, on_done=self._on_done,
                                   prepare_workers=cfg.prepare_workers)
        self.preparer = Preparer(engine, compile_schema, max_context=cfg.max_context, limits=cfg.compile_limits,
                                 failure_ttl_s=cfg.failure_ttl_s, fast_lane_s=cfg.fast_lane_s)
        self.budget = WorkBudget(cfg.max_work, cfg.max_memory_mb)
        self.max_token_chars = longest_token_chars(engine)
        self.plain_weights = plain_weights(engine)  # a plain reply's weights, as the SDK's (engine.faces)
        self.lock = engine.lock if isinstance(engine, Tokenizing) else contextlib.nullcontext()
        self.created = int(time.time())

    def served_model(self, requested: str | None) -> str:
        """The name a response carries: the request's ``model`` when this server serves it (None: the first served
        name); any other name is a 404, as vLLM answers (``GET /v1/models`` lists the names)."""
        if requested is None:
            return self.served_names[0]
        if requested not in self.served_names:
            raise APIError(404, f"The model `{requested}` does not exist (this server serves "
                                f"{', '.join(repr(n) for n in self.served_names)}; see GET /v1/models)",
                           "NotFoundError", "model_not_found", "model")
        return requested

    # -- callbacks from the worker threads and the batcher -------------------------------------------------------
    def _on_forward(self, size: int) -> None:
        self.metrics.batch_forward(size)
        self.scheduler.progress()

    def _on_done(self, job: Job, service_s: float, out: Outcome | None) -> None:
        """A job's decoding ended (``out`` None: it failed), called before its answer is delivered."""
        if out is not None:
            st = out.result.stats
            self.metrics.generation(st.mode, st.forwards, st.output_tokens, st.tokens_per_forward,
                                    st.cached_prompt_tokens)
            self.metrics.finished(job, out.usage(), st.finish_reason)
            if self.scheduler.batcher is None:  # no batcher: each of this request's forwards carried it alone
                self.metrics.batch_forward(1, n=st.encoder_forwards + st.decoder_forwards)
        if job.ready is not None:
            self.metrics.prepare.observe(job.ready - job.enqueued)

    # -- plan, submit, decode --------------------------------------------------------------------------------
    def plan(self, req: ChatRequest) -> RequestPlan:
        if req.logprobs and not isinstance(self.engine, Scoring):
            raise APIError(400, "logprobs: not available with this engine (it exposes no model backbone to score "
                                "with)", param="logprobs", code="unsupported_parameter")
        plan = self._plan(req, self.cfg.default_mode)
        asked = self.cfg.default_mode is not None or (req.agentkit is not None and req.agentkit.mode is not None)
        if not asked and plan.config.mode != "ar" and estimate_work(plan, plan.prompt_chars) > self.cfg.max_request_work:
            # the calibrated mode's work bound (max_tokens x its block) is over the request bound, AR's may not be
            plan = self._plan(req, "ar")
        check_bounds(plan, self.cfg)
        return plan

    def _plan(self, req: ChatRequest, default_mode: str | None) -> RequestPlan:
        return plan_request(req, default_mode=default_mode, context=self.preparer.context,
                            max_token_chars=self.max_token_chars, plain_weights=self.plain_weights)

    def check_n(self, n: int) -> None:
        if n > self.cfg.max_n:
            raise APIError(400, f"n is {n}, more than this server's max_n ({self.cfg.max_n})", param="n",
                           code="invalid_value")

    def submit(self, plan: RequestPlan, on_tokens: Callable[[list[int]], None] | None = None,
               on_draft: Callable[[list[int], list[bool]], None] | None = None) -> Job:
        work = estimate_work(plan, plan.prompt_chars)
        check_request_work(work, self.cfg)
        if plan.schema is not None:
            self.preparer.check_failed(plan.schema)  # a schema that failed before is refused at once
        prepare, lane = None, None
        if plan.schema is not None and not self.preparer.is_cached(plan.schema):
            prepare = lambda job: self.preparer.build(plan, job)
            lane = "fast" if len(plan.schema.key) <= self.cfg.small_schema_chars else "slow"
        try:
            self.budget.charge(work, self.scheduler.retry_after_s)
        except WorkBudgetFull as e:
            self.metrics.reject("work_budget")
            raise APIError(429, str(e), "rate_limit_error", e.code,
                           headers={"Retry-After": str(e.retry_after_s)}) from None
        try:
            job = self.scheduler.submit(lambda job: self._decode(job, plan, on_tokens, on_draft), prepare,
                                        timeout_s=self.cfg.request_timeout_s, lane=lane)
        except (QueueFull, ShuttingDown) as e:
            self.budget.release(work)
            if isinstance(e, QueueFull):
                self.metrics.reject("queue_full")
            raise from_exception(e, self.cfg.request_timeout_s) from None
        job.future.add_done_callback(lambda _f: self.budget.release(work))
        return job

    def _decode(self, job: Job, plan: RequestPlan, on_tokens: Callable | None, on_draft: Callable | None) -> Outcome:
        template = job.prepared if job.prepare is not None else self.preparer.build(plan, job)
        prompt_ids = self.preparer.check_prompt(plan)
        progress = self.scheduler.progress if self.scheduler.batcher is None else (lambda: None)

        def hook(fn: Callable | None, tokens: bool = False) -> Callable:
            def run(*a: Any) -> None:
                job.check()
                progress()
                if tokens and job.first_token is None:
                    job.first_token = time.perf_counter()  # time to first token (the metrics)
                if fn is not None:
                    fn(*a)
            return run

        text_ids: list[list[int] | None] = []  # the text reply's prompt, checked before it is decoded
        io = StepIO(template, functools.partial(self.preparer.tool_template, plan), job.check, hook(on_tokens, True),
                    hook(None, True), hook(on_draft), job.cancelled.is_set, job.slot,
                    lambda step: text_ids.append(self.preparer.text_prompt(plan, step)))
        try:
            out = run_step(self.engine, plan.step, io)
            assert out.result is not None  # the runner's step always decodes (a call, or the text reply)
            result, changed = out.result, None
            if plan.settle and grounded_.SETTLE and isinstance(self.engine, Scoring):
                result, changed = settled(self.engine, plan, out.result, self.preparer.grounding(plan.schema),
                                          job.slot)
        finally:
            if plan.settle and (kept := getattr(self.engine, "kept", None)) is not None:
                kept.clear()  # the decode's cache is not held past this request
        if out.text_reply:
            prompt_ids = text_ids[0]
        lp = None
        if plan.logprobs is not None and prompt_ids is not None:
            from .logprobs import token_logprobs

            lp = token_logprobs(self.engine, prompt_ids, list(out.result.token_ids), plan.logprobs, job.slot)
        return Outcome(result, lp, out.choice, out.decision.record() if out.decision else None, out.calls,
                       settled=changed)

    def decode_text(self, ids: list[int]) -> str:
        with self.lock:  # the tokenizer is shared with concurrent requests
            return self.engine.tokenizer.decode(ids, skip_special_tokens=False)

    # -- responses -------------------------------------------------------------------------------------------
    async def outcomes(self, plans: list[RequestPlan], request: Request) -> list[tuple[Job, Outcome]]:
        """Submit every plan (the choices of one request), wait for all; the first failure cancels the rest and
        is raised as its HTTP error."""
        jobs: list[Job] = []
        try:
            for p in plans:
                jobs.append(self.submit(p))
            outs = await asyncio.gather(*(self.scheduler.wait(j, self.cfg.request_timeout_s, request.is_disconnected)
                                          for j in jobs), return_exceptions=True)
        except asyncio.CancelledError:
            self.metrics.reject("disconnect")
            self._cancel(jobs)
            raise
        except BaseException as e:  # noqa: BLE001 -- a later choice not admitted: mapped to an HTTP error
            self._cancel(jobs)
            raise self.error(e, plans[0].mode) from None
        failed = [o for o in outs if isinstance(o, BaseException)]
        if failed:
            self._cancel(jobs)
            raise self.error(failed[0], plans[0].mode) from None
        return list(zip(jobs, outs))

    def _cancel(self, jobs: list[Job]) -> None:
        for j in jobs:
            if not j.future.done():
                self.scheduler.cancel(j)

    async def complete(self, req: ChatRequest, request: Request, t0: float) -> JSONResponse:
        model = self.served_model(req.model)
        self.check_n(req.n)
        plan = self.plan(req)
        done = await self.outcomes([plan.choice(i) for i in range(req.n)], request)
        body = completion_body(done, model)
        self.metrics.request(plan.mode, 200, time.perf_counter() - t0)
        return JSONResponse(body)

    def error(self, e: BaseException, mode: str) -> APIError:
        err = from_exception(e, self.cfg.request_timeout_s)
        if err.status == 504:
            self.metrics.reject("timeout")
        elif isinstance(e, ClientDisconnected):
            self.metrics.reject("disconnect")
        err.mode = mode  # for the request metrics (not part of the body)
        return err

    async def stream(self, req: ChatRequest, request: Request, t0: float) -> StreamingResponse:
        model = self.served_model(req.model)
        self.check_n(req.n)
        plan = self.plan(req)
        return await open_stream(self, [plan.choice(i) for i in range(req.n)], request, t0, model=model)
