"""``agentkit serve --ray``: the same FastAPI app (``serving.app.create_app``) as a Ray Serve deployment.

What a deployment is
--------------------
- **Replicas.** ``--replicas N`` fixed replicas, or ``--autoscale MIN,MAX``: Serve's autoscaling on ongoing
  requests, aiming at ``max_batch`` requests per replica (the batch one engine decodes at once). Each replica is a
  Ray actor that loads **one engine** in its constructor and serves the unchanged app on it, so continuous
  batching, the bounded queue (429 with ``Retry-After``), the request timeout (504), disconnect handling and the
  API key all behave as on one process: Serve sends a replica up to ``max_batch + max_queue + 8`` requests at
  once (``max_ongoing_requests``), so the app's own queue fills -- and answers 429 -- before Serve queues anything.
- **Ingress.** ``@serve.ingress()`` with ``__serve_build_asgi_app__``: the app is built inside the replica, after the
  engine is loaded. Every response carries ``x-agentkit-replica`` (the replica's id), and every sample in
  ``/metrics`` gets a ``replica`` label (a scrape through Serve's proxy reaches one replica at a time).
- **Health.** Serve's periodic ``check_health`` calls the app's own ``GET /health`` in process; a replica that
  fails it (or whose process dies) is replaced by Serve.
- **Graceful shutdown.** When a replica is stopped (scale-down, redeploy, ``serve.shutdown``, Ctrl-C on
  ``agentkit serve --ray``) Serve stops routing to it and waits up to ``graceful_shutdown_timeout_s`` (default: the
  request timeout + 5 s) for its in-flight requests to finish before the app's shutdown closes the scheduler.
- **Replica loss.** A request in flight on a replica whose process dies gets no response from the replica; Serve's
  proxy would answer a bare 500. :func:`proxy_middlewares` (installed on the proxy through
  ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=agentkit.serving.ray_serve:proxy_middlewares``, which :func:`run` sets for a
  local Ray) turns every proxy-made 5xx (no ``x-agentkit-replica`` header: the app did not answer) into a 503 in
  the server's error body with ``Retry-After``. The proxy's own timeout (``request_timeout_s + 10``) is a backstop
  behind the app's 504, so no request hangs.

Not done here: request-level retries after a replica dies (the client retries on 503), model-aware routing (Serve
routes by queue length, not by prefix-cache contents), and GPUs (``num_gpus`` per replica is one option away but is
untested here).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from ray import serve

from agentkit.errors import UserError

from .config import ServerConfig

REPLICA_HEADER = "x-agentkit-replica"
PROXY_CALLBACK_ENV = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
PROXY_CALLBACK = "agentkit.serving.ray_serve:proxy_middlewares"


@dataclass
class RayServeConfig:
    """How the app is deployed. ``address``: ``"local"`` (a Ray instance on this machine, 127.0.0.1) or a cluster
    address (``auto``, ``HOST:6379``, ``ray://HOST:10001``); a Ray already initialised in this process is used.
    ``autoscale``: ``(min, max)`` replicas instead of the fixed ``replicas``. ``engine_factory``:
    ``"module:function"`` returning an engine instead of loading ``model`` (tests: the tiny random model)."""

    replicas: int = 1
    autoscale: tuple[int, int] | None = None
    address: str | None = "local"
    host: str = "127.0.0.1"
    port: int = 8000
    model: str | None = None
    threads: int | None = None
    # EngineConfig.dtype / .backend / .pass_width / .attention / .q4_steps / .prepack / .row_exact / .prefix_cache
    # / .prefix_cache_bytes / .prompt_chunk / .lora of each replica (engine_fields: the names both declare)
    dtype: str = "auto"
    backend: str = "auto"
    pass_width: int | None = None
    attention: str = "auto"
    q4_steps: str = "auto"
    prepack: str = "auto"
    row_exact: str = "auto"
    prefix_cache: bool = True
    prefix_cache_bytes: int | None = None
    prompt_chunk: int = 128
    lora: str | None = None
    engine_factory: str | None = None
    num_cpus_per_replica: float = 1.0
    graceful_shutdown_timeout_s: float | None = None  # None: the request timeout + 5 s
    health_check_period_s: float = 10.0
    health_check_timeout_s: float = 30.0
    runtime_env: dict[str, Any] | None = None
    local_num_cpus: float | None = None  # CPUs of a local Ray instance (default: every core)
    app_name: str = "agentkit"
    extra: dict[str, Any] = field(default_factory=dict)  # further Serve deployment options, passed as they are

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise UserError(f"--replicas must be >= 1, got {self.replicas}")
        if self.autoscale is not None:
            lo, hi = self.autoscale
            if not 0 <= lo <= hi or hi < 1:
                raise UserError(f"--autoscale MIN,MAX needs 0 <= MIN <= MAX and MAX >= 1, got {lo},{hi}")
        if self.num_cpus_per_replica < 0:
            raise UserError(f"num_cpus_per_replica must be >= 0, got {self.num_cpus_per_replica}")
        if self.engine_factory is not None and ":" not in self.engine_factory:
            raise UserError(f"engine_factory must be 'module:function', got {self.engine_factory!r}")
        self.engine_config()  # a bad engine option is an error here, not in every replica

    def engine_config(self):
        """The :class:`~agentkit.config.EngineConfig` every replica loads (unless ``engine_factory``)."""
        from agentkit.config import EngineConfig

        return EngineConfig(**{k: getattr(self, k) for k in engine_fields(self)})


def engine_fields(config: Any) -> list[str]:
    """The names of ``config``'s fields that are ``EngineConfig``'s too (what a replica's engine is built from)."""
    import dataclasses

    from agentkit.config import EngineConfig

    engine = {f.name for f in dataclasses.fields(EngineConfig)}
    return [f.name for f in dataclasses.fields(config) if f.name in engine]


def parse_autoscale(text: str) -> tuple[int, int]:
    """``"MIN,MAX"`` -> ``(MIN, MAX)``, or a :class:`UserError` naming the option."""
    parts = text.split(",")
    try:
        lo, hi = (int(p) for p in parts)
    except ValueError:
        raise UserError(f"--autoscale expects MIN,MAX (two integers), got {text!r}") from None
    return lo, hi


# -- the replica's ASGI middleware ---------------------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?(\s.*)$")


def label_exposition(text: str, replica: str) -> str:
    """Prometheus text with ``replica="<id>"`` added to every sample's labels (comments unchanged)."""
    value = replica.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    out = []
    for line in text.splitlines():
        m = None if not line or line.startswith("#") else _SAMPLE.match(line)
        if m is None:
            out.append(line)
            continue
        name, _, labels, rest = m.groups()
        inner = f'replica="{value}"' + (f",{labels}" if labels else "")
        out.append(f"{name}{{{inner}}}{rest}")
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


class ReplicaMiddleware:
    """Pure ASGI: the replica id in a response header; ``/metrics`` samples labelled with it."""

    def __init__(self, app: Any, replica: str) -> None:
        self.app, self.replica = app, replica

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        header = (REPLICA_HEADER.encode(), self.replica.encode())
        if scope.get("path") != "/metrics":
            async def tagged(msg: dict) -> None:
                if msg["type"] == "http.response.start":
                    msg = {**msg, "headers": [*msg.get("headers", []), header]}
                await send(msg)

            return await self.app(scope, receive, tagged)
        start: dict = {}
        body = bytearray()

        async def buffered(msg: dict) -> None:
            if msg["type"] == "http.response.start":
                start.update(msg)
                return
            body.extend(msg.get("body", b""))
            if msg.get("more_body"):
                return
            data = bytes(body)
            if start.get("status") == 200:
                data = label_exposition(data.decode(), self.replica).encode()
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            headers += [(b"content-length", str(len(data)).encode()), header]
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": data})

        await self.app(scope, receive, buffered)


# -- the proxy's ASGI middleware -----------------------------------------------------------------------------------


class ReplicaLossMiddleware:
    """On Serve's HTTP proxy: a 5xx the proxy made itself (the replica died or none is available: no
    ``x-agentkit-replica`` header), its 408 (the backstop timeout: a request routed to a replica that died without
    Serve noticing gets no answer, not even the app's own 504) -- or no response at all -- becomes a 503 with
    ``Retry-After`` and the server's error body. Responses from a replica pass unchanged."""

    def __init__(self, app: Any, retry_after_s: int = 1) -> None:
        self.app, self.retry_after_s = app, retry_after_s

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        state = {"started": False, "swallow": False}

        async def guarded(msg: dict) -> None:
            if msg["type"] == "http.response.start":
                names = {k.lower() for k, _ in msg.get("headers", [])}
                proxy_made = REPLICA_HEADER.encode() not in names
                if proxy_made and (msg["status"] >= 500 or msg["status"] == 408):  # 408: the proxy's backstop timeout
                    state["swallow"] = True
                    return
                state["started"] = True
            if state["swallow"]:
                return
            await send(msg)

        try:
            await self.app(scope, receive, guarded)
        except Exception:  # answered below (a 503), unless the replica's response had started
            if state["started"]:
                raise
        if not state["started"]:
            await self._unavailable(send)

    async def _unavailable(self, send: Any) -> None:
        body = json.dumps({"error": {
            "message": "the replica serving this request is unavailable (it stopped or is being replaced); retry",
            "type": "server_error", "code": "replica_unavailable", "param": None}}).encode()
        await send({"type": "http.response.start", "status": 503, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(self.retry_after_s).encode())]})
        await send({"type": "http.response.body", "body": body})


