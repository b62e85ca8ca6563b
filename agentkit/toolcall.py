"""Tool calls as JSON: one template builder and one parser, shared by the BFCL eval, the SDK and the server.

A call is one JSON object ``{NAME_KEY: "tool name", ARGS_KEY: {...}}`` (:class:`CallShape`; BFCL and the server use
``name``/``arguments``, the SDK ``tool``/``arguments``). :func:`call_template` builds its template from a list of
``(name, parameters)``: the text every tool's call starts with is pinned, the name is a ``Choice`` over the tools
(pinned literals), and each tool's arguments follow its own compiled parameter schema, all in one JSON style
(:data:`~agentkit.constrain.canonical.STYLES`). :func:`parse_call` reads a call back from a parsed value or from
free text. :func:`reply_of` says which of a step's calls its reply returns (each once, to its tools, the repeat
rule under ``tool_choice`` auto).
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .constrain.canonical import JsonStyle, json_style
from .constrain.dates import resolved_days
from .constrain.ground import text_currencies
from .constrain.nodes import Choice, Lit, Repeat, Template, json_lines, seq
from .constrain.numbers import text_numbers

__all__ = ["CALL_SEP", "MAX_PARALLEL_CALLS", "CallRules", "CallShape", "ToolSpec", "call_grounded", "call_schema",
           "call_template", "calls_template", "choice_prompt", "json_lines", "parse_call", "parse_calls", "read_call",
           "reply_calls", "reply_of", "result_values", "scalar_leaves", "sources_of", "tools_list", "tools_prompt"]

ToolSpec = tuple[str, "dict | Template | None"]  # (name, parameters: a JSON Schema, a compiled template, or None: {})


@dataclass(frozen=True)
class CallShape:
    """The keys of a call object."""

    name_key: str = "name"
    args_key: str = "arguments"


NAME_ARGS = CallShape()

# the worked example of the tool prompt (a tool no benchmark has): BFCL's default prompt's, which showed a value
# copied as the request writes it, a number as a number, and an optional argument left out (0.422 against 0.405
# without it on all 600 BFCL questions, evals/results/bfcl/prompts600.json.gz)
CALL_EXAMPLE = ('For example, for the request "Book a table for 12 at Marigold Bistro" and a tool book_table with '
                'the arguments restaurant, guests and an optional time, the call is:\n'
                '{"name": "book_table", "arguments": {"restaurant": "Marigold Bistro", "guests": 12}}')


NO_CALL = "respond"  # the pseudo-tool that means "no call: answer in text" (a tool's name may not be it)
NO_CALL_NOTE = ('If no tool is needed, reply with only {{"name": "{name}", "arguments": {{}}}} '
                "and then answer in plain text.")


def no_call_name(tool_names: Sequence[str] | frozenset[str]) -> str:
    """:data:`NO_CALL`, or (when a tool already has that name) the first of ``respond_``, ``respond__``, ... that
    is not a tool's name."""
    name = NO_CALL
    while name in tool_names:
        name += "_"
    return name


def choice_prompt(specs: Sequence[dict], no_call: str | None = None, *, example: bool = False,
                  listed_first: bool = False) -> str:
    """The system text for deciding whether (and which tool) to call: the tools (one JSON spec a line, spaced) and
    the call format, then with ``no_call`` how to choose no call, then with ``example`` :data:`CALL_EXAMPLE`. The
    server's ``tool_choice`` prompt and the SDK's decision by scores (no example; ``agentkit/sdk/_decide.py``, whose
    measured alternatives use the example). Measured against :func:`tools_prompt` for the decision: the server's
    auto decision right 0.80 against 0.60 (``evals/tool_choice_server.py --n 20``). ``listed_first``: the tools as
    :func:`tools_prompt` opens (:func:`tools_list`), then the format, so the two texts share their opening."""
    fmt = '{"name": "<tool name>", "arguments": {...}}.'
    if listed_first:
        text = f"{tools_list(specs)}\n\nTo call a tool, reply with only a JSON object {fmt}"
    else:
        text = f"You can call these tools. To call one, reply with only a JSON object {fmt}\n" + "\n".join(
            json.dumps(s) for s in specs)
    text += "\n" + NO_CALL_NOTE.format(name=no_call) if no_call else ""
    return text + ("\n\n" + CALL_EXAMPLE if example else "")


