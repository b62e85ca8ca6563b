"""What each step kind asks of the model: its template, its prompt text, and how its output is checked.

Step kinds: ``plan`` (a ``Plan`` object), ``tool_call`` (``{"name": NAME, "arguments": {...}}`` with NAME a choice
among the tools plus ``final_answer``, or one tool the model's scores picked, ``agentkit.decide``), ``tool_input`` (a templated tool's input text, under the template its
``template_factory`` builds at call time), ``extract`` (the final structured output) and ``reply`` (free text).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any, Literal, Protocol

import jsonschema
from pydantic import BaseModel, Field, PydanticSchemaGenerationError, PydanticUserError, TypeAdapter, ValidationError

from ..constrain.canonical import json_style
from ..constrain.ground import type_branches
from ..constrain.nodes import Template
from ..engine.stats import GenerationResult
from ..errors import UserError
from ..toolcall import NAME_ARGS, CallShape, call_template, calls_template, read_call, tools_prompt

StepKind = Literal["plan", "tool_call", "tool_input", "extract", "reply"]
STEP_KINDS: tuple[str, ...] = ("plan", "tool_call", "tool_input", "extract", "reply")
FINAL_ANSWER = "final_answer"
# a call is {"name": ..., "arguments": {...}}: BFCL's, the server's and SmolLM2's function-calling format; a fake
# model's output in the older {"tool": ..., "arguments": ...} shape is still read (``read_tool_call``)
TOOL_SHAPE = NAME_ARGS
LEGACY_SHAPE = CallShape(name_key="tool", args_key="arguments")
# the JSON style of the SDK's templates; None: each step's own default, EXTRACT_STYLE for the extract (and plan)
# templates (compile_template), TOOL_STYLE for tool calls (tool_call_template)
STYLE: str | None = None
EXTRACT_STYLE = "spaced"  # extraction benchmark (docs/extraction.md) and the four texts of issue 37: spaced best
TOOL_STYLE = "spaced"  # BFCL: spaced ahead of compact, which invited junk optional keys (docs/benchmarks.md)


class StepTool(Protocol):
    """What a step reads of a tool (``agentkit.sdk.Tool`` has it): its name, description and schemas, and for a
    templated tool the factory of its input's template and that step's prompt."""

    name: str
    description: str
    parameters_schema: dict[str, Any]
    input_prompt: str | None
    template_factory: Callable[[], Template] | None

    @property
    def templated(self) -> bool: ...

    @property
    def input_parameter(self) -> str | None: ...

    @property
    def call_schema(self) -> dict[str, Any]: ...

    @property
    def spec(self) -> dict[str, Any]: ...


class Plan(BaseModel):
    """A short plan the agent writes before acting (the ``plan`` step)."""

    steps: list[str] = Field(min_length=1, max_length=8, description="What to do, in order, one short step each")


class OutputError(Exception):
    """A structured step's output was not JSON or did not validate (sent back to the model as a retry prompt)."""


def compile_template(schema: dict[str, Any], style: str | None = STYLE, strict: bool = True) -> Template:
    """The canvas template for a JSON Schema (cached by the compiler), in JSON ``style`` (None:
    :data:`EXTRACT_STYLE`).

    Compiled *strict*: an object that lists its properties gets no other keys. Tool arguments and output types are
    consumed by functions and pydantic models that only read the declared fields, and an open object invites a
    small model to ramble keys until its token budget runs out. The template stays a subset of the schema, so
    every output still validates against it.
    """
    from ..constrain.compiler import compile_schema

    return compile_schema(cap_arrays(schema), strict=strict, style=style or EXTRACT_STYLE)


ARRAY_CAP = 16  # items, for arrays whose schema sets no maxItems (as the BFCL call templates cap them)
_MAPS = ("properties", "patternProperties", "$defs", "definitions")  # keys whose value maps names to schemas
_VALUES = ("enum", "const", "default", "examples", "required")  # keys whose value is data, not a schema