def proxy_middlewares() -> list:
    """The HTTP proxy callback (``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``): Starlette middlewares for the proxy."""
    from starlette.middleware import Middleware

    return [Middleware(ReplicaLossMiddleware)]


# -- the deployment ------------------------------------------------------------------------------------------------


def _build_engine(engine: Any, engine_factory: str | None) -> Any:
    if engine_factory:
        import importlib

        module, _, name = engine_factory.partition(":")
        return getattr(importlib.import_module(module), name)()
    from agentkit.engine.engine import Engine

    return Engine(engine)


@serve.ingress()
class AgentkitServer:
    """One replica: one engine, the unchanged app on it (see the module docstring)."""

    def __init__(self, server: ServerConfig, engine: Any, engine_factory: str | None = None) -> None:
        if engine.threads:  # an EngineConfig
            import torch

            torch.set_num_threads(engine.threads)
        self.server, self.engine = server, _build_engine(engine, engine_factory)
        ctx = serve.get_replica_context()
        self.replica = ctx.replica_id.unique_id if ctx is not None else f"pid-{os.getpid()}"

    def __serve_build_asgi_app__(self) -> Any:
        from .app import create_app

        app = create_app(self.engine, self.server)
        app.add_middleware(ReplicaMiddleware, replica=self.replica)
        return app  # Serve keeps it as ``self.app``

    async def check_health(self) -> None:
        """Serve's health check: the app's ``GET /health``, in process."""
        import httpx

        transport = httpx.ASGITransport(app=self.app)
        base = f"http://{health_host(self.server.allowed_hosts)}"
        async with httpx.AsyncClient(transport=transport, base_url=base) as client:
            r = await asyncio.wait_for(client.get("/health"), timeout=10)
        if r.status_code != 200:
            raise RuntimeError(f"/health answered {r.status_code}: {r.text[:200]}")


