"""OpenAI chat-completions request models.

The top level is strict: a field that is neither implemented nor listed in :data:`IGNORED` is a 400 naming it (a
misspelt or unsupported option is never silently dropped). Nested objects (messages, tools) stay lenient, as
clients echo back fields of earlier responses there (``refusal``, ``annotations``, ...).

Every string and number in the body is checked once, before anything else runs (:func:`check_json`): a lone UTF-16
surrogate (``"\\ud800"``, which no tokenizer can encode) or a non-finite number (``NaN``, ``Infinity``, ``1e999``,
which JSON itself does not allow) is a 400 naming the field where it sits. Nesting deeper than
:data:`MAX_JSON_DEPTH` is refused the same way.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentkit.settings import bounds
from agentkit.validate import SURROGATE, surrogate_error  # the engine's own checks

# accepted and ignored (documented in the README): they change nothing a single-model server does
IGNORED = ("user", "metadata", "store", "service_tier", "prompt_cache_key",
           "safety_identifier", "stream_options")
MAX_JSON_DEPTH = 64
# numbers and flags are taken as JSON gives them: "10" or true for an integer, "0.5" for a number, 1 or "true" for a
# flag are 400s (pydantic's lax mode would convert them); an integer is a valid number
SInt = Annotated[int, Field(strict=True)]
SFloat = Annotated[float, Field(strict=True)]
SBool = Annotated[bool, Field(strict=True)]


class FieldError(ValueError):
    """A bad value at ``param`` (a JSON path such as ``messages[0].content``); becomes a 400 naming it."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


def check_json(value: Any, path: str = "") -> None:
    """Raise :class:`FieldError` at the first lone surrogate, non-finite number or over-deep nesting (iterative:
    no recursion limit on hostile input)."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        v, p, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise FieldError(p or "body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(v, str):
            why = surrogate_error(v)
            if why:
                raise FieldError(p or "body", why)
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise FieldError(p or "body", f"non-finite number {v!r} (JSON numbers must be finite)")
        elif isinstance(v, dict):
            for k, x in v.items():
                kp = f"{p}.{k}" if p else str(k)
                if isinstance(k, str) and SURROGATE.search(k):
                    raise FieldError(p or "body", f"key {k!r} holds a lone UTF-16 surrogate")
                stack.append((x, kp, depth + 1))
        elif isinstance(v, list):
            stack.extend((x, f"{p}[{i}]", depth + 1) for i, x in enumerate(v))


# ----------------------------------------------------------------------------------------------------------------
# request models


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class ContentPart(_Lenient):
    type: str
    text: str | None = None


class FunctionCall(_Lenient):
    name: str
    arguments: str | dict[str, Any] = "{}"


class MessageToolCall(_Lenient):
    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None


class FunctionDef(_Lenient):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDef(_Lenient):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(BaseModel):
    name: str


class NamedToolChoice(_Lenient):
    type: Literal["function"]
    function: NamedFunction


class JSONSchemaFormat(_Lenient):
    name: str = "output"
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None
    description: str | None = None


class ResponseFormat(_Lenient):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None


MAX_COPY_SOURCE = 65536  # characters of agentkit.copy_source


class AgentkitExt(BaseModel):
    """The ``"agentkit"`` extension object (``extra_body={"agentkit": {...}}`` with the openai client). A setting
    left out (None) takes the settings table's default (``agentkit/settings.py``, ``docs/settings.md``)."""

    model_config = ConfigDict(extra="forbid")
    mode: Literal["ar", "diffusion", "verify"] | None = None
    canvas_length: SInt | None = Field(default=None, **bounds("canvas_length"))
    max_denoising_steps: SInt | None = Field(default=None, **bounds("max_denoising_steps"))
    sampler: Literal["auto", "jacobi", "mask", "uniform"] | None = None
    canvas: SBool = False  # stream canvas draft events (``event: agentkit.canvas``) when true
    step: str | None = Field(default=None, max_length=64)  # a label (the SDK's step kind); decoding ignores it
    # how the pinned JSON punctuation is written (agentkit.constrain.canonical.STYLES); None: the compiler's default
    json_style: Literal["compact", "spaced", "spaced-schema-order"] | None = None
    # False/None: an object schema that lists properties and says nothing of additionalProperties generates those
    # keys only, also without "strict" and in tools (agentkit/settings.py open_objects); True: other keys too
    open_objects: SBool | None = None
    # a tool call's values come from the user and tool messages (agentkit.steps.arguments); None: the table's default
    grounded_arguments: SBool | None = None
    # how a greedy structured step picks a token (agentkit.config.DecodeConfig.greedy); None: the table's default
    greedy: Literal["byte", "token"] | None = None
    # logit bonus for tokens that copy a span of the prompt inside a JSON string (DecodeConfig.copy_bias); None: the
    # table's default
    copy_bias: SFloat | None = Field(default=None, **bounds("copy_bias"))
    copy_from: Literal["prompt", "user"] | None = None  # the copy prior's source (DecodeConfig.copy_from)
    copy_numbers: SBool | None = None  # the copy prior in number slots too (DecodeConfig.copy_numbers)
    # the number copy prior at a number's first digit too (DecodeConfig.copy_first_digit); None: on for a
    # response_format with the schema prompt (as extract), off otherwise
    copy_first_digit: SBool | None = None
    # the bonus for copying copy_source's values in a text reply (DecodeConfig.copy_text_bias); None: the table's
    # default
    copy_text_bias: SFloat | None = Field(default=None, **bounds("copy_text_bias"))
    # the output ends at a loop of this many copies of one piece (DecodeConfig.stop_loops); None: the table's default
    stop_loops: SInt | None = Field(default=None, **bounds("stop_loops"))
    # the copy prior's source text itself (DecodeConfig.copy_source); None: copy_from's, or for a text reply after
    # tool messages the results' values (the copy prior on free text needs a source)
    copy_source: str | None = Field(default=None, max_length=MAX_COPY_SOURCE)
    # response_format: append the schema prompt agentkit's ``extract`` writes to the last user message (and its
    # instructions as the system message when there is none), copying values from that message's own text, so
    # the server and ``extract`` give the same values for the same schema and text; false: the messages as sent
    schema_prompt: SBool = True
    # response_format with the schema prompt: values grounded in that user message's text, as extract grounds them
    # (agentkit.constrain.ground: spans, the numbers, dates and currency codes it writes); None: extract's
    # default kinds, false: off (placeholders still refused), true: every kind
    grounded: SBool | None = None
    # response_format: the text its values come from (grounded in it and settled against it, as extract's), in place
    # of the schema prompt's user message; with schema_prompt false, the messages go as sent (the SDK's HTTP
    # backend sends extract's text so)
    grounded_in: str | None = Field(default=None, max_length=MAX_COPY_SOURCE)


