"""``agentkit eval extract``: each item through ``extract`` in each row, beside the peers, scored per field.

A row is a decoding mode with optional settings after ``+`` (``ar``, ``ar+compact``, ``diffusion+schema``) or a
peer name (:data:`agentkit.evals.peers.PEERS`). Settings: ``compact``/``spaced`` (JSON style), ``schema``/
``example`` (the extract prompt, :data:`agentkit.steps.kinds.EXTRACT_PROMPTS`), ``nocopy`` (copy prior off),
``copyuser`` (copying from the whole user message, schema included, instead of the text), ``nonum`` (no copy
prior in numbers), ``nofirst`` (none at a number's first digit, ``DecodeConfig.copy_first_digit``), ``ungrounded``
(``extract(grounded=False)``: values not constrained to the text, no abstention), ``nosettle`` (grounded, the
output not settled against the text: the greedy grounded decode, :func:`agentkit.steps.grounded.settle`), ``retry`` (a second decode in ``diffusion`` when the first's values are not in the text, see
:func:`agentkit.sdk._extract.values_in_text`), ``server`` (the item sent to agentkit's server in this process as an OpenAI
``response_format`` request, the text as the user message: :mod:`agentkit.evals.via_server`), ``http`` (``extract``
with that server as its model: the SDK's HTTP backend), ``typelist`` (the schema's optional fields written as
``"type": ["string", "null"]``, the form OpenAI's strict mode asks for, instead of pydantic's ``anyOf``:
:func:`type_lists`). Items run in the outer loop and rows in the inner one, so a run stopped
early compares every row on the same items; results are written after every item.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

from ..config import DecodeConfig
from .extract import ExtractItem, load_items, score
from .timing import cold_prompts

SETTINGS = ("compact", "spaced", "schema", "example", "nocopy", "copyuser", "nonum", "nofirst", "retry", "ungrounded",
            "nosettle", "drafter", "eachpass", "nonumdraft", "nostrdraft", "server", "http", "typelist")  # drafter: verify's drafts from the block drafter where
# lookup has none; eachpass: a grounded field's candidates read a pass each (agentkit.engine.backbone.
# ONE_PASS_CONTINUATIONS off); nonumdraft: verify drafts no copied numbers (agentkit.engine.decode.NUMBER_DRAFTS off);
# nostrdraft: nor copied phrases inside string values (STRING_DRAFTS off)


def parse_row(row: str) -> tuple[str, set[str]]:
    """``"ar+compact+nocopy"`` -> ``("ar", {"compact", "nocopy"})``; an unknown mode or setting is a ``UserError``."""
    from ..config import MODES
    from ..errors import UserError

    mode, *opts = row.split("+")
    if mode not in MODES:
        raise UserError(f"row {row!r}: unknown mode {mode!r}; a row is a mode ({', '.join(MODES)}) with optional "
                        f"+settings, or a peer")
    bad = [o for o in opts if o not in SETTINGS]
    if bad:
        raise UserError(f"row {row!r}: unknown setting(s) {bad}; the settings are {', '.join(SETTINGS)}")
    if "drafter" in opts and mode != "verify":
        raise UserError(f"row {row!r}: +drafter chooses verify's drafts; it needs the verify mode")
    if "server" in opts and "http" in opts:
        raise UserError(f"row {row!r}: +server and +http are two ways to reach the server; give one")
    if "server" in opts:
        from .via_server import REFUSED

        if bad := [o for o in opts if o in REFUSED]:
            raise UserError(f"row {row!r}: +server rows cannot take {bad}: the server has no request field for them")
    return mode, set(opts)


def type_lists(node: Any) -> Any:
    """``node`` (a JSON Schema) with each ``anyOf`` of bare types (``[{"type": "string"}, {"type": "null"}]``)
    written as one ``"type"`` list, the other keys of its branches kept (the ``typelist`` setting)."""
    if isinstance(node, list):
        return [type_lists(v) for v in node]
    if not isinstance(node, dict):
        return node
    branches = node.get("anyOf")
    if isinstance(branches, list) and all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in branches) \
            and len({b["type"] for b in branches}) == len(branches):
        merged: dict[str, Any] = {}
        for b in branches:
            merged.update({k: type_lists(v) for k, v in b.items() if k != "type"})
        return {**{k: type_lists(v) for k, v in node.items() if k != "anyOf"}, **merged,
                "type": [b["type"] for b in branches]}
    return {k: type_lists(v) for k, v in node.items()}


def run_agentkit(engine: Any, item: ExtractItem, row: str) -> dict[str, Any]:
    """One item through ``extract`` under ``row``'s mode and settings."""
    from ..engine import backbone
    from ..engine import decode as decode_
    from ..sdk._extract import extract, extract_messages
    from ..steps import grounded as grounded_
    from ..steps import kinds as _steps

    mode, opts = parse_row(row)
    if "typelist" in opts:
        item = replace(item, schema=type_lists(item.schema))
    decode = DecodeConfig(copy_bias=0.0 if "nocopy" in opts else DecodeConfig.copy_bias,
                          copy_numbers="nonum" not in opts, copy_first_digit="nofirst" not in opts,
                          draft="drafter" if "drafter" in opts else DecodeConfig.draft)
    settings: dict[str, Any] = {}
    for style in ("compact", "spaced"):
        if style in opts:
            settings["json_style"] = style
    prompt = next((p for p in _steps.EXTRACT_PROMPTS if p in opts), None)
    switches = [(_steps, "EXTRACT_PROMPT", prompt)] if prompt else []
    switches += [(module, name, False) for opt, module, name in (
        ("nosettle", grounded_, "SETTLE"), ("eachpass", backbone, "ONE_PASS_CONTINUATIONS"),
        ("nonumdraft", decode_, "NUMBER_DRAFTS"), ("nostrdraft", decode_, "STRING_DRAFTS")) if opt in opts]
    server = _server(engine) if opts & {"server", "http"} else None  # the app made before the clock starts
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        for module, name, value in switches:
            stack.enter_context(mock.patch.object(module, name, value))
        if "copyuser" in opts:  # the whole user message, the extract prompt's schema with it
            decode = replace(decode, copy_source=extract_messages(item.schema, item.text)[-1]["content"])
        if "server" in opts:
            res = server.run(item.schema, item.text, mode, opts - {"server"})
            return {**res, "latency_ms": round(1000 * (time.perf_counter() - t0), 1), "ungrounded": []}
        kw = {"model": server.http_model if server is not None else engine, "mode": mode, "decode": decode, "model_settings": settings or None,
              "return_usage": True, "grounded": False if "ungrounded" in opts else None,
              "fallback_mode": ("diffusion" if mode != "diffusion" else "ar") if "retry" in opts else None}
        output, usage, error = _call(extract, item, kw)
    ms = 1000 * (time.perf_counter() - t0)
    out = output.model_dump(mode="json") if hasattr(output, "model_dump") else output
    return {"output": out, "error": error, "latency_ms": round(ms, 1), "ungrounded": usage.ungrounded if usage else [],
            "output_tokens": usage.output_tokens if usage else 0, "forwards": usage.forwards if usage else 0}


