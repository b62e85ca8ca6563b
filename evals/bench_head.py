"""What the output head costs in a bf16 forward, and whether the refined head picks what a float32 head picks.

The default model in bfloat16, 1 thread. For a pass of 1 and 8 positions after a ~200-token prefix: the body's
ms, then three heads on the same hidden states (the median over ``--repeats`` rounds, interleaved):

- ``float32``: every logit as a float32 dot product (the engine's head before; 113 MB of float32 weights a pass);
- ``refined`` (the engine's head now, ``agentkit.engine.backbone.refined_logits``): the bf16 matmul, then each
  row's top 64 recomputed in float32;
- ``bf16``: the bf16 matmul alone (logits rounded to bf16: ties).

and, over ``--rows`` real next-token distributions (a BFCL prompt's continuation), how often the greedy pick of
the refined and the bf16 head differs from the float32 head's, with no constraint and with a random half of the
vocabulary ruled out (a constraint that removes the model's favourites).

    python evals/bench_head.py --threads 1
"""

from __future__ import annotations

import argparse

import torch

from agentkit.config import EngineConfig
from agentkit.engine.backbone import refined_logits
from agentkit.engine.engine import Engine
from agentkit.evals.timing import interleaved_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--rows", type=int, default=400)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    eng = Engine(EngineConfig(dtype="bfloat16", backend="torch", threads=a.threads))
    bb = eng.backbone
    w, w32 = bb.head.weight, bb.head.weight.detach().float()
    heads = {"float32": lambda h: torch.nn.functional.linear(h.float(), w32),
             "refined": lambda h: refined_logits(h, bb.head),
             "bf16": lambda h: torch.nn.functional.linear(h, w).float()}
    text = " ".join(["The history of computing spans calculators, mainframes and phones."] * 40)
    ids = eng.tokenizer.encode(text, add_special_tokens=False)[:264]
    cache = bb.new_cache()
    bb.encode(ids[:200], cache)
    print(f"default model, bfloat16, {a.threads} thread(s), prefix 200 tokens, median of {a.repeats}")
    print("| positions | body ms | head float32 ms | head refined ms | head bf16 ms | step refined / float32 |")
    print("|---|---|---|---|---|---|")
    for p in (1, 8):
        def body(p=p):
            h = bb._run(ids[200:200 + p], cache, None)
            bb.crop(cache, 200)
            return h
        hidden = body()
        fns = {"body": body, **{k: (lambda f=f, h=hidden: f(h)) for k, f in heads.items()}}
        hm = interleaved_ms(fns, a.repeats)
        b = hm["body"]
        print(f"| {p} | {b:.1f} | {hm['float32']:.1f} | {hm['refined']:.1f} | {hm['bf16']:.1f} | "
              f"{(b + hm['refined']) / (b + hm['float32']):.2f} |")
    # greedy agreement with the float32 head on real hidden states
    cache = bb.new_cache()
    hidden = bb._run(ids[: a.rows], cache, None)
    g = torch.Generator().manual_seed(0)
    ref = heads["float32"](hidden)
    for name in ("refined", "bf16"):
        out = heads[name](hidden)
        free = (out.argmax(-1) != ref.argmax(-1)).sum().item()
        half = torch.rand(ref.shape, generator=g) < 0.5
        masked = (out.masked_fill(half, -1e9).argmax(-1) != ref.masked_fill(half, -1e9).argmax(-1)).sum().item()
        print(f"{name}: greedy pick differs from float32 on {free}/{len(ref)} rows unconstrained, "
              f"{masked}/{len(ref)} with half the vocabulary ruled out")


if __name__ == "__main__":
    with torch.inference_mode():
        main()
