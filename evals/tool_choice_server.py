"""The server's tool choice on the default model, through the openai client against ``agentkit serve``.

Tool-needed questions: BFCL items (``--data``, default ``evals/data/bfcl``; their functions as the tools, their
question). No-tool questions: the small facts / chit-chat below (written here, not from any data set), each offered
the tools of one of the BFCL items in turn. For each question it asks with ``tool_choice="auto"`` and records
whether the decision (a tool call or a text reply) is right; for BFCL items it also asks with
``tool_choice="required"`` and records whether the call names the ground-truth function (and whether the whole
call passes BFCL's checker). Ground truths are read only to score.

    python evals/tool_choice_server.py --n 20 --out evals/results/serving/tool_choice_whole_name.json

Starts ``agentkit serve`` on ``--port`` (the embedded SmolLM2-135M) unless ``--url`` names a running server. The
JSON is rewritten after each question (a stopped run keeps its partial results).
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

NO_TOOL_QUESTIONS = [
    "Hello! How are you today?", "What is the capital of France?", "Thanks, that was helpful.",
    "Tell me a short joke.", "What color is the sky on a clear day?", "Who wrote Romeo and Juliet?",
    "Good morning!", "How many days are in a week?", "What is your name?", "Say hi to my friend Anna.",
    "What language is spoken in Spain?", "Can you recommend a good book?", "What is 2 plus 2?",
    "Is water wet?", "What do cats like to eat?", "Goodbye, see you later.", "What is the opposite of hot?",
    "Write one sentence about the sea.", "How do you say hello in German?", "What season comes after winter?",
]


def _tools(item: Any) -> list[dict]:
    return [{"type": "function", "function": {"name": f["name"], "description": f.get("description", ""),
                                               "parameters": item.params(f["name"])}} for f in item.functions]


def _start(port: int) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "agentkit.cli", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait(url: str, limit_s: float = 300) -> None:
    import httpx

    t0 = time.time()
    while time.time() - t0 < limit_s:
        try:
            if httpx.get(url.removesuffix("/v1") + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise SystemExit(f"the server at {url} did not become healthy within {limit_s} s")


def _ask(client: Any, question: list[dict], tools: list[dict], choice: str, max_tokens: int) -> dict:
    t0 = time.perf_counter()
    r = client.chat.completions.create(model="agentkit", messages=question, tools=tools, tool_choice=choice,
                                       max_tokens=max_tokens, temperature=0)
    msg = r.choices[0].message
    call = msg.tool_calls[0].function if msg.tool_calls else None
    return {"called": call is not None, "name": call.name if call else None,
            "arguments": json.loads(call.arguments) if call else None, "content": msg.content,
            "finish_reason": r.choices[0].finish_reason, "usage": r.usage.model_dump(),
            "latency_ms": round(1000 * (time.perf_counter() - t0), 1)}


def _summary(rows: list[dict]) -> dict:
    need = [r for r in rows if r["kind"] == "tool"]
    none = [r for r in rows if r["kind"] == "no_tool"]
    rate = lambda xs, f: round(sum(1 for x in xs if f(x)) / len(xs), 3) if xs else None
    return {"n_tool": len(need), "n_no_tool": len(none),
            "auto_called_on_tool_questions": rate(need, lambda r: r["auto"]["called"]),
            "auto_text_on_no_tool_questions": rate(none, lambda r: not r["auto"]["called"]),
            "auto_decision_right": rate(need + none, lambda r: r["auto"]["called"] == (r["kind"] == "tool")),
            "auto_right_function_when_called": rate([r for r in need if r["auto"]["called"]],
                                                    lambda r: r["auto"]["name"] == r["expected"]),
            "required_right_function": rate(need, lambda r: r["required"]["name"] == r["expected"]),
            "required_bfcl_success": rate(need, lambda r: r["required_ok"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parent / "data" / "bfcl")
    ap.add_argument("--n", type=int, default=20, help="questions of each kind")
    ap.add_argument("--url", default=None)
    ap.add_argument("--port", type=int, default=8431)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, required=True, help="the result JSON (evals/results/serving/ holds the committed ones)")
    a = ap.parse_args()
    from openai import OpenAI

    from agentkit.evals.bfcl import check_call, load_bfcl

    items = load_bfcl(a.data, limit=(a.n + 1) // 2)[: a.n]
    proc = None if a.url else _start(a.port)
    url = a.url or f"http://127.0.0.1:{a.port}/v1"
    try:
        _wait(url)
        client = OpenAI(base_url=url, api_key="none", timeout=300)
        rows: list[dict] = []
        cmd = "python " + " ".join(sys.argv)
        for i in range(max(len(items), len(NO_TOOL_QUESTIONS[: a.n]))):
            if i < len(items):
                it = items[i]
                q, tools = it.messages, _tools(it)
                req = _ask(client, q, tools, "required", a.max_tokens)
                ok = check_call(it, (req["name"], req["arguments"]) if req["called"] else None).ok
                rows.append({"kind": "tool", "id": it.id, "expected": next(iter(it.ground_truth[0])),
                             "auto": _ask(client, q, tools, "auto", a.max_tokens), "required": req,
                             "required_ok": ok})
            if i < min(a.n, len(NO_TOOL_QUESTIONS)):
                it = items[i % len(items)]
                q = [{"role": "user", "content": NO_TOOL_QUESTIONS[i]}]
                rows.append({"kind": "no_tool", "question": NO_TOOL_QUESTIONS[i], "tools_from": it.id,
                             "auto": _ask(client, q, _tools(it), "auto", a.max_tokens)})
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(json.dumps({"command": cmd, "model": "SmolLM2-135M (embedded)", "summary": _summary(rows),
                                         "rows": rows}, indent=1))
            print(json.dumps(_summary(rows)), flush=True)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
