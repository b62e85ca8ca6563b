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

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from ..constrain import compiler
from ..constrain.canonical import json_style
from ..constrain.ground import ground_arguments, grounded_argument_template
from ..constrain.nodes import Template
from ..settings import BY_NAME
from ..toolcall import sources_of
from .kinds import TOOL_STYLE, StepTool

__all__ = ["argument_gaps", "choosable_tools", "groundable", "grounded_parameters"]

ToolT = TypeVar("ToolT", bound=StepTool)


def argument_gaps(parameters: dict[str, Any] | None, sources: str) -> list[str]:
    """The required arguments of a tool (its ``parameters`` schema) that ``sources`` gives no value for."""
    return ground_arguments(parameters or {}, sources).ungrounded


def groundable(tools: Sequence[ToolT], sources: str) -> list[ToolT]:
    """The ``tools`` whose every required argument has a value in ``sources`` (a templated tool, whose input is
    written apart, always)."""
    return [t for t in tools if t.templated or not argument_gaps(t.parameters_schema, sources)]


def choosable_tools(tools: Sequence[ToolT], chat: Sequence[dict[str, Any]],
                    settings: Mapping[str, Any]) -> tuple[str | None, list[ToolT]]:
    """(the text a step's call is grounded in, None when ``settings`` (an agent's model settings) turn
    ``grounded_arguments`` off; the ``tools`` it may choose among: the :func:`groundable` ones of the ``chat``
    messages' :func:`sources_of`, all of them when off)."""
    if not settings.get("grounded_arguments", BY_NAME["grounded_arguments"].default):
        return None, list(tools)
    sources = sources_of(chat)
    return sources, groundable(tools, sources)


def grounded_parameters(tools: Sequence[StepTool], sources: str, style: str | None = None,
                        strict: bool = True) -> dict[str, Template]:
    """Each tool's arguments compiled grounded in ``sources`` (``style``: the call template's JSON style), by tool
    name (templated tools left out: their call takes no arguments)."""
    st = json_style(style or TOOL_STYLE)  # as agentkit.toolcall.call_template compiles a tool's parameters
    out: dict[str, Template] = {}
    for t in tools:
        if not t.templated:
            out[t.name] = grounded_argument_template(t.parameters_schema, sources,
                                                     lambda s: compiler.compile_schema(s, strict=strict, style=st))
    return out
