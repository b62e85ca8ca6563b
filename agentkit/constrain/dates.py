"""The dates and days a text writes: full dates as ISO ``YYYY-MM-DD`` (:func:`text_dates`, :func:`date_mentions`)
and, for a tool's date argument, the days it names otherwise (:func:`day_phrases`: ``tomorrow``, ``next Friday``,
``March 5``, ``the 14th``), each resolved against today where it names one day (:func:`resolve_day`: ``thursday``
is the coming Thursday, ``the 20th`` this month's or next month's).

Today is the machine's date, or ``AGENTKIT_TODAY`` (``YYYY-MM-DD``) where it is set: an environment whose calendar
has its own today (a benchmark's, a test's) sets it."""

from __future__ import annotations

import os
import re
from datetime import date, timedelta

from ..errors import UserError

__all__ = ["MONTH", "WEEKDAY", "date_mentions", "day_phrases", "resolve_day", "resolved_days", "text_dates", "today"]

_MONTHS = {m: i + 1 for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                           "september", "october", "november", "december"])}
_MONTHS |= {m[:3]: i for m, i in list(_MONTHS.items())} | {"sept": 9}
_MON = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
             "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth", "eighteenth", "nineteenth",
             "twentieth", *(f"twenty-{o}" for o in ["first", "second", "third", "fourth", "fifth", "sixth", "seventh",
                                                    "eighth", "ninth"]), "thirtieth", "thirty-first"]
# a day of the month in digits ("20", "20th") or in words ("twentieth", "twenty first"), beside a month's name
_DAY = r"(\d{1,2}|" + "|".join(o.replace("-", "[- ]") for o in sorted(_ORDINALS, key=len, reverse=True)) \
    + r")(?:st|nd|rd|th)?"
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
                found.append((m.start(), m.end(), date(int(parts["y"]), month or 0, _day_number(parts["d"])).isoformat()))
            except ValueError:
                continue
    return sorted(found)


def _day_number(day: str) -> int:
    """A day of the month as :data:`_DAY` reads it: ``20`` or ``twentieth`` is 20."""
    return int(day) if day.isdigit() else _ORDINALS.index(re.sub(r"\s+", "-", day.lower())) + 1


WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
# a day and a month as much of the world writes them, where no month-first reading exists ("14/03": the 13th to the
# 31st); "3/4" stays a fraction, "03/04" unread
_DAY_SLASH_MONTH = r"(?:1[3-9]|2\d|3[01])/(?:0?[1-9]|1[0-2])(?![/\d])"
MONTH = _MON  # a month's name or its short form
_PHRASES = re.compile(  # a day said without a full date: relative, a weekday, a day and month without the year
    r"\b(?:today|tomorrow|tmrw|tmr|tomoz|yesterday|tonight|the day after tomorrow|(?:(?:next|this|last|coming)\s+)?" + WEEKDAY
    + r"|(?:next|this|last)\s+(?:week|month)|(?:(?:next|this|last)\s+)?weekend|(?!(?-i:may)\s+[^\d\s])" + _MON + r"\s+"
    + _DAY + r"|(?:the\s+)?" + _DAY
    + r"(?:\s+of)?\s+" + _MON + r"|the\s+\d{1,2}(?:st|nd|rd|th)(?!\s+centur)|" + r"(?<![\d/])" + _DAY_SLASH_MONTH + r")\b",
    re.IGNORECASE)


_TODAY_VAR = "AGENTKIT_TODAY"
_RELATIVE = {"today": 0, "tonight": 0, "tomorrow": 1, "tmrw": 1, "tmr": 1, "tomoz": 1, "yesterday": -1,
             "the day after tomorrow": 2}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def today() -> date:
    """Today: ``AGENTKIT_TODAY`` where it is set (a ``UserError`` if it is no ``YYYY-MM-DD``), else the machine's."""
    pinned = os.environ.get(_TODAY_VAR, "").strip()
    if not pinned:
        return date.today()
    try:
        return date.fromisoformat(pinned)
    except ValueError:
        raise UserError(f"{_TODAY_VAR}={pinned!r} is not a date as YYYY-MM-DD") from None


def resolve_day(phrase: str, on: date | None = None, year: int | None = None) -> str | None:
    """The ISO date ``phrase`` (a :func:`day_phrases` phrase) names on the day ``on`` (default :func:`today`), or
    None when it names no one day ("next week", "the weekend"): ``today``, ``tomorrow`` (``tmrw``), a weekday (``this
    Friday``, ``next tuesday``: the coming one, after ``on``), ``March 5`` (the coming one), ``the 14th`` (this
    month's, or next month's once it has passed); with ``year`` (one the text writes), a day and a month are in it."""
    on = on or today()
    low = re.sub(r"\s+", " ", phrase.strip().lower())
    if low in _RELATIVE:
        return (on + timedelta(days=_RELATIVE[low])).isoformat()
    day = re.fullmatch(r"(?:(?:this|next|coming) )?(" + WEEKDAY + ")", low)
    if day:
        ahead = (_WEEKDAYS.index(day.group(1)) - on.weekday()) % 7 or (7 if low.startswith("next") else 0)
        return (on + timedelta(days=ahead)).isoformat()
    slash = re.fullmatch(r"(\d{1,2})/(\d{1,2})", low)  # "14/03": day and month
    if slash:
        return _upcoming(on, int(slash.group(2)), int(slash.group(1)))
    nth = re.fullmatch(r"the (\d{1,2})(?:st|nd|rd|th)", low)
    if nth:
        return _upcoming(on, on.month, int(nth.group(1)), by_month=True)
    m = re.fullmatch(_MON + r" " + _DAY, low) or re.fullmatch(r"(?:the )?" + _DAY + r"(?: of)? " + _MON, low)
    if m:
        month_word, number = (m.group(1), m.group(2)) if m.group(1).rstrip(".") in _MONTHS else (m.group(2), m.group(1))
        if year is not None:
            try:
                return date(year, _MONTHS[month_word.rstrip(".")], _day_number(number)).isoformat()
            except ValueError:
                return None
        return _upcoming(on, _MONTHS[month_word.rstrip(".")], _day_number(number))
    return None


def _upcoming(on: date, month: int, day: int, by_month: bool = False) -> str | None:
    """The first date with ``day`` (and ``month``) on or after ``on``: this month's or the next (``by_month``),
    this year's or the next."""
    for step in range(2):
        m, y = ((on.month + step - 1) % 12 + 1, on.year + (on.month + step - 1) // 12) if by_month \
            else (month, on.year + step)
        try:
            d = date(y, m, day)
        except ValueError:
            continue
        if d >= on:
            return d.isoformat()
    return None


def resolved_days(text: str, on: date | None = None) -> list[str]:
    """The ISO dates of the days ``text`` names (:func:`day_phrases`, each resolved: :func:`resolve_day`)."""
    iso = re.compile(r"\d{4}-\d{2}-\d{2}")  # a full date day_phrases already gives in ISO form
    return list(dict.fromkeys(d for p in day_phrases(text) for d in [p if iso.fullmatch(p) else resolve_day(p, on)]
                              if d))


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
