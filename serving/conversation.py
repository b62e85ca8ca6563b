"""A chat request's conversation, read once (:func:`read_conversation`): the messages as the engine's chat template
takes them (the tools described in a system message), and what ``tool_choice`` auto and the copy prior read of it:
the text reply's messages, the tool results since the last user message, the calls they answered, whether the last
tool message reports a failure, and the text a call's argument values must come from.

How clients write a tool's failure in a ``tool`` message (the protocol has no error flag): pydantic-ai's retry
prompt ends with :data:`RETRY_SUFFIX`; the openai examples and many loops start the content with "error".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentkit.steps import kinds as steps
from agentkit.toolcall import call_key, choice_prompt, result_values, sources_of

from .errors import APIError
from .protocol import ChatRequest, ContentPart, ToolDef

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
RETRY_SUFFIX = "Fix the errors and try again."
Call = tuple[str, Any]  # (name, arguments)


@dataclass(frozen=True)
class Conversation:
    """What a plan reads of the request's messages (see the module docstring)."""

    messages: list[dict[str, str]]  # the engine's messages, the tools described in a system message
    reply: list[dict[str, str]]  # tool_choice auto: the text reply's messages (no tool instructions)
    results: str | None  # the tool results' values since the last user message (the copy prior's source)
    last_user: str  # the last user message's text ("" without one)
    answered: frozenset[str]  # the call_key of every call a tool message answered (the repeat rule)
    retry: bool  # the conversation ends with a tool message reporting a failure (the retry rule)
    sources: str  # the user and tool messages' text: a call's argument values must come from it
    texts: list[dict[str, str]]  # each message's role and text (an assistant's calls: agentkit.steps.kinds.call_text)


def read_conversation(req: ChatRequest, tools: list[ToolDef], no_call: str | None) -> Conversation:
    """The conversation of ``req`` (``tools`` described to the model, with ``no_call`` the option of no call)."""
    texts = message_texts(req)
    reply, results, last_user = reply_messages(req), tool_results(req), last_user_text(req)
    answered, retry = answered_pairs(req.messages), retrying(req.messages)
    messages = chat_messages(req, tools, no_call)
    chat = [{"role": m.role, "content": "\n".join(steps.call_text(c.function.name, call_arguments(c.function.arguments))
                                                  for c in m.tool_calls)
             if m.role == "assistant" and m.tool_calls else t} for t, m in zip(texts, req.messages)]
    return Conversation(messages, reply, results, last_user, frozenset(call_key(n, a) for n, a in answered), retry,
                        sources_of(chat), chat)


