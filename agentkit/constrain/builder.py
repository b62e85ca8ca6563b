"""What the parts of the layout (:mod:`~agentkit.constrain.arrays`, :mod:`~agentkit.constrain.objects`,
:mod:`~agentkit.constrain.extras`) need from the builder they work for: the :class:`ValueBuilder` protocol, which
:class:`~agentkit.constrain.layout.Layout` implements. The parts depend on this protocol, not on the layout module,
so the layout can call them and they can call back (``value``) without an import cycle."""

from __future__ import annotations

from typing import Protocol

from .canonical import JsonStyle, Resolver
from .literals import LiteralCheck
from .nodes import Node
from .normalize import Normalizer


class ValueBuilder(Protocol):
    norm: Normalizer  # the normalise step: flat alternatives, per-key and per-item subschemas
    res: Resolver  # resolves $ref against the root schema
    literals: LiteralCheck  # which literal values (enum members, property names) the schemas accept
    style: JsonStyle  # pinned punctuation and member order
    strict: bool  # no extra keys where an object lists properties and never mentions extras

    def value(self, conj: list, order: list, iptr: str, ctx: int) -> Node | None:
        """Node for a value that must satisfy every ``(schema, pointer)`` in ``conj``; None when nothing can."""
        ...
