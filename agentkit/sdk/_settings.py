"""Per-call model settings (pydantic-ai's ``ModelSettings`` names) merged into a ``DecodeConfig``."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, TypedDict

from .. import settings as table
from ..config import DecodeConfig, Mode
from ..errors import UserError


class ModelSettings(TypedDict, total=False):
    """Settings for one call or for an agent's every call; a per-call value overrides the agent's.

    ``max_tokens``: output tokens per model request; ``mode``: every step in this decoding mode; ``json_style``:
    how structured steps write the pinned JSON punctuation (``"spaced"``, the default, as ``json.dumps`` writes it,
    or ``"compact"``), see :data:`agentkit.constrain.canonical.STYLES`; ``open_objects``: False (default) generates
    only the listed keys of an object schema that says nothing of ``additionalProperties``, True other keys too;
    ``greedy``: how a greedy structured step picks a token, ``"byte"`` (the default: byte by byte, each byte's
    tokens weighed together) or ``"token"`` (a plain argmax), see ``DecodeConfig.greedy``; ``copy_bias``: a logit
    bonus for tokens that copy a span of the prompt inside a JSON string value (default 2; 0: off), see
    ``DecodeConfig.copy_bias``; ``copy_from``: what it copies from, ``"prompt"`` (all of it) or ``"user"`` (the last
    user message, the default); ``copy_numbers``: the same bonus for digits that go on along a number the source
    writes (default on), see ``DecodeConfig.copy_numbers``; ``copy_text_bias``: the bonus for copying a tool result's
    values into a free-text answer (default 8; 0: off), see ``DecodeConfig.copy_text_bias``; ``frequency_penalty``
    / ``presence_penalty``: OpenAI's penalties on tokens already in the output (default 0), see
    ``DecodeConfig.frequency_penalty``; ``logit_bias``: token id -> a bonus for its logit (OpenAI's; -100 bans the
    token); ``stop_loops``: the output ends at a loop of this many copies of one piece (0: off; the agent's
    free-text reply uses 4 unless set), see
    ``DecodeConfig.stop_loops``; ``parallel_tool_calls``: a tool step may make several calls to the tool it picked, run concurrently
    (default False: a small model tends to write its call again, see ``agentkit/settings.py``; the server's default
    is OpenAI's, True); ``grounded_arguments``: a tool call's argument values come from the run's user messages
    and tool results, and a tool with a required argument they give no value for is not chosen (default True),
    see :mod:`agentkit.steps.arguments`.
    """

    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    mode: Mode
    json_style: str
    open_objects: bool
    greedy: str
    copy_bias: float
    copy_from: str
    copy_numbers: bool
    copy_text_bias: float
    frequency_penalty: float
    presence_penalty: float
    logit_bias: dict[str, int]
    stop_loops: int
    parallel_tool_calls: bool
    grounded_arguments: bool


KEYS = frozenset(ModelSettings.__annotations__)  # the table's "sdk" settings (tests/test_settings_table.py)
_NAMES = table.sdk_names()  # ModelSettings key -> DecodeConfig field (json_style: the template's)
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
        for key in sorted(s):
            st = table.BY_NAME[_NAMES[key]]
            if st.choices and s[key] not in st.choices:  # type: ignore[literal-required]
                one = " or ".join(map(repr, st.choices)) if len(st.choices) == 2 else f"one of {list(st.choices)}"
                raise UserError(f"model_settings {key} must be {one}, got {s[key]!r}")  # type: ignore[literal-required]
        out.update(s)  # type: ignore[typeddict-item]
    return out


def apply(config: DecodeConfig, settings: ModelSettings) -> DecodeConfig:
    """``config`` with the settings applied (validated by ``DecodeConfig``)."""
    # json_style and open_objects are the template's, not the decoder's (Agent._template)
    return replace(config, **{_NAMES[k]: v for k, v in settings.items() if _NAMES[k] not in table.TEMPLATE_SETTINGS})


def for_retry(config: DecodeConfig, retry: int) -> DecodeConfig:
    """A retry's config: sampled at ``RETRY_TEMPERATURE`` at least, seeded per retry (reproducible, different);
    a verify step's retry stays in verify, which keeps AR's samples for the seed; a diffusion step's retry
    decodes in AR (a canvas that garbled a value tends to garble it again: a second decode in the other
    distribution is the one that differs)."""
    temperature = max(config.temperature, RETRY_TEMPERATURE)
    seed = (config.seed or 0) + retry
    mode = "ar" if config.mode == "diffusion" else config.mode
    return replace(config, temperature=temperature, seed=seed, mode=mode)


DEFAULT_MODE = next(f.default for f in fields(DecodeConfig) if f.name == "mode")


def agent_routing(routing: Any, decode: DecodeConfig | None, policy: Any) -> Any:
    """An agent's routing (``policy`` is ``RoutingPolicy``): ``routing`` if given; else, when ``decode.mode`` is
    not the default (``"ar"``: the routing decides), every step in ``decode.mode``; else the calibrated default. A
    ``decode.mode`` that a given ``routing`` contradicts is a ``UserError`` (one of them would be ignored).
    A run's ``mode=`` / ``model_settings={"mode": ...}`` still overrides the agent's routing."""
    mode = decode.mode if decode is not None else DEFAULT_MODE
    if mode == DEFAULT_MODE:
        return routing or policy()
    if routing is None:
        return policy.force(mode)
    other = {k: v for k, v in vars(routing).items() if v != mode}
    if other:
        raise UserError(f"Agent(decode=DecodeConfig(mode={mode!r})) and routing={routing!r} disagree on "
                        f"{sorted(other)}; give the mode once (decode, routing, or run(mode=...))")
    return routing
