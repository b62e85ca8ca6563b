"""The dates and days a text writes: full dates as ISO ``YYYY-MM-DD`` (:func:`text_dates`, :func:`date_mentions`)
and, for a tool's date argument, the days it names otherwise (:func:`day_phrases`: ``tomorrow``, ``next Friday``,
``March 5``, ``the 14th``)."""

from __future__ import annotations

import re
from datetime import date

__all__ = ["WEEKDAY", "date_mentions", "day_phrases", "text_dates"]

_MONTHS = {m: i + 1 for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                           "september", "october", "november", "december"])}
_MONTHS |= {m[:3]: i for m, i in list(_MONTHS.items())} | {"sept": 9}
_MON = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATES = [  # (regex, order of the groups: d/m/y as 0/1/2)
    (re.compile(r"\b" + _DAY + r"(?:\s+of)?\s+" + _MON + r",?\s+(\d{4})\b", re.IGNORECASE), "dmy"),
    (re.compile(r"\b" + _MON + r"\s+" + _DAY + r",?\s+(\d{4})\b", re.IGNORECASE), "mdy"),
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), "ymd"),
    (re.compile(r"\b(\d{4})/(\d{1,2})/(\d{1,2})\b"), "ymd"),
]



def text_dates(text: str) -> list[str]:
    """The dates ``text`` writes, as ISO ``YYYY-MM-DD``, in order, each once: ``12 March 2025``, ``the 2nd of June
    2024``, ``March 31, 2025``, ``Oct 4th, 2025``, ``2025-03-12``, ``2025/3/12``. A date without a year is not one."""
    return list(dict.fromkeys(iso for _, _, iso in date_mentions(text)))


def date_mentions(text: str) -> list[tuple[int, int, str]]:
    """(start, end, ISO date) of every date ``text`` writes (:func:`text_dates`), in order, repeats included."""
    found: list[tuple[int, int, str]] = []
    for rx, order in _DATES:
        for m in rx.finditer(text):
            parts = dict(zip(order, m.groups()))
            month = _MONTHS.get(parts["m"].lower()) if not parts["m"].isdigit() else int(parts["m"])
            try:
                found.append((m.start(), m.end(), date(int(parts["y"]), month or 0, int(parts["d"])).isoformat()))
            except ValueError:
                continue
    return sorted(found)


WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
MONTH = _MON  # a month's name or its short form
_PHRASES = re.compile(  # a day said without a full date: relative, a weekday, a day and month without the year
    r"\b(?:today|tomorrow|yesterday|tonight|the day after tomorrow|(?:(?:next|this|last|coming)\s+)?" + WEEKDAY
    + r"|(?:next|this|last)\s+(?:week|month)|(?:(?:next|this|last)\s+)?weekend|" + _MON + r"\s+" + _DAY + r"|(?:the\s+)?" + _DAY
    + r"(?:\s+of)?\s+" + _MON + r"|the\s+\d{1,2}(?:st|nd|rd|th))\b", re.IGNORECASE)


def day_phrases(text: str) -> list[str]:
    """The days ``text`` names, for a tool's date argument without a format: its full dates in ISO form
    (:func:`text_dates`) and, as written, the days it names otherwise (``tomorrow``, ``next Friday``, ``March 5``,
    ``the 20th of March``, ``the 14th``), in order, each once. A weekday written just before a date is that date's
    (``Tuesday the 3rd of March`` names one day, ``the 3rd of March``)."""
    dates = date_mentions(text)
    found = [m for m in _PHRASES.finditer(text) if not any(a <= m.start() < b for a, b, _ in dates)]
    starts = sorted([a for a, _, _ in dates] + [m.start() for m in found])
    said = [(m.start(), m.group()) for m in found
            if not (re.fullmatch(WEEKDAY, m.group(), re.IGNORECASE)
                    and any(re.fullmatch(r"[\s,]{1,3}", text[m.end():s]) for s in starts if s > m.end()))]
    return list(dict.fromkeys(v for _, v in sorted([(a, iso) for a, _, iso in dates] + said)))
