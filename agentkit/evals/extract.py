"""The extraction benchmark: ``extract`` (and the peers) on generated texts, scored field by field.

Data (``evals/extract``, written by :mod:`agentkit.evals.extract_gen`): ``items.jsonl`` (``id``, ``schema``,
``text``, ``gold``) and ``schemas/<name>.json``. Only the schema and the text reach the model; ``gold`` is read
by :func:`score` alone.

Scoring, per field (each leaf of the schema's properties; a nested object's fields are fields, an array is one):

- strings: equal after case folding, collapsing whitespace and dropping a trailing period;
- numbers: equal as numbers after reading the number format (``"1,200.50"``, ``1200.5`` and ``"$1,200.5"`` agree);
- dates (``format: date``): equal after reading both as dates (``2024-03-05``, ``March 5, 2024``, ``5 March 2024``,
  ``Mar 5 2024``);
- arrays: equal as multisets of normalised elements;
- an optional field the text does not state (absent from ``gold``): right when the output leaves it out (or
  writes null or ``""``), wrong when it writes a value;
- an output that failed (no valid JSON after the retries): every field wrong.

Each field is also marked *invented* when the output writes a string (or a list of strings) the text does not hold
(after case folding) where the gold value is in the text or absent: :func:`invented`.

Per row (a mode with its settings, or a peer): field accuracy, item exact rate (every field right), numeric-copy
accuracy (the number fields whose gold value the text writes), invented values (a share of all fields), the
None rate on absent optional fields, valid rate, latency p50/p95 (the whole call:
compile, prompt, decode, retries), output tokens per forward.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ..engine.copy import source_numbers
from ..errors import UserError

MISSING = object()  # a field the output (or the gold) leaves out


@dataclass
class ExtractItem:
    id: str
    schema_name: str
    schema: dict[str, Any]
    text: str
    gold: dict[str, Any]


def load_items(data: Path, limit: int | None = None) -> list[ExtractItem]:
    """``data/items.jsonl`` with each item's schema from ``data/schemas/``; at most ``limit`` items."""
    data = Path(data)
    path = data / "items.jsonl"
    if not path.is_file():
        raise UserError(f"no extraction items at {str(path)!r} (write them with python -m agentkit.evals.extract_gen)")
    schemas: dict[str, dict] = {}
    items = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        name = row["schema"]
        if name not in schemas:
            spath = data / "schemas" / f"{name}.json"
            if not spath.is_file():
                raise UserError(f"item {row['id']!r}: schema file {str(spath)!r} not found")
            schemas[name] = json.loads(spath.read_text())
        items.append(ExtractItem(row["id"], name, schemas[name], row["text"], row["gold"]))
        if limit is not None and len(items) >= limit:
            break
    return items


# -- normalisation -----------------------------------------------------------------------------------------------

_NUM = re.compile(r"^[^\d\-]*(-?[\d,]*\.?\d+)[^\d]*$")
_DATE_FORMATS = ("%Y-%m-%d", "%B %d, %Y", "%d %B %Y", "%b %d %Y", "%b %d, %Y", "%B %d %Y", "%d %b %Y", "%Y/%m/%d")


def as_number(v: Any) -> float | None:
    """``v`` as a number (a JSON number, or a string such as ``"$1,200.50"``), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        m = _NUM.match(v.strip())
        if m:
            try:
                return float(m.group(1).replace(",", ""))
            except ValueError:
                return None
    return None


def as_date(v: Any) -> date | None:
    if not isinstance(v, str):
        return None
    s = " ".join(v.strip().rstrip(".").split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(s, fmt).date()
        except ValueError:
            continue
    return None


def norm_text(v: Any) -> str:
    return " ".join(str(v).casefold().split()).rstrip(".")


def norm(v: Any, kind: str) -> Any:
    """The comparable form of one value of a field of ``kind`` (``number``, ``date``, ``array``, ``string``)."""
    if v is MISSING or v is None:
        return MISSING
    if kind == "number":
        n = as_number(v)
        return n if n is not None else ("?", norm_text(v))
    if kind == "date":
        d = as_date(v)
        return d.isoformat() if d else ("?", norm_text(v))
    if kind == "array":
        if not isinstance(v, list):
            return ("?", norm_text(v))
        return Counter(json.dumps(x, sort_keys=True) if isinstance(x, dict | list) else norm_text(x) for x in v)
    if isinstance(v, dict | list):
        return json.dumps(v, sort_keys=True)
    return norm_text(v)


def fields(schema: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """The scored fields of an object schema: (path, kind), nested objects flattened."""
    out = []
    for name, sub in (schema.get("properties") or {}).items():
        path = (*prefix, name)
        sub = _not_null(sub)
        t = sub.get("type")
        if t == "object" and sub.get("properties"):
            out.extend(fields(sub, path))
        elif t == "array":
            out.append((path, "array"))
        elif t in ("integer", "number"):
            out.append((path, "number"))
        elif sub.get("format") == "date":
            out.append((path, "date"))
        else:
            out.append((path, "string"))
    return out


def _not_null(sub: dict[str, Any]) -> dict[str, Any]:
    """An optional field's schema (``X | None``: ``anyOf`` X and null) as X's, with the field's own keywords."""
    branches = [b for b in sub.get("anyOf") or sub.get("oneOf") or [] if isinstance(b, dict) and b.get("type") != "null"]
    if len(branches) != 1:
        return sub
    return {**{k: v for k, v in sub.items() if k not in ("anyOf", "oneOf")}, **branches[0]}


