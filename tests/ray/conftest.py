"""One local Ray instance for the tests in this folder: 127.0.0.1, 2 CPUs, no dashboard; shut down at the end."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="package")
def ray_local():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    # Serve's HTTP proxy answers 503 + Retry-After for a replica that died (see serving/ray_serve.py)
    os.environ.setdefault("RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", "agentkit.serving.ray_serve:proxy_middlewares")
    os.environ.setdefault("RAY_worker_niceness", "0")  # as agentkit._ray.connect does for a local instance
    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    yield ray
    from ray import serve

    serve.shutdown()  # a no-op when Serve never started
    ray.shutdown()
