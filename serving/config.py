"""The server's settings, one dataclass (``agentkit serve`` options map onto it one to one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentkit.constrain.limits import CompileLimits
from agentkit.errors import InvalidRequestError


def _opt(default: Any, help: str) -> Any:
    """A field with its ``agentkit serve`` help (a tuple default becomes a factory)."""
    if isinstance(default, tuple):
        return field(default_factory=lambda: default, metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass
class ServerConfig:
    """Limits and behaviour of one server. Every limit is listed in the README's "Limits and isolation"."""

    # every field but compile_limits is an ``agentkit serve`` option of the same name (``--max-batch``), its
    # ``help`` the option's text; the CLI builds them from these fields (agentkit/cli.py, server_options)
    api_key: str | None = _opt(None, "require this bearer token on every request but /health and /health/ready "
                                     "(shown by ps: prefer --api-key-file or the AGENTKIT_API_KEY variable)")
    allowed_hosts: tuple[str, ...] | None = _opt(
        None, "the Host header values a request may carry, comma-separated ('*': any; '*.example.com': its "
              "subdomains); another Host is HTTP 403, which keeps a web page from reaching the server by DNS "
              "rebinding. Default on a loopback bind: localhost and the bind address "
              "(serving.connections.loopback_hosts); else any")
    max_batch: int = _opt(8, "requests decoded concurrently, their model forwards batched")
    max_queue: int = _opt(64, "requests that may wait (preparing or queued) beyond the decoding slots; then HTTP 429")
    request_timeout_s: float = _opt(120.0, "arrival to result, schema compilation included; then HTTP 504")
    served_model_names: tuple[str, ...] = _opt(
        (), "a name requests' model may carry (vLLM's --served-model-name; repeat --served-model-name for several); "
            "another name is HTTP 404. Default: the engine's own name and 'agentkit'")
    max_n: int = _opt(8, "n (choices per request) at most this, each decoded and charged as a request; over it "
                         "HTTP 400")
    default_mode: str | None = _opt(None, "ar | diffusion | verify for every request without agentkit.mode "
                                          "(default: the calibrated mode for structured output, as the SDK's; ar "
                                          "for free text)")
    prepare_workers: int = _opt(2, "threads compiling schemas and building automata, apart from decoding")
    ready_stall_s: float = _opt(30.0, "/health/ready fails when requests wait and no forward completed for this long")
    max_context: int | None = _opt(None, "cap on prompt + max_tokens in tokens (default: the model's context); over "
                                         "it HTTP 400")
    # admission by work (serving/admission.py, docs/limits.md)
    max_canvas_length: int = _opt(64, "bound on agentkit.canvas_length (the model's useful block); over it HTTP 400")
    max_denoising_steps: int = _opt(64, "bound on agentkit.max_denoising_steps; over it HTTP 400")
    max_request_work: int = _opt(65_536, "one request's estimated positions (max_tokens x steps + prompt + "
                                         "template); over it HTTP 400")
    max_work: int = _opt(524_288, "estimated positions of all requests in flight; a request over it HTTP 429 + "
                                  "Retry-After")
    max_memory_mb: float | None = _opt(None, "resident memory bound: over it new requests HTTP 429 and "
                                             "/health/ready 503 (default: off)")
    # the preparation pool's fair queue: cached schemas skip preparation
    small_schema_chars: int = _opt(4096, "schemas of at most this many JSON characters are built on a preparation "
                                         "lane of their own")
    fast_lane_s: float = _opt(1.0, "a build on the small-schema lane longer than this moves to the slow lane")
    failure_ttl_s: float = _opt(600.0, "a schema whose build timed out is refused at once for this long (other "
                                       "failures: always)")
    # connections (serving/connections.py; uvicorn and the app's middleware)
    max_body_bytes: int = _opt(8 * 2**20, "request body bound: HTTP 413 before reading")
    header_timeout_s: float = _opt(10.0, "a request head must arrive within this; then the connection is closed")
    body_timeout_s: float = _opt(30.0, "each request body chunk must arrive within this; then HTTP 408")
    keep_alive_s: float = _opt(5.0, "idle keep-alive connections are closed after this")
    max_connections: int = _opt(512, "concurrent connections + requests uvicorn serves; then HTTP 503")
    # every schema build (schema -> template -> token automata); its time limit is also cut to the request's time
    # left. Options --compile-timeout-s, --compile-max-states, ... (agentkit/cli.py)
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