_SERVERS: dict[int, Any] = {}  # one in-process app per engine (id), made at its first +server or +http row


def _server(engine: Any) -> Any:
    """The in-process app over ``engine`` (:class:`~agentkit.evals.via_server.ServerRows`), made at first use."""
    from .via_server import ServerRows

    if id(engine) not in _SERVERS:
        _SERVERS[id(engine)] = ServerRows(engine)
    return _SERVERS[id(engine)]


def _call(extract, item: ExtractItem, kw: dict[str, Any]) -> tuple[Any, Any, str]:
    from ..errors import AgentkitError

    try:
        output, usage = extract(item.schema, item.text, **kw)
        return output, usage, ""
    except AgentkitError as e:
        return None, None, f"{type(e).__name__}: {str(e)[:300]}"


def run_peer(peer: Any, item: ExtractItem, max_new_tokens: int = 256) -> dict[str, Any]:
    """One item on a peer: the messages ``extract`` sends and the schema closed as agentkit compiles it."""
    from ..sdk._extract import extract_messages
    from .bfcl import close_objects

    out = peer.generate(extract_messages(item.schema, item.text), close_objects(item.schema), max_new_tokens)
    try:
        value, error = json.loads(out.text), ""
    except ValueError:
        value, error = None, f"not JSON: {out.text[:200]!r}"
    st = out.stats
    return {"output": value, "error": error, "latency_ms": st["latency_ms"], "output_tokens": st["output_tokens"],
            "forwards": st["forwards"]}


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Field accuracy, item exact rate, numeric-copy accuracy, invented values, the None rate on absent optional
    fields, valid rate, latency p50/p95, tokens per forward."""
    f = [r for res in results for r in res["score"]["fields"]]
    copy = [r for r in f if r["copy"]]
    absent = [r for r in f if r["absent"]]
    lat = sorted(res["latency_ms"] for res in results)
    toks, fwd = sum(res["output_tokens"] for res in results), sum(res["forwards"] for res in results)
    n = len(results)
    return {"items": n, "fields": len(f), "field_accuracy": round(sum(r["ok"] for r in f) / max(len(f), 1), 4),
            "item_exact": round(sum(res["score"]["exact"] for res in results) / max(n, 1), 4),
            "numeric_copy": round(sum(r["ok"] for r in copy) / max(len(copy), 1), 4), "numeric_fields": len(copy),
            "invented": round(sum(r.get("invented", False) for r in f) / max(len(f), 1), 4),
            "none_rate": round(sum(r["ok"] for r in absent) / max(len(absent), 1), 4), "absent_fields": len(absent),
            "valid": round(sum(res["output"] is not None for res in results) / max(n, 1), 4),
            "p50_ms": round(statistics.median(lat), 1) if lat else 0.0,
            "p95_ms": round(lat[min(n - 1, int(0.95 * n))], 1) if lat else 0.0,
            "tokens_per_forward": round(toks / fwd, 3) if fwd else 0.0}


def run_extract_eval(data: Path, rows: list[str], *, limit: int | None, out: Path, plot: Path | None,
                     engine: Any, peers: dict[str, Any] | None = None, command: str = "", log=print) -> dict:
    """Every item in every row (peers by name from ``peers``), the rows' order rotating from item to item and the
    engine's prefix cache emptied before each agentkit row; JSON to ``out`` after each item, a plot at the end."""
    items = load_items(data, limit)
    peers = peers or {}
    for row in rows:
        if row not in peers:
            parse_row(row)  # an unknown mode or setting is an error, never a row left out
    per_row: dict[str, list[dict]] = {r: [] for r in rows}
    report: dict[str, Any] = {}
    for i, item in enumerate(items):
        for row in rows[i % len(rows):] + rows[:i % len(rows)]:  # the order rotates: no row always goes first
            if row not in peers:
                cold_prompts(engine)
            res = run_peer(peers[row], item) if row in peers else run_agentkit(engine, item, row)
            res.update(id=item.id, schema=item.schema_name, score=score(item, res["output"]))
            per_row[row].append(res)
        report = {"suite": "extract", "data": str(data), "command": command, "items": i + 1,
                  "summary": {r: summarize(v) for r, v in per_row.items()}, "results": per_row}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1, default=str))
        if (i + 1) % 10 == 0 or i + 1 == len(items):
            log(f"{i + 1}/{len(items)} " + "  ".join(f"{r} {s['field_accuracy']:.3f}"
                                                      for r, s in report["summary"].items()))
    if plot is not None and report:
        from .plots import plot_extract

        plot_extract(report["summary"], plot)
    return report


