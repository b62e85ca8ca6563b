"""The decoding engine."""

from functools import lru_cache


@lru_cache(maxsize=4)
def default_engine(model: str | None = None):
    """A process-wide ``Engine`` for ``model`` (None: the embedded default model), loaded on first use."""
    from ..config import EngineConfig
    from .engine import Engine

    return Engine(EngineConfig(model=model))
