"""Extraction calls: text in, a validated pydantic instance (or a dict for a raw JSON Schema) out."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar, overload

from pydantic import BaseModel

from ..config import DecodeConfig
from ..errors import UserError
from ._agent import Agent, Limits
from ._context import RunUsage
from ._settings import ModelSettings

ModelT = TypeVar("ModelT", bound=BaseModel)

DEFAULT_INSTRUCTIONS = "Extract the information the schema asks for from the user's text. Answer with JSON only."


@overload
async def aextract(output_type: type[ModelT], text: str, *, model: Any, mode: str | None = ..., instructions: str | None = ...,
                   retries: int = ..., decode: DecodeConfig | None = ..., trace_path: str | None = ...,
                   model_settings: ModelSettings | None = ..., return_usage: bool = ...) -> ModelT: ...
@overload
async def aextract(output_type: dict[str, Any], text: str, *, model: Any, mode: str | None = ...,
                   instructions: str | None = ..., retries: int = ..., decode: DecodeConfig | None = ...,
                   trace_path: str | None = ..., model_settings: ModelSettings | None = ...,
                   return_usage: bool = ...) -> Any: ...
async def aextract(
    output_type: type[BaseModel] | dict[str, Any],
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
) -> Any:
    """Extract ``output_type`` from ``text`` in one structured step (asked again up to ``retries`` times).

    Returns an instance of the pydantic model, or the JSON value (validated with ``jsonschema``) for a schema dict;
    with ``return_usage=True`` a pair ``(output, RunUsage)``. ``mode``: None takes ``RoutingPolicy``'s calibrated
    mode for extraction (the fastest at equal success measured for the default model on this kind of device).
    ``model_settings``: temperature, top_p, max_tokens, seed, mode, json_style for this call.
    Raises ``UnexpectedModelBehavior`` (with ``.trace``) when no valid output came back, ``UserError`` for a bad
    ``output_type``.
    """
    if not isinstance(text, str) or not text.strip():
        raise UserError("text to extract from must be a non-empty string")
    agent: Agent[None, Any] = Agent(model, output_type=output_type,
                                    instructions=instructions or DEFAULT_INSTRUCTIONS, name="extract", decode=decode,
                                    output_retries=retries, limits=Limits(max_iterations=retries + 1))
    if model_settings and "mode" in model_settings:
        mode = model_settings["mode"]
    result = await agent.run(text, mode=mode, trace_path=trace_path,  # type: ignore[arg-type]
                             model_settings=model_settings)
    usage: RunUsage = result.usage()
    return (result.output, usage) if return_usage else result.output


@overload
def extract(output_type: type[ModelT], text: str, *, model: Any, mode: str | None = ..., instructions: str | None = ...,
            retries: int = ..., decode: DecodeConfig | None = ..., trace_path: str | None = ...,
            model_settings: ModelSettings | None = ..., return_usage: bool = ...) -> ModelT: ...
@overload
def extract(output_type: dict[str, Any], text: str, *, model: Any, mode: str | None = ..., instructions: str | None = ...,
            retries: int = ..., decode: DecodeConfig | None = ..., trace_path: str | None = ...,
            model_settings: ModelSettings | None = ..., return_usage: bool = ...) -> Any: ...
def extract(output_type: Any, text: str, **kwargs: Any) -> Any:
    """``aextract`` for synchronous code (not from inside a running event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(aextract(output_type, text, **kwargs))
    raise UserError("extract() cannot be called from a running event loop; use `await aextract(...)`")
