"""One local Ray instance for the tests in this folder: 127.0.0.1, 2 CPUs, no dashboard; shut down at the end."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="package")
def ray_local():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    yield ray
    try:
        from ray import serve

        serve.shutdown()
    except Exception:  # noqa: BLE001 -- Serve may never have started
        pass
    ray.shutdown()
