"""agentkit: an agent framework built around structured (constrained) block-diffusion decoding.

The short public surface; everything else lives in its module (``agentkit.engine``, ``agentkit.constrain``,
``agentkit.sdk``, ``agentkit.evals``, ``agentkit.serving``, ``agentkit.tools``). ``Engine``, ``default_engine`` and
``compile_schema`` load torch or the compiler, so they are imported on first use; type checkers see them through
the ``TYPE_CHECKING`` block.
"""

from typing import TYPE_CHECKING

from . import _threads  # noqa: F401 -- first: sets OMP_WAIT_POLICY=PASSIVE before anything loads torch
from .config import DecodeConfig, EngineConfig
from .constrain.nodes import Template
from .errors import (
    AdapterMismatchError,
    AgentkitError,
    AgentRunError,
    CompileCancelled,
    ContextLengthError,
    DrafterMismatchError,
    EditError,
    InvalidRequestError,
    MissingExtraError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelRetry,
    SandboxUnavailableError,
    SchemaLimitError,
    UnexpectedModelBehavior,
    UnsupportedModeError,
    UnsupportedSchemaError,
    UsageLimitExceeded,
    UserError,
    WorkspaceError,
)
from .sdk import (
    Agent,
    FunctionModel,
    Limits,
    ModelMessagesTypeAdapter,
    ModelSettings,
    RoutingPolicy,
    RunContext,
    RunResult,
    RunUsage,
    TestModel,
    Tool,
    Trace,
    aextract,
    extract,
    tool,
)

if TYPE_CHECKING:
    from .constrain.compiler import compile_schema
    from .engine import default_engine
    from .engine.engine import Engine

__version__ = "0.1.0"


def __getattr__(name: str):
    # heavy imports (torch, transformers) only when asked for
    if name == "Engine":
        from .engine.engine import Engine

        return Engine
    if name == "default_engine":
        from .engine import default_engine

        return default_engine
    if name == "compile_schema":
        from .constrain.compiler import compile_schema

        return compile_schema
    if name == "LOOP_ADAPTER":  # the loop adapter's folder (the default model merges it unless lora="none")
        from .models.adapter import LOOP_DIR

        return str(LOOP_DIR)
    raise AttributeError(f"module 'agentkit' has no attribute {name!r}")


__all__ = [
    "LOOP_ADAPTER",
    "AdapterMismatchError",
    "Agent",
    "AgentRunError",
    "AgentkitError",
    "CompileCancelled",
    "ContextLengthError",
    "DecodeConfig",
    "DrafterMismatchError",
    "EditError",
    "Engine",
    "EngineConfig",
    "FunctionModel",
    "InvalidRequestError",
    "Limits",
    "MissingExtraError",
    "ModelHTTPError",
    "ModelMessagesTypeAdapter",
    "ModelNotFoundError",
    "ModelRetry",
    "ModelSettings",
    "RoutingPolicy",
    "RunContext",
    "RunResult",
    "RunUsage",
    "SandboxUnavailableError",
    "SchemaLimitError",
    "Template",
    "TestModel",
    "Tool",
    "Trace",
    "UnexpectedModelBehavior",
    "UnsupportedModeError",
    "UnsupportedSchemaError",
    "UsageLimitExceeded",
    "UserError",
    "WorkspaceError",
    "aextract",
    "compile_schema",
    "default_engine",
    "extract",
    "tool",
]
