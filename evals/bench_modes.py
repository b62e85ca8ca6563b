"""Decoding modes side by side on the default model: forwards, tokens per forward, ms per forward, tokens/s.

Free text (8 short prompts): AR, diffusion as a causal canvas on the base weights (``diffusion-causal``), diffusion
with the model's block-diffusion adapter when it ships one (``diffusion-adapter``), and verify. The same prompts
under a small JSON template: AR-constrained (jump-forward) and the same canvas modes. Ratios are against AR (free
text) and AR-constrained (template). Greedy decoding throughout, so verify must equal AR exactly and the causal
canvas (a Jacobi fixed point) should too: mismatches are printed. The adapter is a different model distribution,
so its agreement with AR is printed as a figure, not expected to be total. Prints figures; asserts nothing.

    python evals/bench_modes.py [--prompts 8] [--max-new-tokens 40] [--model DIR] [--threads 1] [--no-adapter]

About 4 minutes on 2 CPU cores (1 thread is faster than 2 when the machine is shared).
"""

from __future__ import annotations

import argparse
import time

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.evals.report import summarize
from agentkit.evals.runner import ENGINE_MODE, UNCONSTRAINED, adapter_off

MODE = {**ENGINE_MODE, "diffusion-adapter": "diffusion"}

PROMPTS = [
    "What is the capital of France? Answer in one sentence.",
    "Give me two tips for sleeping better.",
    "Explain what a hash table is in simple words.",
    "Write a haiku about the sea.",
    "What is 12 times 7? Explain briefly.",
    "Name three primary colors.",
    "Why is the sky blue?",
    "Suggest a name for a small bakery.",
]

SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "maxLength": 60},
        "confident": {"type": "boolean"},
        "topic": {"enum": ["science", "cooking", "geography", "math", "art", "health", "computing", "other"]},
    },
    "required": ["answer", "confident", "topic"],
    "additionalProperties": False,
}
JSON_SYSTEM = ('Answer as JSON: {"answer": <short answer>, "confident": true|false, "topic": one of science, cooking, '
               "geography, math, art, health, computing, other}.")


def row(res) -> dict:
    s = res.stats
    return {"success": True, "valid": True, "stats": s.to_dict(), "text": res.text,
            "ms_per_forward": (s.latency_ms - s.prefill_ms) / max(s.forwards, 1)}


def table(title: str, rows: dict[str, list[dict]], base: str) -> None:
    print(f"\n### {title}\n")
    print("| mode | n | dec fwd | enc fwd | fwd | tok/fwd | tok/fwd excl pinned | ms/fwd | p50 ms | out tok/s "
          f"| fwd vs {base} | latency vs {base} |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    sums = {m: summarize(r) for m, r in rows.items()}
    b = sums[base]
    for m, s in sums.items():
        msf = sum(r["ms_per_forward"] for r in rows[m]) / len(rows[m])
        print(f"| {m} | {s['n']} | {s['decoder_forwards_mean']:.1f} | {s['encoder_forwards_mean']:.1f} "
              f"| {s['forwards_mean']:.1f} | {s['tokens_per_forward']:.2f} | {s['tokens_per_forward_excl_pinned']:.2f} "
              f"| {msf:.0f} | {s['latency_ms_p50']:.0f} | {s['output_tokens_per_s']:.1f} "
              f"| {s['forwards_mean'] / b['forwards_mean']:.2f}x | {s['latency_ms_mean'] / b['latency_ms_mean']:.2f}x |")


def mismatches(rows: dict[str, list[dict]], ref: str, others: list[str], prompts: list[str]) -> None:
    for m in others:
        bad = 0
        for i, (a, b) in enumerate(zip(rows[ref], rows[m])):
            if a["text"] != b["text"]:
                bad += 1
                k = next((j for j, (x, y) in enumerate(zip(a["text"], b["text"])) if x != y),
                         min(len(a["text"]), len(b["text"])))
                print(f"  MISMATCH {m} vs {ref} on prompt {i} ({prompts[i][:40]!r}) at char {k}:\n"
                      f"    {ref}: {a['text'][max(0, k - 20):k + 40]!r}\n    {m}: {b['text'][max(0, k - 20):k + 40]!r}")
        print(f"{m} == {ref}: {len(rows[m]) - bad}/{len(rows[m])} identical")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--canvas-length", type=int, default=32)
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (1 is faster on a loaded shared CPU)")
    ap.add_argument("--no-adapter", action="store_true", help="skip the adapted-diffusion rows")
    args = ap.parse_args()
    prompts = PROMPTS[: args.prompts]

    t0 = time.perf_counter()
    engine = Engine(EngineConfig(model=args.model, threads=args.threads))
    print(f"model {engine.name}, loaded in {time.perf_counter() - t0:.1f} s")
    from agentkit.constrain.compiler import compile_schema

    template = compile_schema(SCHEMA)
    print(f"template compiled in {template.compile_ms:.1f} ms")
    engine.generate("Hi", DecodeConfig(max_new_tokens=2))  # warm-up
    adapter = None if args.no_adapter else engine.adapter_path
    print(f"adapter for the diffusion-adapter rows: {adapter or 'none'}")
    canvas = ["diffusion-causal"] + (["diffusion-adapter"] if adapter else []) + ["verify"]
    free: dict[str, list[dict]] = {m: [] for m in [UNCONSTRAINED, *canvas]}
    tpl: dict[str, list[dict]] = {m: [] for m in ["ar-constrained", *canvas]}

    def gen(prompt, mode: str, max_new_tokens: int, template=None):
        cfg = DecodeConfig(mode=MODE[mode], max_new_tokens=max_new_tokens, canvas_length=args.canvas_length)
        if mode == "diffusion-causal":
            with adapter_off(engine):
                return engine.generate(prompt, cfg, template=template)
        return engine.generate(prompt, cfg, template=template)

    for i, p in enumerate(prompts):
        for mode, out in free.items():  # item-major: every mode on the same prompt, back to back
            out.append(row(gen(p, mode, args.max_new_tokens)))
        msgs = [{"role": "system", "content": JSON_SYSTEM}, {"role": "user", "content": p}]
        for mode, out in tpl.items():
            out.append(row(gen(msgs, mode, 256, template)))
        print(f"prompt {i + 1}/{len(prompts)} done ({time.perf_counter() - t0:.0f} s)", flush=True)

    table(f"free text, {args.max_new_tokens} new tokens, canvas {args.canvas_length}", free, UNCONSTRAINED)
    mismatches(free, UNCONSTRAINED, canvas, prompts)
    table("small JSON template (3 properties: string, boolean, enum)", tpl, "ar-constrained")
    mismatches(tpl, "ar-constrained", canvas, prompts)
    if adapter:
        print("(diffusion-adapter is a different model distribution: its agreement with AR is a figure, not a check)")
    print("\nexample template outputs:")
    for m in tpl:
        print(f"  {m}: {tpl[m][0]['text']}")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
