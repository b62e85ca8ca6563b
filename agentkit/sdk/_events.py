"""Events streamed by ``Agent.run_stream``: small dataclasses told apart by their literal ``kind``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ._result import RunResult


@dataclass
class StepStarted:
    """An iteration began: ``step`` is plan | tool_call | extract | reply, ``mode`` the decoding mode routed to."""

    iteration: int
    step: str
    mode: str
    kind: Literal["step_started"] = field(default="step_started", init=False)


@dataclass
class CanvasDraft:
    """A snapshot of the canvas while a step decodes: token ids, which positions are fixed, and the text."""

    iteration: int
    token_ids: list[int]
    fixed: list[bool]
    text: str | None = None  # None when the generator cannot decode ids
    kind: Literal["canvas_draft"] = field(default="canvas_draft", init=False)


@dataclass
class TextDelta:
    """Text committed to a step's output since the last delta (AR: about a token; diffusion: a block)."""

    iteration: int
    step: str
    delta: str
    kind: Literal["text_delta"] = field(default="text_delta", init=False)


@dataclass
class ToolCall:
    """The model called ``tool`` with ``args`` (before validation)."""

    iteration: int
    tool: str
    args: dict[str, Any]
    kind: Literal["tool_call"] = field(default="tool_call", init=False)


@dataclass
class ToolResult:
    """What went back to the model after a tool call; ``is_error`` for invalid arguments, exceptions, ModelRetry."""

    iteration: int
    tool: str
    content: str
    is_error: bool = False
    kind: Literal["tool_result"] = field(default="tool_result", init=False)


@dataclass
class Reply:
    """The free-text reply of a reply step."""

    iteration: int
    text: str
    kind: Literal["reply"] = field(default="reply", init=False)


@dataclass
class Final:
    """The run finished; always the last event."""

    result: RunResult[Any]
    kind: Literal["final"] = field(default="final", init=False)


AgentEvent = StepStarted | CanvasDraft | TextDelta | ToolCall | ToolResult | Reply | Final
