"""The chat service: one engine, its scheduler, preparer and metrics; runs a planned request to a response.

A request's life: plan (pure, ``serving/plan.py``) -> admitted to the scheduler (or 429) -> prepared on the
preparation pool (``serving/prepare.py``: compile, build automata, prompt check) -> decoded on a worker, its
forwards batched with other requests' -> answered as JSON, or streamed as SSE (``serving/sse.py``) with a content
delta per committed run of tokens (an AR token, a diffusion block, a verified prefix). The timeout covers the
whole life; a client that leaves cancels the request at its next forward (or drops it from the queue).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from agentkit.constrain.canonical import json_style
from agentkit.decide import can_score, pick_tool, wants_call
from agentkit.engine.faces import Scoring, Tokenizing
from agentkit.toolcall import NAME_ARGS, call_grounded, parse_calls

from .admission import WorkBudget, WorkBudgetFull, check_bounds, check_request_work, estimate_work
from .config import ServerConfig
from .errors import APIError, from_exception
from .metrics import Metrics
from .plan import RequestPlan, plan_request, reply_calls, response_parts, usage
from .prepare import Preparer, longest_token_chars
from .protocol import ChatRequest
from .scheduler import ClientDisconnected, Job, QueueFull, Scheduler, ShuttingDown
from .streaming import open_stream
from .tracing import Tracer


@dataclass
class Outcome:
    """What a decoding job returns: the engine's result and, on request, the returned tokens' log-probabilities."""

    result: Any
    logprobs: list[dict[str, Any]] | None = None
    choice: Any = None  # tool_choice auto: the choice decode's result when a text decode followed it
    decision: dict[str, Any] | None = None  # tool_choice auto: how the call / no-call decision was made

    def usage(self) -> dict[str, int]:
        """OpenAI's usage: the choice decode's and the text decode's tokens summed (both were computed)."""
        runs = [r.stats for r in (self.choice, self.result) if r is not None]
        return usage(sum(st.prompt_tokens for st in runs), sum(st.output_tokens for st in runs),
                     sum(st.cached_prompt_tokens for st in runs))


def _params(fn: Callable) -> tuple[set[str], bool]:
    """``fn``'s named parameters, and whether it also takes ``**kwargs``."""
    try:
        ps = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return set(), False
    return set(ps), any(p.kind is p.VAR_KEYWORD for p in ps.values())


