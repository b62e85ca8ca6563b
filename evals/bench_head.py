"""What the output head costs in a forward, and whether the refined heads pick what a float32 head picks.

The default model in ``--dtype`` (``auto``: the engine's choice on this CPU), 1 thread. For a pass of 1 and 8
positions after a ~200-token prefix: the body's ms, then four heads on the same hidden states (the median over
``--repeats`` rounds, interleaved):

- ``float32``: every logit as a float32 dot product (113 MB of float32 weights a pass);
- ``refined int8`` (the engine's head on CPU, ``agentkit.engine.backbone.refined_logits`` with
  ``agentkit.models.head.Int8Head``): an int8 matmul ranks, then each row's top 64 are recomputed in float32;
- ``refined bf16``: the same with a bf16 matmul ranking (the engine's head before, in bf16 engines);
- ``bf16``: the bf16 matmul alone (logits rounded to bf16: ties).

and, over ``--rows`` real next-token distributions (a BFCL prompt's continuation), how often each head's greedy
pick differs from the float32 head's: with no constraint, with a random half of the vocabulary ruled out, and with
the float32 head's top 64 ruled out (a constraint that removes every refined candidate, so the coarse values
decide).

    python evals/bench_head.py --threads 1
"""

from __future__ import annotations

import argparse

import torch

from agentkit.config import EngineConfig
from agentkit.engine.backbone import refined_logits
from agentkit.engine.engine import Engine
from agentkit.evals.timing import interleaved_ms
from agentkit.models.head import Int8Head


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--rows", type=int, default=400)
    ap.add_argument("--dtype", default="auto", help="the engine's dtype (EngineConfig.dtype)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    eng = Engine(EngineConfig(dtype=a.dtype, backend="torch", threads=a.threads))
    bb = eng.backbone
    w32 = bb.head.weight.detach().float()
    w16 = torch.nn.Linear(w32.shape[1], w32.shape[0], bias=False, dtype=torch.bfloat16)
    w16.weight = torch.nn.Parameter(w32.bfloat16(), requires_grad=False)
    coarse = Int8Head(w32)
    heads = {"float32": lambda h: torch.nn.functional.linear(h.float(), w32),
             "refined int8": lambda h: refined_logits(h, bb.head, coarse=coarse),
             "refined bf16": lambda h: refined_logits(h.bfloat16(), w16),
             "bf16": lambda h: w16(h.bfloat16()).float()}
    text = " ".join(["The history of computing spans calculators, mainframes and phones."] * 40)
    ids = eng.tokenizer.encode(text, add_special_tokens=False)[:264]
    cache = bb.new_cache()
    bb.encode(ids[:200], cache)
    print(f"default model, {eng.lm.model.dtype}, {a.threads} thread(s), prefix 200 tokens, median of {a.repeats}")
    print("| positions | body ms | " + " | ".join(f"head {k} ms" for k in heads) + " | step refined int8 / float32 |")
    print("|---|---|" + "---|" * (len(heads) + 1))
    for p in (1, 8):
        def body(p=p):
            h = bb.hidden_states(ids[200:200 + p], cache, None)
            bb.crop(cache, 200)
            return h
        hidden = body()
        fns = {"body": body, **{k: (lambda f=f, h=hidden: f(h)) for k, f in heads.items()}}
        hm = interleaved_ms(fns, a.repeats)
        b = hm["body"]
        print(f"| {p} | {b:.1f} | " + " | ".join(f"{hm[k]:.1f}" for k in heads)
              + f" | {(b + hm['refined int8']) / (b + hm['float32']):.2f} |")
    # greedy agreement with the float32 head on real hidden states
    cache = bb.new_cache()
    hidden = bb.hidden_states(ids[: a.rows], cache, None)
    g = torch.Generator().manual_seed(0)
    ref = heads["float32"](hidden)
    half = torch.rand(ref.shape, generator=g) < 0.5
    edge = torch.zeros_like(half).scatter_(-1, ref.topk(64, -1).indices, True)
    for name in ("refined int8", "refined bf16", "bf16"):
        out = heads[name](hidden)
        free = (out.argmax(-1) != ref.argmax(-1)).sum().item()
        n = [(out.masked_fill(m, -1e9).argmax(-1) != ref.masked_fill(m, -1e9).argmax(-1)).sum().item()
             for m in (half, edge)]
        print(f"{name}: greedy pick differs from float32 on {free}/{len(ref)} rows unconstrained, "
              f"{n[0]}/{len(ref)} with half the vocabulary ruled out, {n[1]}/{len(ref)} with the top 64 ruled out")


if __name__ == "__main__":
    with torch.inference_mode():
        main()
