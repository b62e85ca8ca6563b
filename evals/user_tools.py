"""The user-tool benchmark (``agentkit/evals/user_tools.py``): six tools nobody trained on, every task offering
all six, run through the SDK's ``Agent`` or through ``agentkit serve`` with the openai client and
``tool_choice="auto"`` (the client runs the tools and sends their results back, up to 4 rounds).

    nice -n 5 python evals/user_tools.py sdk --split held_out --out evals/results/user_tools/sdk_default_held_out.json
    nice -n 5 python evals/user_tools.py sdk --split dev --calibrate false --out evals/results/user_tools/sdk_raw_dev.json
    nice -n 5 python evals/user_tools.py server --split held_out --out evals/results/user_tools/server_default_held_out.json

``--calibrate``: ``Agent(calibrate=...)``: ``true`` reads the decision against a content-free question, ``false``
raw; ``default`` as the weights declare (``agentkit.decide.calibrates``: raw for the loop adapter, calibrated for
weights that declare nothing).
``--lora none``: the weights as loaded. ``--url``: a running server (else one is started on ``--port``). Rows are written as they finish; a rerun with the same ``--out`` resumes.
The run sets ``AGENTKIT_TODAY`` to the calendar's today (2026-03-02, a Monday), as a user's machine has its own
date: "thursday" is 2026-03-05. A server given with ``--url`` must be started with it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agentkit.evals.user_tools import BY_NAME, SPLITS, TODAY, TOOLS, load_tasks, score_run, summary

DATA = Path(__file__).resolve().parent / "user_tools" / "tasks.jsonl"


def sdk_calls(agent: Any, prompt: str) -> tuple[list[tuple[str, dict]], str]:
    from agentkit.sdk import ToolCallPart

    result = agent.run_sync(prompt)
    calls = [(p.tool_name, dict(p.args)) for m in result.all_messages() if m.kind == "response"
             for p in m.parts if isinstance(p, ToolCallPart) and p.tool_name in BY_NAME]
    return calls, str(result.output)


def grounding(args: argparse.Namespace) -> dict[str, bool]:
    """``--grounded-arguments`` as settings (empty: the default)."""
    return {} if args.grounded_arguments == "default" else {"grounded_arguments": args.grounded_arguments == "true"}


def server_calls(client: Any, tools: list[dict], prompt: str, ext: dict[str, Any] | None = None,
                 rounds: int = 4) -> tuple[list[tuple[str, dict]], str]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    calls: list[tuple[str, dict]] = []
    extra = {"extra_body": {"agentkit": ext}} if ext else {}
    for _ in range(rounds):
        r = client.chat.completions.create(model="agentkit", messages=messages, tools=tools, tool_choice="auto",
                                           max_tokens=160, temperature=0, **extra)
        msg = r.choices[0].message
        if not msg.tool_calls:
            return calls, msg.content or ""
        messages.append({"role": "assistant", "content": msg.content, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in msg.tool_calls]})
        for c in msg.tool_calls:
            args = json.loads(c.function.arguments or "{}")
            calls.append((c.function.name, args))
            try:
                out = BY_NAME[c.function.name](**args)
            except (KeyError, TypeError, ValueError) as e:
                out = {"error": f"{type(e).__name__}: {e}"}
            messages.append({"role": "tool", "tool_call_id": c.id, "content": json.dumps(out)})
    return calls, ""


def _server(args: argparse.Namespace) -> tuple[Any, list[dict], subprocess.Popen | None]:
    import httpx
    from openai import OpenAI

    from agentkit.sdk import Tool

    proc, url = None, args.url
    if url is None:
        url = f"http://127.0.0.1:{args.port}/v1"
        cmd = [sys.executable, "-m", "agentkit.cli", "serve", "--port", str(args.port), "--threads", "1"]
        proc = subprocess.Popen(cmd + (["--lora", args.lora] if args.lora else []),
                                env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    t0 = time.time()
    while True:
        try:
            if httpx.get(url.removesuffix("/v1") + "/health/ready", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.time() - t0 > 600:
            raise SystemExit(f"the server at {url} did not become ready in 600 s")
        time.sleep(2)
    tools = [{"type": "function", "function": Tool(f).spec} for f in TOOLS]
    return OpenAI(base_url=url, api_key="unused", timeout=600), tools, proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("via", choices=["sdk", "server"])
    ap.add_argument("--split", default=None, help="a split of agentkit.evals.user_tools.SPLITS (default: all)")
    ap.add_argument("--calibrate", choices=["default", "true", "false"], default="default",
                    help="Agent(calibrate=...): default (as the weights declare), true, or false (the raw scores)")
    ap.add_argument("--grounded-arguments", choices=["default", "true", "false"], default="default",
                    help="model_settings grounded_arguments (SDK) / agentkit.grounded_arguments (server)")
    ap.add_argument("--lora", default=None)
    ap.add_argument("--url", default=None)
    ap.add_argument("--port", type=int, default=8791)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.environ["AGENTKIT_TODAY"] = TODAY  # the calendar's today: the agent (and a server started here) reads days by it
    out = Path(args.out)
    rows = {r["id"]: r for r in json.loads(out.read_text())["rows"]} if out.is_file() else {}
    tasks = load_tasks(args.data, args.split)[: args.limit]
    proc = None
    if args.via == "sdk":
        import torch

        from agentkit import Agent, Limits, default_engine

        torch.set_num_threads(1)
        engine = default_engine(lora=args.lora) if args.lora else default_engine()
        agent = Agent(engine, tools=list(TOOLS), limits=Limits(max_iterations=5),
                      calibrate={"default": None, "true": True, "false": False}[args.calibrate],
                      model_settings=grounding(args))
        ask = lambda prompt: sdk_calls(agent, prompt)
    else:
        client, tools, proc = _server(args)
        ask = lambda prompt: server_calls(client, tools, prompt, grounding(args))
    try:
        for t in tasks:
            if t["id"] in rows:
                continue
            t0 = time.perf_counter()
            try:
                calls, answer = ask(t["prompt"])
                error = None
            except Exception as e:  # noqa: BLE001 (a failed run is a row, not the end of the benchmark)
                calls, answer, error = [], "", f"{type(e).__name__}: {e}"
            row = dict(score_run(t, calls), split=t["split"], answer=answer[:300], error=error,
                       s=round(time.perf_counter() - t0, 2))
            rows[t["id"]] = row
            print(json.dumps(row)[:300], flush=True)
            report = {"command": " ".join(sys.argv), "via": args.via, "calibrate": args.calibrate, "lora": args.lora,
                      "grounded_arguments": args.grounded_arguments,
                      "summary": {s: summary([r for r in rows.values() if r["split"] == s])
                                  for s in SPLITS if any(r["split"] == s for r in rows.values())}, "rows": list(rows.values())}
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report, indent=1))
    finally:
        if proc is not None:
            proc.terminate()
    print(json.dumps(report["summary"], indent=1))


if __name__ == "__main__":
    main()
