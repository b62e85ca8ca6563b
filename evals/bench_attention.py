"""What attention costs in a one-token decode step, torch's sdpa kernel against agentkit's decode-step path.

The default model in bfloat16, 1 thread, rounds interleaved (median over ``--repeats``):

- one layer's attention for a one-token query against K cached positions (the default model's shapes: 9 query
  heads, 3 key/value heads, head dim 64): transformers' ``sdpa`` (torch's CPU flash kernel) and
  ``agentkit.engine.attention.decode_step_attention`` (two float32 matmuls), and their largest difference;
- a whole AR step (body and head) after a K-token prompt, on two engines that differ only in
  ``EngineConfig.attention`` (``sdpa`` and ``auto``), and whether their greedy picks agree over ``--steps`` steps.

    python evals/bench_attention.py --threads 1
"""

from __future__ import annotations

import argparse

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from agentkit.config import EngineConfig
from agentkit.engine.attention import decode_step_attention
from agentkit.engine.engine import Engine
from agentkit.evals.timing import interleaved_ms


class _Layer(torch.nn.Module):
    num_key_value_groups = 3
    is_causal = True


def _layer_row(k_len: int, repeats: int, g: torch.Generator) -> None:
    q = torch.randn(1, 9, 1, 64, generator=g).bfloat16()
    k, v = torch.randn(2, 1, 3, k_len, 64, generator=g).bfloat16()
    fns = {"sdpa": lambda: sdpa_attention_forward(_Layer(), q, k, v, None, scaling=0.125),
           "step": lambda: decode_step_attention(_Layer(), q, k, v, None, scaling=0.125)}
    ms = interleaved_ms(fns, repeats)
    diff = (fns["sdpa"]()[0].float() - fns["step"]()[0].float()).abs().max().item()
    print(f"{k_len} | {ms['sdpa']:.3f} | {ms['step']:.3f} | {ms['step'] / ms['sdpa']:.2f} | {diff:.2e}")


def _step_row(engines: dict[str, Engine], ids: list[int], repeats: int, steps: int) -> None:
    caches = {a: e.backbone.new_cache() for a, e in engines.items()}
    for a, e in engines.items():
        e.backbone.encode(ids, caches[a])
    n = len(ids)

    def step(a: str) -> None:
        engines[a].backbone.encode([ids[-1]], caches[a])
        engines[a].backbone.crop(caches[a], n)

    ms = interleaved_ms({a: (lambda a=a: step(a)) for a in engines}, repeats)
    agree, last = 0, ids[-1]
    for _ in range(steps):  # both engines continue the same (sdpa's) text
        picks = {a: int(e.backbone.encode([last], caches[a])[0].argmax()) for a, e in engines.items()}
        agree += picks["sdpa"] == picks["auto"]
        last = picks["sdpa"]
    print(f"{n} | {ms['sdpa']:.1f} | {ms['auto']:.1f} | {ms['auto'] / ms['sdpa']:.2f} | {agree}/{steps}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--steps", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    lengths = [100, 300, 600, 1200]
    print("one layer, one-token query (ms): K | sdpa | decode-step | ratio | max |diff|")
    g = torch.Generator().manual_seed(0)
    for k_len in lengths:
        _layer_row(k_len, a.repeats * 10, g)
    engines = {att: Engine(EngineConfig(dtype="bfloat16", backend="torch", threads=a.threads, attention=att))
               for att in ("sdpa", "auto")}
    text = " ".join(["The history of computing spans calculators, mainframes and phones."] * 200)
    ids = engines["auto"].tokenizer.encode(text, add_special_tokens=False)
    print("AR step of the whole model after a K-token prompt (ms): K | sdpa | auto | ratio | greedy picks agree")
    for k_len in lengths:
        _step_row(engines, ids[:k_len], a.repeats, a.steps)


if __name__ == "__main__":
    main()
