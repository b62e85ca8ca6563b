"""Extraction calls: text in, a validated pydantic instance (or a dict for a raw JSON Schema) out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar, overload

from pydantic import BaseModel, TypeAdapter

from ..config import DecodeConfig
from ..decide import can_score
from ..errors import UserError
from ..steps import grounded as grounded_
from ..steps.grounded import GroundedOutput, settle
from ..steps.kinds import EXTRACT_INSTRUCTIONS, OutputSpec, extract_prompt
from ._agent import Agent
from ._policy import Limits
from ._settings import ModelSettings

ModelT = TypeVar("ModelT", bound=BaseModel)



@overload
async def aextract(output_type: type[ModelT], text: str, *, model: Any, mode: str | None = ..., instructions: str | None = ...,
                   retries: int = ..., decode: DecodeConfig | None = ..., trace_path: str | None = ...,
                   model_settings: ModelSettings | None = ..., return_usage: bool = ...,
                   fallback_mode: str | None = ..., grounded: bool | None = ...) -> ModelT: ...
@overload
async def aextract(output_type: dict[str, Any], text: str, *, model: Any, mode: str | None = ...,
                   instructions: str | None = ..., retries: int = ..., decode: DecodeConfig | None = ...,
                   trace_path: str | None = ..., model_settings: ModelSettings | None = ...,
                   return_usage: bool = ..., fallback_mode: str | None = ...,
                   grounded: bool | None = ...) -> Any: ...
async def aextract(
    output_type: Any,
    text: str,
    *,
    model: Any,
    mode: str | None = None,
    instructions: str | None = None,
    retries: int = 1,
    decode: DecodeConfig | None = None,
    trace_path: str | None = None,
    model_settings: ModelSettings | None = None,
    return_usage: bool = False,
    fallback_mode: str | None = None,
    grounded: bool | None = None,
) -> Any:
    """Extract ``output_type`` from ``text`` in one structured step (asked again up to ``retries`` times).

    Returns an instance of the pydantic model, or the JSON value (validated with ``jsonschema``) for a schema dict;
    with ``return_usage=True`` a pair ``(output, RunUsage)``. ``mode``: None takes ``RoutingPolicy``'s calibrated
    mode for extraction (the fastest at equal success measured for the default model on this kind of device).
    ``model_settings``: temperature, top_p, max_tokens, seed, mode, json_style for this call.
    ``decode``: None takes ``DecodeConfig(copy_first_digit=True)`` (an extraction's numbers are the text's own);
    its ``copy_source``, when None, becomes ``text`` (values are copied from the text, not from the schema the
    prompt shows). ``fallback_mode``: when a value of the output is not in the text (:func:`values_in_text`), decode again in this mode
    and keep the output with more values found in the text (the first on a tie).
    ``grounded``: values come from the text (:mod:`agentkit.steps.grounded`; None: the kinds grounded by default,
    :data:`agentkit.constrain.ground.KINDS`; False: none, unless a field says ``"grounded": true``; a field's
    ``Field(json_schema_extra={"grounded": False})`` overrides the call), and an optional field the model scores
    null above its value comes back None. ``usage.ungrounded`` names the required fields the text has no value for.
    Raises ``UnexpectedModelBehavior`` (with ``.trace``) when no valid output came back, ``UserError`` for a bad
    ``output_type``.
    """
    if not isinstance(text, str) or not text.strip():
        raise UserError("text to extract from must be a non-empty string")
    decode = decode or DecodeConfig(copy_first_digit=True)  # an extraction's numbers are the text's own
    if decode.copy_source is None:  # values are copied from the text, not from the schema the prompt shows
        decode = replace(decode, copy_source=text)
    spec = GroundedOutput(output_type, text, grounded)
    settles = spec.grounded is not False and grounded_.SETTLE and can_score(model)
    if settles:  # settling scores after the decoded output: it reads the decode's keys/values (engine/kept.py)
        decode = replace(decode, keep_cache=True)
    agent: Agent[None, Any] = Agent(model, output_type=spec,
                                    instructions=instructions or EXTRACT_INSTRUCTIONS, name="extract", decode=decode,
                                    output_retries=retries, limits=Limits(max_iterations=retries + 1))
    if model_settings and "mode" in model_settings:
        mode = model_settings["mode"]
    messages = extract_messages(output_type, text, instructions)
    settle_ = (lambda out: _settle(model, spec, out, messages)) if settles else None
    try:
        output, usage = await _run(agent, spec, text, mode, trace_path, model_settings, fallback_mode, settle_)
    finally:
        if settles and (kept := getattr(model, "kept", None)) is not None:
            kept.clear()  # not held past this call where settling scored nothing
    return (output, usage) if return_usage else output


async def _run(agent: Agent[None, Any], spec: GroundedOutput, text: str, mode: str | None, trace_path: str | None,
               model_settings: ModelSettings | None, fallback_mode: str | None,
               settle_: Callable[[Any], Any] | None) -> tuple[Any, Any]:
    """The extraction's run(s): its output settled (``settle_``, where it settles), then decoded again in
    ``fallback_mode`` where a value is not in the text; the output and the usage."""
    result = await agent.run(text, mode=mode, trace_path=trace_path,  # type: ignore[arg-type]
                             model_settings=model_settings)
    output, usage = result.output, result.usage()
    usage.ungrounded = spec.ungrounded
    if settle_ is not None:
        output = settle_(output)
    if fallback_mode is not None:
        found, checked = values_in_text(output, text)
        if found < checked:
            second = await agent.run(text, mode=fallback_mode, trace_path=trace_path,  # type: ignore[arg-type]
                                     model_settings=model_settings)
            usage.incr(second.usage())
            if values_in_text(second.output, text)[0] > found:
                output = second.output
    return output, usage


def _settle(engine: Any, spec: GroundedOutput, output: Any, messages: list[dict[str, str]]) -> Any:
    """``output`` with its fields settled against the text (:func:`agentkit.steps.grounded.settle`): each place
    in the text gives one field its value, the best-scoring grounded number or date, null where the model scores
    it above an optional field's value."""
    if spec.wrapped or spec.grounding is None:
        return output
    value = spec.dump(output)
    if not isinstance(value, dict):
        return output
    new, _ = settle(engine, messages, value, spec)
    return output if new == value else spec.validate(new)


