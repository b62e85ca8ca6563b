"""The agent SDK: tools, agents, extraction calls, per-iteration traces, and the generators behind them.

Structured steps (plan, tool call, extraction) decode under a compiled template, routed to diffusion by default;
free-text replies go to AR. Every iteration's cost is recorded in a ``Trace``.
"""

from ..errors import ModelRetry
from ._agent import Agent, Limits, RoutingPolicy, RunResult
from ._events import AgentEvent, CanvasDraft, Final, Reply, StepStarted, ToolCall, ToolResult
from ._extract import aextract, extract
from ._generator import EngineGenerator, Generator
from ._http import HTTPGenerator
from ._models import FunctionModel, StepInfo, TestModel
from ._steps import Plan
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
    "IterationRecord",
    "Limits",
    "ModelRetry",
    "Plan",
    "Reply",
    "RoutingPolicy",
    "RunResult",
    "StepInfo",
    "StepStarted",
    "TestModel",
    "Tool",
    "ToolCall",
    "ToolResult",
    "Trace",
    "aextract",
    "extract",
    "tool",
]
