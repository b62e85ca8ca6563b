"""The agent's answer step alone, given the right tool result: does the reply carry the returned value?

For each ``one_tool`` and ``fail_once`` task of the agent-loop set (``evals/agent_loop/tasks.jsonl``), the answer
step's messages are built as the SDK's ``Agent`` builds them after one call that returned (the instructions, then
``reply_prompt(task, results_text(...))``), with the *ground-truth* call as the call made and the task's canned
result as what it returned: an oracle call, so the answer step is measured apart from the call steps (the full loop
is ``agentkit eval agent-loop``). Each configuration decodes every reply in AR; the score is the agent-loop
benchmark's ``answer_has`` (the reply carries the result's CODE).

    python evals/answer_copy.py --bias 0,2,3,5,8 --out evals/results/agent_loop/answer_copy_once.json
    python evals/answer_copy.py --bias 5 --presence 0,0.5,1 --out evals/results/agent_loop/answer_copy_presence.json
    python evals/answer_copy.py --bias 5 --loops 0,3,4 --out evals/results/agent_loop/answer_copy_loops.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from agentkit.config import DecodeConfig
from agentkit.engine import default_engine
from agentkit.evals.agent_env import answer_has
from agentkit.evals.agent_tasks import INSTRUCTIONS, load
from agentkit.steps import kinds as steps
from agentkit.toolcall import result_values


def oracle_args(expected: dict[str, dict[str, list]]) -> tuple[str, dict]:
    """The ground-truth call: its function and, per argument, the first allowed value (optional ones left out)."""
    (name, params), = expected.items()
    return name, {k: v[0] for k, v in params.items() if v and v[0] != ""}


# the answer step's closing request: the SDK's (``_steps.reply_prompt``), or a variant measured against it
PROMPTS = {"default": None,
           "exact": "Answer in one sentence that gives the result exactly as the tool returned it.",
           "starts": "Answer in one sentence that starts with the result."}


def messages(task, prompt: str = "default") -> tuple[list[dict[str, str]], str]:
    name, args = oracle_args(task.expected[-1])
    text = json.dumps(task.result, ensure_ascii=False, separators=(",", ":"))  # as the SDK serializes a dict
    results = steps.results_text([(name, args, text)])
    user = steps.reply_prompt(task.prompt, results) if PROMPTS[prompt] is None else \
        f"{task.prompt}\n\n{results}{PROMPTS[prompt]}"
    chat = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": user}]
    return chat, text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="evals/agent_loop/tasks.jsonl")
    ap.add_argument("--bias", default="0,5", help="copy_text_bias values, comma-separated (0: no prior)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--prompt", default="default", choices=sorted(PROMPTS), help="the answer request's wording")
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--presence", default="0", help="presence_penalty values (OpenAI's), comma-separated; each is "
                    "run with every --bias")
    ap.add_argument("--loops", default="0", help="stop_loops values (0: off), comma-separated; each is run with "
                    "every --bias and --presence")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    tasks = load(args.data, kinds=["one_tool", "fail_once"], limit=args.limit)
    engine = default_engine()
    biases = [float(b) for b in args.bias.split(",")]
    configs = [(b, float(p), int(n)) for n in args.loops.split(",") for p in args.presence.split(",") for b in biases]
    rows, summary = [], {}
    for bias, presence, loops in configs:
        key = str(bias) + (f"/presence {presence}" if presence else "") + (f"/loops {loops}" if loops else "")
        hits, ms, at_budget, tokens, cut = 0, [], 0, 0, 0
        for i, task in enumerate(tasks):
            chat, text = messages(task, args.prompt)
            cfg = DecodeConfig(mode="ar", max_new_tokens=args.max_new_tokens, copy_text_bias=bias,
                               copy_source=result_values([text]) if bias else None, presence_penalty=presence,
                               stop_loops=loops)
            t0 = time.perf_counter()
            r = engine.generate(chat, cfg)
            ms.append((time.perf_counter() - t0) * 1000)
            has = answer_has(r.text, task.answer_value)
            hits += has
            at_budget += r.stats.output_tokens >= args.max_new_tokens
            tokens += r.stats.output_tokens
            cut += r.stats.finish_reason == "loop"
            rows.append({"bias": bias, "presence": presence, "loops": loops, "id": task.id, "has": has,
                         "text": r.text, "tokens": r.stats.output_tokens, "finish_reason": r.stats.finish_reason})
            print(f"{key} {i + 1}/{len(tasks)} {task.id} has={has} {r.text[:90]!r}", file=sys.stderr)
        ms.sort()
        summary[key] = {"n": len(tasks), "answer_has_result_rate": round(hits / len(tasks), 4),
                        "at_budget": at_budget, "ended_at_a_loop": cut,
                        "output_tokens_mean": round(tokens / len(tasks), 1), "p50_ms": round(ms[len(ms) // 2], 1),
                        "mean_ms": round(sum(ms) / len(ms), 1)}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"suite": "answer_copy", "data": args.data, "prompt": args.prompt,
                                              "command": "python evals/answer_copy.py " + " ".join(argv or sys.argv[1:]),
                                              "summary": summary, "items": rows}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
