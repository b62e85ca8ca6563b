"""Per-call model settings (pydantic-ai's ``ModelSettings`` names) merged into a ``DecodeConfig``."""

from __future__ import annotations

from dataclasses import replace
from typing import TypedDict

from ..config import GREEDY, MODES, DecodeConfig, Mode
from ..constrain.canonical import STYLES
from ..errors import UserError


class ModelSettings(TypedDict, total=False):
    """Settings for one call or for an agent's every call; a per-call value overrides the agent's.

    ``max_tokens``: output tokens per model request; ``mode``: every step in this decoding mode; ``json_style``:
    how structured steps write the pinned JSON punctuation, ``"compact"`` (the SDK's default: its prompts show
    compact JSON) or ``"spaced"`` (as ``json.dumps`` writes it), see :data:`agentkit.constrain.canonical.STYLES`;
    ``greedy``: how a greedy structured step picks a token, ``"byte"`` (the default: byte by byte, each byte's
    tokens weighed together) or ``"token"`` (a plain argmax), see ``DecodeConfig.greedy``; ``copy_bias``: a logit
    bonus for tokens that copy a span of the prompt inside a JSON string value (default 2; 0: off), see
    ``DecodeConfig.copy_bias``; ``copy_from``: what it copies from, ``"prompt"`` (all of it) or ``"user"`` (the last
    user message, the default); ``copy_numbers``: the same bonus for digits that go on along a number the source
    writes (default on), see ``DecodeConfig.copy_numbers``.
    """

    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    mode: Mode
    json_style: str
    greedy: str
    copy_bias: float
    copy_from: str
    copy_numbers: bool


KEYS = frozenset(ModelSettings.__annotations__)
RETRY_TEMPERATURE = 0.7  # an output retry samples (unless the settings already do), so it can differ


def merge(*settings: ModelSettings | None) -> ModelSettings:
    """Later settings override earlier ones; unknown keys are a ``UserError`` naming them."""
    out: ModelSettings = {}
    for s in settings:
        if not s:
            continue
        if not isinstance(s, dict):
            raise UserError(f"model_settings must be a dict, got {type(s).__name__}")
        unknown = sorted(set(s) - KEYS)
        if unknown:
            raise UserError(f"unknown model_settings key(s) {unknown}; known: {sorted(KEYS)}")
        if "mode" in s and s["mode"] not in MODES:
            raise UserError(f"model_settings mode must be one of {MODES}, got {s['mode']!r}")
        if "json_style" in s and s["json_style"] not in STYLES:
            raise UserError(f"model_settings json_style must be one of {sorted(STYLES)}, got {s['json_style']!r}")
        if "greedy" in s and s["greedy"] not in GREEDY:
            raise UserError(f"model_settings greedy must be 'byte' or 'token', got {s['greedy']!r}")
        out.update(s)  # type: ignore[typeddict-item]
    return out


def apply(config: DecodeConfig, settings: ModelSettings) -> DecodeConfig:
    """``config`` with the settings applied (validated by ``DecodeConfig``)."""
    names = {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_new_tokens", "seed": "seed",
             "mode": "mode", "greedy": "greedy", "copy_bias": "copy_bias", "copy_from": "copy_from",
             "copy_numbers": "copy_numbers"}  # json_style is the template's, not the decoder's (Agent._template)
    return replace(config, **{names[k]: v for k, v in settings.items() if k in names})


def for_retry(config: DecodeConfig, retry: int) -> DecodeConfig:
    """A retry's config: sampled at ``RETRY_TEMPERATURE`` at least, seeded per retry (reproducible, different);
    verify mode reproduces greedy AR, so a retry routed there samples in AR instead; a diffusion step's retry
    decodes in AR too (a canvas that garbled a value tends to garble it again: a second decode in the other
    distribution is the one that differs)."""
    temperature = max(config.temperature, RETRY_TEMPERATURE)
    seed = (config.seed or 0) + retry
    mode = "ar" if config.mode in ("verify", "diffusion") else config.mode
    return replace(config, temperature=temperature, seed=seed, mode=mode)
