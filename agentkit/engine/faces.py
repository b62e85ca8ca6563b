"""The faces of an engine that the server and the SDK use, as Protocols: what each part may rely on, checked with
``isinstance`` once, instead of attribute guesses at each use.

- :class:`EngineLike`: ``generate(prompt, config, *, template, raw, on_draft, batch, on_tokens, should_stop)``, typed;
  every engine, and every test double the server or the SDK is given (a double may ignore a keyword it has no use
  for, but takes them all). ``batches``: whether ``batch=`` seats it at a
  :class:`~agentkit.engine.batch.Batcher` (concurrent requests' forwards as one); False: one request at a time.
- :class:`Tokenizing`: the model's name, context and tokenizer: ``name``, ``context_length`` (None: unknown),
  ``longest_token_chars``, ``encode_prompt`` and the ``lock`` that guards the tokenizer. The server bounds a
  prompt's length before it queues and counts its tokens with them.
- :class:`Constraining`: ``vocab`` and ``constraint(template)``: the server builds a template's token automaton
  outside the engine's lock.
- :class:`Scoring`: a ``backbone`` (:class:`BackboneLike`) to run the base weights directly (and a tokenizer):
  log-probabilities (``logprobs``) and the tool decision by scores (:mod:`agentkit.decide`).
- :class:`BackboneLike`: what those passes use of a backbone: ``new_cache()``, ``encode(ids, cache, rows=...)``
  (the rows' logits) and ``crop(cache, n)``. The torch ``Backbone``, DiffusionGemma's and llama.cpp's have it.

:class:`agentkit.engine.Engine` has all four; a test double may have only the first, and a part that needs another
face says so when it is missing (``logprobs`` is refused, the decision is decoded, nothing is prebuilt).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..config import DecodeConfig
    from ..constrain.nodes import Template
    from .batch import BatchSeat
    from .engine import Prompt
    from .stats import GenerationResult

__all__ = ["BackboneLike", "Constraining", "EngineLike", "Scoring", "Tokenizing", "Unmerging"]


@runtime_checkable
class EngineLike(Protocol):
    batches: bool

    def generate(self, prompt: Prompt, config: DecodeConfig | None = None, *, template: Template | None = None,
                 raw: bool = False, on_draft: Callable[[list[int], list[bool]], None] | None = None,
                 batch: BatchSeat | None = None, on_tokens: Callable[[list[int]], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> GenerationResult: ...


@runtime_checkable
class Tokenizing(Protocol):
    name: str
    context_length: int | None
    longest_token_chars: int
    lock: Any

    def encode_prompt(self, prompt: Any, *, raw: bool = False) -> list[int]: ...


@runtime_checkable
class Constraining(Protocol):
    vocab: Any

    def constraint(self, template: Any, **kw: Any) -> Any: ...


@runtime_checkable
class Scoring(Protocol):
    backbone: Any
    tokenizer: Any
    lock: Any

    def encode_prompt(self, prompt: Any, *, raw: bool = False) -> list[int]: ...


@runtime_checkable
class Unmerging(Protocol):
    """An engine that can decode with its weights as loaded beside a LoRA merged into them
    (``DecodeConfig(weights="loaded")``: the SDK's and the server's plain replies)."""

    def can_load_unmerged(self) -> bool: ...


def plain_weights(engine: object) -> str | None:
    """The ``DecodeConfig.weights`` of a plain reply (no tool result to carry) on ``engine``: ``"loaded"`` where it
    merged a LoRA it can decode without (the loop adapter was trained on steps that carry a result:
    docs/agent_loop.md, "Plain replies"), else None (its own weights)."""
    return "loaded" if isinstance(engine, Unmerging) and engine.can_load_unmerged() else None


@runtime_checkable
class BackboneLike(Protocol):
    def new_cache(self) -> Any: ...

    def encode(self, ids: Any, cache: Any, rows: Any = ..., **kw: Any) -> Any: ...

    def crop(self, cache: Any, n: int) -> None: ...