def health_host(allowed: tuple[str, ...] | None) -> str:
    """A ``Host`` the app serves, for the replica's in-process health check: the first of ``allowed_hosts`` (an
    IPv6 address in brackets, a wildcard's own name), any name when the server allows every host."""
    pattern = (allowed or ("*",))[0].strip("[]")
    if pattern == "*":
        return "replica"
    if pattern.startswith("*."):
        return "replica" + pattern[1:]
    return f"[{pattern}]" if ":" in pattern else pattern


def deployment_options(server: ServerConfig, cfg: RayServeConfig) -> dict[str, Any]:
    """Serve deployment options for ``cfg`` (replicas or autoscaling, per-replica concurrency, health, drain)."""
    opts: dict[str, Any] = {
        "name": "AgentkitServer",
        "max_ongoing_requests": server.max_batch + server.max_queue + 8,
        "ray_actor_options": {"num_cpus": cfg.num_cpus_per_replica},
        "health_check_period_s": cfg.health_check_period_s,
        "health_check_timeout_s": cfg.health_check_timeout_s,
        "graceful_shutdown_wait_loop_s": 1.0,
        "graceful_shutdown_timeout_s": cfg.graceful_shutdown_timeout_s or server.request_timeout_s + 5,
    }
    if cfg.autoscale is not None:
        lo, hi = cfg.autoscale
        opts["autoscaling_config"] = {"min_replicas": lo, "initial_replicas": max(lo, 1), "max_replicas": hi,
                                      "target_ongoing_requests": server.max_batch}
    else:
        opts["num_replicas"] = cfg.replicas
    return {**opts, **cfg.extra}


