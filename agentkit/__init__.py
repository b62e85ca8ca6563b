"""agentkit: an agent framework built around structured (constrained) block-diffusion decoding.

The short public surface; everything else lives in its module (``agentkit.engine``, ``agentkit.constrain``,
``agentkit.sdk``, ``agentkit.evals``).
"""

from .config import DecodeConfig, EngineConfig
from .errors import (
    AgentkitError,
    AgentRunError,
    CompileCancelled,
    EditError,
    InvalidRequestError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelRetry,
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
    Limits,
    ModelMessagesTypeAdapter,
    ModelSettings,
    RoutingPolicy,
    RunContext,
    RunResult,
    RunUsage,
    Trace,
    aextract,
    extract,
    tool,
)

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
        from .constrain.compiler import compile_schema_cached

        return compile_schema_cached
    raise AttributeError(f"module 'agentkit' has no attribute {name!r}")


__all__ = [
    "Agent",
    "AgentRunError",
    "AgentkitError",
    "CompileCancelled",
    "DecodeConfig",
    "EditError",
    "Engine",
    "EngineConfig",
    "InvalidRequestError",
    "Limits",
    "ModelHTTPError",
    "ModelMessagesTypeAdapter",
    "ModelNotFoundError",
    "ModelRetry",
    "ModelSettings",
    "RoutingPolicy",
    "RunContext",
    "RunResult",
    "RunUsage",
    "SchemaLimitError",
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