class ChatService:
    def __init__(self, engine: Any, cfg: ServerConfig, compile_schema: Callable | None = None) -> None:
        self.engine, self.cfg = engine, cfg
        self.model_name = str(engine.name) if isinstance(engine, Tokenizing) else "agentkit"
        self.served_names = cfg.served_model_names or tuple(dict.fromkeys((self.model_name, "agentkit")))
        self.metrics = Metrics(self.served_names[0])  # vLLM's model_name label: the served name
        self.tracer = Tracer()  # a span per request when opentelemetry is installed (serving/tracing.py)
        params, any_kw = _params(engine.generate)
        self._hooks = any_kw or "on_tokens" in params  # the engine streams committed tokens
        self._should_stop = any_kw or "should_stop" in params  # ... and stops before its next forward when asked
        self._raw = any_kw or "raw" in params  # ... and takes a prompt as text (/v1/completions)
        batcher = None
        if "batch" in params:  # explicit batch support (not merely **kwargs)
            from agentkit.engine.batch import Batcher

            batcher = Batcher(max_batch=cfg.max_batch, on_forward=self._on_forward)
        self.max_batch = cfg.max_batch if batcher is not None else 1
        self.scheduler = Scheduler(cfg.max_queue, max_batch=self.max_batch, batcher=batcher, on_done=self._on_done,
                                   prepare_workers=cfg.prepare_workers)
        self.preparer = Preparer(engine, compile_schema, max_context=cfg.max_context, limits=cfg.compile_limits,
                                 failure_ttl_s=cfg.failure_ttl_s, fast_lane_s=cfg.fast_lane_s)
        self.budget = WorkBudget(cfg.max_work, cfg.max_memory_mb)
        self.max_token_chars = longest_token_chars(engine)
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
        plan = plan_request(req, default_mode=self.cfg.default_mode, context=self.preparer.context,
                            max_token_chars=self.max_token_chars)
        check_bounds(plan, self.cfg)
        return plan

    def check_n(self, n: int) -> None:
        if n > self.cfg.max_n:
            raise APIError(400, f"n is {n}, more than this server's max_n ({self.cfg.max_n})", param="n",
                           code="invalid_value")

    def check_raw(self) -> None:
        if not self._raw:
            raise APIError(400, "this engine takes chat messages only (its generate() has no raw= prompt); use "
                                "/v1/chat/completions", param="prompt", code="unsupported_endpoint")

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

        auto = plan.tool_mode == "auto"  # the choice is not streamed (serving/toolchoice.py)
        call, decision = self._decide(job, plan) if auto else (None, None)
        if plan.tool_mode == "forced" and len(plan.tool_names) > 1 and self._can_score():
            decision = {"by": "name_scores", "tool": self._pick(job, plan)}
        res = choice = None
        if call is not False:  # a call (the picked tool's template, else the choice decode), or forced/no tools
            if decision and decision.get("tool"):
                assert plan.schema is not None
                tool = tuple(t for t in plan.schema.tools if t.function.name == decision["tool"])
                template = self.preparer.template(dataclasses.replace(plan.schema, tools=tool, no_call=None,
                                                                      max_calls=plan.max_calls))
            res = self._generate(job, plan.prompt, plan.config, template, hook(None if auto else on_tokens, True),
                                 hook(on_draft), raw=plan.raw_prompt is not None)
        if auto and (res is None or self._answer_in_text(plan, res.value)):
            choice, prompt_ids = res, self.preparer.check_prompt(plan, text=True)
            assert plan.text_messages is not None and plan.text_config is not None
            res = self._generate(job, plan.text_messages, plan.text_config, None, hook(on_tokens, True),
                                 hook(on_draft))
        lp = None
        if plan.logprobs is not None and prompt_ids is not None:
            from .logprobs import token_logprobs

            lp = token_logprobs(self.engine, prompt_ids, list(res.token_ids), plan.logprobs, job.slot)
        return Outcome(res, lp, choice, decision)

    def _generate(self, job: Job, prompt: list[dict[str, str]] | str, config: Any, template: Any,
                  on_tokens: Callable, on_draft: Callable, raw: bool = False) -> Any:
        kw: dict[str, Any] = {"template": template, "on_draft": on_draft}
        if raw:
            kw["raw"] = True
        if self._hooks:
            kw["on_tokens"] = on_tokens
        if self._should_stop:
            kw["should_stop"] = job.cancelled.is_set  # a cancelled job stops before its next forward
        if job.slot is not None:
            kw["batch"] = job.slot
        res = self.engine.generate(prompt, config, **kw)
        job.check()  # stopped early because the request was cancelled: its answer is already decided
        return res

    def _decide(self, job: Job, plan: RequestPlan) -> tuple[bool | None, dict[str, Any]]:
        """tool_choice auto: (True: call, False: answer in text, None: left to the choice decode) by the model's
        calibrated scores (``agentkit.decide.wants_call``); None for an engine without a backbone to score."""
        if plan.retry:  # the last tool message reports a failure: a call again (serving/toolchoice.py)
            tool = self._pick(job, plan) if self._can_score() else None  # without scores, the choice decode's
            return True, {"by": "retry after a failed tool message", "call": True, "tool": tool}
        if not self._can_score():
            return None, {"by": "choice_decode"}
        assert plan.no_call is not None
        call, info = wants_call(self.engine, plan.messages, sorted(plan.tool_names), plan.no_call, self._head(plan),
                                job.slot)
        job.check()
        return call, {"by": "calibrated_scores", "call": call, **info}

    def _can_score(self) -> bool:
        return can_score(self.engine)

    @staticmethod
    def _head(plan: RequestPlan) -> str:
        """The call's text before its name (``{"name": "`` in the request's JSON style)."""
        assert plan.schema is not None
        return "{" + json.dumps(NAME_ARGS.name_key) + json_style(plan.schema.style).key_sep + '"'

    def _pick(self, job: Job, plan: RequestPlan) -> str:
        """tool_choice required: the tool the model scores highest (``agentkit.decide.pick_tool``)."""
        name = pick_tool(self.engine, plan.messages, sorted(plan.tool_names), self._head(plan), job.slot)
        job.check()
        return name

    @staticmethod
    def _answer_in_text(plan: RequestPlan, value: Any) -> bool:
        """After the call decode of tool_choice auto: True when the model chose no call, or only calls that repeat
        ones a tool message already answered (the repeat rule) or that take none of their argument values from the
        conversation (``agentkit.toolcall.call_grounded``: ``{"base": 10, "height": 10}`` for "What is the capital
        of France?"), so the reply is decoded as text."""
        calls = parse_calls("", value) if value is not None else []
        calls = [c for c in reply_calls(plan, calls) if call_grounded(c[1], plan.sources)]
        return not calls  # none (the no-call option; a template-less test engine's text)

    def decode_text(self, ids: list[int]) -> str:
        with self.lock:  # the tokenizer is shared with concurrent requests
            return self.engine.tokenizer.decode(ids, skip_special_tokens=False)

    # -- responses -------------------------------------------------------------------------------------------
    def stats(self, out: Outcome, job: Job) -> dict[str, Any]:
        res = out.result
        d = res.stats.to_dict()
        sizes = job.slot.sizes if job.slot is not None and job.slot.sizes else [1]
        prepare_ms = 1000 * (job.ready - job.enqueued) if job.ready is not None else 0.0
        d.update(queue_ms=round(job.queue_ms, 3), prepare_ms=round(prepare_ms, 3),
                 batch_size=round(sum(sizes) / len(sizes), 3), batch_size_max=max(sizes),
                 token_ids=list(res.token_ids))
        if out.decision is not None:
            d["tool_choice"] = out.decision
        return d

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

    @staticmethod
    def total_usage(outs: list[Outcome]) -> dict[str, Any]:
        """One request's usage: the prompt counted once (OpenAI's), the completions of every choice summed."""
        first = outs[0].usage()
        done = sum(o.usage()["completion_tokens"] for o in outs)
        return usage(first["prompt_tokens"], done, first["prompt_tokens_details"]["cached_tokens"])

    async def complete(self, req: ChatRequest, request: Request, t0: float) -> JSONResponse:
        model = self.served_model(req.model)
        self.check_n(req.n)
        plan = self.plan(req)
        done = await self.outcomes([plan.choice(i) for i in range(req.n)], request)
        choices = []
        for i, (job, out) in enumerate(done):
            res = out.result
            message, finish = response_parts(plan, res.text, res.value, res.stats.finish_reason)
            logprobs = {"content": out.logprobs} if out.logprobs is not None else None
            choice = {"index": i, "message": message, "logprobs": logprobs, "finish_reason": finish}
            if req.n > 1:
                choice["agentkit_stats"] = self.stats(out, job)
            choices.append(choice)
        body = {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()),
                "model": model, "system_fingerprint": None, "choices": choices,
                "usage": self.total_usage([o for _, o in done]), "agentkit_stats": self.stats(done[0][1], done[0][0])}
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
