"""What an ``Agent`` and a run are given, checked: instructions, message history, the output type, and whether
the generator can decode with the weights as loaded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import UserError
from ..steps import kinds as steps
from ._context import RunContext
from ._messages import ModelMessage, ModelRequest, ModelResponse

Instructions = str | Callable[[RunContext[Any]], Any]


def no_result_type(result_type: Any) -> None:
    """``result_type=``, pydantic-ai's earlier name for ``output_type``, refused with the name to use."""
    if result_type is not None:
        raise UserError("result_type= is pydantic-ai's earlier name; agentkit takes output_type= (the type the run's "
                        "output is validated as)", param="result_type")


def instruction_list(instructions: Any) -> list[Instructions]:
    if instructions is None:
        return []
    items = [instructions] if isinstance(instructions, str) or callable(instructions) else list(instructions)
    bad = [i for i in items if not (isinstance(i, str) or callable(i))]
    if bad:
        raise UserError(f"instructions must be strings or functions of the RunContext, got {bad!r}")
    return items


def check_history(history: Sequence[ModelMessage] | None) -> list[ModelMessage]:
    if history is None:
        return []
    items = list(history)
    bad = [i for i, m in enumerate(items) if not isinstance(m, (ModelRequest, ModelResponse))]
    if bad:
        raise UserError(f"message_history must hold ModelRequest/ModelResponse messages (result.all_messages(), "
                        f"or ModelMessagesTypeAdapter.validate_json(...)); item {bad[0]} is "
                        f"{type(items[bad[0]]).__name__}")
    return items


def output_spec(output_type: Any) -> steps.OutputSpec | None:
    """An output type's spec (an ``OutputSpec`` given as the type is used as it is: ``extract``'s grounded one)."""
    if output_type is None or isinstance(output_type, steps.OutputSpec):
        return output_type
    return steps.OutputSpec(output_type)
