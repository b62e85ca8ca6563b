"""An OpenAI-compatible HTTP server over one agentkit ``Engine``.

Endpoints
---------
- ``POST /v1/chat/completions``: OpenAI chat completions. Supported: ``messages``, ``tools`` + ``tool_choice``,
  ``response_format`` (``text``, ``json_object``, ``json_schema``), ``max_tokens`` (or ``max_completion_tokens``),
  ``temperature`` (default 0 = greedy, unlike OpenAI's 1), ``seed``, ``stop``, ``stream``; ``n`` must be 1.
  Extension field ``"agentkit": {"mode": "ar"|"diffusion"|"verify", "canvas_length", "max_denoising_steps",
  "sampler", "canvas": bool}``. Without a mode the server routes: structured output (a schema, json_object or a
  forced tool call) decodes with ``diffusion``, free text with ``ar`` (``default_mode`` overrides this).
  Every response carries ``usage`` and ``agentkit_stats`` (``DecodeStats.to_dict()`` plus ``queue_ms``,
  ``batch_size`` -- the mean number of requests in the model forwards this request took part in --,
  ``batch_size_max`` and ``token_ids``).
- ``GET /v1/models``, ``GET /health``, ``GET /metrics`` (Prometheus text format).

Concurrency
-----------
Up to ``max_batch`` requests decode at once and their model forwards run batched (continuous batching, see
``serving/scheduler.py`` and ``agentkit/engine/batch.py``); more wait in a bounded queue (``max_queue``, then 429).

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
Server-sent events in OpenAI's ``chat.completion.chunk`` format: a role chunk, then (diffusion/verify) canvas
draft events, then the content (or tool call) delta, a final chunk with ``finish_reason``, ``usage`` and
``agentkit_stats``, and ``data: [DONE]``. The engine produces its output at the end of the request (it has no
per-token callback), so the content arrives as one delta. Canvas drafts are the documented extension::

    event: agentkit.canvas
    data: {"object": "chat.completion.chunk", "choices": [], ...,
           "agentkit_canvas": {"step": 3, "draft": "<decoded canvas text>", "frozen": 5, "length": 32}}

They carry ``choices: []`` (like OpenAI's usage chunk), so unmodified OpenAI clients pass over them; clients that
dispatch on the SSE ``event`` name see ``agentkit.canvas``. ``"agentkit": {"canvas": false}`` turns them off.

Errors
------
OpenAI-style bodies ``{"error": {"message", "type", "code", "param"}}``: 422 for a body that does not validate
(the message names each failing field), 400 for a request the engine refuses (an unsupported schema names the
keyword and the JSON pointer in ``error.keyword`` / ``error.pointer``), 401 for a missing or wrong API key, 429 with
``Retry-After`` when the queue is full, 504 on timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from agentkit.config import DecodeConfig
from agentkit.constrain.nodes import Choice, Lit, Template, seq
from agentkit.errors import UnsupportedSchemaError, UserError

from .metrics import Metrics
from .protocol import AgentkitExt, ChatRequest, ContentPart, NamedToolChoice, ToolDef
from .scheduler import Aborted, ClientDisconnected, Job, QueueFull, RequestTimeout, Scheduler

# ----------------------------------------------------------------------------------------------------------------
# errors


class APIError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None, headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type_, code, param
        self.headers = headers or {}
        self.extra = extra

    def response(self) -> JSONResponse:
        err = {"message": self.message, "type": self.type, "code": self.code, "param": self.param, **self.extra}
        return JSONResponse({"error": err}, status_code=self.status, headers=self.headers)


def _user_error(e: UserError, where: str = "") -> APIError:
    prefix = f"{where}: " if where else ""
    if isinstance(e, UnsupportedSchemaError):
        return APIError(400, f"{prefix}{e}", code="unsupported_schema", param=where or "response_format",
                        keyword=e.keyword, pointer=e.pointer)
    return APIError(400, f"{prefix}{e}", code=type(e).__name__)


def _loc(loc: tuple) -> str:
    parts = [str(p) for p in loc if p != "body"]
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or "body"


# ----------------------------------------------------------------------------------------------------------------
# request -> engine call


_TOOL_PROMPT = (
    "You can call these tools. To call one, reply with only a JSON object "
    '{{"name": "<tool name>", "arguments": {{...}}}}.\n{tools}'
)


def _text(content: str | list[ContentPart] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for p in content:
        if p.type != "text" or p.text is None:
            raise APIError(400, f"content part of type {p.type!r} is not supported (text only)",
                           param="messages", code="unsupported_content")
        parts.append(p.text)
    return "".join(parts)


def _messages(req: ChatRequest, tools: list[ToolDef]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for m in req.messages:
        role = {"developer": "system", "function": "tool"}.get(m.role, m.role)
        content = _text(m.content)
        if m.tool_calls:
            calls = [{"name": c.function.name, "arguments": _args(c.function.arguments)} for c in m.tool_calls]
            content = (content + "\n" if content else "") + "\n".join(json.dumps(c) for c in calls)
        out.append({"role": role, "content": content})
    if tools:
        desc = "\n".join(json.dumps({"name": t.function.name, "description": t.function.description or "",
                                     "parameters": t.function.parameters or {"type": "object", "properties": {}}})
                         for t in tools)
        sys = _TOOL_PROMPT.format(tools=desc)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + sys}
        else:
            out.insert(0, {"role": "system", "content": sys})
    return out


def _args(a: str | dict[str, Any]) -> Any:
    if isinstance(a, dict):
        return a
    try:
        return json.loads(a)
    except json.JSONDecodeError:
        return a


def _parse_tool_call(text: str, names: set[str]) -> dict[str, Any] | None:
    s = text.strip()
    if not s.startswith("{"):
        return None
    try:
        v, _ = json.JSONDecoder().raw_decode(s)
    except json.JSONDecodeError:
        return None
    if isinstance(v, dict) and v.get("name") in names and isinstance(v.get("arguments", {}), dict):
        return {"name": v["name"], "arguments": v.get("arguments", {})}
    return None


class _Plan:
    """Everything decided before the request is queued."""

    def __init__(self) -> None:
        self.messages: list[dict[str, str]] = []
        self.template: Template | None = None
        self.tool_mode: Literal["none", "forced", "auto"] = "none"
        self.tool_names: set[str] = set()
        self.config: DecodeConfig | None = None
        self.canvas = True


# ----------------------------------------------------------------------------------------------------------------
# the app


def create_app(engine: Any, *, api_key: str | None = None, max_queue: int = 64, request_timeout_s: float = 120,
               default_mode: str | None = None, max_batch: int = 8,
               compile_schema: Callable[[dict[str, Any]], Template] | None = None) -> FastAPI:
    """The FastAPI app serving ``engine`` (an ``agentkit`` ``Engine`` or anything with its ``generate``).

    ``max_batch``: requests decoded concurrently, their forwards batched. It applies to engines whose
    ``generate`` takes ``batch=`` (a seat at an ``agentkit.engine.batch.Batcher``, as ``Engine.generate`` does);
    any other engine is served one request at a time. ``compile_schema`` defaults to
    ``agentkit.constrain.compiler.compile_schema_cached`` (imported lazily).
    """
    if default_mode not in (None, "ar", "diffusion", "verify"):
        raise ValueError(f"default_mode must be ar, diffusion or verify, got {default_mode!r}")
    if max_batch < 1:
        raise ValueError(f"max_batch must be >= 1, got {max_batch}")
    metrics = Metrics()
    try:
        batching = "batch" in inspect.signature(engine.generate).parameters
    except (TypeError, ValueError):
        batching = False
    batcher = None
    if batching:
        from agentkit.engine.batch import Batcher

        batcher = Batcher(max_batch=max_batch, on_forward=metrics.batch_forward)
    else:
        max_batch = 1
    engine_lock = getattr(engine, "lock", None) or contextlib.nullcontext()

    def on_done(job: Job, service_s: float) -> None:
        res = job.future.result() if job.future.done() and not job.future.cancelled() and \
            job.future.exception() is None else None
        if res is not None:
            st = res.stats
            metrics.generation(st.mode, st.forwards, st.output_tokens, st.tokens_per_forward)
            if batcher is None:  # no batcher: each of this request's forwards carried it alone
                metrics.batch_forward(1, n=st.encoder_forwards + st.decoder_forwards)

    sched = Scheduler(max_queue, max_batch=max_batch, batcher=batcher, on_done=on_done)
    model_name = str(getattr(engine, "name", "agentkit"))
    tool_templates: OrderedDict[str, Template] = OrderedDict()
    created = int(time.time())

    def compiler() -> Callable[[dict[str, Any]], Template]:
        if compile_schema is not None:
            return compile_schema
        try:
            from agentkit.constrain.compiler import compile_schema_cached
        except ImportError as e:
            raise APIError(501, f"structured output is unavailable: the schema compiler failed to import ({e})",
                           "server_error", "compiler_unavailable") from None
        return compile_schema_cached

    def compile_or_400(schema: Any, where: str, strict: bool = False) -> Template:
        """``strict`` (OpenAI's structured-output flag): objects get no keys beyond their listed properties."""
        if not isinstance(schema, dict):
            raise APIError(400, f"{where}: a JSON Schema must be an object", param=where)
        try:
            return compiler()(schema, strict=True) if strict else compiler()(schema)
        except UserError as e:
            raise _user_error(e, where) from None

    def tool_template(tools: list[ToolDef], key: str) -> Template:
        t = tool_templates.get(key)
        if t is not None:
            tool_templates.move_to_end(key)
            return t
        options = []
        for i, tool in enumerate(tools):
            params = tool.function.parameters or {"type": "object", "properties": {}}
            sub = compile_or_400(params, f"tools[{i}].function.parameters")
            head = '{"name":' + json.dumps(tool.function.name) + ',"arguments":'
            options.append(seq(Lit(head), sub.root, Lit("}")))
        root = options[0] if len(options) == 1 else Choice(tuple(options))
        t = Template(root, schema={"tool_call": [x.function.name for x in tools]}, kind="json",
                     meta={"step": "tool_call"})
        tool_templates[key] = t
        if len(tool_templates) > 64:
            tool_templates.popitem(last=False)
        return t

    def plan(req: ChatRequest) -> _Plan:
        p = _Plan()
        ext = req.agentkit or AgentkitExt()
        tools = req.tools or []
        choice = req.tool_choice if req.tool_choice is not None else ("auto" if tools else "none")
        if choice != "none" and not tools:
            raise APIError(400, "tool_choice requires tools", param="tool_choice")
        if isinstance(choice, NamedToolChoice):
            named = [t for t in tools if t.function.name == choice.function.name]
            if not named:
                raise APIError(400, f"tool_choice names {choice.function.name!r}, which is not among the tools",
                               param="tool_choice")
            forced_tools = named
        elif choice == "required":
            forced_tools = tools
        else:
            forced_tools = []
        names = [t.function.name for t in tools]
        if len(set(names)) != len(names):
            raise APIError(400, "tool names must be unique", param="tools")
        p.messages = _messages(req, tools if choice != "none" else [])
        if forced_tools:
            key = json.dumps([t.model_dump(mode="json") for t in forced_tools], sort_keys=True)
            p.template = tool_template(forced_tools, key)
            p.tool_mode, p.tool_names = "forced", {t.function.name for t in forced_tools}
        else:
            rf = req.response_format
            if rf is not None and rf.type == "json_object":
                p.template = compile_or_400({}, "response_format")
            elif rf is not None and rf.type == "json_schema":
                if rf.json_schema is None:
                    raise APIError(400, "response_format.json_schema is required for type json_schema",
                                   param="response_format.json_schema")
                p.template = compile_or_400(rf.json_schema.schema_, "response_format.json_schema.schema",
                                            strict=bool(rf.json_schema.strict))
            if choice == "auto" and p.template is None:
                p.tool_mode, p.tool_names = "auto", set(names)
        mode = ext.mode or default_mode or ("diffusion" if p.template is not None else "ar")
        kw: dict[str, Any] = {"mode": mode,
                              "max_new_tokens": req.max_completion_tokens or req.max_tokens or 256,
                              "temperature": req.temperature if req.temperature is not None else 0.0,
                              "seed": req.seed, "stop": req.stop or [], "top_k": req.top_k}
        for k in ("canvas_length", "max_denoising_steps", "sampler"):
            if getattr(ext, k) is not None:
                kw[k] = getattr(ext, k)
        try:
            p.config = DecodeConfig(**kw)
        except UserError as e:
            raise _user_error(e) from None
        p.canvas = ext.canvas
        return p

    def work(p: _Plan, sink: Callable[[list[int], list[bool]], None] | None) -> Callable[[Job], Any]:
        def run(job: Job) -> Any:
            def on_draft(tokens: list[int], frozen: list[bool]) -> None:
                job.check()
                if sink is not None:
                    sink(tokens, frozen)

            kw = {"batch": job.slot} if job.slot is not None else {}
            return engine.generate(p.messages, p.config, template=p.template, on_draft=on_draft, **kw)

        return run

    def result_parts(p: _Plan, res: Any) -> tuple[dict[str, Any], str]:
        """(assistant message, finish_reason) for a generation result."""
        call = None
        if p.tool_mode == "forced" and isinstance(res.value, dict):
            call = res.value
        elif p.tool_mode != "none":
            call = _parse_tool_call(res.text, p.tool_names)
        if call is not None:
            tc = {"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                  "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))}}
            return {"role": "assistant", "content": None, "tool_calls": [tc]}, "tool_calls"
        fr = res.stats.finish_reason
        return {"role": "assistant", "content": res.text}, ("length" if fr == "length" else "stop")

    def usage(res: Any) -> dict[str, int]:
        st = res.stats
        return {"prompt_tokens": st.prompt_tokens, "completion_tokens": st.output_tokens,
                "total_tokens": st.prompt_tokens + st.output_tokens}

    def stats(res: Any, job: Job) -> dict[str, Any]:
        d = res.stats.to_dict()
        sizes = job.slot.sizes if job.slot is not None and job.slot.sizes else [1]
        d.update(queue_ms=round(job.queue_ms, 3), batch_size=round(sum(sizes) / len(sizes), 3),
                 batch_size_max=max(sizes), token_ids=list(res.token_ids))
        return d

    def map_engine_error(e: BaseException) -> APIError:
        if isinstance(e, UserError):
            return _user_error(e)
        if isinstance(e, (RequestTimeout, Aborted)):
            metrics.reject("timeout")
            return APIError(504, f"request timed out after {request_timeout_s:g} s", "timeout", "timeout")
        return APIError(500, f"internal error: {type(e).__name__}: {e}", "server_error", "internal_error")

    async def check_key(request: Request) -> None:
        if api_key is None:
            return
        auth = request.headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), api_key.encode()):
            raise APIError(401, "missing or invalid API key (send 'Authorization: Bearer <key>')",
                           "authentication_error", "invalid_api_key",
                           headers={"WWW-Authenticate": "Bearer"})

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        sched.close()

    app = FastAPI(title="agentkit", version="0.1.0", description=__doc__, lifespan=lifespan)
    app.state.scheduler = sched
    app.state.metrics = metrics

    @app.exception_handler(APIError)
    async def _api_error(request: Request, e: APIError) -> JSONResponse:
        return e.response()

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, e: RequestValidationError) -> JSONResponse:
        errs = e.errors()
        parts = [f"{_loc(tuple(x.get('loc', ())))}: {x.get('msg', 'invalid')}" for x in errs]
        first = errs[0] if errs else {}
        detail = [{"loc": [str(p) for p in x.get("loc", ())], "msg": str(x.get("msg", "")), "type": x.get("type")}
                  for x in errs]
        body = {"error": {"message": "invalid request: " + "; ".join(parts), "type": "invalid_request_error",
                          "code": "validation_error", "param": _loc(tuple(first.get("loc", ()))), "details": detail}}
        return JSONResponse(body, status_code=422)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, e: Exception) -> JSONResponse:
        return APIError(500, f"internal error: {type(e).__name__}", "server_error", "internal_error").response()

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": model_name, "queue_depth": sched.depth, "running": sched.running,
                "max_queue": max_queue, "max_batch": max_batch,
                "batching": (f"continuous (up to {max_batch} requests per forward)" if batcher is not None
                             else "none (one request per forward)")}

    @app.get("/metrics", dependencies=[Depends(check_key)])
    async def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(sched.depth, sched.running),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/v1/models", dependencies=[Depends(check_key)])
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": created,
                                            "owned_by": "agentkit"}]}

    @app.post("/v1/chat/completions", dependencies=[Depends(check_key)])
    async def chat(req: ChatRequest, request: Request) -> Any:
        t0 = time.perf_counter()
        mode = "?"
        try:
            p = await asyncio.to_thread(plan, req)
            mode = p.config.mode
            if req.stream:
                return await stream(req, p, request, t0)
            try:
                job = sched.submit(work(p, None))
            except QueueFull as e:
                metrics.reject("queue_full")
                raise APIError(429, str(e), "rate_limit_error", "queue_full",
                               headers={"Retry-After": str(e.retry_after_s)}) from None
            try:
                res = await sched.wait(job, request_timeout_s, request.is_disconnected)
            except ClientDisconnected:
                metrics.reject("disconnect")
                metrics.request(mode, 499, time.perf_counter() - t0)
                return JSONResponse({"error": {"message": "client disconnected", "type": "cancelled",
                                               "code": "client_disconnected", "param": None}}, status_code=499)
            except asyncio.CancelledError:
                metrics.reject("disconnect")
                raise
            except BaseException as e:  # noqa: BLE001 -- mapped to an HTTP error
                raise map_engine_error(e) from None
            message, finish = result_parts(p, res)
            body = {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()),
                    "model": model_name, "system_fingerprint": None,
                    "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                    "usage": usage(res), "agentkit_stats": stats(res, job)}
            metrics.request(mode, 200, time.perf_counter() - t0)
            return JSONResponse(body)
        except APIError as e:
            metrics.request(mode, e.status, time.perf_counter() - t0)
            raise

    async def stream(req: ChatRequest, p: _Plan, request: Request, t0: float) -> StreamingResponse:
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        tok = engine.tokenizer
        steps = [0]

        def sink(tokens: list[int], frozen: list[bool]) -> None:
            steps[0] += 1
            with engine_lock:  # the tokenizer is shared with concurrent requests
                draft = tok.decode(tokens, skip_special_tokens=False)
            ev = {"step": steps[0], "draft": draft,
                  "frozen": sum(frozen), "length": len(frozen)}
            loop.call_soon_threadsafe(events.put_nowait, ev)

        want_canvas = p.canvas and p.config.mode != "ar"
        try:
            job = sched.submit(work(p, sink if want_canvas else None))
        except QueueFull as e:
            metrics.reject("queue_full")
            raise APIError(429, str(e), "rate_limit_error", "queue_full",
                           headers={"Retry-After": str(e.retry_after_s)}) from None
        cid, created_at = "chatcmpl-" + uuid.uuid4().hex, int(time.time())

        def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None,
                                                 "finish_reason": finish}]
            return {"id": cid, "object": "chat.completion.chunk", "created": created_at, "model": model_name,
                    "system_fingerprint": None, "choices": choices, **extra}

        def sse(obj: dict[str, Any], event: str | None = None) -> str:
            head = f"event: {event}\n" if event else ""
            return f"{head}data: {json.dumps(obj)}\n\n"

        async def gen() -> AsyncIterator[str]:
            status = 200
            try:
                yield sse(chunk({"role": "assistant", "content": ""}))
                waiter = asyncio.ensure_future(sched.wait(job, request_timeout_s))
                try:
                    while not waiter.done() or not events.empty():
                        getter = asyncio.ensure_future(events.get())
                        done, _ = await asyncio.wait({waiter, getter}, return_when=asyncio.FIRST_COMPLETED)
                        if getter in done:
                            yield sse(chunk(None, agentkit_canvas=getter.result()), "agentkit.canvas")
                        else:
                            getter.cancel()
                finally:
                    if not waiter.done():
                        waiter.cancel()
                try:
                    res = waiter.result()
                except BaseException as e:  # noqa: BLE001 -- reported in-stream, the status line is sent
                    err = map_engine_error(e)
                    status = err.status
                    yield sse({"error": {"message": err.message, "type": err.type, "code": err.code,
                                         "param": err.param}})
                    yield "data: [DONE]\n\n"
                    return
                message, finish = result_parts(p, res)
                if message.get("tool_calls"):
                    tc = message["tool_calls"][0]
                    yield sse(chunk({"tool_calls": [{"index": 0, **tc}]}))
                elif message["content"]:
                    yield sse(chunk({"content": message["content"]}))
                yield sse(chunk({}, finish, usage=usage(res), agentkit_stats=stats(res, job)))
                yield "data: [DONE]\n\n"
            except asyncio.CancelledError:
                status = 499
                metrics.reject("disconnect")
                sched.cancel(job)
                raise
            finally:
                if not job.future.done():
                    sched.cancel(job)
                metrics.request(p.config.mode, status, time.perf_counter() - t0)

        return StreamingResponse(gen(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    return app
