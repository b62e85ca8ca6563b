"""``POST /v1/responses``: the core of OpenAI's Responses API, translated onto chat completions.

A request is rewritten as a chat request (:func:`to_chat`) and runs the same way (tools, ``tool_choice``, structured
output, modes, admission, errors); its result is written back as a ``response`` object (:func:`response_body`), or,
streaming, as the Responses API's typed events (:class:`EventWriter`).

- ``input``: a string (one user message) or a list of items: messages (``role`` user / system / developer /
  assistant; ``content`` a string or ``input_text`` / ``output_text`` parts), ``function_call`` items (earlier calls)
  and ``function_call_output`` items (their results, matched by ``call_id``). ``instructions`` is a system message
  in front.
- ``tools``: function tools (``{"type": "function", "name", "description", "parameters", "strict"}``);
  ``tool_choice``: ``auto`` / ``none`` / ``required`` / ``{"type": "function", "name"}``.
- ``text.format``: ``text``, ``json_object`` or ``json_schema`` (``name``, ``schema``, ``strict``).
- ``max_output_tokens``, ``temperature``, ``top_p``, ``stream``, the ``"agentkit"`` extension; ``seed`` (not in
  OpenAI's API: chat's seed, as vLLM takes it).
- Accepted and ignored (they change nothing here): ``store`` (nothing is stored), ``metadata`` (echoed), ``user``,
  ``service_tier``, ``prompt_cache_key``, ``safety_identifier``, ``truncation``, ``include``, ``stream_options``,
  ``reasoning`` (the model does not reason apart). ``parallel_tool_calls`` is chat's (default true: up to
  ``agentkit.toolcall.MAX_PARALLEL_CALLS`` calls, one item each); ``max_tool_calls`` 1 is ``parallel_tool_calls: false``, a
  larger value is accepted (the bound stays that).
- Refused with a 400 naming the field: ``previous_response_id`` and ``conversation`` (nothing is stored: send the
  whole conversation as ``input``), ``background``, ``prompt`` templates, tools other than functions, items other
  than the three kinds above, content parts other than text.

Output: one ``message`` item (an ``output_text`` part) or ``function_call`` items; ``status`` ``completed``, or
``incomplete`` with ``incomplete_details.reason = "max_output_tokens"`` when the text was cut; ``usage`` in the
Responses API's names (``input_tokens``, ``output_tokens``, ``input_tokens_details.cached_tokens``).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import Field, ValidationError

from agentkit.settings import bounds

from .errors import APIError
from .outcome import job_stats, response_parts
from .protocol import AgentkitExt, Body, ChatRequest, SBool, SFloat, SInt
from .sse import event
from .streaming import Frame, open_stream

TEXT_PARTS = ("input_text", "output_text", "text")


class ResponsesRequest(Body):
    model: str  # required, as OpenAI requires it
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    max_output_tokens: SInt | None = Field(default=None, **bounds("max_new_tokens"))
    temperature: SFloat | None = Field(default=None, **bounds("temperature"))
    top_p: SFloat | None = Field(default=None, **bounds("top_p"))
    seed: SInt | None = Field(default=None, **bounds("seed"))  # not OpenAI's: chat's seed (vLLM takes it too)
    stream: SBool = False
    agentkit: AgentkitExt | None = None
    top_logprobs: SInt | None = Field(default=None, ge=0, le=0)  # 0 only: log-probabilities are not returned here
    # refused unless empty (see the module docstring)
    previous_response_id: str | None = None
    conversation: Any = None
    background: SBool | None = None
    prompt: Any = None
    # accepted and ignored
    parallel_tool_calls: SBool | None = None
    max_tool_calls: SInt | None = Field(default=None, ge=1)
    store: Any = None
    metadata: dict[str, str] | None = None
    user: Any = None
    service_tier: Any = None
    prompt_cache_key: Any = None
    safety_identifier: Any = None
    truncation: Literal["auto", "disabled"] | None = None
    include: list[str] | None = None
    stream_options: Any = None
    reasoning: Any = None


def _bad(param: str, message: str, code: str = "unsupported_parameter") -> APIError:
    return APIError(400, f"{param}: {message}", param=param, code=code)


def _content(content: Any, where: str) -> str:
    """A message's or a tool output's content as text (parts joined)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise _bad(where, "must be a string or a list of content parts", "invalid_value")
    out = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in TEXT_PARTS or not isinstance(part.get("text"), str):
            raise _bad(f"{where}[{j}]", f"content part of type {kind!r} is not supported (text only)",
                       "unsupported_content")
        out.append(part["text"])
    return "".join(out)