def application(server: ServerConfig, cfg: RayServeConfig) -> Any:
    """The bound Serve application (``serve.run`` it). Only the engine's settings are the replicas' arguments, so
    running it again with other replica counts rescales without restarting the replicas."""
    dep = serve.deployment(AgentkitServer).options(**deployment_options(server, cfg))
    return dep.bind(server, cfg.engine_config(), cfg.engine_factory)


def app_builder(args: dict[str, Any]) -> Any:
    """Serve's application builder, for a Serve config file or KubeRay's RayService ``serveConfigV2``
    (``import_path: agentkit.serving.ray_serve:app_builder``). ``args``: ``ServerConfig`` fields (``max_batch``,
    ``max_queue``, ``request_timeout_s``, ``api_key``, ...) and ``RayServeConfig`` fields (``replicas``, ``autoscale``
    as ``"MIN,MAX"``, ``model``, ``threads``, ``num_cpus_per_replica``, ...); an unknown key is a ``UserError``."""
    import dataclasses

    server_keys = {f.name for f in dataclasses.fields(ServerConfig)}
    ray_keys = {f.name for f in dataclasses.fields(RayServeConfig)} - {"extra", "runtime_env"}
    unknown = set(args) - server_keys - ray_keys
    if unknown:
        raise UserError(f"unknown application args {sorted(unknown)}; known: {sorted(server_keys | ray_keys)}")
    kw = {k: v for k, v in args.items() if k in ray_keys}
    if isinstance(kw.get("autoscale"), str):
        kw["autoscale"] = parse_autoscale(kw["autoscale"])
    return application(ServerConfig(**{k: v for k, v in args.items() if k in server_keys}), RayServeConfig(**kw))


def start(server: ServerConfig, cfg: RayServeConfig) -> bool:
    """Connect to (or start) Ray, start Serve's HTTP proxy on ``cfg.host:cfg.port`` and deploy; returns True if this
    call started Ray (the caller shuts it down). Returns once every replica is up."""
    from agentkit._ray import connect

    os.environ.setdefault(PROXY_CALLBACK_ENV, PROXY_CALLBACK)  # a local Ray's proxy inherits it
    started = connect(cfg.address, num_cpus=cfg.local_num_cpus, runtime_env=cfg.runtime_env)
    # the proxy is Serve's uvicorn: keep-alive is set here; the head timeout and the connection cap of agentkit's own
    # uvicorn (serving/connections.py) have no Serve option (docs/ray.md, "Connection limits under Ray")
    serve.start(http_options={"host": cfg.host, "port": cfg.port, "keep_alive_timeout_s": server.keep_alive_s,
                              "request_timeout_s": server.request_timeout_s + 10})
    serve.run(application(server, cfg), name=cfg.app_name, route_prefix="/", blocking=False)
    return started


def run(server: ServerConfig, cfg: RayServeConfig) -> None:
    """``agentkit serve --ray``: deploy, then serve until interrupted; on Ctrl-C or SIGTERM drain and shut down."""
    import ray

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    started = start(server, cfg)
    # a supervisor's stop (and a background job's only signal) drains too; set after start, whose ray.init puts
    # Ray's crash handler on SIGTERM (it printed a stack and aborted the driver)
    signal.signal(signal.SIGTERM, stop)
    how = (f"autoscaling {cfg.autoscale[0]}..{cfg.autoscale[1]} replicas" if cfg.autoscale
           else f"{cfg.replicas} replica(s)")
    print(f"agentkit on Ray Serve: http://{cfg.host}:{cfg.port} ({how}); Ctrl-C drains and stops", flush=True)
    try:
        while True:  # Serve runs in Ray's processes; the driver only waits
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        serve.delete(cfg.app_name)  # replicas drain their in-flight requests (graceful_shutdown_timeout_s)
        serve.shutdown()
        if started:
            ray.shutdown()
