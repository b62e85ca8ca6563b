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
- :class:`BackboneLike`: what the decoder, the batcher and those passes use of a backbone: ``shift``,
  ``cost_curve``, ``new_cache(room)``, ``encode(ids, cache, rows)`` (a causal pass that writes the cache; the rows'
  logits), ``denoise(ids, cache, rows, bidirectional)`` (a canvas pass that leaves it as it was), ``crop(cache, n)``
  and ``batchable(cache)``. Every backbone has it: the torch ``Backbone`` and its fixed-shape kind, DiffusionGemma's,
  llama.cpp's, the self-speculative ones (``SyncBackbone``, ``SplitBackbone``) and the batcher's proxy.
  :class:`Batching` adds ``forward_many``: the passes of several requests as one forward, for a backbone whose
  ``batchable()`` says so.
- :class:`HiddenPasses`: a torch backbone's hidden-state pass and output head apart (``hidden_states``,
  ``head_logits``, ``attention_mask``), for a caller that builds its own mask (self-speculation's synced canvas).
- :class:`DecoderHooks`: the decoder's extension points for the loops outside it (DiffusionGemma's canvas, the
  self-speculative drafter) and the engine: the template's ``forced_tokens`` / ``allowed_tokens`` / ``advance`` /
  ``is_complete`` at a state, ``layout`` (one constrained walk of a canvas), ``finish_reason`` and ``logits`` (the
  logits that predict the next output position).

:class:`agentkit.engine.Engine` has all four; a test double may have only the first, and a part that needs another
face says so when it is missing (``logprobs`` is refused, the decision is decoded, nothing is prebuilt).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

    from ..config import DecodeConfig
    from ..constrain.nodes import Template
    from .backbone import Pass
    from .batch import BatchSeat
    from .decode import Block
    from .engine import Prompt
    from .stats import GenerationResult

__all__ = ["BackboneLike", "Batching", "Constraining", "DecoderHooks", "EngineLike", "HiddenPasses", "Scoring",
           "Tokenizing", "Unmerging"]


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
    """A backbone: the two passes block diffusion needs (``agentkit/engine/backbone.py``), on one request's cache.

    ``shift``: position ``i`` is predicted from the output at ``i - 1`` (an AR head), else from its own output.
    ``cost_curve``: ms per pass by its positions (sizes verify blocks and causal canvases). ``room`` in
    ``new_cache``: the new tokens a request may add after its prompt. ``rows``: indices into ``ids`` (negative
    from the end) where logits are wanted. ``batchable(cache)``: whether its passes on ``cache`` (None: any) can
    join a batched forward (:class:`Batching`)."""

    shift: bool
    cost_curve: Mapping[int, float]

    def new_cache(self, room: int = 0) -> Any: ...

    def encode(self, ids: Sequence[int], cache: Any, rows: Sequence[int] = (-1,)) -> torch.Tensor: ...

    def denoise(self, ids: Sequence[int], cache: Any, rows: Sequence[int], bidirectional: bool) -> torch.Tensor: ...

    def crop(self, cache: Any, length: int) -> None: ...

    def batchable(self, cache: Any = None) -> bool: ...


@runtime_checkable
class Batching(BackboneLike, Protocol):
    """A backbone that runs encode and denoise passes of several requests (caches of different lengths) as one
    forward; each request's logits at its rows, in order."""

    def forward_many(self, items: Sequence[Pass]) -> list[torch.Tensor]: ...


@runtime_checkable
class Branching(Protocol):
    """A backbone that scores several continuations of one cached prefix in one pass (a tree mask): each
    branch's tokens read the cache and their own branch's earlier tokens, at the positions after the cache; the
    cache is left as it was. Returns each branch's logits at every one of its positions."""

    def branches(self, branches: Sequence[Sequence[int]], cache: Any) -> list[torch.Tensor]: ...


@runtime_checkable
class HiddenPasses(Protocol):
    """A torch backbone's pass and head apart: ``hidden_states`` appends ``ids`` to the cache under ``mask`` (a 4-D
    boolean mask as :meth:`attention_mask` shapes it; None: causal) and returns their hidden states ``[T, H]``;
    ``head_logits`` reads the output head at ``rows`` of them."""

    device: torch.device

    def hidden_states(self, ids: Sequence[int], cache: Any, mask: torch.Tensor | None,
                      causal_rows: bool = False) -> torch.Tensor: ...

    def head_logits(self, hidden: torch.Tensor, rows: Sequence[int]) -> torch.Tensor: ...

    def attention_mask(self, allowed: torch.Tensor) -> torch.Tensor: ...


@runtime_checkable
class DecoderHooks(Protocol):
    """The decoder's extension points (``agentkit.engine.decode.Decoder``). ``state``: a template's automaton
    state (None: free text, where nothing is forced, everything allowed and nothing complete)."""

    logits: torch.Tensor | None

    def forced_tokens(self, state: Any) -> list[int]: ...

    def allowed_tokens(self, state: Any) -> torch.Tensor | None: ...

    def advance(self, state: Any, tok: int) -> Any: ...

    def is_complete(self, state: Any) -> bool: ...

    def layout(self, block: Block, pred: dict[int, torch.Tensor], fed: list[int] | None) -> bool: ...

    def finish_reason(self) -> str: ...