def _get(value: Any, path: tuple[str, ...]) -> Any:
    for k in path:
        if not isinstance(value, dict) or k not in value:
            return MISSING
        value = value[k]
    return value


def _absent(v: Any) -> bool:
    return v is MISSING or v is None or v == "" or v == []


def in_text(v: Any, text: str) -> bool:
    """Whether a string value (each string of a list) is in ``text``, after case folding and collapsing
    whitespace."""
    low = norm_text(text)
    strings = [x for x in v if isinstance(x, str)] if isinstance(v, list) else [v] if isinstance(v, str) else []
    return all(norm_text(x) in low for x in strings)


def written_date(v: Any, text: str) -> bool:
    """Whether ``v`` is a date (``as_date``) that ``text`` writes in a usual form (``4 May 2025``, ``May 4th,
    2025``, ``the 4th of May 2025``, ``2025-05-04``)."""
    d = as_date(v)
    if d is None:
        return False
    th = {1: "st", 2: "nd", 3: "rd", 21: "st", 22: "nd", 23: "rd", 31: "st"}.get(d.day, "th")
    forms = set()
    for month in (d.strftime("%B"), d.strftime("%b")):
        forms |= {f"{d.day} {month} {d.year}", f"{month} {d.day}, {d.year}", f"{month} {d.day} {d.year}",
                  f"{d.day}{th} {month} {d.year}", f"{d.day}{th} of {month} {d.year}",
                  f"{month} {d.day}{th}, {d.year}", f"{month} {d.day}{th} {d.year}"}
    forms |= {d.isoformat(), d.strftime("%Y/%m/%d")}
    low = norm_text(text)
    return any(f.casefold() in low for f in forms)


def invented(got: Any, want: Any, text: str, kind: str = "string") -> bool:
    """An invented value: a string (or a list's string) the text does not hold (a date: does not write in a usual
    form, :func:`written_date`), where the gold value is in the text or absent (the model had the right value,
    or nothing, to write)."""
    if _absent(got) or not isinstance(got, str | list) or (isinstance(got, list) and not any(
            isinstance(x, str) for x in got)):
        return False
    held = in_text(got, text) or (kind == "date" and written_date(got, text))
    gold = want is MISSING or (isinstance(want, str | list) and (in_text(want, text) or (
        kind == "date" and written_date(want, text))))
    return not held and gold


def score(item: ExtractItem, output: Any) -> dict[str, Any]:
    """Per-field verdicts of one output (None: the extraction failed) against the item's gold."""
    stated = {float(n) for n in source_numbers(item.text.encode())}
    rows = []
    for path, kind in fields(item.schema):
        want, got = _get(item.gold, path), _get(output, path) if output is not None else MISSING
        if want is MISSING:
            ok = output is not None and _absent(got)
        else:
            ok = output is not None and not _absent(got) and norm(got, kind) == norm(want, kind)
        copy = kind == "number" and want is not MISSING and float(want) in stated
        rows.append({"field": ".".join(path), "kind": kind, "ok": ok, "absent": want is MISSING, "copy": copy,
                     "invented": output is not None and invented(got, want, item.text, kind)})
    return {"fields": rows, "exact": all(r["ok"] for r in rows)}
