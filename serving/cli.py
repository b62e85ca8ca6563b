"""Running the server: :func:`run` loads the engine and serves the app on uvicorn.

The one ``serve`` command is ``agentkit serve`` (typer, ``agentkit/cli.py``; ``python -m agentkit.cli serve`` from a
checkout), which calls :func:`run`.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path

from agentkit.config import EngineConfig
from agentkit.errors import InvalidRequestError

from .config import ServerConfig
from .connections import loopback_hosts

API_KEY_ENV = "AGENTKIT_API_KEY"


def read_api_key(api_key: str | None, api_key_file: Path | None) -> str | None:
    """The server's API key: ``--api-key``, else the first line of ``--api-key-file``, else the ``AGENTKIT_API_KEY``
    environment variable, else None (no key). The file and the variable keep the key out of the process list, where
    ``--api-key`` shows it. Both options given, or an empty or unreadable file, is an error."""
    if api_key is not None and api_key_file is not None:
        raise InvalidRequestError("pass --api-key or --api-key-file, not both")
    if api_key_file is not None:
        try:
            key = Path(api_key_file).read_text().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise InvalidRequestError(f"cannot read --api-key-file {str(api_key_file)!r}: {e}") from None
        if not key or "\n" in key:
            raise InvalidRequestError(f"--api-key-file {str(api_key_file)!r} must hold the key on one line")
        return key
    if api_key is None and os.environ.get(API_KEY_ENV, "").strip():
        return os.environ[API_KEY_ENV].strip()
    return api_key


def with_host_default(server_config: ServerConfig, host: str) -> ServerConfig:
    """``server_config`` with ``allowed_hosts`` defaulted to :func:`loopback_hosts` of the bind address."""
    if server_config.allowed_hosts is not None:
        return server_config
    return dataclasses.replace(server_config, allowed_hosts=loopback_hosts(host))


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
    """Load the model and serve it until interrupted (loopback by default); the address is checked first. On a
    loopback bind, requests must name ``localhost`` or the bind address as their Host unless ``server_config``
    says which hosts (:func:`with_host_default`)."""
    import uvicorn

    check_address(host, port)  # agentkit serve checked it already; a caller of run() gets the same error
    server_config = with_host_default(server_config, host)

    from agentkit.engine.engine import Engine

    from .app import create_app
    from .connections import uvicorn_settings

    engine = Engine(engine_config)
    uvicorn.run(create_app(engine, server_config), host=host, port=port, log_level=log_level,
                **uvicorn_settings(server_config))
