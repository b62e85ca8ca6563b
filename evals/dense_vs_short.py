"""Do the prompt's weights and the decoding steps' weights agree? The engine encodes a prompt on its dense weights and
decodes in short passes on 4-bit ones (``agentkit/models/q4.py``; with a merged LoRA, a grid fitted to the merged
weights, ``agentkit/models/gptq.py``). For extraction items, each item's ar-constrained output is read after its
prompt twice, in one dense pass and in the decoding steps' row-exact short passes, and the two next-token
distributions are compared at every output position: top-1 agreement, KL(short || dense), and the gap in the
log-probability of the token that follows.

    python evals/dense_vs_short.py --data evals/extract_user/dev --limit 20 --out evals/results/engine/dense_vs_short_loop.json
    python evals/dense_vs_short.py --data evals/extract_user/dev --limit 20 --lora none --out ...
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import agentkit  # noqa: F401  (sets OpenMP's wait policy before torch loads)
from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.evals.extract import load_items
from agentkit.sdk._extract import extract_messages
from agentkit.steps.grounded import GroundedOutput


def compare(engine: Engine, item: Any) -> dict[str, list[float]]:
    """One item: per output position, whether the two passes' argmax agree, KL(short || dense), and |log p short -
    log p dense| of the next output token."""
    import torch

    messages = extract_messages(item.schema, item.text)
    config = DecodeConfig(mode="ar", max_new_tokens=200, copy_source=item.text, copy_first_digit=True)
    out = list(engine.generate(messages, config, template=GroundedOutput(item.schema, item.text).template(None, True))
               .token_ids)
    prompt, bb = engine.encode_prompt(messages), engine.backbone
    logits = []
    for whole in (True, False):  # one dense pass; the decoding steps' short passes
        cache = bb.new_cache()
        bb.encode(prompt, cache, rows=[], whole=True)
        logits.append(torch.log_softmax(bb.encode(out, cache, rows=list(range(len(out))), whole=whole).float(), -1))
    dense, short = logits
    nxt = torch.tensor(out[1:], dtype=torch.long)[:, None]
    gap = (short[:-1].gather(-1, nxt) - dense[:-1].gather(-1, nxt)).abs().flatten()
    return {"agree": (dense.argmax(-1) == short.argmax(-1)).float().tolist(),
            "kl": (short.exp() * (short - dense)).sum(-1).tolist(), "gap": gap.tolist()}


def _q(xs: list[float], q: float) -> float:
    return sorted(xs)[min(int(q * len(xs)), len(xs) - 1)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("evals/extract_user/dev"))
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--lora", default=None, help="EngineConfig.lora (none: the checkpoint as loaded)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    kw = {"lora": args.lora} if args.lora is not None else {}
    engine = Engine(EngineConfig(threads=args.threads, **kw))
    rows = {"agree": [], "kl": [], "gap": []}
    for item in load_items(args.data, args.limit):
        for key, values in compare(engine, item).items():
            rows[key] += values
    summary = {"positions": len(rows["agree"]), "top1_agree": round(statistics.mean(rows["agree"]), 4),
               "kl_mean": round(statistics.mean(rows["kl"]), 4), "kl_p95": round(_q(rows["kl"], 0.95), 4),
               "gap_mean": round(statistics.mean(rows["gap"]), 4), "gap_p95": round(_q(rows["gap"], 0.95), 4),
               "gap_max": round(max(rows["gap"]), 3)}
    print(json.dumps(summary))
    if args.out:
        args.out.write_text(json.dumps({"command": "python evals/dense_vs_short.py " + " ".join(argv or []),
                                        "lora": args.lora or "default", "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
