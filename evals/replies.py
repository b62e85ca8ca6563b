"""The reply benchmark (``agentkit/evals/replies.py``): plain replies of an ``Agent`` with no tools, on
instructions with checkable constraints, and a paired comparison of two runs with a sign test.

    nice -n 5 python evals/replies.py run --lora none --out evals/results/replies/loaded.json
    nice -n 5 python evals/replies.py run --out evals/results/replies/default.json
    python evals/replies.py compare evals/results/replies/default.json evals/results/replies/loaded.json

``--lora``: the engine's ``EngineConfig.lora`` (``none``: the weights as loaded; left out: the default model's own
LoRA, the loop adapter). ``--reply-weights``: ``Agent(decode=DecodeConfig(weights=...))``, which weights write a
plain reply (the SDK's default: ``loaded``, the weights as loaded; ``base``: the merged loop adapter).
``--instructions``: the agent's instructions (without them a plain reply has the chat template's own system text;
``"You are a helpful assistant."`` is the SDK's text for agent steps).
Each run writes its replies as it goes (``--out``; a rerun with the same ``--out`` resumes). ``compare`` reports
each split apart: the share of items followed by each run, wins and losses on the same items, the sign test's p.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from agentkit.evals.replies import follows, load_items, sign_test

DATA = Path(__file__).resolve().parent / "replies" / "instructions.jsonl"


def run(args: argparse.Namespace) -> None:
    import torch

    from agentkit import Agent, DecodeConfig, default_engine

    torch.set_num_threads(1)
    out = Path(args.out)
    done = json.loads(out.read_text())["replies"] if out.is_file() else {}
    engine = default_engine(lora=args.lora) if args.lora else default_engine()
    decode = DecodeConfig(weights=args.reply_weights) if args.reply_weights else None
    agent = Agent(engine, decode=decode, instructions=args.instructions)
    items = load_items(args.data, args.split)[: args.limit]
    for it in items:
        if it["id"] in done:
            continue
        t = time.perf_counter()
        text = agent.run_sync(it["prompt"]).output
        done[it["id"]] = {"reply": text, "followed": follows(text, it), "s": round(time.perf_counter() - t, 2)}
        print(f"{it['id']} {done[it['id']]['followed']!s:5} {text[:90]!r}", flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"lora": args.lora, "reply_weights": args.reply_weights,
                                   "instructions": args.instructions,
                                   "command": " ".join(sys.argv), "replies": done}, indent=1))


def compare(args: argparse.Namespace) -> None:
    a, b = (json.loads(Path(p).read_text())["replies"] for p in (args.a, args.b))
    items = load_items(args.data)
    for split in ("dev", "held_out"):
        ids = [it["id"] for it in items if it["split"] == split and it["id"] in a and it["id"] in b]
        rescored = {it["id"]: it for it in items}
        fa = [follows(a[i]["reply"], rescored[i]) for i in ids]
        fb = [follows(b[i]["reply"], rescored[i]) for i in ids]
        wins = sum(x and not y for x, y in zip(fa, fb, strict=True))
        losses = sum(y and not x for x, y in zip(fa, fb, strict=True))
        print(f"{split}: n={len(ids)}  {os.path.basename(args.a)} {sum(fa) / max(1, len(ids)):.3f}  "
              f"{os.path.basename(args.b)} {sum(fb) / max(1, len(ids)):.3f}  wins {wins} losses {losses}  "
              f"sign test p={sign_test(wins, losses):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--lora", default=None)
    r.add_argument("--reply-weights", default=None)
    r.add_argument("--limit", type=int, default=None)
    r.add_argument("--split", default=None, help="dev | held_out (default: both)")
    r.add_argument("--instructions", default=None)
    r.add_argument("--out", required=True)
    r.add_argument("--data", default=str(DATA))
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--data", default=str(DATA))
    args = ap.parse_args()
    run(args) if args.cmd == "run" else compare(args)


if __name__ == "__main__":
    main()
