"""BFCL items whose question spells a number out ("three", "a dozen"): ar-constrained with the number copy prior
reading spelled-out numbers (``agentkit.engine.copy.source_numbers``, session 18) against it reading digits only.
Greedy, so the two runs pair item by item.

    python evals/experiments/number_words_bfcl.py --out evals/results/s18/number_words_bfcl.json
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from agentkit.engine import copy as copy_mod
from agentkit.engine import default_engine
from agentkit.evals import bfcl
from agentkit.evals.runner import EvalContext, get_suite


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data/bfcl")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    items = [it for it in bfcl.load_bfcl(Path(args.data)) if copy_mod.WORD_NUMBER.search(
        " ".join(m["content"] for m in it.messages if m["role"] == "user").lower().encode())]
    engine, suite = default_engine(), get_suite("bfcl")
    words = copy_mod.WORD_NUMBER
    rows = []
    for it in items:
        row = {"id": it.id}
        for label, pattern in (("words", words), ("digits_only", re.compile(rb"(?!x)x"))):
            copy_mod.WORD_NUMBER = pattern
            r = suite.run(engine, it, bfcl.compile_call(it), "ar-constrained", EvalContext())
            row[label] = bool(r["success"])
        copy_mod.WORD_NUMBER = words
        rows.append(row)
    summary = {"n": len(rows), **{k: sum(r[k] for r in rows) for k in ("words", "digits_only")},
               "won": sum(r["words"] and not r["digits_only"] for r in rows),
               "lost": sum(r["digits_only"] and not r["words"] for r in rows)}
    Path(args.out).write_text(json.dumps({"summary": summary, "items": rows}, indent=1))
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
