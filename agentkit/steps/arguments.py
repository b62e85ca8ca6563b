"""Grounded tool arguments: a call's values come from the conversation (the ``grounded_arguments`` setting).

A small model fills a tool's arguments with what its training made likely: the example in the tool's description
(``get_weather(city="Paris")`` asked "What is 17.5 times 23?"), a stock date (``2022-01-01T00:00:00Z`` for
"tomorrow"), a currency the question never names. Grounded, each argument is held to the conversation's user and
tool messages, field by field, as ``extract`` holds an output to its text (:mod:`agentkit.constrain.ground`); its
required arguments, that is (:func:`required_only`: an optional one has a default and may be the model's own):

- a string is a span of them (``Tokyo``, ``tomorrow``, ``20th of March``, ``kg``);
- a number is a number they write (``1,500`` is ``1500``; a result's ``-3`` too);
- a currency code (``from_currency``) is one they write or name (``Mexican pesos`` is ``MXN``);
- an arithmetic expression (``expression``) is their numbers joined by operators (``17.5 * 23``);
- a day (``date``, ``day``) is one they name: ``tomorrow``, ``next Friday``, ``March 5``, a full date in ISO form;
- a ``format: date`` string is one of their dates in ISO form;
- a (from, to) pair (``from_currency``/``to_currency``, ``from_unit``/``to_unit``) takes each side from where
  the conversation marks it (:func:`anchor_pairs`): the from side right after the amount or ``from``, the to side
  after ``to``/``in``/``into`` (``How much is 10000 rupees in Canadian dollars?``: ``INR`` to ``CAD``).

:func:`groundable` leaves out of a step's choice the tools with a required argument the conversation has no value
for (a calculator on a question that writes no number). :func:`grounded_parameters` compiles each offered tool's
arguments grounded, for :func:`agentkit.steps.kinds.tool_call_template`. A parameter's ``{"grounded": false}``
(``Annotated[str, Field(json_schema_extra={"grounded": False})]``) turns it off for that parameter.
"""

from __future__ import annotations

import re

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..constrain import compiler
from ..constrain.canonical import json_style
from ..constrain.ground import (ARGUMENT_KINDS, FUNCTION_WORDS, currency_mentions, ground_schema, grounded_template, is_currency,
                                name_words, number_mentions)
from ..constrain.nodes import Template
from ..settings import BY_NAME
from .kinds import TOOL_STYLE, StepTool

__all__ = ["argument_gaps", "choosable_tools", "groundable", "grounded_arguments", "grounded_parameters", "sources_of"]

ToolT = TypeVar("ToolT", bound=StepTool)


def sources_of(messages: Sequence[dict[str, Any]]) -> str:
    """The text a call's values may come from: the chat ``messages``' user and tool contents, one per line (the
    server's ``tool_choice`` reads the same, ``serving/conversation.py``)."""
    return "\n".join(str(m.get("content") or "") for m in messages if m.get("role") in ("user", "tool", "function"))


def argument_gaps(parameters: dict[str, Any] | None, sources: str) -> list[str]:
    """The required arguments of a tool (its ``parameters`` schema) that ``sources`` gives no value for."""
    return ground_schema(anchor_pairs(required_only(parameters or {}), sources), sources,
                         kinds=ARGUMENT_KINDS).ungrounded


_PAIRS = (("from", "to"), ("source", "target"), ("origin", "destination"))
_TO_CUE = re.compile(r"\b(?:to|in|into|as|how many|how much)\s+", re.IGNORECASE)
_FROM_CUE = re.compile(r"\bfrom\s+", re.IGNORECASE)
_STOP = "|".join(sorted(FUNCTION_WORDS | {"into", "how", "many", "much", "what", "what's"}, key=len, reverse=True))
# one or two words; the second not a function word (``CAD a month`` is ``CAD``)
_PHRASE = re.compile(r"(?!(?:" + _STOP + r")\b)[^\W\d_][\w°'-]*(?:\s+(?!(?:" + _STOP + r")\b)[^\W\d_][\w'-]*)?",
                     re.IGNORECASE)


