"""Adversarial probe of the OpenAI-compatible server (issue 18's reproductions), on the tiny random model.

Each group of bad requests runs in its own process with a hard wall-clock limit (a build that never ends is
killed with its process, not left burning a shared CPU). For every request it records the HTTP status, whether
the body is the OpenAI error object, and the time; for the denial-of-service cases a small concurrent request is
timed as well. Prints one line per request and the table: category | tried | typed 4xx | 5xx | hang | accepted.

    python evals/probe_server.py                # the whole probe, ~2-4 min on a loaded 2-core machine
    python evals/probe_server.py --limit-s 20   # per-request bound (a request slower than this is a hang)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

MSG = [{"role": "user", "content": "hi"}]


def _tool(params: dict) -> dict:
    return {"model": "agentkit", "messages": MSG, "max_tokens": 16, "tool_choice": "required",
            "tools": [{"type": "function", "function": {"name": "f", "parameters": params}}]}


def _schema(schema: dict, **kw) -> dict:
    return {"model": "agentkit", "messages": MSG, "max_tokens": 16, **kw,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}


def _raw_schema(schema: str) -> str:
    """A request body as raw JSON text (for what ``json.dumps`` cannot write: NaN, 1e999, lone surrogates)."""
    return ('{"model": "agentkit", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "response_format": '
            '{"type": "json_schema", "json_schema": {"name": "x", "schema": ' + schema + '}}}')


def _obj(prop: dict) -> dict:
    return {"type": "object", "properties": {"v": prop}, "required": ["v"]}


# name -> (category, body: dict or raw str, extra: {"method", "path", "headers", "concurrent"})
CASES: dict[str, tuple[str, object, dict]] = {
    "int64 tool param": ("schema build", _tool(_obj({"type": "integer", "minimum": -9223372036854775808,
                                                     "maximum": 9223372036854775807})), {"concurrent": True}),
    "pattern ^[ab]*a[ab]{20}$": ("schema build", _schema(_obj({"type": "string", "pattern": "^[ab]*a[ab]{20}$"})),
                                 {"concurrent": True}),
    "maximum 2^53+1": ("schema build", _schema(_obj({"type": "integer", "minimum": 0,
                                                     "maximum": 9007199254740993})), {"concurrent": True}),
    "exclusiveMaximum 1e20": ("schema build", _schema(_obj({"type": "number", "exclusiveMaximum": 1e20})),
                              {"concurrent": True}),
    "minimum 1e308": ("schema build", _schema(_obj({"type": "number", "minimum": 1e308})), {"concurrent": True}),
    "[\\s\\S]{256}": ("schema build", _schema(_obj({"type": "string", "pattern": "^[\\s\\S]{256}$"})),
                      {"concurrent": True}),
    "enum 10k": ("schema build", _schema(_obj({"enum": [f"item{i}" for i in range(10000)]})), {"concurrent": True}),
    "prompt 500 KB": ("prompt length", {"model": "agentkit", "messages": [{"role": "user", "content": "word " * 100_000}],
                                        "max_tokens": 4}, {"concurrent": True}),
    "prompt 5 MB": ("prompt length", {"model": "agentkit", "messages": [{"role": "user", "content": "word " * 1_000_000}],
                                      "max_tokens": 4}, {"concurrent": True}),
    "seed 2^70": ("fields", {"model": "agentkit", "messages": MSG, "max_tokens": 4, "seed": 1180591620717411303424}, {}),
    "seed -1": ("fields", {"model": "agentkit", "messages": MSG, "max_tokens": 4, "seed": -1}, {}),
    "lone surrogate content": ("fields", '{"model": "agentkit", "messages": [{"role": "user", "content": "a\\ud800"}], "max_tokens": 4}',
                               {}),
    "maximum 1e999": ("fields", _raw_schema('{"type": "number", "maximum": 1e999}'), {}),
    "maximum NaN": ("fields", _raw_schema('{"type": "number", "maximum": NaN}'), {}),
    "minimum -Infinity": ("fields", _raw_schema('{"type": "number", "minimum": -Infinity}'), {}),
    "temperature NaN": ("fields", '{"model": "agentkit", "messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', {}),
    "1000 optional properties": ("fields", _schema({"type": "object", "properties": {
        f"p{i}": {"type": "integer"} for i in range(1000)}}), {}),
    "const lone surrogate": ("fields", _raw_schema('{"const": "\\ud800"}'), {}),
    "stream: template longer than max_tokens": ("stream errors", _schema(
        {"type": "object", "properties": {"a_long_property_name": {"type": "integer"}},
         "required": ["a_long_property_name"]}, max_tokens=2, stream=True), {}),
    "stream: verify with temperature": ("stream errors", {"model": "agentkit", "messages": MSG, "stream": True, "temperature": 0.5,
                                                          "agentkit": {"mode": "verify"}}, {}),
    "body not JSON": ("body / shape", "{not json", {}),
    "body JSON array": ("body / shape", "[1, 2]", {}),
    "text/plain body": ("body / shape", json.dumps({"model": "agentkit", "messages": MSG}), {"headers": {"content-type": "text/plain"}}),
    "GET on POST route": ("body / shape", None, {"method": "GET"}),
    "unknown path": ("body / shape", None, {"method": "GET", "path": "/v1/nothing"}),
    "unknown field 'mode'": ("unknown fields", {"model": "agentkit", "messages": MSG, "max_tokens": 4, "mode": "diffusion"}, {}),
    "unknown agentkit field": ("unknown fields", {"model": "agentkit", "messages": MSG, "max_tokens": 4, "agentkit": {"mdoe": "ar"}}, {}),
}
# expected: every case is refused with a typed 4xx, except these, which a correct server serves (torch's seed range
# includes negative seeds)
SERVED = {"seed -1"}

GROUPS = [[n] for n, (_, _, x) in CASES.items() if x.get("concurrent")] + \
    [[n for n, (_, _, x) in CASES.items() if not x.get("concurrent")]]


async def _one(client, name: str, limit_s: float) -> dict:
    cat, body, x = CASES[name]
    method, path = x.get("method", "POST"), x.get("path", "/v1/chat/completions")
    headers = x.get("headers", {"content-type": "application/json"})
    content = body if isinstance(body, str) else (json.dumps(body) if body is not None else None)
    small = None
    t0 = time.perf_counter()
    task = asyncio.ensure_future(client.request(method, path, content=content, headers=headers))
    if x.get("concurrent"):
        await asyncio.sleep(0.3)  # let the bad request take the engine first
        ts = time.perf_counter()
        try:
            r = await asyncio.wait_for(client.post("/v1/chat/completions", json={"model": "agentkit", "messages": MSG, "max_tokens": 4}),
                                       limit_s)
            small = {"status": r.status_code, "s": round(time.perf_counter() - ts, 2)}
        except TimeoutError:
            small = {"status": "hang", "s": limit_s}
    try:
        r = await asyncio.wait_for(task, max(0.1, limit_s - (time.perf_counter() - t0)))
    except TimeoutError:
        return {"name": name, "cat": cat, "status": "hang", "s": limit_s, "openai_body": False, "small": small}
    try:
        d = r.json()
        shaped = isinstance(d, dict) and isinstance(d.get("error"), dict) and "message" in d["error"]
    except ValueError:
        shaped = False
    return {"name": name, "cat": cat, "status": r.status_code, "s": round(time.perf_counter() - t0, 2),
            "openai_body": shaped, "small": small, "head": r.text[:160]}


async def _group(names: list[str], limit_s: float) -> list[dict]:
    import httpx
    import torch
    from agentkit.serving.app import create_app

    from agentkit.engine import tiny_engine

    torch.set_num_threads(1)
    app = create_app(tiny_engine(0), request_timeout_s=max(1.0, limit_s - 5))  # a 504 comes before the hang bound
    out = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://probe",
                                 timeout=limit_s + 5) as c:
        for n in names:
            out.append(await _one(c, n, limit_s))
    return out


def _verdict(r: dict) -> str:
    st = r["status"]
    if st == "hang":
        return "hang"
    if st == 200 and (r["name"] in SERVED or r["cat"] == "schema build"):
        return "ok"  # a valid input served (a schema build may also end in a typed 400 from a build limit)
    if 400 <= st < 500 and r["openai_body"]:
        return "typed 4xx"
    if st >= 500:
        return "5xx"
    return "accepted" if st < 400 else "untyped 4xx"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit-s", type=float, default=20.0)
    ap.add_argument("--group", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help="write the per-request records here")
    ap.add_argument("--only", default=None, help="run only the groups whose first case's category is this")
    a = ap.parse_args()
    if a.group is not None:
        print(json.dumps(asyncio.run(_group(GROUPS[a.group], a.limit_s))))
        sys.stdout.flush()
        os._exit(0)  # builds still running in abandoned threads must not keep the process alive
    rows = []
    for i, names in enumerate(GROUPS):
        if a.only and not any(CASES[n][0] == a.only for n in names):
            continue
        cmd = [sys.executable, __file__, "--group", str(i), "--limit-s", str(a.limit_s)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=a.limit_s * (len(names) + 1) + 60)
            got = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else []
            if not got:
                print(f"group {i} produced nothing: {p.stderr[-400:]}", flush=True)
        except subprocess.TimeoutExpired:
            got = []
        seen = {r["name"] for r in got}
        got += [{"name": n, "cat": CASES[n][0], "status": "hang", "s": None, "openai_body": False, "small": None}
                for n in names if n not in seen]
        for r in got:
            r["verdict"] = _verdict(r)
            print(f"{r['cat']:15} {r['name']:42} {r['status']!s:5} {r['s']!s:6}s {r['verdict']:11} "
                  f"small={r['small']}", flush=True)
        rows += got
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    print("\ncategory | tried | typed 4xx | served (valid input) | 5xx | hang | accepted/other | "
          "concurrent small request > 5 s")
    for cat in dict.fromkeys(r["cat"] for r in rows):
        rs = [r for r in rows if r["cat"] == cat]
        v = [r["verdict"] for r in rs]
        slow = sum(1 for r in rs if r["small"] and (r["small"]["status"] != 200 or r["small"]["s"] > 5))
        known = v.count("typed 4xx") + v.count("ok") + v.count("5xx") + v.count("hang")
        print(f"{cat} | {len(rs)} | {v.count('typed 4xx')} | {v.count('ok')} | {v.count('5xx')} | {v.count('hang')} | "
              f"{len(rs) - known} | {slow}")


if __name__ == "__main__":
    main()
