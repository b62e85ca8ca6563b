"""The server's settings, one dataclass (``agentkit serve`` options map onto it one to one)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentkit.constrain.limits import CompileLimits
from agentkit.errors import InvalidRequestError


@dataclass
class ServerConfig:
    """Limits and behaviour of one server. Every limit is listed in the README's "Limits and isolation"."""

    api_key: str | None = None  # every route but /health and /health/ready needs "Authorization: Bearer <key>"
    # the Host header values a request may carry (a port after them is ignored; "*" any, "*.example.com" its
    # subdomains); another Host is a 403, which keeps a web page from reaching the server by DNS rebinding.
    # None: any Host. agentkit serve on a loopback bind defaults to localhost and the bind address
    # (serving.connections.loopback_hosts)
    allowed_hosts: tuple[str, ...] | None = None
    max_batch: int = 8  # requests decoded concurrently, their model forwards batched
    max_queue: int = 64  # requests that may wait (preparing or queued) beyond the decoding slots; then 429
    request_timeout_s: float = 120.0  # arrival to result, preparation (schema compilation) included; then 504
    # the names a request's "model" may carry (vLLM's --served-model-name); another name is a 404. Empty: the
    # engine's own name and "agentkit" (the name the README and the SDK's HTTP backend use)
    served_model_names: tuple[str, ...] = ()
    max_n: int = 8  # "n" (choices per request) at most this; each choice is decoded and charged as a request
    default_mode: str | None = None  # None: the calibrated mode for structured output (as the SDK), ar for free text
    prepare_workers: int = 2  # threads compiling schemas / building automata (separate from decoding)
    ready_stall_s: float = 30.0  # /health/ready fails when requests wait and no forward completed for this long
    max_context: int | None = None  # prompt + max_tokens cap in tokens (None: the model's max_position_embeddings)
    # admission by work (serving/admission.py, docs/limits.md)
    max_canvas_length: int = 64  # agentkit.canvas_length at most this (the model's useful block); over: 400
    max_denoising_steps: int = 64  # agentkit.max_denoising_steps at most this; over: 400
    max_request_work: int = 65_536  # one request's estimated positions (max_tokens x steps + prompt + template); 400
    max_work: int = 524_288  # estimated positions of all requests in flight; a request over it: 429 + Retry-After
    max_memory_mb: float | None = None  # resident memory over this: new requests 429, /health/ready 503 (None: off)
    # the preparation pool's fair queue: schemas whose JSON text is at most this many characters go to a lane of
    # their own (cached schemas skip preparation); a build there over fast_lane_s moves to the slow lane
    small_schema_chars: int = 4096
    fast_lane_s: float = 1.0
    failure_ttl_s: float = 600.0  # a schema whose build timed out is refused at once for this long (others: always)
    # connections (serving/connections.py; uvicorn and the app's middleware)
    max_body_bytes: int = 8 * 2**20  # request body; Content-Length over it: 413 before reading (chunked: on passing)
    header_timeout_s: float = 10.0  # a connection's request head must arrive within this; then it is closed
    body_timeout_s: float = 30.0  # each body chunk must arrive within this; then 408
    keep_alive_s: float = 5.0  # idle keep-alive connections are closed after this
    max_connections: int = 512  # concurrent connections + requests uvicorn serves; then 503
    # every schema build (schema -> template -> token automata); its time limit is also cut to the request's time left
    compile_limits: CompileLimits = field(default_factory=CompileLimits)

    def __post_init__(self) -> None:
        if self.default_mode not in (None, "ar", "diffusion", "verify"):
            raise InvalidRequestError(f"default_mode must be ar, diffusion or verify, got {self.default_mode!r}")
        for name in ("max_batch", "prepare_workers"):
            if getattr(self, name) < 1:
                raise InvalidRequestError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_queue < 0:
            raise InvalidRequestError(f"max_queue must be >= 0, got {self.max_queue}")
        if self.max_context is not None and self.max_context < 2:
            raise InvalidRequestError(f"max_context must be >= 2, got {self.max_context}")
        if isinstance(self.served_model_names, str) or not all(
                isinstance(n, str) and n for n in self.served_model_names):
            raise InvalidRequestError(f"served_model_names must be a tuple of non-empty strings, got "
                                      f"{self.served_model_names!r}")
        self.served_model_names = tuple(self.served_model_names)
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key.strip()):
            raise InvalidRequestError("api_key must be a non-empty string (or None: no key)")
        if self.allowed_hosts is not None:
            if isinstance(self.allowed_hosts, str) or not all(
                    isinstance(h, str) and h.strip() for h in self.allowed_hosts) or not self.allowed_hosts:
                raise InvalidRequestError(f"allowed_hosts must be a non-empty tuple of host names, got "
                                          f"{self.allowed_hosts!r}")
            self.allowed_hosts = tuple(h.strip().lower() for h in self.allowed_hosts)
        for name in ("max_n", "max_canvas_length", "max_denoising_steps", "max_request_work", "max_work", "small_schema_chars",
                     "max_body_bytes", "max_connections"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidRequestError(f"{name} must be an integer >= 1, got {v!r}")
        if self.max_memory_mb is not None and not self.max_memory_mb > 0:
            raise InvalidRequestError(f"max_memory_mb must be > 0, got {self.max_memory_mb}")
        for name in ("request_timeout_s", "ready_stall_s", "fast_lane_s", "failure_ttl_s", "header_timeout_s",
                     "body_timeout_s", "keep_alive_s"):
            if not getattr(self, name) > 0:
                raise InvalidRequestError(f"{name} must be > 0, got {getattr(self, name)}")
