"""What the block-diffusion adapter costs AR mode: perplexity and greedy agreement, base vs adapted weights.

The DiffusionGemma report states how much AR quality its diffusion adaptation costs; this is the same question for
the adapter shipped with the default model (``adapters/smollm2-135m-bd``). Both measurements run the adapted weights
*causally* (plain AR, no canvas):

1. **Perplexity** on held-out English prose the adapter never saw: the docstrings of Python standard-library modules
   (on every machine, never in the training data, which is synthetic tool calls plus the base model's own chat
   replies), first ``--tokens`` tokens of each.
2. **Greedy agreement** on chat prompts: the share of the first ``--new`` greedy tokens where the adapted model's AR
   output equals the base model's (up to the first difference), and exact-match rate.

Prints figures; asserts nothing.

    python evals/bench_adapter_ar.py [--docs 24] [--tokens 192] [--prompts 12] [--new 32] [--threads 1] [--adapter DIR]
"""

from __future__ import annotations

import argparse
import importlib
import math
import time

import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.models.adapter import apply_adapter

MODULES = ["json", "textwrap", "argparse", "logging", "unittest", "pathlib", "datetime", "collections", "difflib",
           "heapq", "bisect", "csv", "shutil", "subprocess", "tempfile", "fractions", "decimal", "statistics",
           "random", "string", "calendar", "email", "http.client", "urllib.parse", "zipfile", "tarfile", "sqlite3",
           "contextlib", "functools", "itertools", "inspect", "dataclasses", "enum", "typing", "pickle", "copy"]

PROMPTS = [
    "What is the capital of France? Answer in one sentence.",
    "Give me two tips for sleeping better.",
    "Explain what a hash table is in simple words.",
    "Write a haiku about the sea.",
    "Why is the sky blue?",
    "Suggest a name for a small bakery.",
    "How do I reverse a list in Python?",
    "What does a compiler do?",
    "List three fruits that are red.",
    "Describe a cat in one sentence.",
    "What is photosynthesis?",
    "Translate 'good morning' into French.",
    "What are the benefits of regular exercise?",
    "Write one sentence about the moon.",
]


def docs(n: int) -> list[str]:
    out = []
    for name in MODULES:
        doc = (importlib.import_module(name).__doc__ or "").strip()
        if len(doc) > 400:
            out.append(doc)
        if len(out) == n:
            break
    return out


@torch.inference_mode()
def nll(model, ids: list[int]) -> tuple[float, int]:
    x = torch.tensor([ids])
    logits = model(input_ids=x).logits[0, :-1].float()
    lp = torch.log_softmax(logits, -1).gather(-1, x[0, 1:, None])[:, 0]
    return float(-lp.sum()), len(ids) - 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=24)
    ap.add_argument("--tokens", type=int, default=192)
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--adapter", default=None, help="adapter dir (default: the one shipped for the default model)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    base = Engine(EngineConfig(adapter=False, backend="torch"))  # shares its torch weights
    adapted_lm = apply_adapter(base.lm, args.adapter)
    adapted = Engine.from_loaded(adapted_lm)
    tok = base.tokenizer

    t0 = time.perf_counter()
    texts = docs(args.docs)
    tot = {"base": [0.0, 0], "adapted": [0.0, 0]}
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False)[: args.tokens]
        for name, lm in (("base", base.lm), ("adapted", adapted_lm)):
            s, n = nll(lm.model, ids)
            tot[name][0] += s
            tot[name][1] += n
    ppl = {k: math.exp(s / n) for k, (s, n) in tot.items()}
    print(f"perplexity on {len(texts)} stdlib docstrings ({tot['base'][1]} tokens): base {ppl['base']:.2f}, "
          f"adapted {ppl['adapted']:.2f}, ratio {ppl['adapted'] / ppl['base']:.3f}")

    cfg = DecodeConfig(mode="ar", max_new_tokens=args.new)
    prefix, exact, n_tok = 0, 0, 0
    for p in PROMPTS[: args.prompts]:
        a = base.generate(p, cfg).token_ids
        b = adapted.generate(p, cfg).token_ids
        agree = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        prefix += agree
        n_tok += len(a)
        exact += a == b
        print(f"  agree {agree:>2}/{len(a):<2} {p[:48]!r}")
    n = min(args.prompts, len(PROMPTS))
    print(f"greedy AR agreement over {n} chat prompts: common prefix {prefix}/{n_tok} tokens "
          f"({prefix / max(n_tok, 1):.2%}), identical outputs {exact}/{n}")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