def tools_list(specs: Sequence[dict]) -> str:
    """The opening of :func:`tools_prompt`: the tools, one compact JSON line each."""
    lines = "\n".join(json.dumps(s, ensure_ascii=False, separators=(",", ":")) for s in specs)
    return f"You can call the following tool{'s' if len(specs) != 1 else ''}:\n{lines}"


def tools_prompt(specs: Sequence[dict], stop: str = "", example: bool = True) -> str:
    """The tools (``{"name", "description", "parameters"}`` each, one compact JSON line) and how to call one, in
    BFCL's default prompt's words, with ``stop`` (how to finish) after the format: the system text of the SDK's tool
    steps (the server keeps its own, measured better for tool_choice auto: ``serving/plan.py``)."""
    return (f"{tools_list(specs)}\n\n"
            "To call a tool, reply with exactly one call, written as JSON in this form:\n"
            '{"name": "<tool name>", "arguments": {"<argument>": <value>, ...}}\n'
            "Reply with the JSON only." + (f" {stop}" if stop else "") + ("\n\n" + CALL_EXAMPLE if example else ""))


def _head(name: str, shape: CallShape, st: JsonStyle) -> str:
    return ("{" + json.dumps(shape.name_key) + st.key_sep + json.dumps(name, ensure_ascii=False) + st.item_sep
            + json.dumps(shape.args_key) + st.key_sep)


