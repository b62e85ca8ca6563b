"""Grounded tool arguments: a call's values come from the conversation (the ``grounded_arguments`` setting).

A small model fills a tool's arguments with what its training made likely: the example in the tool's description
(``get_weather(city="Paris")`` asked "What is 17.5 times 23?"), a stock date (``2022-01-01T00:00:00Z`` for
"tomorrow"), a currency the question never names. Grounded, each argument is held to the conversation's user and
tool messages, field by field, as ``extract`` holds an output to its text (:mod:`agentkit.constrain.ground`); its
required arguments, that is (:func:`agentkit.constrain.ground.ground_arguments`: an optional one has a default and may be the model's own):

- a string is a span of them (``Tokyo``, ``tomorrow``, ``20th of March``, ``kg``);
- a number is a number they write (``1,500`` is ``1500``; a result's ``-3`` too);
- a currency code (``from_currency``) is one they write or name (``Mexican pesos`` is ``MXN``);
- an arithmetic expression (``expression``) is their numbers joined by operators (``17.5 * 23``);
- a day (``date``, ``day``) is one they name: ``tomorrow``, ``next Friday``, ``March 5``, a full date in ISO form;
- a ``format: date`` string is one of their dates in ISO form;
- a (from, to) pair (``from_currency``/``to_currency``, ``from_unit``/``to_unit``) takes each side from where
  the conversation marks it (:func:`agentkit.constrain.ground.anchor_pairs`): the from side right after the amount or ``from``, the to side
  after ``to``/``in``/``into`` (``How much is 10000 rupees in Canadian dollars?``: ``INR`` to ``CAD``).

:func:`groundable` leaves out of a step's choice the tools with a required argument the conversation has no value
for (a calculator on a question that writes no number). :func:`grounded_parameters` compiles each offered tool's
arguments grounded, for :func:`agentkit.steps.kinds.tool_call_template`. A parameter's ``{"grounded": false}``
(``Annotated[str, Field(json_schema_extra={"grounded": False})]``) turns it off for that parameter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..constrain import compiler
from ..constrain.canonical import json_style
from ..constrain.ground import ground_arguments, grounded_argument_template
from ..constrain.nodes import Template
from ..settings import BY_NAME
from ..toolcall import sources_of
from .kinds import TOOL_STYLE, StepTool, is_observation
from .lookup import asks_present, searches
from .unserved import Mention, asked_fields, covering, mentions, names_a_date, narrowed, operands, owed, untaken

__all__ = ["ArgumentSources", "Turn", "argument_gaps", "argument_sources", "choosable_tools", "groundable",
           "grounded_parameters", "turn_of"]

Held = tuple[tuple[str, str, str], ...]  # (tool, argument, what it is held to: a schema overlay's JSON)


@dataclass(frozen=True)
class ArgumentSources:
    """What a step's call is grounded in: the conversation's ``text`` (its user and tool messages), the tools the
    request still owes a call (``owed``, best first: :mod:`agentkit.steps.unserved`; empty when calls took every
    value the request wrote; None before any call, for a request that writes none, or when what is left no tool
    takes), what each of their arguments that takes what is left is held to (``held``) and, before any call, the
    tools the request fills every required argument of with a typed value (``covered``, :func:`covering`)."""

    text: str
    owed: tuple[str, ...] | None = None
    held: Held = ()
    covered: tuple[str, ...] = ()

    def held_for(self, tool: str) -> dict[str, dict[str, Any]]:
        return {arg: json.loads(overlay) for name, arg, overlay in self.held if name == tool}

    def parameters(self, tool: str, parameters: dict[str, Any]) -> dict[str, Any]:
        """``tool``'s parameters with its arguments held to what the request left (:func:`narrowed`)."""
        return narrowed(parameters, self.held_for(tool))


@dataclass(frozen=True)
class Turn:
    """The conversation since its request: the ``request`` (the last user message that is not a tool's result),
    the ``calls`` made since (the assistant messages after it: each its calls' JSON, one per line) and the tools'
    ``results`` since (their text)."""

    request: str
    calls: tuple[str, ...] = ()
    results: tuple[str, ...] = ()
    failed: bool = False  # the last result reports a failure (the next call is a retry, not a further ask)

    @property
    def last_tool(self) -> str | None:
        """The name of the last call made since the request (None: none, or not readable)."""
        for text in reversed(self.calls):
            for line in reversed(text.splitlines()):
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                if isinstance(value, dict) and isinstance(value.get("name"), str):
                    return value["name"]
        return None


def turn_of(chat: Sequence[Mapping[str, Any]]) -> Turn:
    """The :class:`Turn` of ``chat``: messages as the SDK writes them (a tool's result a user message,
    :func:`agentkit.steps.kinds.observation`) or as OpenAI's (``tool`` messages; an assistant's ``tool_calls``
    given as its content, :func:`agentkit.steps.kinds.call_text` each)."""
    calls: list[str] = []
    results: list[str] = []
    failed: bool | None = None
    for m in reversed(chat):
        role, content = m.get("role"), str(m.get("content") or "")
        if role == "assistant":
            calls.append(content)
        elif role in ("tool", "function") or (role == "user" and is_observation(content)):
            results.append(content.split(": ", 1)[1] if role == "user" else content)
            failed = is_observation(content, failed=True) if failed is None else failed
        elif role == "user":
            return Turn(content, tuple(reversed(calls)), tuple(reversed(results)), bool(failed))
    return Turn("")


