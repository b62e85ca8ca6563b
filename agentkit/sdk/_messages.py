"""A run's messages as pydantic models (pydantic-ai's names and shapes), and their chat rendering.

A conversation is a list of ``ModelMessage``: a ``ModelRequest`` (what the agent sent: the user's prompt, tool
results, retry prompts; ``instructions`` is the system prompt it was sent with) or a ``ModelResponse`` (what the
model answered: text or a tool call). Parts and messages carry a literal discriminator (``part_kind``, ``kind``),
so a history serialises to JSON and back with ``ModelMessagesTypeAdapter``::

    data = ModelMessagesTypeAdapter.dump_json(result.all_messages())
    history = ModelMessagesTypeAdapter.validate_json(data)
    agent.run_sync("and then?", message_history=history)
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from ..steps.kinds import DEFAULT_INSTRUCTIONS, call_text, observation, reply_prompt
from ..toolcall import CALL_SEP


def _now() -> datetime:
    return datetime.now(UTC)


def _call_id() -> str:
    return "call_" + uuid.uuid4().hex[:16]


class SystemPromptPart(BaseModel):
    """A system prompt kept in the history (the agent's own goes in ``ModelRequest.instructions``)."""

    content: str
    part_kind: Literal["system-prompt"] = "system-prompt"


class UserPromptPart(BaseModel):
    """What the user (or the agent on the user's side) asked."""

    content: str
    timestamp: datetime = Field(default_factory=_now)
    part_kind: Literal["user-prompt"] = "user-prompt"


class ToolReturnPart(BaseModel):
    """A tool's result, sent back to the model."""

    tool_name: str
    content: str
    tool_call_id: str = Field(default_factory=_call_id)
    timestamp: datetime = Field(default_factory=_now)
    part_kind: Literal["tool-return"] = "tool-return"


class RetryPromptPart(BaseModel):
    """A failure sent back to the model to ask again: a tool's error (``tool_name`` set) or an unusable output."""

    content: str
    tool_name: str | None = None
    tool_call_id: str = Field(default_factory=_call_id)
    timestamp: datetime = Field(default_factory=_now)
    part_kind: Literal["retry-prompt"] = "retry-prompt"


class TextPart(BaseModel):
    """Text the model wrote (a reply, or a structured output's JSON)."""

    content: str
    part_kind: Literal["text"] = "text"


class ToolCallPart(BaseModel):
    """The model called ``tool_name`` with ``args``."""

    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)
    tool_call_id: str = Field(default_factory=_call_id)
    part_kind: Literal["tool-call"] = "tool-call"


ModelRequestPart = Annotated[SystemPromptPart | UserPromptPart | ToolReturnPart | RetryPromptPart,
                             Field(discriminator="part_kind")]
ModelResponsePart = Annotated[TextPart | ToolCallPart, Field(discriminator="part_kind")]


class ModelRequest(BaseModel):
    """A message to the model. ``instructions``: the system prompt (instructions and tool specs) it went with."""

    parts: list[ModelRequestPart]
    instructions: str | None = None
    timestamp: datetime = Field(default_factory=_now)
    run_id: str | None = None
    kind: Literal["request"] = "request"


class ModelResponse(BaseModel):
    """A message from the model, with the step that produced it and that step's token counts."""

    parts: list[ModelResponsePart]
    model_name: str | None = None
    step: str | None = None  # plan | tool_call | tool_input | extract | reply
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    timestamp: datetime = Field(default_factory=_now)
    run_id: str | None = None
    kind: Literal["response"] = "response"

    @property
    def text(self) -> str:
        return "".join(p.content for p in self.parts if isinstance(p, TextPart))


ModelMessage = Annotated[ModelRequest | ModelResponse, Field(discriminator="kind")]
ModelMessagesTypeAdapter: TypeAdapter[list[ModelMessage]] = TypeAdapter(list[ModelMessage])

RETRY_TEXT = "That answer was not usable: {}. Answer again."


def to_chat(messages: list[ModelMessage]) -> list[dict[str, str]]:
    """The chat messages a generator is sent: the latest request's ``instructions`` as the system message (the
    agent's current instructions and tools, as pydantic-ai does), then one chat message per part."""
    system = next((m.instructions for m in reversed(messages) if isinstance(m, ModelRequest) and m.instructions),
                  None)
    chat = [{"role": "system", "content": system}] if system else []
    for m in messages:
        calls = [p for p in m.parts if isinstance(p, ToolCallPart)]
        if len(calls) > 1 and len(calls) == len(m.parts):  # parallel calls: one reply, a call per line
            chat.append({"role": "assistant", "content": CALL_SEP.join(call_text(p.tool_name, p.args) for p in calls)})
            continue
        for part in m.parts:
            chat.append(_part_chat(part))
    return chat


def _part_chat(part: Any) -> dict[str, str]:
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, UserPromptPart):
        return {"role": "user", "content": part.content}
    if isinstance(part, ToolReturnPart):
        return {"role": "user", "content": observation(part.tool_name, part.content)}
    if isinstance(part, RetryPromptPart):
        if part.tool_name is not None:
            return {"role": "user", "content": observation(part.tool_name, part.content, error=True)}
        return {"role": "user", "content": RETRY_TEXT.format(part.content)}
    if isinstance(part, ToolCallPart):
        return {"role": "assistant", "content": call_text(part.tool_name, part.args)}
    return {"role": "assistant", "content": part.content}


def to_chat_with_prompt(messages: list[ModelMessage], prompt: str | None) -> list[dict[str, str]]:
    """The chat messages sent for one step: the step's prompt joins the last user message (or becomes one)."""
    msgs = to_chat(messages)
    if prompt:
        if msgs and msgs[-1]["role"] == "user":
            msgs[-1] = {"role": "user", "content": msgs[-1]["content"] + "\n\n" + prompt}
        else:
            msgs.append({"role": "user", "content": prompt})
    return msgs


def without_default_system(chat: list[dict[str, str]]) -> list[dict[str, str]]:
    """``chat`` without the SDK's default system message (:data:`agentkit.steps.kinds.DEFAULT_INSTRUCTIONS`) at its start: a plain
    reply on the default model follows the instructions of the reply benchmark more often under the chat template's
    own default (``evals/replies.py``: 0.41 against 0.34 of its dev split with the loop adapter, 0.46 against 0.36 on
    the weights as loaded); agent steps keep it, as the loop adapter was trained with it."""
    if chat and chat[0] == {"role": "system", "content": DEFAULT_INSTRUCTIONS}:
        return chat[1:]
    return chat


def answer_chat(instructions: str | None, earlier: list[ModelMessage], task: str, results: str) -> list[dict[str, str]]:
    """What the free-text answer step of a run with tools is sent: the instructions without the tools' specs,
    the earlier runs' text turns (``earlier``), then the task with the tool results and the request for a plain
    answer. No JSON call is in view, so the reply is text (a small model imitates the calls it sees)."""
    chat = [{"role": "system", "content": instructions or DEFAULT_INSTRUCTIONS}]
    for m in to_chat(earlier):
        if m["role"] != "system" and not m["content"].startswith("{"):
            chat.append(m)
    chat.append({"role": "user", "content": reply_prompt(task, results)})
    return chat