def call_template(tools: Sequence[ToolSpec], *, style: str | JsonStyle | None = None, shape: CallShape = NAME_ARGS,
                  strict: bool = True, cached: bool = True, meta: dict | None = None) -> Template:
    """The template of one call to any of ``tools`` in ``style`` (None: the compiler's default style).

    ``tools``: ``(name, parameters)`` pairs; ``parameters`` is a JSON Schema (compiled here, ``strict`` as in
    :func:`~agentkit.constrain.compiler.compile_schema`, through the compiler's cache unless ``cached=False``), an
    already compiled :class:`Template` (it must be in the same style), or None for a tool that takes no arguments
    (``{}``). The text every tool's call starts with (``{"name": "`` and any shared start of the names, in the
    style's spelling) is pinned before the choice of the name, and the closing ``}`` after it. Pinning the quote and
    the names' shared start is what the BFCL figures were measured with: leaving them to the model cost 23% more
    forwards on 20 BFCL questions (ar-constrained, compact) and changed 2 of 20 answers, with the same success."""
    from .constrain import compiler

    if not tools:
        raise ValueError("call_template needs at least one tool")
    names = [n for n, _ in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate tool names in {names}")
    st = json_style(style)
    fn = compiler.compile_schema if cached else compiler.compile_schema_uncached
    args, ms, schemas = [], 0.0, []
    for name, params in tools:
        if params is None:
            args.append(Lit("{}"))
            schemas.append({"type": "object", "properties": {}, "additionalProperties": False})
            continue
        tpl = params if isinstance(params, Template) else fn(params, strict=strict, style=st)
        if tpl.meta.get("style", st.name) != st.name:
            raise ValueError(f"tool {name!r}: its template is in style {tpl.meta['style']!r}, not {st.name!r}")
        args.append(tpl.root)
        ms += tpl.compile_ms
        schemas.append(tpl.schema if isinstance(tpl.schema, dict) else params)
    heads = [_head(n, shape, st) for n in names]
    if len(heads) == 1:
        root = seq(Lit(heads[0]), args[0], Lit("}"))
    else:
        common = os.path.commonprefix(heads)  # pinned: a choice has no single forced path
        options = tuple(seq(Lit(h[len(common):]), a) for h, a in zip(heads, args))
        root = seq(Lit(common), Choice(options), Lit("}"))
    return Template(root=root, schema=call_schema(list(zip(names, schemas)), shape=shape), compile_ms=ms,
                    kind="json", meta={"style": st.name, "functions": names, **(meta or {})})


MAX_PARALLEL_CALLS = 8  # calls in one reply with parallel tool calls (the SDK, the server, BFCL's parallel files)
CALL_SEP = "\n"  # between the calls of one reply: JSON lines, as the server writes earlier calls into the history


def calls_template(tools: Sequence[ToolSpec], *, max_calls: int, style: str | JsonStyle | None = None,
                   shape: CallShape = NAME_ARGS, strict: bool = True, cached: bool = True,
                   meta: dict | None = None) -> Template:
    """One to ``max_calls`` calls to any of ``tools`` (parallel tool calls), one per line: the first call is
    :func:`call_template`'s, token for token; after each call the model either ends (EOS, where the template may
    end) or writes :data:`CALL_SEP` and another call. Its kind is ``"jsonl"``: the result's value is the list of
    call objects. ``max_calls`` 1 is :func:`call_template` itself."""
    if max_calls < 1:
        raise ValueError(f"max_calls must be >= 1, got {max_calls}")
    one = call_template(tools, style=style, shape=shape, strict=strict, cached=cached, meta=meta)
    if max_calls == 1:
        return one
    return Template(root=Repeat(one.root, sep=CALL_SEP, min=1, max=max_calls),
                    schema={"type": "array", "items": one.schema, "minItems": 1, "maxItems": max_calls},
                    compile_ms=one.compile_ms, kind="jsonl", meta={**one.meta, "max_calls": max_calls})


def call_schema(tools: Sequence[tuple[str, dict]], *, shape: CallShape = NAME_ARGS) -> dict:
    """JSON Schema of one call to any of ``tools`` (``(name, parameters schema)`` pairs)."""
    branches = [{"type": "object", "properties": {shape.name_key: {"const": n}, shape.args_key: p},
                 "required": [shape.name_key, shape.args_key], "additionalProperties": False} for n, p in tools]
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def call_key(name: str, args: Any) -> str:
    """A canonical form of a call: key order and spacing do not matter (the repeat rule of the SDK and the
    server compares calls by it)."""
    return name + " " + json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def read_call(obj: Any, shape: CallShape = NAME_ARGS) -> tuple[str, Any] | None:
    """``(name, arguments)`` of a parsed call object, or None.

    Accepts ``{NAME_KEY: FN, ARGS_KEY: {...}}`` (also ``parameters`` for the arguments, and arguments written as a
    JSON string, as OpenAI-style APIs send them) and the one-key form ``{FN: {...}}``."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get(shape.name_key), str):
        args = obj.get(shape.args_key, obj.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                pass
        return obj[shape.name_key], args
    if len(obj) == 1:
        (name, args), = obj.items()
        if isinstance(args, dict):
            return name, args
    return None


def _json_objects(text: str) -> Iterator[dict]:
    dec = json.JSONDecoder()
    i = text.find("{")
    while i >= 0:
        try:
            obj, end = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            yield obj
        i = text.find("{", end)


def parse_call(text: str, value: Any = None, *, shape: CallShape = NAME_ARGS) -> tuple[str, Any] | None:
    """The call in an output: ``value`` (the template's parsed JSON) when it reads as one, else the first JSON
    object in ``text`` that does (free-text output: prose and code fences around it are skipped)."""
    call = read_call(value, shape) if value is not None else None
    if call is not None:
        return call
    for obj in _json_objects(text or ""):
        call = read_call(obj, shape)
        if call is not None:
            return call
    return None


def parse_calls(text: str, value: Any = None, *, shape: CallShape = NAME_ARGS) -> list[tuple[str, Any]]:
    """Every call in an output, in order: ``value`` (a ``"jsonl"`` template's list, or one call object) when it
    reads as calls, else each JSON object in ``text`` that reads as one."""
    values = value if isinstance(value, list) else ([value] if value is not None else [])
    calls = [c for c in (read_call(v, shape) for v in values) if c is not None]
    if calls:
        return calls
    return [c for c in (read_call(o, shape) for o in _json_objects(text or "")) if c is not None]


MAX_RESULT_VALUES = 16_000  # characters of result_values kept (the latest), under the server's copy_source cap


def scalar_leaves(value: Any) -> Iterator[Any]:
    """The scalar values of JSON data in document order (a dict's values, a list's items; booleans and None
    included, keys not): what ``result_values``, ``call_grounded`` and ``extract``'s ``grounded`` look at."""
    if isinstance(value, dict):
        for v in value.values():
            yield from scalar_leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from scalar_leaves(v)
    else:
        yield value


def result_values(texts: Sequence[str], limit: int = MAX_RESULT_VALUES) -> str:
    """A free-text copy source from tool results: each result's scalar values (its strings and numbers, not its
    keys) when it is JSON, else its text; one per line; the last ``limit`` characters (the latest results)."""
    lines: list[str] = []
    for text in texts:
        try:
            lines.extend(str(v) for v in scalar_leaves(json.loads(text))
                         if isinstance(v, str | int | float) and not isinstance(v, bool))
        except (ValueError, RecursionError):
            lines.append(text)
    text = "\n".join(x.replace("\n", " ") for x in lines if x.strip())
    return text[-limit:] if len(text) > limit else text


_WORD = re.compile(r"[^\W_]{3,}")  # a word of three or more letters or digits


def sources_of(messages: Sequence[dict[str, Any]]) -> str:
    """The text a call's values may come from (:func:`call_grounded`, :mod:`agentkit.steps.arguments`): the chat
    ``messages``' user and tool contents, one per line."""
    return "\n".join(str(m.get("content") or "") for m in messages if m.get("role") in ("user", "tool", "function"))


def call_grounded(args: Any, text: str) -> bool:
    """Whether a call takes at least one of its argument values from ``text`` (the conversation's user and tool
    messages): a string found there whole (case aside), one of its words of three or more letters or digits, a
    currency code the text names (``SEK`` for "Swedish kronor"), a day it names as its ISO date (``2026-03-05`` for
    "thursday", :func:`~agentkit.constrain.dates.resolved_days`), or one of its numbers the text writes (an
    expression ``7.25% * 18400`` for "18,400"); a number the text writes (``$1,200``, ``5000`` for "5k", spelled
    out under a hundred). A call with nothing to check (no arguments, only booleans or nulls) is grounded. On BFCL's 600 questions 590 ground-truth calls pass (each argument's
    first allowed value); a 135M model asked "What is the capital of France?" with a triangle tool calls it with
    ``{"base": 10, "height": 10}``, which does not."""
    from .engine.copy import source_numbers  # torch: only where the engine is

    low, checked = text.casefold(), False
    numbers = functools.cache(lambda: {float(n) for n in source_numbers(text.encode())}
                              | {float(n) for n in text_numbers(text)})
    codes = functools.cache(lambda: set(text_currencies(text)))
    days = functools.cache(lambda: set(resolved_days(text)))
    for v in scalar_leaves(args):
        if isinstance(v, str) and v.strip():
            checked = True
            s = v.casefold()
            if s in low or any(w in low for w in _WORD.findall(s)) or v.strip().upper() in codes():
                return True
            if any(float(n) in numbers() for n in source_numbers(v.encode())):  # "7.25% * 18400" for "18,400"
                return True
            if v.strip() in days():  # "2026-03-05" for "thursday"
                return True
        elif isinstance(v, int | float) and not isinstance(v, bool):
            checked = True
            if float(v) in numbers():
                return True
    return not checked


class CallRules(Protocol):
    """What the rules read of a step (``agentkit.steps.runner.ToolStep`` has it)."""

    tool_mode: str  # "none", "forced" or "auto"
    tool_names: frozenset[str]
    max_calls: int
    answered: frozenset[str]  # the call_key of every call a tool message already answered


def reply_of(step: CallRules, text: str, value: Any) -> list[tuple[str, Any]]:
    """The calls a generation's reply returns (:func:`reply_calls` of what it wrote): a forced call's text or
    value; under ``tool_choice`` auto only the call decode's parsed value (a text reply, ``value`` None, is
    content even if it holds JSON); none without tools."""
    calls: list[tuple[str, Any]] = []
    if step.tool_mode == "forced":
        calls = parse_calls(text, value)
    elif step.tool_mode == "auto" and value is not None:
        calls = parse_calls("", value)
    return reply_calls(step, calls)


def reply_calls(step: CallRules, calls: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The calls a reply returns: to the step's tools, with object arguments, each once (a call written twice in
    one reply is made once), at most ``step.max_calls``; under ``tool_choice`` auto without the calls a tool
    message already answered (the repeat rule)."""
    out, seen = [], set()
    for name, args in calls:
        key = call_key(name, args)
        if name not in step.tool_names or not isinstance(args, dict) or key in seen:
            continue
        if step.tool_mode == "auto" and key in step.answered:
            continue
        seen.add(key)
        out.append((name, args))
    return out[:step.max_calls]
