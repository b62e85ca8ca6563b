"""The words of a field's or a tool's name (``room_type``, ``maxGuests``, ``due-date``, ``web_search``): what the
grounding rules read a name by (a ``city`` argument holds a place, a ``from_unit`` a unit, a ``web_search`` tool
searches)."""

from __future__ import annotations

import re

__all__ = ["name_words"]


def name_words(name: str) -> list[str]:
    """The words of a field name: ``room_type``, ``maxGuests`` and ``due-date`` are two each."""
    return [w for w in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name) if w]
