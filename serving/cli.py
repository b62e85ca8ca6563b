"""Running the server: :func:`run` loads the engine and serves the app on uvicorn.

The one ``serve`` command is ``agentkit serve`` (typer, ``agentkit/cli.py``; ``python -m agentkit.cli serve`` from a
checkout), which calls :func:`run`.
"""

from __future__ import annotations

from agentkit.config import EngineConfig

from .config import ServerConfig


def run(engine_config: EngineConfig, server_config: ServerConfig, *, host: str = "127.0.0.1", port: int = 8000,
        log_level: str = "info") -> None:
    """Load the model and serve it until interrupted (loopback by default)."""
    import uvicorn

    from agentkit.engine.engine import Engine

    from .app import create_app
    from .connections import uvicorn_settings

    engine = Engine(engine_config)
    uvicorn.run(create_app(engine, server_config), host=host, port=port, log_level=log_level,
                **uvicorn_settings(server_config))
