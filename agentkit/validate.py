"""Checks at the engine's door: what a request must satisfy before any work is done for it.

``Engine.generate`` runs them before tokenizing, compiling or decoding, and the server calls the same ones (its
400s are these errors, mapped in ``serving/errors.py``), so an in-process caller and an HTTP client are refused the
same way:

- :func:`check_text`: text must be valid Unicode (a lone UTF-16 surrogate such as ``"\\ud800"`` cannot be encoded
  by any tokenizer);
- :func:`check_seed`: a seed must be an int that ``torch.Generator.manual_seed`` accepts;
- :func:`check_prompt_length`: the prompt and ``max_new_tokens`` must fit the model's context; checked first from
  the prompt's length in characters (a prompt of C characters holds at least C / longest-token-chars tokens, so a
  prompt that cannot fit is refused before it is tokenized), then from its token count.

Every error is a :class:`~agentkit.errors.InvalidRequestError` (or its subclass :class:`ContextLengthError`).
"""

from __future__ import annotations

import re
from typing import Any

from .errors import ContextLengthError, InvalidRequestError

__all__ = ["ContextLengthError", "check_prompt_bound", "check_prompt_length", "check_prompt_text", "check_seed",
           "check_text", "min_prompt_tokens", "prompt_texts", "surrogate_error"]

SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1  # what torch.Generator.manual_seed accepts
SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_error(text: str) -> str | None:
    """Why ``text`` is not valid Unicode (its first lone surrogate), or None."""
    m = SURROGATE.search(text)
    if m is None:
        return None
    return f"lone UTF-16 surrogate U+{ord(m.group()):04X} at index {m.start()} (text must be valid Unicode)"


def check_text(text: str, where: str = "prompt") -> None:
    """:class:`InvalidRequestError` naming ``where`` if ``text`` holds a lone surrogate."""
    why = surrogate_error(text)
    if why is not None:
        raise InvalidRequestError(f"{where}: {why}")


def check_seed(seed: Any, where: str = "seed") -> None:
    """:class:`InvalidRequestError` unless ``seed`` is None or an int in ``SEED_MIN..SEED_MAX``."""
    if seed is None:
        return
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise InvalidRequestError(f"{where} must be an integer or None, got {seed!r}")
    if not SEED_MIN <= seed <= SEED_MAX:
        raise InvalidRequestError(f"{where} must be in {SEED_MIN}..{SEED_MAX} (torch's generator seeds), got {seed}")


def prompt_texts(prompt: Any) -> list[tuple[str, str]]:
    """``(where, text)`` for each text of a prompt (a string, or chat messages' contents)."""
    if isinstance(prompt, str):
        return [("prompt", prompt)]
    if isinstance(prompt, list):
        return [(f"prompt[{i}].content", m["content"]) for i, m in enumerate(prompt)
                if isinstance(m, dict) and isinstance(m.get("content"), str)]
    return []


def check_prompt_text(prompt: Any) -> None:
    """Every text of ``prompt`` valid Unicode (:func:`check_text`)."""
    for where, text in prompt_texts(prompt):
        check_text(text, where)


def check_prompt_length(prompt_tokens: int, context: int | None, max_tokens: int, *, at_least: bool = False) -> None:
    """:class:`ContextLengthError` if ``prompt_tokens + max_tokens`` exceeds ``context`` (None: not known)."""
    if context is not None and prompt_tokens + max_tokens > context:
        raise ContextLengthError(prompt_tokens, max_tokens, context, at_least)


def min_prompt_tokens(prompt: Any, longest_token_chars: int | None) -> int:
    """A lower bound on ``prompt``'s token count from its characters (0 when the vocabulary is not known)."""
    if not longest_token_chars:
        return 0
    chars = sum(len(t) for _, t in prompt_texts(prompt))
    return -(-chars // longest_token_chars)


def check_prompt_bound(prompt: Any, longest_token_chars: int | None, context: int | None, max_tokens: int) -> None:
    """:class:`ContextLengthError` when ``prompt`` cannot fit ``context`` with ``max_tokens``, bounded from its
    characters (:func:`min_prompt_tokens`) before it is tokenized: ``Engine.check_request`` checks it at the door,
    and the server when it plans a request."""
    check_prompt_length(min_prompt_tokens(prompt, longest_token_chars), context, max_tokens, at_least=True)
