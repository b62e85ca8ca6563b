"""The server's settings, one dataclass (``agentkit serve`` options map onto it one to one)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentkit.constrain.limits import CompileLimits
from agentkit.errors import InvalidRequestError


@dataclass
class ServerConfig:
    """Limits and behaviour of one server. Every limit is listed in the README's "Limits and isolation"."""

    api_key: str | None = None  # every route but /health and /health/ready needs "Authorization: Bearer <key>"
    max_batch: int = 8  # requests decoded concurrently, their model forwards batched
    max_queue: int = 64  # requests that may wait (preparing or queued) beyond the decoding slots; then 429
    request_timeout_s: float = 120.0  # arrival to result, preparation (schema compilation) included; then 504
    default_mode: str | None = None  # None: the calibrated mode for structured output (as the SDK), ar for free text
    prepare_workers: int = 2  # threads compiling schemas / building automata (separate from decoding)
    ready_stall_s: float = 30.0  # /health/ready fails when requests wait and no forward completed for this long
    max_context: int | None = None  # prompt + max_tokens cap in tokens (None: the model's max_position_embeddings)
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
        for name in ("request_timeout_s", "ready_stall_s"):
            if not getattr(self, name) > 0:
                raise InvalidRequestError(f"{name} must be > 0, got {getattr(self, name)}")
