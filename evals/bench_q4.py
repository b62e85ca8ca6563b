"""What the 4-bit short passes (agentkit/models/q4.py) buy on the default model, bf16 (or ``--dtype float32``:
the 4-bit passes then take bf16 inputs and return float32), 1 thread.

Rounds interleaved, median over ``--repeats``:

- the model's 210 decoder linear layers run one after another on R rows, dense bf16 weights against the 4-bit
  weights with torch's int4 kernel (``Q4Linear`` with ``max_rows`` above R), for R = 1, 2, 4, 8, 16, 32, 300;
- a whole pass of R positions after a 200-token prompt on two engines that differ only in
  ``EngineConfig.q4_steps`` (``off``, ``on``), and over ``--steps`` teacher-forced one-token steps of a BFCL
  prompt's continuation, how often each engine's greedy pick equals a float32 engine's.

    python evals/bench_q4.py --threads 1
    python evals/bench_q4.py --threads 1 --dtype float32
"""

from __future__ import annotations

import argparse

import torch

from agentkit.config import EngineConfig
from agentkit.engine.engine import Engine
from agentkit.evals.timing import interleaved_ms
from agentkit.models.q4 import GROUP, Q4Linear


@torch.inference_mode()
def _layers_row(layers: list[Q4Linear], rows: int, repeats: int) -> None:
    dtype = layers[0].weight.dtype
    xs = {k: torch.randn(rows, k).to(dtype) for k in {m.in_features for m in layers}}

    def dense() -> None:
        for m in layers:
            torch.nn.functional.linear(xs[m.in_features], m.weight)

    def q4() -> None:  # as Q4Linear.forward does: bf16 inputs (a no-op in bf16), output in the layer's dtype
        for m in layers:
            a = xs[m.in_features].to(m.scales.dtype)
            torch.ops.aten._weight_int4pack_mm_for_cpu(a, m.packed, GROUP, m.scales).to(dtype)

    ms = interleaved_ms({"dense": dense, "q4": q4}, repeats)
    print(f"{rows} | {ms['dense']:.1f} | {ms['q4']:.1f} | {ms['dense'] / ms['q4']:.2f}x")


@torch.inference_mode()
def _pass_row(engines: dict[str, Engine], prompt: list[int], rows: int, repeats: int) -> dict[str, float]:
    caches = {k: e.backbone.new_cache() for k, e in engines.items()}
    for k, e in engines.items():
        e.backbone.encode(prompt, caches[k])
    block = prompt[-rows:]

    def run(k: str) -> None:
        engines[k].backbone.encode(block, caches[k], rows=[-1])
        engines[k].backbone.crop(caches[k], len(prompt))

    return interleaved_ms({k: (lambda k=k: run(k)) for k in engines}, repeats)


def _agreement(engines: dict[str, Engine], ref: Engine, prompt: list[int], cont: list[int]) -> dict[str, int]:
    all_engines = {**engines, "float32": ref}
    caches = {k: e.backbone.new_cache() for k, e in all_engines.items()}
    for k, e in all_engines.items():
        e.backbone.encode(prompt, caches[k])
    agree = dict.fromkeys(engines, 0)
    for t in cont:
        picks = {k: int(e.backbone.encode([t], caches[k])[0].argmax()) for k, e in all_engines.items()}
        for k in engines:
            agree[k] += picks[k] == picks["float32"]
    return agree


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    # "on" as "auto" in a bf16 engine, and also in a float32 one
    engines = {q: Engine(EngineConfig(dtype=a.dtype, backend="torch", threads=a.threads, q4_steps=q))
               for q in ("off", "on")}
    layers = [m for m in engines["on"].backbone.model.modules() if isinstance(m, Q4Linear)]
    print(f"{len(layers)} linear layers on 4-bit weights, {a.dtype} engine")
    print(f"all layers on R rows (ms): R | dense {a.dtype} | 4-bit | speed-up")
    for rows in (1, 2, 4, 8, 16, 32, 300):
        _layers_row(layers, rows, a.repeats)
    tok = engines["on"].tokenizer
    text = " ".join(["The history of computing spans calculators, mainframes and phones."] * 40)
    ids = tok.encode(text, add_special_tokens=False)
    print("a pass of R positions after a 200-token prompt (ms): R | q4_steps=off | on | ratio")
    for rows in (1, 2, 4, 8, 16, 32):
        ms = _pass_row(engines, ids[:200 + rows], rows, a.repeats)
        print(f"{rows} | {ms['off']:.1f} | {ms['on']:.1f} | {ms['on'] / ms['off']:.2f}")
    ref = Engine(EngineConfig(dtype="float32", backend="torch", threads=a.threads))
    prompt = ref.encode_prompt([{"role": "user", "content": "Write a short story about a lighthouse keeper."}])
    cache = ref.backbone.new_cache()
    last, cont = ref.backbone.encode(prompt, cache)[0], []
    for _ in range(a.steps):  # the float32 engine's own greedy continuation
        cont.append(int(last.argmax()))
        last = ref.backbone.encode([cont[-1]], cache)[0]
    agree = _agreement(engines, ref, prompt, cont)
    print("greedy picks equal to float32's over " + f"{a.steps} steps: "
          + ", ".join(f"q4_steps={k}: {v}" for k, v in agree.items()))


if __name__ == "__main__":
    main()