def pair_fields(parameters: dict[str, Any]) -> list[tuple[str, str]]:
    """The (from, to) pairs among a tool's required string arguments: ``from_currency``/``to_currency``,
    ``source_lang``/``target_lang``, ``origin``/``destination``."""
    props = parameters.get("properties") or {}
    required = [k for k in parameters.get("required") or () if isinstance(props.get(k), dict)
                and props[k].get("type") == "string"]
    out = []
    for a in required:
        wa = [w.lower() for w in name_words(a)]
        for first, second in _PAIRS:
            if first in wa:
                rest = [second if w == first else w for w in wa]
                b = next((k for k in required if [w.lower() for w in name_words(k)] == rest), None)
                if b is not None:
                    out.append((a, b))
    return out


def pair_phrases(text: str) -> tuple[list[str], list[str]]:
    """What a conversion's two sides are called in ``text``: the from side, a phrase right after a number or
    ``from`` (``1,500 Mexican pesos``, ``100 F``, ``from Paris``); the to side, one right after ``to``/``in``/
    ``into``/``as``/``how many`` (``in Canadian dollars``, ``to miles``, ``How many yen``). Each phrase is one or
    two words, not function words, in order, each once."""
    starts_from = [b for _, b, _ in number_mentions(text)] + [m.end() for m in _FROM_CUE.finditer(text)]
    starts_to = [m.end() for m in _TO_CUE.finditer(text)]

    numbers = {a for a, _, _ in number_mentions(text)}

    def phrases(starts: list[int]) -> list[str]:
        found = []
        for p in starts:
            p += len(text[p:]) - len(text[p:].lstrip())
            m = None if p in numbers else _PHRASE.match(text, p)  # "in one sentence" marks no side
            if m:
                found.append((p, m.group()))
        return list(dict.fromkeys(v for _, v in sorted(found)))
    return phrases(sorted(set(starts_from))), phrases(starts_to)


def anchor_pairs(parameters: dict[str, Any], sources: str) -> dict[str, Any]:
    """``parameters`` with each (from, to) pair (:func:`pair_fields`) held to its side of the conversation
    (:func:`pair_phrases`): a currency code to the codes its side names, a string to its side's phrases. A side the
    text does not mark leaves the pair as it is."""
    pairs = pair_fields(parameters)
    if not pairs:
        return parameters
    froms, tos = pair_phrases(sources)
    props = dict(parameters["properties"])
    for a, b in pairs:
        values = [_side(props[a], a, froms), _side(props[b], b, tos)]
        if all(values) and values[0] != values[1]:
            props[a], props[b] = ({**props[k], "enum": v} for k, v in zip((a, b), values))
    return {**parameters, "properties": props}


def _side(sub: dict[str, Any], name: str, phrases: list[str]) -> list[str]:
    if "enum" in sub or "const" in sub or sub.get("grounded") is False:
        return []
    if is_currency(name, sub):
        return list(dict.fromkeys(c for p in phrases for _, _, c in currency_mentions(p)))
    return phrases


def required_only(parameters: dict[str, Any]) -> dict[str, Any]:
    """``parameters`` with its optional arguments left ungrounded (``"grounded": false``, unless they say
    otherwise): an argument with a default is the tool's to fill, and the model may write a value it knows (the
    speed of light, an initial speed of 0 "from rest") where the conversation writes none."""
    props = parameters.get("properties")
    if not isinstance(props, dict):
        return parameters
    required = set(parameters.get("required") or ())
    return {**parameters, "properties": {
        k: ({"grounded": False, **v} if k not in required and isinstance(v, dict) else v) for k, v in props.items()}}


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


def grounded_arguments(parameters: dict[str, Any], sources: str,
                       compile_schema: Callable[[dict[str, Any]], Template]) -> Template:
    """A tool's arguments (its ``parameters`` schema) compiled by ``compile_schema``, grounded in ``sources``."""
    return grounded_template(anchor_pairs(required_only(parameters), sources), sources, compile_schema,
                             kinds=ARGUMENT_KINDS)[0]


def grounded_parameters(tools: Sequence[StepTool], sources: str, style: str | None = None,
                        strict: bool = True) -> dict[str, Template]:
    """Each tool's arguments compiled grounded in ``sources`` (``style``: the call template's JSON style), by tool
    name (templated tools left out: their call takes no arguments)."""
    st = json_style(style or TOOL_STYLE)  # as agentkit.toolcall.call_template compiles a tool's parameters
    out: dict[str, Template] = {}
    for t in tools:
        if not t.templated:
            out[t.name] = grounded_arguments(t.parameters_schema, sources,
                                             lambda s: compiler.compile_schema(s, strict=strict, style=st))
    return out
