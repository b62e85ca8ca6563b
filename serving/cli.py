"""``agentkit serve``: the OpenAI-compatible server on uvicorn.

``serve`` is registered as a typer command in ``agentkit/cli.py``; ``python -m serving.cli`` runs it standalone
(argparse), which is what ``evals/load_server.py --spawn`` uses.
"""

from __future__ import annotations

import argparse


def serve(model: str | None = None, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None, *,
          max_queue: int = 64, request_timeout_s: float = 120.0, default_mode: str | None = None,
          max_batch: int = 8, threads: int | None = None, log_level: str = "info") -> None:
    """Load the model (``None``: the embedded default) and serve it until interrupted. Binds to loopback by
    default; with ``api_key`` every request except ``GET /health`` needs ``Authorization: Bearer <key>``.
    Up to ``max_batch`` requests decode at once, their model forwards batched; ``max_queue`` more may wait."""
    import uvicorn

    from agentkit.config import EngineConfig
    from agentkit.engine.engine import Engine

    from .app import create_app

    engine = Engine(EngineConfig(model=model, threads=threads))
    app = create_app(engine, api_key=api_key, max_queue=max_queue, request_timeout_s=request_timeout_s,
                     default_mode=default_mode, max_batch=max_batch)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m serving.cli", description=serve.__doc__)
    ap.add_argument("--model", default=None, help="local Hugging Face model directory (default: embedded SmolLM2)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--max-queue", type=int, default=64, help="requests that may wait for a slot (then 429)")
    ap.add_argument("--max-batch", type=int, default=8,
                    help="requests decoded concurrently, their model forwards batched (continuous batching)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    ap.add_argument("--request-timeout-s", type=float, default=120.0)
    ap.add_argument("--default-mode", choices=["ar", "diffusion", "verify"], default=None)
    ap.add_argument("--log-level", default="info")
    a = ap.parse_args(argv)
    serve(a.model, a.host, a.port, a.api_key, max_queue=a.max_queue, request_timeout_s=a.request_timeout_s,
          default_mode=a.default_mode, max_batch=a.max_batch, threads=a.threads, log_level=a.log_level)


if __name__ == "__main__":
    main()
