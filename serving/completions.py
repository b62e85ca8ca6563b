"""``POST /v1/completions``: OpenAI's (legacy) completions -- a prompt in, text out, no chat template.

The prompt is given to the engine as it is (``Engine.generate(prompt, raw=True)``); decoding takes the same options
as chat completions (``temperature``, ``top_p``, ``top_k``, ``seed``, ``stop``, the penalties and ``logit_bias``,
``n``, ``stream``, the ``"agentkit"`` extension) with OpenAI's completions defaults where they differ (``max_tokens``
16). ``prompt`` is a string or a list of strings (each one's ``n`` choices, in order: ``index`` = prompt * n +
choice). ``logprobs`` (0-5) gives the legacy object (``tokens``, ``token_logprobs``, ``top_logprobs``,
``text_offset``). ``echo`` puts the prompt in front of the text. Refused with a 400 naming the field: token-id
prompts, ``suffix``, ``best_of`` > 1, ``echo`` with ``logprobs`` (the prompt's own log-probabilities are not
computed).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import Field, model_validator

from agentkit.settings import bounds

from .admission import check_bounds
from .outcome import job_stats, total_usage
from .plan import RequestPlan, decode_config, prompt_bound
from .protocol import AgentkitExt, FieldError, Sampling, SBool, SInt
from .sse import DONE, event
from .streaming import Frame, open_stream

DEFAULT_MAX_TOKENS = 16  # OpenAI's completions default


class CompletionRequest(Sampling):
    model: str  # required, as OpenAI requires it
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: SInt | None = Field(default=DEFAULT_MAX_TOKENS, **bounds("max_new_tokens"))
    stream: SBool = False
    n: SInt = Field(default=1, ge=1, le=128)
    logprobs: SInt | None = Field(default=None, ge=0, le=5)
    echo: SBool = False
    suffix: str | None = None
    best_of: SInt | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _supported(self) -> CompletionRequest:
        if isinstance(self.prompt, list) and any(not isinstance(p, str) for p in self.prompt):
            raise FieldError("prompt", "token-id prompts are not supported (send the prompt as text)")
        if isinstance(self.prompt, list) and not self.prompt:
            raise FieldError("prompt", "an empty list (give at least one prompt)")
        if self.suffix:
            raise FieldError("suffix", "not supported (only an empty suffix is accepted)")
        if self.best_of is not None and self.best_of > 1:
            raise FieldError("best_of", "not supported (only 1 is accepted; use n for several choices)")
        if self.echo and self.logprobs is not None:
            raise FieldError("echo", "echo with logprobs is not supported (the prompt's log-probabilities are "
                                     "not computed)")
        return self

    @property
    def prompts(self) -> list[str]:
        return [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)  # type: ignore[arg-type]


def plan_completion(req: CompletionRequest, prompt: str, *, default_mode: str | None = None,
                    context: int | None = None, max_token_chars: int | None = None,
                    plain_weights: str | None = None) -> RequestPlan:
    """The plan for one prompt of ``req``: free text in the asked mode (AR unless ``agentkit.mode`` or the
    server's ``default_mode`` says otherwise), the prompt raw, on ``plain_weights`` (a chat's plain reply's)."""
    ext = req.agentkit or AgentkitExt()
    max_tokens = req.max_tokens or DEFAULT_MAX_TOKENS
    prompt_bound(prompt, context, max_token_chars, max_tokens)
    mode = ext.mode or default_mode or "ar"
    return RequestPlan([], decode_config(req, mode, max_tokens, weights=plain_weights), canvas=ext.canvas,
                       max_tokens_given=True, logprobs=req.logprobs, stop=list(req.stop or []), raw_prompt=prompt)


def legacy_logprobs(content: list[dict[str, Any]], offset: int = 0) -> dict[str, Any]:
    """Chat's ``logprobs.content`` as the completions API writes it."""
    offsets, at = [], offset
    for e in content:
        offsets.append(at)
        at += len(e["token"])
    return {"tokens": [e["token"] for e in content], "token_logprobs": [e["logprob"] for e in content],
            "top_logprobs": [{a["token"]: a["logprob"] for a in e["top_logprobs"]} for e in content],
            "text_offset": offsets}


def _finish(reason: str) -> str:
    return "length" if reason == "length" else "stop"


class Completions:
    """The route's work, over the chat service (admission, scheduling, decoding and errors are its)."""

    def __init__(self, svc: Any) -> None:
        self.svc = svc

    def plans(self, req: CompletionRequest) -> list[RequestPlan]:
        svc = self.svc
        svc.check_n(req.n * len(req.prompts))
        out = []
        for prompt in req.prompts:
            plan = plan_completion(req, prompt, default_mode=svc.cfg.default_mode, context=svc.preparer.context,
                                   max_token_chars=svc.max_token_chars, plain_weights=svc.plain_weights)
            check_bounds(plan, svc.cfg)
            out.extend(plan.choice(i) for i in range(req.n))
        return out

    async def complete(self, req: CompletionRequest, request: Request, t0: float) -> JSONResponse:
        model = self.svc.served_model(req.model)
        plans = self.plans(req)
        done = await self.svc.outcomes(plans, request)
        choices = []
        for i, ((job, out), plan) in enumerate(zip(done, plans)):
            res = out.result
            head = plan.raw_prompt if req.echo else ""
            lp = legacy_logprobs(out.logprobs) if out.logprobs is not None else None
            choices.append({"index": i, "text": head + res.text, "logprobs": lp,
                            "finish_reason": _finish(res.stats.finish_reason)})
        body = {"id": "cmpl-" + uuid.uuid4().hex, "object": "text_completion", "created": int(time.time()),
                "model": model, "system_fingerprint": None, "choices": choices,
                "usage": total_usage([o for _, o in done]),
                "agentkit_stats": job_stats(done[0][1], done[0][0])}
        self.svc.metrics.request(plans[0].mode, 200, time.perf_counter() - t0)
        return JSONResponse(body)

    async def stream(self, req: CompletionRequest, request: Request, t0: float) -> StreamingResponse:
        model = self.svc.served_model(req.model)
        plans = self.plans(req)  # choice i is prompt i // n's (i % n)-th sample, as without stream
        cid, created = "cmpl-" + uuid.uuid4().hex, int(time.time())
        heads = [p.raw_prompt or "" if req.echo else "" for p in plans]

        def chunk(i: int | None, text: str = "", finish: str | None = None, **extra: Any) -> str:
            choices = [] if i is None else [{"index": i, "text": text, "logprobs": None, "finish_reason": finish}]
            return event({"id": cid, "object": "text_completion", "created": created, "model": model,
                          "choices": choices, **extra})

        async def render(frames: AsyncIterator[Frame]) -> AsyncIterator[str]:
            for i, head in enumerate(heads):
                if head:
                    yield chunk(i, head)
            async with contextlib.aclosing(frames) as fs:  # type: ignore[type-var]
                async for name, data in fs:
                    if name is not None:  # an error (the canvas events are chat chunks; not sent here)
                        if name == "error":
                            yield event(data)
                        continue
                    if not data["choices"]:  # n > 1: the request's usage, after every choice ended
                        yield chunk(None, usage=data["usage"])
                        continue
                    ch = data["choices"][0]
                    text, finish = ch["delta"].get("content") or "", ch["finish_reason"]
                    if text or finish:
                        extra = {k: data[k] for k in ("usage", "agentkit_stats") if k in data} if finish else {}
                        yield chunk(ch["index"], text, finish, **extra)
            yield DONE

        return await open_stream(self.svc, plans, request, t0, model=model, render=render)