def table(summary: dict[str, dict]) -> str:
    """The summary as a markdown table."""
    head = ("| row | field acc | item exact | numeric copy | invented | None (absent) | valid | p50 ms | p95 ms | tok/fwd |"
            "\n|---|---|---|---|---|---|---|---|---|---|")
    lines = [f"| {r} | {s['field_accuracy']:.3f} | {s['item_exact']:.3f} | {s['numeric_copy']:.3f} | "
             f"{s.get('invented', 0):.3f} | {s.get('none_rate', 0):.3f} | "
             f"{s['valid']:.3f} | {s['p50_ms']:.0f} | {s['p95_ms']:.0f} | {s['tokens_per_forward']:.2f} |"
             for r, s in summary.items()]
    return "\n".join([head, *lines])


def rescore(report_path: Path, data: Path) -> dict[str, Any]:
    """A report's outputs scored again with the scorer as it is now (:func:`agentkit.evals.extract.score`; the
    outputs are kept as they are): each result's ``score`` and the summary rewritten in place."""
    report = json.loads(Path(report_path).read_text())
    items = {it.id: it for it in load_items(data)}
    for results in report["results"].values():
        for res in results:
            res["score"] = score(items[res["id"]], res["output"])
    report["summary"] = {r: summarize(v) for r, v in report["results"].items()}
    Path(report_path).write_text(json.dumps(report, indent=1, default=str))
    return report


if __name__ == "__main__":  # python -m agentkit.evals.extract_run --rescore REPORT --data DIR
    import argparse

    ap = argparse.ArgumentParser(description="score an extract report's outputs again with the current scorer")
    ap.add_argument("--rescore", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True)
    a = ap.parse_args()
    print(table(rescore(a.rescore, a.data)["summary"]))
