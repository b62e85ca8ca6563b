"""Running the server: :func:`run` loads the engine and serves the app on uvicorn.

The one ``serve`` command is ``agentkit serve`` (typer, ``agentkit/cli.py``; ``python -m agentkit.cli serve`` from a
checkout), which calls :func:`run`.
"""

from __future__ import annotations

import socket

from agentkit.config import EngineConfig
from agentkit.errors import InvalidRequestError

from .config import ServerConfig


def check_address(host: str, port: int) -> None:
    """A clear error before the model loads (tens of seconds) when ``port`` is not a port number or ``host:port``
    cannot be bound (in use, or no such address here), instead of uvicorn's after it."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise InvalidRequestError(f"port must be an integer in 1..65535, got {port!r}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise InvalidRequestError(f"host {host!r} cannot be resolved: {e.strerror}") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a TIME_WAIT port is free
        try:
            s.bind(addr)
        except OSError as e:
            raise InvalidRequestError(f"cannot serve on {host}:{port}: {e.strerror} (another server on that port? "
                                      "pass --port)") from None


def run(engine_config: EngineConfig, server_config: ServerConfig, *, host: str = "127.0.0.1", port: int = 8000,
        log_level: str = "info") -> None:
    """Load the model and serve it until interrupted (loopback by default); the address is checked first."""
    import uvicorn

    check_address(host, port)  # agentkit serve checked it already; a caller of run() gets the same error

    from agentkit.engine.engine import Engine

    from .app import create_app
    from .connections import uvicorn_settings

    engine = Engine(engine_config)
    uvicorn.run(create_app(engine, server_config), host=host, port=port, log_level=log_level,
                **uvicorn_settings(server_config))
