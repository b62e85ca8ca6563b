"""What a run produced (``RunResult``) and what the agent keeps while it runs (``RunState``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..steps.kinds import OutputSpec, Plan
from ._context import RunContext, RunUsage
from ._decide import Decision
from ._events import AgentEvent
from ._messages import ModelMessage, ModelMessagesTypeAdapter, to_chat
from ._repeat import Results
from ._settings import ModelSettings
from ._trace import Trace

OutputT = TypeVar("OutputT")


@dataclass
class RunResult(Generic[OutputT]):
    """What a run produced: ``output`` (reply text, or the validated ``output_type``), its trace and messages.

    ``all_messages()`` is the whole conversation (a ``message_history`` passed in, then this run's messages);
    ``new_messages()`` only this run's. ``messages`` is the conversation as the chat messages the model saw.
    """

    output: OutputT
    trace: Trace
    history: list[ModelMessage] = field(default_factory=list, repr=False)
    plan: Plan | None = None
    run_id: str = ""
    new_message_index: int = 0
    run_usage: RunUsage = field(default_factory=RunUsage)

    def all_messages(self) -> list[ModelMessage]:
        return list(self.history)

    def new_messages(self) -> list[ModelMessage]:
        return list(self.history[self.new_message_index:])

    def all_messages_json(self) -> bytes:
        return ModelMessagesTypeAdapter.dump_json(self.history)

    def new_messages_json(self) -> bytes:
        return ModelMessagesTypeAdapter.dump_json(self.new_messages())

    def usage(self) -> RunUsage:
        return self.run_usage

    @property
    def messages(self) -> list[dict[str, str]]:
        return to_chat(self.history)


@dataclass
class RunState:
    """One run in progress."""

    messages: list[ModelMessage]
    trace: Trace
    routing: Any
    limits: Any
    run_id: str
    settings: ModelSettings
    deps: Any = None
    prompt: str = ""
    emit: Callable[[AgentEvent], None] | None = None
    new_message_index: int = 0
    usage: RunUsage = field(default_factory=RunUsage)
    tokens: int = 0
    failures: int = 0  # failed attempts in a row (any step)
    output_failures: int = 0  # unusable structured outputs in a row
    tool_failures: dict[str, int] = field(default_factory=dict)  # per tool, in a row
    plan: Plan | None = None
    spans: dict[str, Any] = field(default_factory=dict)  # OpenTelemetry: "run", "iteration"
    instructions: str | None = None  # the run's instruction text (without the tools' specs)
    results: Results = field(default_factory=Results)  # the calls that returned a result (``_repeat.py``)
    decision: Decision | None = None  # a tool step's decision not yet in a record (the next generation takes it)
    last_decision: Decision | None = None  # the run's last tool-step decision
    output: OutputSpec | None = None  # the run's output type (None: a text reply)
    running_tool: str | None = None  # the tool running now (named by a run timeout)
    offered: list[Any] | None = None  # the tools the current tool step offers (``Tool.prepare``); None: all

    def context(self, tool_name: str | None = None, model: Any = None) -> RunContext[Any]:
        retry = self.tool_failures.get(tool_name, 0) if tool_name else self.failures
        return RunContext(deps=self.deps, usage=self.usage, retry=retry, run_id=self.run_id,
                          messages=list(self.messages), prompt=self.prompt, tool_name=tool_name, model=model)
