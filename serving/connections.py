"""Connection limits: no client holds the server by sending slowly or sending much.

- **Request head** (:func:`head_timeout_protocol`): uvicorn's h11 protocol with a deadline on the request line and
  headers: a connection whose head has not fully arrived ``header_timeout_s`` after its first byte (or after it
  opened) is closed. The head's size is bounded by h11 (``h11_max_incomplete_event_size``, :data:`MAX_HEAD_BYTES`),
  idle keep-alive connections by ``keep_alive_s``, and connections + requests by ``max_connections`` (uvicorn's
  ``limit_concurrency``: 503 past it). See :func:`uvicorn_settings`.
- **Host** (:class:`ConnectionLimits`): with ``allowed_hosts`` set, a request whose ``Host`` header names another
  host is a 403 before anything else is read. ``agentkit serve`` on a loopback bind allows :func:`loopback_hosts`
  by default, so a web page cannot reach the server by DNS rebinding (its requests carry the attacker's host name).
- **Body** (:class:`ConnectionLimits`, an ASGI middleware in front of the app): the API key is checked *before* the
  body is read (401 without reading it); a ``Content-Length`` over ``max_body_bytes`` is a 413 before reading; a
  chunked body is a 413 as soon as it passes the bound; each body chunk must arrive within ``body_timeout_s``
  (else 408). The body is read here, whole, before the app runs (the app reads it from memory), so these answers
  never depend on how the framework parses bodies. ``/health`` and ``/health/ready`` need no key.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from .errors import APIError

MAX_HEAD_BYTES = 64 * 1024  # request line + headers
OPEN_PATHS = ("/health", "/health/ready")


def bearer_ok(authorization: str, key: str) -> bool:
    """Whether an ``Authorization`` header carries ``key`` as a bearer token (constant-time comparison)."""
    scheme, _, token = authorization.partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(token.strip().encode(), key.encode())


def loopback_hosts(bind: str) -> tuple[str, ...] | None:
    """The hosts a server bound to ``bind`` allows by default: ``localhost``, the loopback addresses and ``bind``
    itself when ``bind`` is a loopback address; None (any host) for any other bind, whose names are not known here."""
    name = bind.strip().strip("[]").lower()
    if name != "localhost":
        try:
            if not ipaddress.ip_address(name).is_loopback:
                return None
        except ValueError:
            return None
    return tuple(dict.fromkeys(("localhost", "127.0.0.1", "::1", name)))


def host_name(header: str) -> str:
    """The host of a ``Host`` header, lower case, without its port or an IPv6 address's brackets."""
    header = header.strip().lower()
    if header.startswith("["):  # [::1]:8000
        return header[1:].partition("]")[0]
    if header.count(":") == 1:  # name:port (a bare IPv6 address has several colons)
        return header.partition(":")[0]
    return header


def host_allowed(header: str, allowed: tuple[str, ...]) -> bool:
    """Whether a ``Host`` header names one of ``allowed`` ("*" any; "*.example.com" a subdomain of example.com)."""
    host = host_name(header)
    if not host:
        return False
    for pattern in allowed:
        pattern = pattern.strip("[]")
        if pattern == "*" or host == pattern or (pattern.startswith("*.") and host.endswith(pattern[1:])):
            return True
    return False


def foreign_host(header: str) -> APIError:
    return APIError(403, f"the Host header {header[:200]!r} names a host this server does not serve (server setting "
                         "--allowed-hosts)", "permission_error", "host_not_allowed", param="Host")


def unauthorized() -> APIError:
    return APIError(401, "missing or invalid API key (send 'Authorization: Bearer <key>')", "authentication_error",
                    "invalid_api_key", headers={"WWW-Authenticate": "Bearer"})


class ConnectionLimits:
    """ASGI middleware: auth before the body, a body-size bound checked before reading, a per-chunk read timeout."""

    def __init__(self, app: Any, *, api_key: str | None, max_body_bytes: int, body_timeout_s: float,
                 allowed_hosts: tuple[str, ...] | None = None) -> None:
        self.app, self.api_key, self.allowed_hosts = app, api_key, allowed_hosts
        self.max_body_bytes, self.body_timeout_s = max_body_bytes, body_timeout_s

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        early = self._refuse(scope, headers)
        if early is not None:
            await early.response()(scope, receive, send)
            return
        body = await self._read_body(receive)
        if isinstance(body, APIError):
            await body.response()(scope, receive, send)
            return
        if body is None:  # the client left before its body was in
            return
        await self.app(scope, _replay(body, receive), send)

    def _refuse(self, scope: dict, headers: dict[str, str]) -> APIError | None:
        if self.allowed_hosts is not None and not host_allowed(headers.get("host", ""), self.allowed_hosts):
            return foreign_host(headers.get("host", ""))
        if self.api_key is not None and scope.get("path") not in OPEN_PATHS \
                and not bearer_ok(headers.get("authorization", ""), self.api_key):
            return unauthorized()
        length = headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                return APIError(400, f"Content-Length {length!r} is not a number", param="Content-Length",
                                code="invalid_request")
            if int(length) > self.max_body_bytes:
                return self._too_large(int(length))
        return None

    def _too_large(self, size: int) -> APIError:
        return APIError(413, f"the request body is {size} bytes or more, over this server's bound of "
                             f"{self.max_body_bytes} bytes (server setting --max-body-bytes)", param="body",
                        code="body_too_large", limit="max_body_bytes", limit_value=self.max_body_bytes)

    async def _read_body(self, receive: Any) -> bytes | APIError | None:
        """The whole body (at most ``max_body_bytes``; the app then reads it from memory), an error (408, 413), or
        None when the client disconnected first."""
        parts, seen = [], 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), self.body_timeout_s)
            except TimeoutError:
                return APIError(408, f"the request body did not arrive within {self.body_timeout_s:g} s per chunk "
                                     "(server setting --body-timeout-s)", param="body", code="body_timeout")
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_body_bytes:
                return self._too_large(seen)
            parts.append(chunk)
            if not message.get("more_body", False):
                return b"".join(parts)


def _replay(body: bytes, receive: Any) -> Any:
    """A ``receive`` giving ``body`` once, then the connection's own messages (the disconnect)."""
    sent = False

    async def receive_() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return receive_


def head_timeout_protocol(header_timeout_s: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request head takes over ``header_timeout_s``."""

    class HeadTimeoutProtocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def _waiting_head(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(header_timeout_s, self._expired)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def data_received(self, data: bytes) -> None:
            if self._waiting_head():
                self._arm()
            super().data_received(data)
            if not self._waiting_head():
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _expired(self) -> None:
            self._head_timer = None
            if self._waiting_head() and not self.transport.is_closing():
                self.transport.close()

    return HeadTimeoutProtocol


def uvicorn_settings(cfg: Any) -> dict[str, Any]:
    """The ``uvicorn.Config`` keywords that carry the server's connection limits."""
    return {"http": head_timeout_protocol(cfg.header_timeout_s), "timeout_keep_alive": cfg.keep_alive_s,
            "h11_max_incomplete_event_size": MAX_HEAD_BYTES, "limit_concurrency": cfg.max_connections}
