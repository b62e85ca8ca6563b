"""The decoding engine."""

from functools import lru_cache


@lru_cache(maxsize=4)
def default_engine(model: str | None = None, prefix_cache: bool = True, lora: str | None = None):
    """A process-wide ``Engine`` for ``model`` (None: the embedded default model), loaded on first use;
    ``prefix_cache``: ``EngineConfig.prefix_cache`` (on by default: an agent's steps resend the conversation);
    ``lora``: ``EngineConfig.lora``."""
    from ..config import EngineConfig
    from .engine import Engine

    return Engine(EngineConfig(model=model, prefix_cache=prefix_cache, lora=lora))


def tiny_engine(seed: int = 0, **kw):
    """An ``Engine`` over a random 2-layer Llama (``agentkit.models.tiny.tiny_llama``): SDK, serving and Ray tests."""
    from ..models.tiny import tiny_llama
    from .engine import Engine

    return Engine.from_loaded(tiny_llama(seed, **kw))