def map_subschemas(schema: Any, node: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """``schema`` rebuilt with ``node`` applied to every schema object in it, the innermost first (the values of
    :data:`_MAPS` keys are name -> schema maps, those of :data:`_VALUES` keys data, left as they are)."""
    if isinstance(schema, list):
        return [map_subschemas(x, node) for x in schema]
    if not isinstance(schema, dict):
        return schema
    return node({k: ({n: map_subschemas(v, node) for n, v in sub.items()} if k in _MAPS and isinstance(sub, dict)
                     else sub if k in _VALUES else map_subschemas(sub, node)) for k, sub in schema.items()})


def cap_arrays(schema: Any) -> Any:
    """``schema`` with every array that sets no ``maxItems`` capped at :data:`ARRAY_CAP` items: a small model
    stuck repeating an element (an extraction's attendee list written 60 times) still closes the output within
    its token budget. The language stays a subset of the schema's, so every output still validates."""

    def cap(out: dict[str, Any]) -> dict[str, Any]:
        if (out.get("type") == "array" or "items" in out) and "maxItems" not in out \
                and out.get("minItems", 0) <= ARRAY_CAP:
            out["maxItems"] = ARRAY_CAP
        return out

    return map_subschemas(schema, cap)


def for_step(template: Template, step: str, **meta: Any) -> Template:
    """A copy of ``template`` labelled with its step (compiled templates are cached and shared: never mutate)."""
    return Template(root=template.root, schema=template.schema, compile_ms=template.compile_ms, kind=template.kind,
                    meta={**template.meta, "step": step, **meta})


def tool_call_template(tools: list[StepTool], style: str | None = STYLE, *, final_answer: bool = True,
                       strict: bool = True, max_calls: int = 1,
                       parameters: dict[str, Template] | None = None) -> Template:
    """One template for a tool-call step (:func:`agentkit.toolcall.call_template`, keys ``name``/``arguments``):
    a choice of the tools (ARGS under that tool's compiled schema; ``{}`` for a templated tool) and, with
    ``final_answer``, ``final_answer`` with ``{}``. One tool without ``final_answer``: its name pinned, only its
    arguments decoded (the call the model's scores picked). ``max_calls`` > 1 (parallel tool calls, without
    ``final_answer``): one to that many calls, one per line (:func:`agentkit.toolcall.calls_template`; its value is
    the list of calls). ``parameters``: a tool's arguments compiled already (:mod:`agentkit.steps.arguments`:
    grounded in the conversation), in place of its parameters schema."""
    given = parameters or {}
    specs: list[tuple[str, Any]] = [(t.name, None if t.templated else given.get(t.name, t.parameters_schema))
                                    for t in tools]
    if final_answer:
        specs.append((FINAL_ANSWER, None))
    schema = tool_call_schema(tools, final_answer=final_answer)
    if max_calls > 1 and not final_answer:
        template = calls_template(specs, max_calls=max_calls, style=style or TOOL_STYLE, shape=TOOL_SHAPE,
                                  strict=strict)
        schema = {"type": "array", "items": schema, "minItems": 1, "maxItems": max_calls}
    else:
        template = call_template(specs, style=style or TOOL_STYLE, shape=TOOL_SHAPE, strict=strict)
    return Template(root=template.root, schema=schema, compile_ms=template.compile_ms, kind=template.kind,
                    meta={"step": "tool_call", "style": template.meta["style"], "open_objects": not strict,
                          "tools": {t.name: t.call_schema for t in tools}, "max_calls": max_calls})


def call_head(style: str | None = STYLE) -> str:
    """The text a call starts with up to its name, in JSON ``style``: ``{"name": "`` (spaced)."""
    return "{" + json.dumps(TOOL_SHAPE.name_key) + json_style(style or TOOL_STYLE).key_sep + '"'


def call_text(name: str, args: Any) -> str:
    """A call as the model reads its own earlier call in the conversation (the tool prompt's form)."""
    return json.dumps({TOOL_SHAPE.name_key: name, TOOL_SHAPE.args_key: args}, ensure_ascii=False, default=str)


def read_tool_call(value: Any) -> tuple[str, Any] | None:
    """``(tool name, arguments)`` of a parsed tool-call step output (:func:`agentkit.toolcall.read_call`), held to
    the step's exact shape (``name``/``arguments``, or the older ``tool``/``arguments``): no other keys."""
    if not isinstance(value, dict):
        return None
    for shape in (TOOL_SHAPE, LEGACY_SHAPE):
        if set(value) == {shape.name_key, shape.args_key}:
            return read_call(value, shape)
    return None


def tool_call_schema(tools: list[StepTool], *, final_answer: bool = True) -> dict[str, Any]:
    """The JSON Schema of a tool-call step: ``anyOf`` one object per tool; tools' ``$defs`` hoisted and prefixed."""
    defs: dict[str, Any] = {}
    variants = []
    for t in tools:
        params = copy.deepcopy(t.call_schema)
        local = params.pop("$defs", {})
        if local:
            names = {f"#/$defs/{k}": f"#/$defs/{t.name}__{k}" for k in local}
            params = _rewrite_refs(params, names)
            defs.update({f"{t.name}__{k}": _rewrite_refs(v, names) for k, v in local.items()})
        variants.append(_call_variant(t.name, params))
    if final_answer:
        variants.append(_call_variant(FINAL_ANSWER, {"type": "object", "properties": {}, "additionalProperties": False}))
    schema: dict[str, Any] = {"anyOf": variants} if len(variants) > 1 else variants[0]
    if defs:
        schema["$defs"] = defs
    return schema


def _call_variant(name: str, params: dict[str, Any]) -> dict[str, Any]:
    keys = (TOOL_SHAPE.name_key, TOOL_SHAPE.args_key)
    return {"type": "object", "properties": {keys[0]: {"const": name}, keys[1]: params},
            "required": list(keys), "additionalProperties": False}


def _rewrite_refs(node: Any, names: dict[str, str]) -> Any:
    if isinstance(node, dict):
        return {k: (names.get(v, v) if k == "$ref" and isinstance(v, str) else _rewrite_refs(v, names))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_rewrite_refs(v, names) for v in node]
    return node


RESPONSE_KEY = "response"  # the key a non-object output is wrapped in (pydantic-ai's name for it)


class OutputSpec:
    """An ``output_type``: its JSON Schema (what the extract step's template is compiled from), its validation and
    its JSON form.

    - a JSON Schema dict: validated with ``jsonschema``; the output is the JSON value;
    - any type pydantic can validate (a ``BaseModel``, ``int``, ``list[str]``, a union, ``Literal``, a
      ``TypedDict``, a dataclass, ...): validated with a ``TypeAdapter``; the output is an instance of the type.
      A type whose schema is not an object (``int``, ``list[T]``, a union) is asked for as
      ``{"response": VALUE}`` and unwrapped, as pydantic-ai does: a JSON object is what the model is prompted for,
      and a union stays a choice inside it.
    """

    def __init__(self, output_type: Any) -> None:
        self.output_type = output_type
        self.wrapped = False
        self._validator = self._adapter = None
        if isinstance(output_type, dict):
            try:
                cls = jsonschema.validators.validator_for(output_type, default=jsonschema.Draft202012Validator)
                cls.check_schema(output_type)
            except jsonschema.SchemaError as e:
                raise UserError(f"output_type is not a valid JSON Schema: {e.message}") from e
            self.schema = output_type
            self.name = str(output_type.get("title") or "output")
            self._validator = cls(output_type)
            return
        try:
            self._adapter = TypeAdapter(output_type)
            schema = self._adapter.json_schema()
        except (PydanticSchemaGenerationError, PydanticUserError, TypeError, ValueError) as e:
            raise UserError(f"output_type must be a JSON Schema dict or a type pydantic can validate (a model, "
                            f"int, list[str], a union, ...), got {output_type!r}: {e}") from e
        self.name = getattr(output_type, "__name__", None) or str(schema.get("title") or "output")
        if schema.get("type") != "object":
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {RESPONSE_KEY: schema}, "required": [RESPONSE_KEY],
                      "additionalProperties": False, **({"$defs": defs} if defs else {})}
            self.wrapped = True
        self.schema = schema

    def template(self, style: str | None, strict: bool) -> Template:
        """The extract step's template: the schema compiled (:func:`compile_template`)."""
        return compile_template(self.schema, style, strict)

    def template_key(self) -> str:
        """What :meth:`template` depends on (an agent caches templates by it)."""
        return json.dumps(self.schema, sort_keys=True, default=str)

    def parse(self, result: GenerationResult) -> Any:
        """The validated output (an instance of the type, or the JSON value for a schema dict). Raises
        ``OutputError`` with a readable reason."""
        return self.validate(parse_json(result))

    def validate(self, value: Any) -> Any:
        """:meth:`parse` of a JSON value."""
        if self._validator is not None:
            errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
            if errors:
                raise OutputError("; ".join(f"{_pointer(e.absolute_path)}: {e.message}" for e in errors[:8]))
            return value
        if self.wrapped:
            if not isinstance(value, dict) or set(value) != {RESPONSE_KEY}:
                raise OutputError(f'expected {{"{RESPONSE_KEY}": ...}}, got {compact(value)[:200]}')
            value = value[RESPONSE_KEY]
        try:
            return self._adapter.validate_python(value)  # type: ignore[union-attr]
        except ValidationError as e:
            raise OutputError(pydantic_errors(e)) from e

    def dump(self, value: Any) -> Any:
        """The output as JSON data (what the conversation keeps)."""
        if self._adapter is None:
            return value
        data = self._adapter.dump_python(value, mode="json")
        return {RESPONSE_KEY: data} if self.wrapped else data