class Body(BaseModel):
    """A request body's top level: strict (a field neither implemented nor listed is a 400 naming it), every string
    and number checked before anything else (:func:`check_json`). Chat, completions and responses requests."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _valid_json(cls, data: Any) -> Any:
        check_json(data)
        return data


class Sampling(Body):
    """The decoding fields chat completions and completions share, checked once here (``logit_bias``'s keys and
    range by ``DecodeConfig``, a token id against the vocabulary by the engine)."""

    temperature: SFloat | None = Field(default=None, **bounds("temperature"))
    top_p: SFloat | None = Field(default=None, **bounds("top_p"))
    top_k: SInt | None = Field(default=None, **bounds("top_k"))
    seed: SInt | None = Field(default=None, **bounds("seed"))
    stop: str | list[str] | None = None
    agentkit: AgentkitExt | None = None
    frequency_penalty: SFloat | None = Field(default=None, **bounds("frequency_penalty"))
    presence_penalty: SFloat | None = Field(default=None, **bounds("presence_penalty"))
    logit_bias: dict[str, SFloat] | None = None
    user: Any = None
    stream_options: Any = None

    @field_validator("stop")
    @classmethod
    def _stop(cls, v: str | list[str] | None) -> list[str] | None:
        if v is None:
            return None
        v = [v] if isinstance(v, str) else v
        if len(v) > 4 or any(not s for s in v):
            raise ValueError("stop must be a non-empty string or a list of at most 4 non-empty strings")
        return v


class ChatRequest(Sampling):
    model: str  # required, as OpenAI requires it (a request without it is a 400 naming it)
    messages: list[Message] = Field(min_length=1)
    tools: list[ToolDef] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    response_format: ResponseFormat | None = None
    max_tokens: SInt | None = Field(default=None, **bounds("max_new_tokens"))
    max_completion_tokens: SInt | None = Field(default=None, **bounds("max_new_tokens"))
    stream: SBool = False
    n: SInt = Field(default=1, ge=1, le=128)  # at most ServerConfig.max_n (checked by the service)
    logprobs: SBool = False
    top_logprobs: SInt | None = Field(default=None, ge=0, le=20)
    # ignored fields (see IGNORED; the neutral-only ones and user, stream_options are Sampling's)
    metadata: Any = None
    store: Any = None
    service_tier: Any = None
    # several calls in one reply (up to agentkit.toolcall.MAX_PARALLEL_CALLS); false: one. None: true, OpenAI's
    # default (the SDK's is false: agentkit/settings.py)
    parallel_tool_calls: SBool | None = None
    prompt_cache_key: Any = None
    safety_identifier: Any = None

    @model_validator(mode="after")
    def _logprobs(self) -> ChatRequest:
        if self.top_logprobs is not None and not self.logprobs:
            raise FieldError("top_logprobs", "requires logprobs: true")
        return self