def values_in_text(output: Any, text: str) -> tuple[int, int]:
    """(values found in ``text``, values checked) over the output's string and number leaves: a string is found
    where the text holds it (case-insensitively), a number where the text writes it (``$1,200`` is 1200)."""
    from ..engine.copy import source_numbers
    from ..toolcall import scalar_leaves

    value = TypeAdapter(type(output)).dump_python(output, mode="json") if not isinstance(
        output, dict | list | str | int | float | bool | type(None)) else output  # a model, a dataclass, ...
    low, numbers = text.casefold(), {float(n) for n in source_numbers(text.encode())}
    found = checked = 0
    for v in scalar_leaves(value):
        if isinstance(v, str) and v:
            checked, found = checked + 1, found + (v.casefold() in low)
        elif isinstance(v, int | float) and not isinstance(v, bool):
            checked, found = checked + 1, found + (float(v) in numbers)
    return found, checked


def extract_messages(output_type: Any, text: str,
                     instructions: str | None = None) -> list[dict[str, str]]:
    """The chat messages ``extract`` sends for ``text`` (the system instructions; the text and the extract
    prompt as one user message): what the extraction benchmark gives the peers, and the server's
    ``response_format`` writes for a request without them."""
    return [{"role": "system", "content": instructions or EXTRACT_INSTRUCTIONS},
            {"role": "user", "content": text + "\n\n" + extract_prompt(OutputSpec(output_type))}]


@overload
def extract(output_type: type[ModelT], text: str, *, model: Any, mode: str | None = ..., instructions: str | None = ...,
            retries: int = ..., decode: DecodeConfig | None = ..., trace_path: str | None = ...,
            model_settings: ModelSettings | None = ..., return_usage: bool = ...,
            fallback_mode: str | None = ..., grounded: bool | None = ...) -> ModelT: ...
@overload
def extract(output_type: dict[str, Any], text: str, *, model: Any, mode: str | None = ..., instructions: str | None = ...,
            retries: int = ..., decode: DecodeConfig | None = ..., trace_path: str | None = ...,
            model_settings: ModelSettings | None = ..., return_usage: bool = ...,
            fallback_mode: str | None = ..., grounded: bool | None = ...) -> Any: ...
def extract(output_type: Any, text: str, **kwargs: Any) -> Any:
    """``aextract`` for synchronous code (not from inside a running event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(aextract(output_type, text, **kwargs))
    raise UserError("extract() cannot be called from a running event loop; use `await aextract(...)`")