def parse_json(result: GenerationResult) -> Any:
    """The JSON value of a structured generation: ``result.value`` if the generator parsed it, else the text."""
    if result.value is not None:
        return result.value
    try:
        return json.loads(result.text)
    except json.JSONDecodeError as e:
        raise OutputError(f"output is not JSON ({e.msg} at char {e.pos}): {result.text[:200]!r}") from e


def pydantic_errors(e: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, err['loc'])) or '<root>'}: {err['msg']}" for err in e.errors()[:8])


def _pointer(path: Any) -> str:
    return "/" + "/".join(map(str, path)) if path else "<root>"


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# prompts ------------------------------------------------------------------------------------------------------


DEFAULT_INSTRUCTIONS = "You are a helpful assistant."


def system_prompt(instructions: str | None, tools: list[StepTool], example: bool = True) -> str:
    """The instructions, then the tools and how to call one (:func:`agentkit.toolcall.tools_prompt`: BFCL's default
    prompt, the one the engine's BFCL figures were measured with), with ``final_answer`` to stop."""
    parts = [instructions or DEFAULT_INSTRUCTIONS]
    if tools:
        parts.append(tools_prompt([t.spec for t in tools], "The tool's result comes back in the next message. When "
                                  f'you have what you need, or no tool is needed, reply {{"name": "{FINAL_ANSWER}", '
                                  '"arguments": {}}.', example))
    return "\n\n".join(parts)


