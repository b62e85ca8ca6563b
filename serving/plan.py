"""Request -> plan: pure functions (no HTTP, no engine), tested on their own.

:func:`plan_request` decides everything that needs no compilation and no model: the chat messages (tools described
in a system message), the decoding config, which tool calls are forced, which schema must be compiled (a
:class:`SchemaJob`: it is compiled later, inside the request's life, see ``serving/prepare.py``), and a cheap
prompt-length bound. The response is built from the outcome in ``serving/outcome.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from agentkit import validate
from agentkit.calibration import step_mode
from agentkit.config import DecodeConfig
from agentkit.constrain.canonical import DEFAULT_STYLE
from agentkit.errors import UserError
from agentkit.settings import BY_NAME, TEMPLATE_SETTINGS, server_fields
from agentkit.steps import kinds as steps
from agentkit.steps.arguments import ArgumentSources, Held, argument_gaps, argument_sources
from agentkit.steps.runner import ToolStep
from agentkit.toolcall import MAX_PARALLEL_CALLS

from .conversation import Conversation, chat_messages, read_conversation
from .errors import APIError, user_error
from .outcome import response_parts
from .protocol import AgentkitExt, ChatRequest, NamedToolChoice, ToolDef
from .toolchoice import no_call_name

__all__ = ["RequestPlan", "SchemaJob", "chat_messages", "decode_config", "plan_request", "prompt_bound",
           "response_parts"]

DEFAULT_MAX_TOKENS = 256


@dataclass(frozen=True)
class SchemaJob:
    """A schema to compile for this request: the ``response_format`` schema or the forced tools."""

    kind: Literal["response", "tools"]
    schema: dict[str, Any] | None = None  # kind "response"
    strict: bool = False  # closed objects (the request's strict, or open_objects not set)
    tools: tuple[ToolDef, ...] = ()  # kind "tools"
    where: str = "response_format"
    style: str | None = None  # the JSON style (AgentkitExt.json_style); None: the compiler's default
    no_call: str | None = None  # kind "tools" under tool_choice auto: the pseudo-tool that means "answer in text"
    max_calls: int = 1  # kind "tools": calls in one reply (agentkit.toolcall.calls_template)
    source: str | None = None  # kind "response": the text values are grounded in (agentkit.constrain.ground)
    grounded: bool | None = None  # kind "response" with a source: AgentkitExt.grounded
    # kind "tools": the conversation's text the arguments are grounded in (agentkit.steps.arguments); None: not;
    # and the values the arguments that take what the request left are held to (ArgumentSources.held)
    arguments_source: str | None = None
    arguments_held: Held = ()

    @functools.cached_property
    def key(self) -> str:
        """The cache key: the JSON text with its key order kept (property order is the output's order). Computed
        once: a large schema's text is asked for several times (cache, lane, work) on the event loop."""
        if self.kind == "tools":
            return json.dumps([[t.function.name, t.function.parameters] for t in self.tools]
                              + [self.style, self.no_call, self.strict, self.max_calls, self.arguments_source,
                                 self.arguments_held])
        return json.dumps([self.schema, self.strict, self.style, self.source, self.grounded])

    @functools.cached_property
    def digest(self) -> str:
        """What a build's failure is remembered by: the schema (and ``strict``) whatever the JSON style."""
        what = ([[t.function.name, t.function.parameters] for t in self.tools] + [self.strict]
                if self.kind == "tools" else [self.schema, self.strict])
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


@dataclass
class RequestPlan:
    """Everything decided before the request is queued."""

    messages: list[dict[str, str]]
    config: DecodeConfig
    schema: SchemaJob | None = None
    tool_mode: Literal["none", "forced", "auto"] = "none"
    tool_names: frozenset[str] = frozenset()
    canvas: bool = False  # stream canvas draft events
    max_tokens_given: bool = False  # False: the server may shorten the default to what the context leaves
    logprobs: int | None = None  # None: off; else how many alternatives per token (top_logprobs)
    stop: list[str] = field(default_factory=list)
    # tool_choice auto (serving/toolchoice.py): the text decode's messages (no tool instructions) and config, the
    # pseudo-tool meaning "no call", and the calls already answered by a tool message (canonical keys)
    text_messages: list[dict[str, str]] | None = None
    text_config: DecodeConfig | None = None
    no_call: str | None = None
    answered: frozenset[str] = frozenset()
    retry: bool = False  # tool_choice auto after a tool message reporting a failure: a call (toolchoice.retrying)
    # tool_choice auto: the text a call's arguments must take a value from (the user and tool messages'), else the
    # reply is text (agentkit.toolcall.call_grounded)
    sources: str = ""
    owed: tuple[str, ...] | None = None  # the tools the request still owes a call (agentkit.steps.unserved)
    covered: tuple[str, ...] = ()  # before any call, the tools the request fills with typed values (the same)
    max_calls: int = 1  # tool calls one reply may make (MAX_PARALLEL_CALLS with parallel_tool_calls, the default)
    raw_prompt: str | None = None  # /v1/completions: the prompt as text, without the chat template
    # a response_format grounded in the user's text, sent whole (no stream, no logprobs): its output is settled
    # against the text as extract settles it (serving/settle.py)
    settle: bool = False

    @property
    def mode(self) -> str:
        return self.config.mode

    @property
    def prompt(self) -> list[dict[str, str]] | str:
        """What the engine is given: the raw prompt (``Engine.generate(..., raw=True)``) or the chat messages."""
        return self.raw_prompt if self.raw_prompt is not None else self.messages

    @property
    def prompt_chars(self) -> int:
        return len(self.raw_prompt) if self.raw_prompt is not None else sum(len(m["content"]) for m in self.messages)

    @property
    def step(self) -> ToolStep:
        """The plan as the step runner takes it (:mod:`agentkit.steps.runner`), with the configs as they are now
        (preparation shortens a default max_tokens to what the context leaves)."""
        return ToolStep(self.prompt, self.config, self.tool_mode, self.tool_names, self.max_calls,
                        raw=self.raw_prompt is not None, style=self.schema.style if self.schema else None,
                        no_call=self.no_call, answered=self.answered, retry=self.retry, sources=self.sources,
                        owed=self.owed, covered=self.covered,
                        text_messages=self.text_messages, text_config=self.text_config)

    def choice(self, i: int) -> RequestPlan:
        """The plan of choice ``i`` of a request with ``n`` > 1: its own copy (preparation rewrites the config),
        sampled with seed ``seed + i`` when a seed is given (so the choices differ when sampling, and repeat)."""
        def seeded(c: DecodeConfig | None) -> DecodeConfig | None:
            if c is None:
                return None
            if c.seed is None or i == 0:
                return dataclasses.replace(c)
            return dataclasses.replace(c, seed=c.seed + i if c.seed + i <= validate.SEED_MAX else c.seed - i)
        return dataclasses.replace(self, config=seeded(self.config), text_config=seeded(self.text_config))


def _tools(req: ChatRequest) -> tuple[list[ToolDef], list[ToolDef], str | NamedToolChoice]:
    """(all tools, the forced ones, the tool_choice in effect)."""
    tools = req.tools or []
    choice = req.tool_choice if req.tool_choice is not None else ("auto" if tools else "none")
    if choice != "none" and not tools:
        raise APIError(400, "tool_choice requires tools", param="tool_choice")
    names = [t.function.name for t in tools]
    if len(set(names)) != len(names):
        raise APIError(400, "tool names must be unique", param="tools")
    if isinstance(choice, NamedToolChoice):
        forced = [t for t in tools if t.function.name == choice.function.name]
        if not forced:
            raise APIError(400, f"tool_choice names {choice.function.name!r}, which is not among the tools",
                           param="tool_choice")
        return tools, forced, choice
    return tools, (tools if choice == "required" else []), choice


def max_calls(req: ChatRequest) -> int:
    return MAX_PARALLEL_CALLS if req.parallel_tool_calls is not False else 1


def _schema_job(req: ChatRequest, forced: list[ToolDef], no_call: str | None) -> SchemaJob | None:
    style = req.agentkit.json_style if req.agentkit else None
    closed = not (req.agentkit and req.agentkit.open_objects)  # closed by default, as the SDK's (settings.py)
    if forced:
        return SchemaJob("tools", tools=tuple(forced), where="tools", style=style, strict=closed,
                         max_calls=max_calls(req))
    if no_call:  # the choice decode (an engine without scores): one call or the no-call option
        return SchemaJob("tools", tools=tuple(req.tools or ()), where="tools", style=style, no_call=no_call,
                         strict=closed)
    if style is None and steps.EXTRACT_STYLE != DEFAULT_STYLE:  # the JSON written as agentkit's extract writes it
        style = steps.EXTRACT_STYLE  # (None is the compiler's default, so a custom compile_schema need not know styles)
    rf = req.response_format
    if rf is None or rf.type == "text":
        return None
    if rf.type == "json_object":
        return SchemaJob("response", schema={}, style=style)
    if rf.json_schema is None:
        raise APIError(400, "response_format.json_schema is required for type json_schema",
                       param="response_format.json_schema")
    # arrays capped as extract caps them (agentkit.steps.kinds.cap_arrays), so both decode the same language
    return SchemaJob("response", schema=steps.cap_arrays(rf.json_schema.schema_),
                     strict=bool(rf.json_schema.strict) or closed,
                     where="response_format.json_schema.schema", style=style)


def with_schema_prompt(messages: list[dict[str, str]], schema: dict[str, Any]) -> tuple[list[dict[str, str]], str]:
    """(the messages as ``extract`` writes them for ``schema``, the text values are copied from): the extract
    prompt appended to the last user message, the extract instructions first where no system message is; the copy
    source is that user message's own text. Messages without a user message are returned as they are."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "user"), None)
    if last is None:
        return messages, ""
    try:
        prompt = steps.extract_prompt(steps.OutputSpec(schema))
    except UserError as e:
        raise user_error(e) from None
    out = list(messages)
    source = out[last]["content"]
    out[last] = {"role": "user", "content": source + "\n\n" + prompt}
    if not any(m["role"] == "system" for m in out):
        out.insert(0, {"role": "system", "content": steps.EXTRACT_INSTRUCTIONS})
    return out, source


def decode_config(req: Any, mode: str, max_tokens: int, copy_source: str | None = None,
                  first_digit: bool = True, weights: str | None = None) -> DecodeConfig:
    """The decoding config of ``req`` (a chat or a completions request: the decoding fields they share).
    ``copy_source``: the copy prior's source unless the request names one (``copy_from`` or ``copy_source``), with
    the number prior at a number's first digit when ``first_digit`` (an extraction's; not a tool call's).
    ``weights``: ``DecodeConfig.weights`` when given (a plain reply's, :func:`agentkit.engine.faces.plain_weights`)."""
    ext = req.agentkit or AgentkitExt()
    kw: dict[str, Any] = {"mode": mode, "max_new_tokens": max_tokens,
                          "temperature": req.temperature if req.temperature is not None else 0.0}
    for place, src in (("body", req), ("agentkit", ext)):  # the other decoding settings (agentkit/settings.py)
        for k, name in server_fields(place).items():
            if name not in kw and name not in TEMPLATE_SETTINGS and getattr(src, k, None) is not None:
                kw[name] = getattr(src, k)
    if copy_source is not None and ext.copy_from is None and ext.copy_source is None:
        kw["copy_source"] = copy_source
    if copy_source is not None and first_digit:  # extract's number prior: an extraction's numbers are the text's
        kw["copy_first_digit"] = True if ext.copy_first_digit is None else ext.copy_first_digit
    elif ext.copy_first_digit is not None:
        kw["copy_first_digit"] = ext.copy_first_digit
    if weights is not None:
        kw["weights"] = weights
    try:
        return DecodeConfig(**kw)
    except UserError as e:
        raise user_error(e) from None


def plan_request(req: ChatRequest, *, default_mode: str | None = None, context: int | None = None,
                 max_token_chars: int | None = None, plain_weights: str | None = None) -> RequestPlan:
    """The plan for ``req``. Without ``agentkit.mode`` and ``default_mode``, structured output decodes in its step
    kind's calibrated mode (``agentkit.calibration.step_mode``, as the SDK's ``RoutingPolicy``: tool calls the
    ``tool_call`` step's, a ``response_format`` schema with no tool the ``extract`` step's), free text in the
    ``reply`` step's; a request that samples keeps its mode (verify keeps AR's samples for the seed).
    ``context`` (the model's context in tokens) and ``max_token_chars`` (the longest token's length) bound the prompt cheaply: a prompt of C characters holds at least C / max_token_chars tokens,
    so a prompt that cannot fit is refused here, before it is even tokenized. ``plain_weights``: the weights of a
    plain reply, one with no tool result to carry (:func:`agentkit.engine.faces.plain_weights`, as the SDK's)."""
    tools, forced, choice = _tools(req)
    auto = choice == "auto" and not forced and (req.response_format is None or req.response_format.type == "text")
    no_call = no_call_name([t.function.name for t in tools]) if auto else None
    schema = _schema_job(req, forced, no_call)
    given = req.max_completion_tokens or req.max_tokens
    max_tokens = given or DEFAULT_MAX_TOKENS
    conv = read_conversation(req, tools if choice != "none" else [], no_call)
    messages = conv.messages
    if context is not None and max_token_chars:  # the engine's door bound, before anything is tokenized
        try:
            validate.check_prompt_bound(messages, max_token_chars, context, given or 1)
        except validate.ContextLengthError as e:
            raise user_error(e) from None
    ext = req.agentkit or AgentkitExt()
    schema, messages, source = _response_source(req, ext, schema, messages)
    tool_mode: Literal["none", "forced", "auto"] = "forced" if forced else ("auto" if auto else "none")
    # a schema with no tool: an extraction; a mode asked for is kept
    calibrated = step_mode("tool_call" if tool_mode != "none" else "extract")
    text_mode = ext.mode or default_mode or step_mode("reply")
    mode = (ext.mode or default_mode or calibrated) if schema is not None else text_mode
    names = frozenset(t.function.name for t in (forced or tools)) if tool_mode != "none" else frozenset()
    arguments: ArgumentSources | None = None
    if tool_mode != "none" and _grounded_arguments(ext):
        schema, names, arguments = _grounded_calls(conv, forced or tools, schema, names, auto)
    # auto: a call's decode may take more than a small max_tokens (a small max_tokens must not forbid a call);
    # max_tokens bounds the text reply (serving/toolchoice.py)
    budget = max(max_tokens, DEFAULT_MAX_TOKENS) if auto else max_tokens
    results = conv.results  # after tool results a reply copies their values (agentkit/engine/copy.py), a
    plain = plain_weights if not results else None  # a reply with no tool offered and no tool result to carry
    plan = RequestPlan(messages, decode_config(req, mode, budget, source, weights=plain if schema is None else None),
                       schema, tool_mode, names, ext.canvas, max_tokens_given=given is not None,
                       max_calls=max_calls(req), logprobs=(req.top_logprobs or 0) if req.logprobs else None,
                       stop=list(req.stop or []))
    if schema is not None and schema.kind == "response" and schema.source and schema.grounded is not False \
            and not req.stream and not req.logprobs:  # settled as extract settles (serving/settle.py), which reads
        plan.settle = True                            # the decode's keys and values (agentkit/engine/kept.py)
        plan.config = dataclasses.replace(plan.config, keep_cache=True)
    if schema is None and results:  # call the question's text and theirs (a value passed on to the next call)
        plan.config = decode_config(req, mode, budget, results)
    elif schema is not None and schema.kind == "tools" and results:
        plan.config = decode_config(req, mode, budget, "\n".join(x for x in (conv.last_user, results) if x),
                                    first_digit=False)
    if auto:  # the text reply, when the model chooses no call: free text, in the reply step's mode
        plan.text_messages = conv.reply
        plan.text_config = decode_config(req, text_mode, max_tokens, results)
        plan.no_call, plan.answered, plan.retry, plan.sources = no_call, conv.answered, conv.retry, conv.sources
        plan.owed, plan.covered = (arguments.owed, arguments.covered) if arguments else (None, ())
    return plan


def _response_source(req: ChatRequest, ext: AgentkitExt, schema: SchemaJob | None,
                     messages: list[dict[str, str]]) -> tuple[SchemaJob | None, list[dict[str, str]], str | None]:
    """A ``response_format``'s source text, the messages and the schema job grounded in it: ``grounded_in`` where
    the request gives one, else, with the schema prompt, the last user message (the messages then carry extract's
    prompt, :func:`with_schema_prompt`); None where there is none. ``grounded_in`` without a response schema is a
    400 naming it."""
    if ext.grounded_in is not None and (schema is None or schema.kind != "response"):
        raise APIError(400, "agentkit.grounded_in needs a response_format with a schema (the values it grounds)",
                       param="agentkit.grounded_in")
    if schema is None or schema.kind != "response":
        return schema, messages, None
    source = None
    if ext.schema_prompt:
        rf = req.response_format  # the schema as sent (the prompt shows it as extract does, before capping)
        raw = rf.json_schema.schema_ if rf is not None and rf.type == "json_schema" and rf.json_schema else {}
        messages, source = with_schema_prompt(messages, raw)
    source = ext.grounded_in or source or None
    if source is not None:
        schema = dataclasses.replace(schema, source=source, grounded=ext.grounded)
    return schema, messages, source


def _grounded_calls(conv: Conversation, tools: list[ToolDef], schema: SchemaJob | None, names: frozenset[str],
                    auto: bool) -> tuple[SchemaJob | None, frozenset[str], ArgumentSources]:
    """Grounded arguments (:mod:`agentkit.steps.arguments`): a call's values come from the conversation, a tool it
    gives no required value for is not picked (a forced call is made even so), and what the request left holds the
    next call (:mod:`agentkit.steps.unserved`; not on a retry, which calls again as it was). Returns the schema job
    with the grounding, the tools to choose among and what the call is grounded in (the tools the request owes a
    call, and those it fills with typed values)."""
    fit = frozenset(t.function.name for t in tools if not argument_gaps(t.function.parameters, conv.sources))
    arguments = ArgumentSources(conv.sources) if conv.retry else argument_sources(
        [(t.function.name, t.function.parameters) for t in tools if t.function.name in fit], conv.texts, conv.sources)
    if schema is not None and schema.kind == "tools":
        schema = dataclasses.replace(schema, arguments_source=conv.sources, arguments_held=arguments.held)
    return schema, (fit if fit or auto else names), arguments


def _grounded_arguments(ext: AgentkitExt) -> bool:
    """``agentkit.grounded_arguments``, else the settings table's default."""
    return ext.grounded_arguments if ext.grounded_arguments is not None else BY_NAME["grounded_arguments"].default


def prompt_bound(prompt: str | list[dict[str, str]], context: int | None, max_token_chars: int | None,
                 max_tokens: int) -> None:
    """400 when ``prompt`` cannot fit the context with ``max_tokens`` (:func:`agentkit.validate.check_prompt_bound`:
    from its characters, no tokenizer needed). Nothing is checked when either bound is unknown."""
    if context is not None and max_token_chars:
        try:
            validate.check_prompt_bound(prompt, max_token_chars, context, max_tokens)
        except validate.ContextLengthError as e:
            raise user_error(e) from None
