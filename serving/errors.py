"""One error body for every failure: OpenAI's ``{"error": {"message", "type", "code", "param"}}``.

- :class:`APIError` is what the server's own code raises;
- :func:`from_exception` maps agentkit's typed errors (``UserError`` -> 400, an unsupported schema with its
  ``keyword`` and ``pointer``) and the scheduler's outcomes (429, 504, 499) onto it;
- :func:`install` registers handlers so that body-parse and validation failures (400, naming the field), unknown
  paths and methods (Starlette's ``HTTPException``) and anything unexpected (500) all use the same shape;
- :class:`ErrorRoute` turns an unexpected exception inside a route into that 500 *response* instead of letting it
  reach Starlette's outermost middleware, which re-raises and makes the server close the connection: a
  keep-alive client's next request on the same connection still works.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.responses import Response

from agentkit.errors import CompileCancelled, SchemaLimitError, UnsupportedSchemaError, UserError
from agentkit.validate import ContextLengthError

from .protocol import FieldError
from .scheduler import Aborted, ClientDisconnected, QueueFull, RequestTimeout, ShuttingDown

log = logging.getLogger("agentkit.serving")


class APIError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None, headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type_, code, param
        self.headers = headers or {}
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "code": self.code, "param": self.param,
                          **self.extra}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def user_error(e: UserError, where: str = "") -> APIError:
    prefix = f"{where}: " if where else ""
    if isinstance(e, ContextLengthError):
        return APIError(400, str(e), param="messages", code="context_length_exceeded")
    if isinstance(e, SchemaLimitError):
        return APIError(400, f"{prefix}{e}", code="schema_limit", param=where or "response_format",
                        keyword=e.keyword, pointer=e.pointer, limit=e.limit, limit_value=e.value)
    if isinstance(e, UnsupportedSchemaError):
        return APIError(400, f"{prefix}{e}", code="unsupported_schema", param=where or "response_format",
                        keyword=e.keyword, pointer=e.pointer)
    return APIError(400, f"{prefix}{e}", code=type(e).__name__, param=getattr(e, "param", None) or where or None)


def from_exception(e: BaseException, timeout_s: float) -> APIError:
    """The HTTP error for what a request's job raised (or how it ended)."""
    if isinstance(e, APIError):
        return e
    if isinstance(e, UserError):
        return user_error(e)
    if isinstance(e, QueueFull):
        return APIError(429, str(e), "rate_limit_error", "queue_full", headers={"Retry-After": str(e.retry_after_s)})
    if isinstance(e, (RequestTimeout, Aborted, CompileCancelled)):
        return APIError(504, f"request timed out after {timeout_s:g} s", "timeout", "timeout")
    if isinstance(e, ClientDisconnected):
        return APIError(499, "client disconnected", "cancelled", "client_disconnected")
    if isinstance(e, ShuttingDown):
        return APIError(503, str(e), "server_error", "shutting_down", headers={"Retry-After": "1"})
    return internal(e)


def internal(e: BaseException) -> APIError:
    log.error("internal error: %s: %s", type(e).__name__, e, exc_info=e)
    return APIError(500, f"internal error: {type(e).__name__}", "server_error", "internal_error")


def _loc(loc: tuple) -> str:
    out = ""
    for p in (str(p) for p in loc if p != "body"):
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or "body"


def validation_error(errs: list[dict[str, Any]]) -> APIError:
    """A 400 naming every failing field (pydantic's errors, in OpenAI's shape)."""
    parts, params = [], []
    for x in errs:
        err = (x.get("ctx") or {}).get("error")
        if isinstance(err, FieldError):
            param, msg = err.param, str(err).split(": ", 1)[-1]
        elif x.get("type") == "extra_forbidden":
            param, msg = _loc(tuple(x.get("loc", ()))), "unknown field (not supported; see the README's list)"
        elif x.get("type") == "json_invalid":
            param, msg = "body", f"the body is not valid JSON ({(x.get('ctx') or {}).get('error', 'invalid')})"
        else:
            param, msg = _loc(tuple(x.get("loc", ()))), str(x.get("msg", "invalid"))
        parts.append(f"{param}: {msg}")
        params.append(param)
    return APIError(400, "invalid request: " + "; ".join(parts), code="invalid_request",
                    param=params[0] if params else None)


async def _on_api_error(request: Request, e: APIError) -> JSONResponse:
    return e.response()


async def _on_validation(request: Request, e: RequestValidationError) -> JSONResponse:
    return validation_error(list(e.errors())).response()


async def _on_http(request: Request, e: HTTPException) -> Response:
    if e.status_code < 400:
        return Response(status_code=e.status_code, headers=e.headers)
    code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code, "http_error")
    return APIError(e.status_code, f"{request.method} {request.url.path}: {e.detail}", code=code,
                    headers=dict(e.headers or {})).response()


async def _on_unexpected(request: Request, e: Exception) -> JSONResponse:
    return internal(e).response()


def install(app: FastAPI) -> None:
    app.add_exception_handler(APIError, _on_api_error)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(HTTPException, _on_http)
    app.add_exception_handler(Exception, _on_unexpected)


class ErrorRoute(APIRoute):
    """A route whose unexpected exceptions become a 500 response in place (the connection stays usable)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        inner = super().get_route_handler()

        async def handler(request: Request) -> Response:
            try:
                return await inner(request)
            except (APIError, RequestValidationError, HTTPException):
                raise
            except Exception as e:  # noqa: BLE001 -- answered as a 500, the connection kept
                return internal(e).response()

        return handler
