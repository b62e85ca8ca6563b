"""BFCL single calls with and without a LoRA merged into the weights (``EngineConfig.lora``), on the same
questions, in one process: does the loop adapter cost anything on plain function calling?

    python evals/bfcl_lora.py --lora adapters/smollm2-135m-loop --data evals/data/bfcl --limit 25 \\
        --out evals/results/adapters/bfcl_lora.json

Writes ``OUT`` (both runs' summaries and the paired comparison: questions only the adapted engine got right, only
the base one did, and the sign test's p) and ``OUT`` with ``.base``/``.lora`` before ``.json`` (each run's rows).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from peers_merge import sign_test  # evals/peers_merge.py (this script's folder is on sys.path)

from agentkit.config import NO_LORA, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.evals.report import write_json_atomic
from agentkit.evals.runner import run_eval


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lora", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--limit", type=int, default=25, help="questions per BFCL file")
    ap.add_argument("--mode", default="ar-constrained")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = Path(a.out)
    runs = {}
    for name, lora in (("base", NO_LORA), ("lora", a.lora)):
        engine = Engine(EngineConfig(threads=a.threads, lora=lora))
        runs[name] = run_eval("bfcl", Path(a.data), [a.mode], a.limit, engine=engine, threads=a.threads,
                              out=out.with_suffix(f".{name}.json"), quiet=True, progress=False)
    rows = {k: {(r["id"]): bool(r["success"]) for r in v["items"] if r["mode"] == a.mode} for k, v in runs.items()}
    ids = sorted(set(rows["base"]) & set(rows["lora"]))
    won = sum(rows["lora"][i] and not rows["base"][i] for i in ids)
    lost = sum(rows["base"][i] and not rows["lora"][i] for i in ids)
    res = {"command": f"python evals/bfcl_lora.py --lora {a.lora} --data {a.data} --limit {a.limit} "
                      f"--mode {a.mode} --out {a.out}", "mode": a.mode, "questions": len(ids),
           "base": runs["base"]["modes"][a.mode], "lora": runs["lora"]["modes"][a.mode],
           "won": won, "lost": lost, "p": round(sign_test(won, lost), 4)}
    write_json_atomic(out, res)
    for k in ("base", "lora"):
        m = res[k]
        print(f"{k:<5} success {m['task_success']}  p50 {m['latency_ms_p50']} ms")
    print(f"{len(ids)} questions: lora won {won}, lost {lost}, p {res['p']:.3f}")


if __name__ == "__main__":
    main()
