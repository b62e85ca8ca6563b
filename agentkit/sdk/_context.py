"""What a tool or a dynamic-instructions function is told about the run: ``RunContext`` and ``RunUsage``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from ._messages import ModelMessage

DepsT = TypeVar("DepsT")


@dataclass
class RunUsage:
    """Usage over a run (pydantic-ai's names): model requests, tokens in and out, tool calls, forwards."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    forwards: int = 0  # model forward passes, prefill included (the engine's cost unit)
    # ``extract``: the required fields the text had no value for (not grounded; their value is the model's own)
    ungrounded: list[str] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def incr(self, other: RunUsage) -> None:
        for k in ("requests", "input_tokens", "output_tokens", "tool_calls", "forwards"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.ungrounded += [f for f in other.ungrounded if f not in self.ungrounded]


@dataclass
class RunContext(Generic[DepsT]):
    """Given to a tool whose first parameter is annotated ``RunContext[...]`` (the parameter is not in the tool's
    schema) and to dynamic-instructions functions.

    ``retry``: failed calls of this tool in a row so far (0 on a first attempt); ``messages``: the conversation so
    far (``ModelMessage`` models); ``prompt``: the run's user prompt.
    """

    deps: DepsT
    usage: RunUsage = field(default_factory=RunUsage)
    retry: int = 0
    run_id: str = ""
    messages: list[ModelMessage] = field(default_factory=list)
    prompt: str | None = None
    tool_name: str | None = None
    model: Any = None
