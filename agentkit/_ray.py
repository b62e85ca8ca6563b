"""Ray, the optional extra (``pip install 'agentkit[ray]'``): import it with a clear error, connect to a cluster
or start a local one. Used by ``agentkit serve --ray`` (``serving/ray_serve.py``) and ``agentkit eval --ray``
(``agentkit/evals/distributed.py``)."""

from __future__ import annotations

import os
from typing import Any

from .errors import UserError

EXTRA_HINT = "pip install 'agentkit[ray]'"


def require_ray(what: str = "--ray") -> Any:
    """The ``ray`` module, or a :class:`UserError` naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise UserError(f"{what} needs Ray (not installed): {EXTRA_HINT}") from None
    return ray


def connect(address: str | None = "local", *, num_cpus: float | None = None,
            runtime_env: dict[str, Any] | None = None) -> bool:
    """Join a Ray cluster, or start a local one; True if this call started (and so should shut down) Ray.

    ``address``: ``"local"`` starts a Ray instance on this machine bound to 127.0.0.1 (``num_cpus`` CPUs, default
    all of them), no dashboard; ``None`` is Ray's own default (``RAY_ADDRESS``, else a cluster running on this node, else a
    new local one); ``"auto"`` joins the cluster running on this node; anything else is a cluster address (``HOST:6379``, ``ray://HOST:10001``). A Ray already
    initialised in this process is used as it is."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if runtime_env:
        kw["runtime_env"] = runtime_env
    if address == "local":
        # Ray starts worker processes at nice 15 (background work on a shared node); on a local instance the
        # workers *are* the job: on a busy machine nice 15 gave them a fraction of the CPU the local run gets
        os.environ.setdefault("RAY_worker_niceness", "0")
        ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, _node_ip_address="127.0.0.1", **kw)
    else:
        ray.init(address=address, **kw)
    return True