def plan_prompt() -> str:
    return 'Before acting, write a short plan as JSON: {"steps":["...", ...]}.'


# the extract step's prompt variants (measured on ``agentkit eval extract``, docs/extraction.md): the schema alone;
# the schema and one short worked example (a schema and text no benchmark item has) showing values written as the
# text writes them, a number as a number, and an optional field the text does not state left out
_EXAMPLE_VALUE = {"name": "Kim Park", "age": 35, "city": "Rome"}
EXTRACT_PROMPTS = ("schema", "example")
EXTRACT_PROMPT = "schema"  # the default


# the system instructions of ``extract`` (and of the server's response_format when a request has none)
EXTRACT_INSTRUCTIONS = "Extract the information the schema asks for from the user's text. Answer with JSON only."


NUMBER_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})


def prompt_schema(schema: Any) -> Any:
    """A schema as the extract prompt shows it: without numeric bounds (``minimum``, ``maximum``, exclusive ones),
    which the template's token masks enforce anyway and a small model copies as the value: with the loop adapter,
    ``attendees: int = Field(le=50)`` came out 50 for "the four of us" (99 with ``le=99``). A list of types
    (``"type": ["string", "null"]``) is shown as pydantic's ``anyOf`` (:func:`~agentkit.constrain.ground.type_branches`),
    so the two forms of one schema get one prompt (the model wrote other values for the other text)."""
    return map_subschemas(schema, lambda out: type_branches({k: v for k, v in out.items() if not (
        k in NUMBER_BOUNDS and isinstance(v, (int, float)) and not isinstance(v, bool))}))