def argument_sources(tools: Sequence[tuple[str, dict[str, Any] | None]], chat: Sequence[Mapping[str, Any]],
                     sources: str | None = None) -> ArgumentSources:
    """The :class:`ArgumentSources` of a step on ``chat`` among ``tools`` ((name, parameters schema) pairs;
    ``sources``: the chat's :func:`sources_of` when already read). The owed tools come best first: those that take
    the most of what is left, in the order given; where only names are left, the last call took a name (a word, not
    a code such as ``R-8823``) and its tool takes one,
    that tool alone (a second city for the weather, the name a search left out), unless that tool searches and the
    request asks for the present ("look up the Louvre's hours, and also the weather in Paris now": the model's
    scores choose); none (``()``) when calls took
    every value the request wrote; a day the request tells rather than asks about (not :func:`names_a_date`: "flying to
    Mumbai on Saturday") is no value it wrote. Before any call since the request, the tools it :func:`covering`
    fills."""
    text = sources_of(chat) if sources is None else sources
    turn = turn_of(chat)
    if turn.failed:  # a retry calls the failed tool again, as it was (agentkit.steps.decision's retry rule)
        return ArgumentSources(text)
    made = "\n".join(turn.calls)
    request = [m for m in mentions(turn.request) if m.kind != "day" or names_a_date(m, turn.request)]  # a day told
    said = [*request, *asked_fields(turn.request, turn.results)]  # ("flying to Mumbai on Saturday") is no ask
    left = untaken(said, made)
    found = owed([(n, p or {}) for n, p in tools], left, text, operands(turn.request, left, turn.results, made))
    most = max((len(h) for h in found.values()), default=0)
    best: tuple[str, ...] | None = tuple(n for n, h in found.items() if len(h) == most) or None
    if left and all(m.kind == "name" for m in left) and turn.last_tool in found and _took_a_name(turn, request) \
            and not (searches(turn.last_tool) and asks_present(turn.request)):
        best = (turn.last_tool,)
    if not left and made.strip() and said:
        best = ()  # served
    held = tuple((n, a, json.dumps(v)) for n, h in found.items() for a, v in h.items())
    return ArgumentSources(text, best, held, () if made.strip() else covering(tools, turn.request, text, request))


def _took_a_name(turn: Turn, said: Sequence[Mention]) -> bool:
    """Whether the last call took one of the request's names (``said``) that is a word, not a code ("Rome", "Dune";
    not "R-8823", a reference looked up so that another tool takes its value)."""
    last = turn.calls[-1].casefold() if turn.calls else ""
    return any(m.kind == "name" and not re.search(r"\d", m.text) and m.text.casefold() in last for m in said)


ToolT = TypeVar("ToolT", bound=StepTool)


def argument_gaps(parameters: dict[str, Any] | None, sources: str) -> list[str]:
    """The required arguments of a tool (its ``parameters`` schema) that ``sources`` gives no value for."""
    return ground_arguments(parameters or {}, sources).ungrounded


def groundable(tools: Sequence[ToolT], sources: str) -> list[ToolT]:
    """The ``tools`` whose every required argument has a value in ``sources`` (a templated tool, whose input is
    written apart, always)."""
    return [t for t in tools if t.templated or not argument_gaps(t.parameters_schema, sources)]


def choosable_tools(tools: Sequence[ToolT], chat: Sequence[dict[str, Any]],
                    settings: Mapping[str, Any]) -> tuple[ArgumentSources | None, list[ToolT]]:
    """(what a step's call is grounded in (:func:`argument_sources`), None when ``settings`` (an agent's model
    settings) turn ``grounded_arguments`` off; the ``tools`` it may choose among: the :func:`groundable` ones of
    the ``chat`` messages' :func:`sources_of`, all of them when off)."""
    if not settings.get("grounded_arguments", BY_NAME["grounded_arguments"].default):
        return None, list(tools)
    chosen = groundable(tools, sources_of(chat))
    return argument_sources([(t.name, t.parameters_schema) for t in chosen if not t.templated], chat), chosen


def grounded_parameters(tools: Sequence[StepTool], sources: ArgumentSources, style: str | None = None,
                        strict: bool = True) -> dict[str, Template]:
    """Each tool's arguments compiled grounded in ``sources`` (``style``: the call template's JSON style), by tool
    name (templated tools left out: their call takes no arguments)."""
    st = json_style(style or TOOL_STYLE)  # as agentkit.toolcall.call_template compiles a tool's parameters
    out: dict[str, Template] = {}
    for t in tools:
        if not t.templated:
            out[t.name] = grounded_argument_template(sources.parameters(t.name, t.parameters_schema), sources.text,
                                                     lambda s: compiler.compile_schema(s, strict=strict, style=st))
    return out
