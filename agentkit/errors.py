"""Errors raised by agentkit.

The hierarchy::

    AgentkitError                    base of everything agentkit raises on purpose
    ├── UserError                    the caller asked for something invalid
    │   ├── ModelNotFoundError       a model path or the embedded default model is missing
    │   ├── InvalidRequestError      bad generation input (empty prompt, max_new_tokens < 1, ...)
    │   │   └── ContextLengthError   the prompt and max_new_tokens exceed the model's context (names the numbers)
    │   ├── UnsupportedModeError     the model cannot decode in the requested mode/sampler
    │   ├── DrafterMismatchError     a block drafter was trained for another base model
    │   ├── AdapterMismatchError     a LoRA was trained on other weights (another base, or another adapter under it)
    │   ├── UnsupportedSchemaError   a JSON Schema keyword the compiler cannot enforce (names keyword + pointer)
    │   │   └── SchemaLimitError     building the constraint would pass a CompileLimits bound (names limit + pointer)
    │   ├── MissingExtraError        an optional dependency is not installed (names the extra; also an ImportError)
    │   ├── EditError                an edit response cannot be parsed or applied (names file + missing text)
    │   └── WorkspaceError           a workspace tool call was refused (path escape, size bound, command)
    │       └── SandboxUnavailableError  run_tests found no isolation that holds (names what to install)
    ├── CompileCancelled             a constraint build was cancelled by its caller (the request went away)
    └── AgentRunError                a run failed at run time (carries the trace so far)
        ├── UsageLimitExceeded       max iterations / tokens / time exceeded
        ├── UnexpectedModelBehavior  the model produced output that cannot be used
        └── ModelHTTPError           a remote generator answered an error status or was unreachable (after retries)

    ModelRetry                       not an error: a tool raises it to send its message back to the model and ask again

Internal invariants are asserts, not these classes.
"""

from __future__ import annotations

from typing import Any


class AgentkitError(Exception):
    """Base class of every error agentkit raises on purpose."""


class UserError(AgentkitError):
    """The caller asked for something invalid. ``param``: the setting or field at fault, when one is (the server
    reports it as OpenAI's ``error.param``)."""

    def __init__(self, *args: object, param: str | None = None) -> None:
        super().__init__(*args)
        self.param = param


class ModelNotFoundError(UserError):
    """A model directory, file or the embedded default model cannot be found."""


class InvalidRequestError(UserError):
    """Generation input is invalid (empty prompt, max_new_tokens < 1, bad option)."""


class ContextLengthError(InvalidRequestError):
    """The prompt and ``max_new_tokens`` together exceed the model's context. ``prompt_tokens`` (a lower bound
    when ``at_least``), ``max_tokens`` and ``context`` are the numbers compared."""

    def __init__(self, prompt_tokens: int, max_tokens: int, context: int, at_least: bool = False) -> None:
        self.prompt_tokens, self.max_tokens, self.context, self.at_least = prompt_tokens, max_tokens, context, at_least
        n = f"at least {prompt_tokens}" if at_least else str(prompt_tokens)
        super().__init__(f"the prompt is {n} tokens and max_tokens is {max_tokens}: together they exceed the "
                         f"model's context of {context} tokens (the prompt may be at most "
                         f"{max(0, context - max_tokens)} tokens)")


class UnsupportedModeError(UserError):
    """The model cannot decode in the requested mode or with the requested sampler."""


class DrafterMismatchError(UserError):
    """A drafter (``DecodeConfig.draft="drafter"``) was trained for another base model: its fingerprint of the
    base's output head and shape differs from the engine's model."""


class AdapterMismatchError(UserError, ValueError):
    """A LoRA adapter was trained on other weights: another base model (name or vocabulary), or on top of another
    adapter than the one it names (``AdapterConfig.on`` and its SHA-256)."""


class UnsupportedSchemaError(UserError):
    """A JSON Schema uses something the compiler cannot enforce exactly.

    ``keyword`` is the offending keyword, ``pointer`` the JSON pointer of the subschema holding it.
    """

    def __init__(self, keyword: str, pointer: str, detail: str = "") -> None:
        self.keyword = keyword
        self.pointer = pointer or "#"
        self.detail = detail
        msg = f"unsupported schema keyword {keyword!r} at {self.pointer}"
        super().__init__(f"{msg}: {detail}" if detail else msg)


class SchemaLimitError(UnsupportedSchemaError):
    """Building a schema's constraint would pass one of the bounds of
    :class:`~agentkit.constrain.limits.CompileLimits` (automaton states, build time, schema depth...).

    ``limit`` is the name of the bound (``"max_states"``, ``"max_seconds"``...), ``value`` its setting,
    ``pointer`` the JSON pointer of the subschema being built when it was reached.
    """

    def __init__(self, limit: str, pointer: str, value: object, detail: str = "") -> None:
        super().__init__(limit, pointer, detail)
        self.limit, self.value = limit, value
        msg = f"schema at {self.pointer} exceeds CompileLimits.{limit}={value}"
        Exception.__init__(self, f"{msg}: {detail}" if detail else msg)


class MissingExtraError(UserError, ImportError):
    """A feature needs an optional dependency that is not installed; the message names the extra that installs it
    (``pip install 'agentkit[server]'``). ``extra`` is its name. Also an ``ImportError``."""

    def __init__(self, message: str, extra: str = "") -> None:
        super().__init__(message)
        self.extra = extra


class CompileCancelled(AgentkitError):
    """A constraint build was cancelled by its caller (``build_constraint(cancel=...)``) before it finished."""


class EditError(UserError):
    """A SEARCH/REPLACE edit cannot be parsed or applied. ``path`` is the file it names ("" if unknown)."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class WorkspaceError(UserError):
    """A workspace tool call was refused: a path escaping the root, a size bound, a command not allowed."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class SandboxUnavailableError(WorkspaceError):
    """``run_tests`` / ``run_command`` with ``isolation="auto"`` found no sandbox that holds here (neither
    bubblewrap nor the capability-free ``unshare`` fallback runs). The message names what to install; only an
    explicit ``isolation="none"`` runs commands unisolated."""


class AgentRunError(AgentkitError):
    """A run failed at run time. ``trace`` holds the iterations recorded so far, ``messages`` the conversation
    so far (``ModelMessage`` models, as ``RunResult.all_messages()``; empty when raised outside a run)."""

    def __init__(self, message: str, trace: Any = None, messages: list[Any] | None = None) -> None:
        super().__init__(message)
        self.trace = trace
        self.messages: list[Any] = list(messages or [])


class UsageLimitExceeded(AgentRunError):
    """A limit (iterations, tokens, time) was exceeded."""


class UnexpectedModelBehavior(AgentRunError):
    """The model produced output that could not be used, after the allowed retries."""


class ModelHTTPError(AgentRunError):
    """A remote generator answered an error status, or could not be reached, after the allowed retries.

    ``status_code`` is None when no response came back (connection error); ``body`` is the response text.
    """

    def __init__(self, message: str, status_code: int | None = None, body: str = "", trace: Any = None) -> None:
        super().__init__(message, trace)
        self.status_code = status_code
        self.body = body


class ModelRetry(Exception):
    """Raised by a tool to send ``message`` back to the model as an observation and let it try again.

    Counts against the tool's retry budget. Not an ``AgentkitError``: it never leaves a run.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
