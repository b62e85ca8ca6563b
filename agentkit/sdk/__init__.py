"""The agent SDK: tools, agents, extraction calls, per-iteration traces, and the generators behind them.

Structured steps (plan, tool call, extraction) decode under a compiled template, by default in the mode the
calibration of the default model on CPU chose (``agentkit/calibration.py``; ``"ar"`` when none is found); free-text
replies go to AR. Every iteration's cost is recorded in a ``Trace``.
"""

from ..errors import ModelRetry
from ..steps.kinds import Plan
from ._agent import Agent
from ._context import RunContext, RunUsage
from ._events import AgentEvent, CanvasDraft, Final, Reply, StepStarted, TextDelta, ToolCall, ToolResult
from ._extract import aextract, extract
from ._generator import EngineGenerator, Generator
from ._http import HTTPGenerator
from ._messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from ._models import FunctionModel, StepInfo, TestModel
from ._otel import Instrumentation
from ._policy import Limits, RoutingPolicy
from ._result import RunResult
from ._settings import ModelSettings
from ._stream import StreamedRunResult
from ._tools import Tool, tool
from ._trace import IterationRecord, Trace

__all__ = [
    "Agent",
    "AgentEvent",
    "CanvasDraft",
    "EngineGenerator",
    "Final",
    "FunctionModel",
    "Generator",
    "HTTPGenerator",
    "Instrumentation",
    "IterationRecord",
    "Limits",
    "ModelMessage",
    "ModelMessagesTypeAdapter",
    "ModelRequest",
    "ModelResponse",
    "ModelRetry",
    "ModelSettings",
    "Plan",
    "Reply",
    "RetryPromptPart",
    "RoutingPolicy",
    "RunContext",
    "RunResult",
    "RunUsage",
    "StepInfo",
    "StepStarted",
    "StreamedRunResult",
    "SystemPromptPart",
    "TestModel",
    "TextDelta",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolCallPart",
    "ToolResult",
    "ToolReturnPart",
    "Trace",
    "UserPromptPart",
    "aextract",
    "extract",
    "tool",
]
