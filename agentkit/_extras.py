"""Optional dependencies, grouped as pyproject's extras: a clear error naming the extra when one is missing.

The core install (``pip install agentkit``) is what the SDK, the engine and the schema compiler need; the rest is
in extras: ``server`` (fastapi, uvicorn, prometheus-client: ``agentkit serve``, ``agentkit.serving``), ``evals``
(matplotlib: eval plots), ``repair`` (pytest, coverage: the repair loop), ``llama``, ``ray``, ``otel``, ``peers``. ``dev`` pulls all that the tests need.
"""

from __future__ import annotations

import importlib.util

from .errors import MissingExtraError

# extra -> the modules it provides (import names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("fastapi", "uvicorn", "prometheus_client"),
    "evals": ("matplotlib",),
    "repair": ("pytest", "coverage"),
}


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported."""
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def require(extra: str, what: str) -> None:
    """``MissingExtraError`` naming ``extra`` when any of its modules is missing; ``what`` is the feature."""
    gone = missing(extra)
    if gone:
        raise MissingExtraError(f"{what} needs {', '.join(gone)}, not installed: pip install 'agentkit[{extra}]'",
                                extra)
