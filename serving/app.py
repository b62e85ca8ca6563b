"""An OpenAI-compatible HTTP server over one agentkit ``Engine``.

Endpoints
---------
- ``POST /v1/chat/completions``: OpenAI chat completions. Supported: ``messages``, ``tools`` + ``tool_choice``,
  ``response_format`` (``text``, ``json_object``, ``json_schema``), ``max_tokens`` (or ``max_completion_tokens``),
  ``temperature`` (default 0 = greedy, unlike OpenAI's 1), ``top_p``, ``top_k``, ``seed``, ``stop``,
  ``frequency_penalty`` / ``presence_penalty`` / ``logit_bias`` (not with DiffusionGemma's diffusion mode), ``stream``,
  ``logprobs`` + ``top_logprobs``, ``n`` (up to ``max_n``, streamed too), ``parallel_tool_calls``. ``model`` must
  be a served name (``GET /v1/models``; else 404). Accepted and ignored: ``user``, ``metadata``, ``store``,
  ``service_tier``, ``prompt_cache_key``, ``safety_identifier``, ``stream_options`` (usage is always in the last
  chunk). Any other top-level field is a 400 naming it.
  Extension field ``"agentkit": {"mode": "ar"|"diffusion"|"verify", "canvas_length", "max_denoising_steps",
  "sampler", "canvas": bool}`` (``extra_body={"agentkit": {...}}`` with the openai client). Without a mode the
  server routes as the SDK does (``agentkit.calibration.step_mode``): a tool call in the ``tool_call`` step's calibrated
  mode, a schema with no tool in the ``extract`` step's, free text in the ``reply`` step's; ``ar`` where that is verify
  and the request samples, or where verify's work would pass ``max_request_work`` (``default_mode`` overrides this). Every response carries ``usage`` and ``agentkit_stats``
  (``DecodeStats.to_dict()`` plus ``queue_ms``, ``prepare_ms``, ``batch_size``, ``batch_size_max``, ``token_ids``).
- ``POST /v1/completions`` (``serving/completions.py``) and ``POST /v1/responses`` (``serving/responses.py``): the
  same service, a raw prompt / the Responses API's items and events.
- ``GET /v1/models``; ``GET /health`` (liveness); ``GET /health/ready`` (readiness: 503 when requests wait and no
  forward has completed for ``ready_stall_s``); ``GET /metrics`` (Prometheus, ``prometheus_client``).

Rooms: ``protocol.py`` (request models, field checks) -> ``plan.py`` (request -> plan, pure) -> ``scheduler.py``
(bounded queue, preparation pool, decoding workers, batching) -> ``prepare.py`` (compile, build automata, prompt
length) -> ``service.py`` (decode, respond) / ``streaming.py`` + ``sse.py`` (SSE) ; ``routes.py`` (the
``APIRouter``), ``errors.py`` (one error body), ``metrics.py``, ``config.py`` (``ServerConfig``).

Tools
-----
``tool_choice`` ``"required"`` or ``{"type": "function", "function": {"name": N}}`` decodes under a canvas template
``{"name":"NAME","arguments":<parameters schema>}`` (a choice over the tool names when several may be called), so
the call is valid by construction; it comes back as OpenAI ``tool_calls`` with ``finish_reason: "tool_calls"``.
``"auto"`` (the default when tools are given) lets the model answer in free text, with the tools and the call
format described in a system message; a reply that parses as such a call is returned as ``tool_calls``.
``"none"`` ignores the tools.

Streaming (``"stream": true``)
------------------------------
Server-sent events in OpenAI's ``chat.completion.chunk`` format: a role chunk, content deltas as tokens are
committed (see ``serving/streaming.py``), (diffusion/verify, with ``"agentkit": {"canvas": true}``) canvas draft events, a final chunk with
``finish_reason``, ``usage`` and ``agentkit_stats``, and ``data: [DONE]``. Canvas drafts::

    event: agentkit.canvas
    data: {"object": "chat.completion.chunk", "choices": [], ...,
           "agentkit_canvas": {"step": 3, "draft": "<decoded canvas text>", "frozen": 5, "length": 32}}

Sent only when asked for: ``"agentkit": {"canvas": true}``. Errors known before the first token are plain HTTP errors.

Errors
------
One body for every error, OpenAI's ``{"error": {"message", "type", "code", "param"}}``: 400 for a body that does
not parse or validate (naming each failing field), for an unknown field, a prompt longer than the context minus
``max_tokens``, or a request the engine refuses (an unsupported schema names the keyword and the JSON pointer in
``error.keyword`` / ``error.pointer``); 401 missing or wrong API key; 404/405 unknown route; 429 with
``Retry-After`` when the queue is full or the work budget is spent (``serving/admission.py``); 408 / 413 for a
body too slow / too large (``serving/connections.py``); 504 on timeout; 500 (the connection stays usable) for a bug.
Every limit, its default and its setting: ``docs/limits.md``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI

from agentkit import __version__
from agentkit.constrain.nodes import Template
from agentkit.engine.faces import EngineLike

from . import errors
from .config import ServerConfig
from .connections import ConnectionLimits
from .routes import router
from .service import ChatService


def create_app(engine: EngineLike, config: ServerConfig | None = None, *,
               compile_schema: Callable[[dict[str, Any]], Template] | None = None, **settings: Any) -> FastAPI:
    """The FastAPI app serving ``engine`` (an ``agentkit`` ``Engine``, or a double with its face:
    :class:`agentkit.engine.faces.EngineLike`).

    ``config`` (or its fields as keywords: ``api_key``, ``max_queue``, ``max_batch``, ``request_timeout_s``,
    ``default_mode``, ``prepare_workers``, ``ready_stall_s``, ... see :class:`~serving.config.ServerConfig`) sets
    the limits. ``max_batch`` applies to engines that declare ``batches`` (their ``generate`` takes a seat at an
    ``agentkit.engine.batch.Batcher``, as ``Engine.generate`` does); any other engine is served one request at a
    time. ``compile_schema`` defaults to
    ``agentkit.constrain.compiler.compile_schema`` (imported lazily).
    """
    if config is not None and settings:
        raise TypeError("pass either config or its fields as keywords, not both")
    svc = ChatService(engine, config or ServerConfig(**settings), compile_schema)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        svc.scheduler.close()

    app = FastAPI(title="agentkit", version=__version__, description=__doc__, lifespan=lifespan)
    app.state.service = svc
    app.state.scheduler = svc.scheduler
    app.state.metrics = svc.metrics
    errors.install(app)
    app.include_router(router)
    cfg = svc.cfg
    app.add_middleware(ConnectionLimits, api_key=cfg.api_key, max_body_bytes=cfg.max_body_bytes,
                       body_timeout_s=cfg.body_timeout_s, allowed_hosts=cfg.allowed_hosts)
    return app