def extract_prompt(spec: OutputSpec, prompt: str | None = None, style: str | None = None) -> str:
    """The extract step's prompt ``prompt`` (None: :data:`EXTRACT_PROMPT`, read at call time so the extraction
    benchmark can measure the variants): the output's schema (compact JSON) and, for ``"example"``, a worked
    example written in JSON ``style`` (None: :data:`EXTRACT_STYLE`)."""
    prompt = prompt or EXTRACT_PROMPT
    if prompt not in EXTRACT_PROMPTS:
        raise UserError(f"extract prompt must be one of {EXTRACT_PROMPTS}, got {prompt!r}")
    if not spec.schema.get("properties") and not spec.schema.get("$ref"):  # any JSON (json_object)
        return "Answer with one JSON object holding the values the text gives, written as the text writes them."
    text = f"Answer with JSON matching this schema: {compact(prompt_schema(spec.schema))}"
    if prompt == "example":
        seps = (",", ":") if (style or EXTRACT_STYLE) == "compact" else (", ", ": ")
        text += ("\nFor example, for the text \"Kim Park, 35, works in Rome as a nurse.\" and a schema with the "
                 "properties name, age, city and an optional email, the answer is "
                 + json.dumps(_EXAMPLE_VALUE, separators=seps))
    return text


def tool_input_template(tool: StepTool) -> Template:
    """The template of a templated tool's ``tool_input`` step, built now; labelled with the step and the tool.

    A shallow copy keeps the factory's ``Template`` subclass and attributes (e.g. an edit template's files).
    """
    template = tool.template_factory()  # type: ignore[misc]
    if not isinstance(template, Template):
        raise UserError(f"tool {tool.name!r}: template_factory returned {type(template).__name__}, not a Template")
    labelled = copy.copy(template)
    labelled.meta = {**template.meta, "step": "tool_input", "tool": tool.name}
    return labelled


def tool_input_prompt(tool: StepTool) -> str:
    return tool.input_prompt or f"Now write the input of {tool.name}: {tool.description}"


def results_text(calls: list[tuple[str, Any, str]]) -> str:
    """The results so far, each with its call, as the answer step reads them; empty when no call returned one."""
    if not calls:
        return ""
    lines = [f"{tool}({_call_args(args)}) returned {text}" for tool, args, text in calls]
    if len(lines) == 1:
        return f"Use this tool result in your answer: {lines[0]}\n"
    return "Use these tool results in your answer:\n" + "\n".join(f"- {x}" for x in lines) + "\n"


def _call_args(args: Any) -> str:
    if not isinstance(args, dict):
        return compact(args)
    return ", ".join(f"{k}={compact(v)}" for k, v in args.items())


#: The free-text reply ends at a loop of this many copies of one piece (``DecodeConfig.stop_loops``;
#: ``model_settings={"stop_loops": 0}`` turns it off). SmolLM2-135M's coding assistant replied "... a a a a" to its
#: 256-token budget. On the answer step of 85 tasks (``python evals/answer_copy.py --bias 5 --loops 0,3,4``): 4 ends
#: every runaway reply (6 at the budget -> 0) and carries the value as often as off; 3 without a 12-token floor
#: ended two replies at a number's repeated digits, before the value (docs/agent_loop.md).
REPLY_STOP_LOOPS = 4


def reply_prompt(task: str, results: str) -> str:
    """The answer step's user message after tool calls: the task, the results, and a one-sentence answer (the
    wording that carried the result into the answer most often on the default model)."""
    if not results:
        return f"{task}\n\nAnswer in one or two plain sentences."
    return f"{task}\n\n{results}Answer in one sentence that gives the result."


def observation(tool: str, text: str, *, error: bool = False) -> str:
    return f"Tool {tool} failed: {text}" if error else f"Tool {tool} returned: {text}"


_OBSERVATION = re.compile(r"Tool \S+ (returned|failed): ")


def is_observation(text: str, *, failed: bool = False) -> bool:
    """Whether a user message is a tool's result as :func:`observation` writes it (not the user's own words);
    ``failed``: a failure's."""
    m = _OBSERVATION.match(text)
    return bool(m) and (not failed or m.group(1) == "failed")