def message_text(content: str | list[ContentPart] | None, where: str) -> str:
    """A message's text: a string, or its text parts joined (any other part is a 400 naming ``where``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for p in content:
        if p.type != "text" or p.text is None:
            raise APIError(400, f"{where}: content part of type {p.type!r} is not supported (text only)",
                           param=where, code="unsupported_content")
        parts.append(p.text)
    return "".join(parts)


def message_texts(req: ChatRequest) -> list[str]:
    return [message_text(m.content, f"messages[{i}].content") for i, m in enumerate(req.messages)]


def describe_tools(tools: list[ToolDef], no_call: str | None = None) -> str:
    """The system-message text listing the tools and the call format and, with ``no_call``, how to choose no call
    (:func:`agentkit.toolcall.choice_prompt`, the SDK's decision prompt too). BFCL's prompt with its worked example
    (``tools_prompt``, the SDK's call prompt) was measured here (``evals/tool_choice_server.py --n 20``,
    ``evals/results/serving/tool_choice_bfcl_prompt.json``): auto's decision right 0.60 against 0.80, "required" the
    same (right function 0.95, BFCL success 0.75)."""
    return choice_prompt([{"name": t.function.name, "description": t.function.description or "",
                           "parameters": t.function.parameters or EMPTY_PARAMETERS} for t in tools], no_call)


def chat_messages(req: ChatRequest, tools: list[ToolDef], no_call: str | None = None) -> list[dict[str, str]]:
    """The request's messages as the engine's chat template takes them (tool calls written as JSON lines); with
    ``tools``, a system message describing them (and, with ``no_call``, how to choose no call)."""
    out: list[dict[str, str]] = []
    for i, m in enumerate(req.messages):
        role = {"developer": "system", "function": "tool"}.get(m.role, m.role)
        content = message_text(m.content, f"messages[{i}].content")
        if m.tool_calls:
            calls = [{"name": c.function.name, "arguments": call_arguments(c.function.arguments)} for c in m.tool_calls]
            content = (content + "\n" if content else "") + "\n".join(json.dumps(c) for c in calls)
        out.append({"role": role, "content": content})
    if tools:
        sys = describe_tools(tools, no_call)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + sys}
        else:
            out.insert(0, {"role": "system", "content": sys})
    return out


def last_user_text(req: ChatRequest) -> str:
    """The text of the last user message ("" without one): the copy prior's default source (``copy_from``)."""
    i = _last_user(req)
    return "" if i is None else message_text(req.messages[i].content, f"messages[{i}].content")


def _last_user(req: ChatRequest) -> int | None:
    """The index of the last user message (None without one)."""
    return next((i for i in range(len(req.messages) - 1, -1, -1) if req.messages[i].role == "user"), None)


def reply_messages(req: ChatRequest) -> list[dict[str, str]]:
    """The text reply's messages under ``tool_choice`` auto. After tool results (since the last user message), the
    SDK answer step's view (its ``answer_chat``): the system messages and earlier text turns, then the last user
    message with the calls' results and a request for a one-sentence answer (``steps.reply_prompt``); no JSON call
    in view, since a small model answering after calls written as JSON writes JSON (pydantic-ai's loop through the
    server got ``{"name": "no record matches..."}`` as 7 of 8 final answers). Otherwise the conversation as it is."""
    last = _last_user(req)
    texts = message_texts(req)
    calls = {c.id: (c.function.name, call_arguments(c.function.arguments)) for m in req.messages[last + 1:]
             for c in (m.tool_calls or [])} if last is not None else {}
    done = [(*calls[m.tool_call_id], texts[i]) for i, m in enumerate(req.messages) if m.tool_call_id in calls
            and m.role in ("tool", "function") and not tool_failed(texts[i])]
    if last is None or not done:
        return chat_messages(req, [])
    out = [{"role": {"developer": "system"}.get(m.role, m.role), "content": texts[i]}
           for i, m in enumerate(req.messages[:last]) if m.role in ("system", "developer", "user")
           or (m.role == "assistant" and not m.tool_calls)]
    return [*out, {"role": "user", "content": steps.reply_prompt(texts[last], steps.results_text(done))}]


def tool_results(req: ChatRequest) -> str | None:
    """The free-text copy source of a reply after tool results: the values of the ``tool`` (and ``function``)
    messages after the last user message (:func:`agentkit.toolcall.result_values`); None when there are none."""
    texts: list[str] = []
    for i, m in enumerate(req.messages):
        if m.role == "user":
            texts = []
        elif m.role in ("tool", "function"):
            texts.append(message_text(m.content, f"messages[{i}].content"))
    return result_values(texts) or None


def tool_failed(content: str) -> bool:
    """Whether a ``tool`` message's text reports a failure rather than a result (a failed call is no repeat)."""
    text = content.strip()
    return text.endswith(RETRY_SUFFIX) or text[:5].lower() == "error"


def retrying(messages: list[Any]) -> bool:
    """The conversation ends with ``tool`` messages of which one reports a failure (:func:`tool_failed`): under
    ``"auto"`` the next reply is a call again (a retry, as the SDK's ``after_failure="retry"``), not decided."""
    tail = []
    for m in reversed(messages):
        if m.role not in ("tool", "function"):
            break
        tail.append(m)
    return any(tool_failed(_content(m.content)) for m in tail)


def answered_calls(messages: list[Any]) -> frozenset[str]:
    """The :func:`~agentkit.toolcall.call_key` of every call that a later ``tool`` message answered
    (:func:`answered_pairs`)."""
    return frozenset(call_key(name, args) for name, args in answered_pairs(messages))


def answered_pairs(messages: list[Any]) -> list[Call]:
    """Every call in an assistant message that a later ``tool`` message answered (by its ``tool_call_id``; a tool
    message without a known id answers the calls of the last assistant message). A tool message that reports a
    failure (:func:`tool_failed`) answers nothing: calling again is a retry, as the SDK's ``on_repeat`` counts it."""
    pending: dict[str | None, Call] = {}
    last: list[Call] = []
    done: list[Call] = []
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            last = []
            for c in m.tool_calls:
                call = (c.function.name, call_arguments(c.function.arguments))
                pending[c.id] = call
                last.append(call)
        elif m.role in ("tool", "function"):
            if tool_failed(_content(m.content)):
                continue
            if m.tool_call_id is not None and m.tool_call_id in pending:
                done.append(pending[m.tool_call_id])
            else:  # no id, or one the calls do not carry: it answers the last assistant message's calls
                done.extend(last)
    return done


def call_arguments(a: str | dict[str, Any]) -> Any:
    """A call's arguments as JSON data (a string that is not JSON stays the string)."""
    if isinstance(a, dict):
        return a
    try:
        return json.loads(a)
    except json.JSONDecodeError:
        return a


def _content(content: Any) -> str:
    """A message's text: a string, or its text parts joined (other parts are refused by :func:`message_text`)."""
    if isinstance(content, str) or content is None:
        return content or ""
    return "".join(getattr(p, "text", None) or "" for p in content)
