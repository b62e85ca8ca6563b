"""The HTTP routes: an ``APIRouter`` whose handlers read the :class:`~serving.service.ChatService` from
``app.state.service`` (no closures over the app factory's locals)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from .admission import not_ready_reason
from .completions import CompletionRequest, Completions
from .connections import bearer_ok, unauthorized
from .errors import APIError, ErrorRoute
from .metrics import CONTENT_TYPE
from .protocol import ChatRequest
from .responses import Responses, ResponsesRequest
from .service import ChatService


def service(request: Request) -> ChatService:
    return request.app.state.service


async def check_key(request: Request) -> None:
    """The key again at the route (the ``ConnectionLimits`` middleware checks it before the body is read)."""
    key = service(request).cfg.api_key
    if key is not None and not bearer_ok(request.headers.get("authorization", ""), key):
        raise unauthorized()


router = APIRouter(route_class=ErrorRoute)
authed = [Depends(check_key)]


@router.get("/health")
async def health(request: Request) -> dict[str, Any]:
    """Liveness: the process answers (no lock, no model call)."""
    svc = service(request)
    s = svc.scheduler
    return {"status": "ok", "model": svc.model_name, "queue_depth": s.depth, "preparing": s.preparing,
            "running": s.running, "max_queue": svc.cfg.max_queue, "max_batch": svc.max_batch,
            "batching": (f"continuous (up to {svc.max_batch} requests per forward)" if s.batcher is not None
                         else "none (one request per forward)")}


@router.get("/health/ready")
async def ready(request: Request) -> JSONResponse:
    """Readiness: 503 while requests wait for the engine and no forward has completed for ``ready_stall_s``, or
    while a small request could not be admitted at once (work budget spent, queue full, memory over its bound)."""
    svc = service(request)
    stalled = svc.scheduler.stalled_s
    body = {"status": "ready", "stalled_s": round(stalled, 3), "ready_stall_s": svc.cfg.ready_stall_s,
            "queue_depth": svc.scheduler.depth, "running": svc.scheduler.running, "work_in_flight": svc.budget.used,
            "max_work": svc.budget.limit}
    extra = {k: v for k, v in body.items() if k != "status"}
    if stalled > svc.cfg.ready_stall_s:
        return APIError(503, f"not ready: requests have waited {stalled:.1f} s with no model forward completing "
                             f"(bound {svc.cfg.ready_stall_s:g} s)", "server_error", "engine_stalled",
                        **extra).response()
    reason = not_ready_reason(svc.budget, svc.scheduler, svc.cfg.max_queue)
    if reason is not None:
        return APIError(503, reason[1], "server_error", reason[0], **extra).response()
    return JSONResponse(body)


@router.get("/metrics", dependencies=authed)
async def metrics(request: Request) -> Response:
    s = service(request).scheduler
    return Response(service(request).metrics.render(s.depth, s.running, s.preparing), media_type=CONTENT_TYPE)


@router.get("/v1/models", dependencies=authed)
async def models(request: Request) -> dict[str, Any]:
    svc = service(request)
    return {"object": "list", "data": [{"id": name, "object": "model", "created": svc.created, "owned_by": "agentkit",
                                        "root": svc.model_name, "max_model_len": svc.preparer.context}
                                       for name in svc.served_names]}


async def _serve(request: Request, route: str, req: Any, run: Callable[[float], Awaitable[Response]]) -> Response:
    """Run a generation route: its request metrics on an error, its OpenTelemetry span (``serving/tracing.py``)."""
    svc, t0 = service(request), time.perf_counter()
    params = {"max_tokens": next((getattr(req, k) for k in ("max_completion_tokens", "max_tokens", "max_output_tokens")
                                  if getattr(req, k, None) is not None), None),
              "temperature": req.temperature, "top_p": req.top_p, "seed": getattr(req, "seed", None)}
    span = svc.tracer.start(request.headers, route, req.model, params)
    try:
        resp = await run(t0)
    except APIError as e:
        svc.metrics.request(getattr(e, "mode", "?"), e.status, time.perf_counter() - t0)
        if span is not None:
            span.fail(e)
        raise
    except BaseException:
        if span is not None:
            span.fail(APIError(500, "internal error", "server_error", "internal_error"))
        raise
    return span.response(resp) if span is not None else resp


@router.post("/v1/chat/completions", dependencies=authed)
async def chat(req: ChatRequest, request: Request) -> Response:
    svc = service(request)
    return await _serve(request, "chat", req, lambda t0: (svc.stream if req.stream else svc.complete)(req, request, t0))


@router.post("/v1/completions", dependencies=authed)
async def completions(req: CompletionRequest, request: Request) -> Response:
    api = Completions(service(request))
    return await _serve(request, "completions", req,
                        lambda t0: (api.stream if req.stream else api.complete)(req, request, t0))


@router.post("/v1/responses", dependencies=authed)
async def responses(req: ResponsesRequest, request: Request) -> Response:
    api = Responses(service(request))
    return await _serve(request, "responses", req, lambda t0: api.create(req, request, t0))
