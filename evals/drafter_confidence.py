"""How often verify keeps a block-drafter draft, by the drafter's own probability of it.

Runs verify with the block drafter on generated jobs (``agentkit/training/drafter_data.py``: tool calls,
extractions, edits and free text) with every draft checked (``sized_passes=False``), and records, for each drafter
draft checked up to a block's first rejected one, the drafter's probability of it under the template's mask and
whether greedy AR kept it. ``agentkit/engine/sizing.py``'s ``keep_chance`` is fitted on this table. The jobs come from
seeds the drafter's training and its held-out curve never used (``--held-out-from 50``). ::

    python evals/drafter_confidence.py --held-out-from 50 --limit 40 --out evals/results/drafter/confidence_gen40.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import drafter_verify  # the same requests as the verify benchmark

BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 1.0001)


class Recorder:
    """Wraps a Decoder's drafting and checking to note (probability, kept) for each drafter draft checked."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.kind = ""
        self._block: dict[int, float] = {}

    def install(self, decode) -> None:
        drafted, check, block = decode.Decoder._drafted, decode.Decoder._check_block, decode.Decoder._verify_block
        rec = self

        def _drafted(dec, rows, j, state):
            t, chance = drafted(dec, rows, j, state)
            if t is not None:
                row = rows[j - 1]
                allowed = dec.allowed_tokens(state)
                row = row if allowed is None else row.masked_fill(~allowed, float("-inf"))
                rec._block[j] = float(torch.softmax(row.float(), -1)[t])
            return t, chance

        def _verify_block(dec, *args):
            rec._block = {}
            return block(dec, *args)

        def _check_block(dec, blk, *args):
            out = check(dec, blk, *args)
            keep = out[1]
            rec.rows += [{"kind": rec.kind, "j": j, "p": round(p, 4), "kept": j < keep}
                         for j, p in sorted(rec._block.items()) if j < len(blk) and j <= keep]
            return out

        decode.Decoder._drafted, decode.Decoder._verify_block, decode.Decoder._check_block = (
            _drafted, _verify_block, _check_block)


def table(rows: list[dict]) -> list[dict]:
    out = []
    for lo, hi in itertools.pairwise(BINS):
        b = [r for r in rows if lo <= r["p"] < hi]
        if b:
            out.append({"p_from": lo, "p_to": min(hi, 1.0), "n": len(b),
                        "p_mean": round(sum(r["p"] for r in b) / len(b), 3),
                        "kept": round(sum(r["kept"] for r in b) / len(b), 3)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--held-out-from", type=int, default=50)
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--kind", default=None, choices=["call", "extract", "edit", "free"])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    from agentkit.config import DecodeConfig, EngineConfig
    from agentkit.engine import decode
    from agentkit.engine.engine import Engine

    rec = Recorder()
    rec.install(decode)
    engine = Engine(EngineConfig(threads=1, prefix_cache=False))
    reqs = drafter_verify.requests(argparse.Namespace(edits=None, bfcl=None, kind=args.kind, limit=args.limit,
                                                      held_out_from=args.held_out_from))
    for req in reqs:
        rec.kind = req["id"].rsplit("-", 1)[-1]
        cfg = DecodeConfig(mode="verify", draft="drafter", sized_passes=False,
                           max_new_tokens=256 if req["template"] is not None else 96)
        engine.generate(req["messages"], cfg, template=req["template"])
    kinds = sorted({r["kind"] for r in rec.rows})
    res = {"command": "python evals/drafter_confidence.py " + " ".join(argv or sys.argv[1:]), "requests": len(reqs),
           "checked": len(rec.rows), "kept": sum(r["kept"] for r in rec.rows), "all": table(rec.rows),
           "by_kind": {k: table([r for r in rec.rows if r["kind"] == k]) for k in kinds}, "rows": rec.rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res["all"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
