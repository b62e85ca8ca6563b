"""Running the server: :func:`run` loads the engine and serves the app on uvicorn.

The one ``serve`` command is ``agentkit serve`` (typer, ``agentkit/cli.py``), which calls :func:`run`.
``python -m serving.cli ARGS`` is a thin alias for ``agentkit serve ARGS`` (``evals/load_server.py --spawn`` uses it).
"""

from __future__ import annotations

import sys

from agentkit.config import EngineConfig

from .config import ServerConfig


def run(engine_config: EngineConfig, server_config: ServerConfig, *, host: str = "127.0.0.1", port: int = 8000,
        log_level: str = "info") -> None:
    """Load the model and serve it until interrupted (loopback by default)."""
    import uvicorn

    from agentkit.engine.engine import Engine

    from .app import create_app

    engine = Engine(engine_config)
    uvicorn.run(create_app(engine, server_config), host=host, port=port, log_level=log_level)


def main(argv: list[str] | None = None) -> None:
    from agentkit.cli import app

    app(["serve", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