def to_messages(req: ResponsesRequest) -> list[dict[str, Any]]:
    """``instructions`` and ``input`` as chat messages (function calls grouped into the assistant message
    before their outputs)."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": req.instructions}] if req.instructions else []
    items = [{"role": "user", "content": req.input}] if isinstance(req.input, str) else req.input
    for i, item in enumerate(items):
        where = f"input[{i}]"
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise _bad(f"{where}.role", f"{role!r} is not a message role (user, system, developer, assistant)",
                           "invalid_value")
            msgs.append({"role": role, "content": _content(item.get("content"), f"{where}.content")})
        elif kind == "function_call":
            if not isinstance(item.get("name"), str) or not isinstance(item.get("call_id"), str):
                raise _bad(where, "a function_call item needs a name and a call_id", "invalid_value")
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item.get("arguments") or "{}"}}
            if msgs and msgs[-1]["role"] == "assistant":
                msgs[-1].setdefault("tool_calls", []).append(call)
            else:
                msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str):
                raise _bad(where, "a function_call_output item needs a call_id", "invalid_value")
            msgs.append({"role": "tool", "tool_call_id": item["call_id"],
                         "content": _content(item.get("output"), f"{where}.output")})
        else:
            raise _bad(f"{where}.type", f"input items of type {kind!r} are not supported (message, function_call, "
                                        "function_call_output)")
    return msgs


def _tools(req: ResponsesRequest) -> tuple[list[dict[str, Any]] | None, Any]:
    tools = None
    if req.tools is not None:
        tools = []
        for i, t in enumerate(req.tools):
            if t.get("type") != "function":
                raise _bad(f"tools[{i}].type", f"{t.get('type')!r} tools are not supported (function tools only)")
            fn = {k: t[k] for k in ("name", "description", "parameters", "strict") if t.get(k) is not None}
            tools.append({"type": "function", "function": fn})
    choice = req.tool_choice
    if isinstance(choice, dict):
        if choice.get("type") != "function" or not isinstance(choice.get("name"), str):
            raise _bad("tool_choice", "must be auto, none, required or {\"type\": \"function\", \"name\": ...}")
        choice = {"type": "function", "function": {"name": choice["name"]}}
    return tools, choice


def _response_format(req: ResponsesRequest) -> dict[str, Any] | None:
    fmt = (req.text or {}).get("format")
    if fmt is None or fmt.get("type") == "text":
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") == "json_schema":
        if not isinstance(fmt.get("schema"), dict):
            raise _bad("text.format.schema", "a json_schema format needs a schema object", "invalid_value")
        return {"type": "json_schema", "json_schema": {"name": fmt.get("name") or "output", "schema": fmt["schema"],
                                                        "strict": fmt.get("strict")}}
    raise _bad("text.format.type", f"{fmt.get('type')!r} is not a format (text, json_object, json_schema)",
               "invalid_value")


def to_chat(req: ResponsesRequest) -> ChatRequest:
    """The chat request that runs ``req`` (a 400 naming the field for what the Responses core here lacks)."""
    for name in ("previous_response_id", "conversation", "prompt"):
        if getattr(req, name) is not None:
            raise _bad(name, "not supported: this server stores nothing; send the whole conversation as input")
    if req.background:
        raise _bad("background", "not supported (only false)")
    tools, choice = _tools(req)
    body: dict[str, Any] = {"model": req.model, "messages": to_messages(req), "tools": tools, "tool_choice": choice,
                            "response_format": _response_format(req), "max_tokens": req.max_output_tokens,
                            "temperature": req.temperature, "top_p": req.top_p, "seed": req.seed, "stream": req.stream,
                            "parallel_tool_calls": False if req.max_tool_calls == 1 else req.parallel_tool_calls,
                            "agentkit": req.agentkit.model_dump(exclude_unset=True) if req.agentkit else None}
    try:
        return ChatRequest.model_validate({k: v for k, v in body.items() if v is not None})
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        where = where.replace("messages", "input").replace("function.", "")
        raise APIError(400, f"{where}: {err['msg']}", param=where, code="invalid_value") from None


# ----------------------------------------------------------------------------------------------------------------
# the response object


def output_items(message: dict[str, Any], status: str = "completed") -> list[dict[str, Any]]:
    """A chat assistant message as Responses output items."""
    if message.get("tool_calls"):
        return [{"type": "function_call", "id": "fc_" + uuid.uuid4().hex, "call_id": tc["id"],
                 "name": tc["function"]["name"], "arguments": tc["function"]["arguments"], "status": status}
                for tc in message["tool_calls"]]
    return [{"type": "message", "id": "msg_" + uuid.uuid4().hex, "status": status, "role": "assistant",
             "content": [{"type": "output_text", "text": message.get("content") or "", "annotations": [],
                          "logprobs": []}]}]


def response_usage(u: dict[str, Any]) -> dict[str, Any]:
    return {"input_tokens": u["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": u["prompt_tokens_details"]["cached_tokens"]},
            "output_tokens": u["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u["total_tokens"]}


def response_body(req: ResponsesRequest, rid: str, created: int, model: str, *, status: str,
                  output: list[dict[str, Any]], usage: dict[str, Any] | None = None,
                  stats: dict[str, Any] | None = None) -> dict[str, Any]:
    incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
    body = {"id": rid, "object": "response", "created_at": created, "status": status, "error": None,
            "incomplete_details": incomplete, "instructions": req.instructions,
            "max_output_tokens": req.max_output_tokens, "model": model, "output": output,
            "parallel_tool_calls": req.parallel_tool_calls is not False, "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None}, "store": False,
            "temperature": req.temperature if req.temperature is not None else 0.0,
            "text": req.text or {"format": {"type": "text"}}, "tool_choice": req.tool_choice or "auto",
            "tools": req.tools or [], "top_p": req.top_p if req.top_p is not None else 1.0,
            "truncation": req.truncation or "disabled", "usage": usage, "user": None, "metadata": req.metadata or {}}
    if stats is not None:
        body["agentkit_stats"] = stats
    return body


def _status(message: dict[str, Any], finish: str) -> str:
    return "incomplete" if finish == "length" and not message.get("tool_calls") else "completed"


# ----------------------------------------------------------------------------------------------------------------
# streaming


class EventWriter:
    """Chat stream frames -> the Responses API's events (``response.created`` ... ``response.completed``), each
    with its ``sequence_number``; a text reply is one ``message`` item, parallel calls one ``function_call`` item
    each."""

    def __init__(self, req: ResponsesRequest, model: str) -> None:
        self.req, self.model = req, model
        self.rid, self.created = "resp_" + uuid.uuid4().hex, int(time.time())
        self.seq = 0
        self.items: list[dict[str, Any]] = []  # the output items, in output_index order
        self.message: dict[str, Any] | None = None  # the text reply's item
        self.calls: dict[int, dict[str, Any]] = {}  # chat tool_calls index -> its item
        self.text = ""

    def ev(self, kind: str, **data: Any) -> str:
        out = event({"type": kind, "sequence_number": self.seq, **data}, kind)
        self.seq += 1
        return out

    def body(self, status: str, **kw: Any) -> dict[str, Any]:
        output = self.items if status != "in_progress" else []
        return response_body(self.req, self.rid, self.created, self.model, status=status, output=output, **kw)

    def _open(self, item: dict[str, Any]) -> list[str]:
        self.items.append(item)
        at = len(self.items) - 1
        out = [self.ev("response.output_item.added", output_index=at, item=item)]
        if item["type"] == "message":
            out.append(self.ev("response.content_part.added", item_id=item["id"], output_index=at, content_index=0,
                               part={"type": "output_text", "text": "", "annotations": []}))
        return out

    def _open_message(self) -> list[str]:
        self.message = {"type": "message", "id": "msg_" + uuid.uuid4().hex, "status": "in_progress",
                        "role": "assistant", "content": []}
        return self._open(self.message)

    def text_delta(self, text: str) -> list[str]:
        out = self._open_message() if self.message is None else []
        self.text += text
        return out + [self.ev("response.output_text.delta", item_id=self.message["id"],  # type: ignore[index]
                              output_index=self.items.index(self.message), content_index=0, delta=text,
                              logprobs=[])]

    def call_delta(self, tc: dict[str, Any]) -> list[str]:
        out = []
        fn = tc.get("function") or {}
        item = self.calls.get(tc.get("index", 0))
        if item is None:
            item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex, "call_id": tc.get("id"),
                    "name": fn.get("name"), "arguments": "", "status": "in_progress"}
            self.calls[tc.get("index", 0)] = item
            out = self._open(item)
        if fn.get("arguments"):
            item["arguments"] += fn["arguments"]
            out.append(self.ev("response.function_call_arguments.delta", item_id=item["id"],
                               output_index=self.items.index(item), delta=fn["arguments"]))
        return out

    def _close(self, at: int, item: dict[str, Any]) -> list[str]:
        item["status"] = "completed"
        if item["type"] == "message":
            part = {"type": "output_text", "text": self.text, "annotations": [], "logprobs": []}
            item["content"] = [part]
            out = [self.ev("response.output_text.done", item_id=item["id"], output_index=at, content_index=0,
                           text=self.text, logprobs=[]),
                   self.ev("response.content_part.done", item_id=item["id"], output_index=at, content_index=0,
                           part=part)]
        else:
            out = [self.ev("response.function_call_arguments.done", item_id=item["id"], output_index=at,
                           name=item["name"], arguments=item["arguments"])]
        return out + [self.ev("response.output_item.done", output_index=at, item=item)]

    def finish(self, chunk: dict[str, Any]) -> list[str]:
        finish = chunk["choices"][0]["finish_reason"]
        out = self._open_message() if not self.items else []  # an empty reply: its item still comes
        for at, item in enumerate(self.items):
            out += self._close(at, item)
        status = "incomplete" if finish == "length" and not self.calls else "completed"
        body = self.body(status, usage=response_usage(chunk["usage"]), stats=chunk.get("agentkit_stats"))
        return out + [self.ev(f"response.{status}", response=body)]

    def error(self, err: dict[str, Any]) -> list[str]:
        e = err["error"]
        body = self.body("failed")
        body["error"] = {"code": e.get("code") or "server_error", "message": e.get("message", "")}
        return [self.ev("error", code=e.get("code"), message=e.get("message"), param=e.get("param")),
                self.ev("response.failed", response=body)]

    async def render(self, frames: AsyncIterator[Frame]) -> AsyncIterator[str]:
        yield self.ev("response.created", response=self.body("in_progress"))
        yield self.ev("response.in_progress", response=self.body("in_progress"))
        async with contextlib.aclosing(frames) as fs:  # type: ignore[type-var]
            async for name, data in fs:
                if name == "error":
                    for ev in self.error(data):
                        yield ev
                    return
                if name is not None or not data["choices"]:
                    continue  # canvas drafts: a chat extension, not a Responses event
                delta = data["choices"][0]["delta"]
                for ev in ([*self.text_delta(delta["content"])] if delta.get("content") else []):
                    yield ev
                for tc in delta.get("tool_calls") or []:
                    for ev in self.call_delta(tc):
                        yield ev
                if data["choices"][0]["finish_reason"]:
                    for ev in self.finish(data):
                        yield ev


class Responses:
    """The route's work, over the chat service."""

    def __init__(self, svc: Any) -> None:
        self.svc = svc

    async def create(self, req: ResponsesRequest, request: Request, t0: float) -> JSONResponse | StreamingResponse:
        svc = self.svc
        model = svc.served_model(req.model)
        chat = to_chat(req)
        plan = svc.plan(chat)
        if req.stream:
            return await open_stream(svc, [plan], request, t0, model=model, render=EventWriter(req, model).render)
        ((job, out),) = await svc.outcomes([plan], request)
        res = out.result
        message, finish = response_parts(res.text, res.stats.finish_reason, out.calls)
        status = _status(message, finish)
        body = response_body(req, "resp_" + uuid.uuid4().hex, int(time.time()), model, status=status,
                             output=output_items(message, status), usage=response_usage(out.usage()),
                             stats=job_stats(out, job))
        svc.metrics.request(plan.mode, 200, time.perf_counter() - t0)
        return JSONResponse(body)


__all__ = ["EventWriter", "Responses", "ResponsesRequest", "output_items", "response_body", "to_chat"]
