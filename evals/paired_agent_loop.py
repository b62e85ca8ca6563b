"""Two agent-loop results paired task by task: for each score, how many tasks only the second got right (won), only
the first (lost), and the exact two-sided sign test's p on those discordant tasks; the rates on the shared tasks.

    python evals/paired_agent_loop.py evals/results/agent_loop/agent_loop_fold_160.json \\
        evals/results/adapters/agent_loop_lora_160.json --out evals/results/s22/lora_paired.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from peers_merge import sign_test  # evals/peers_merge.py (this script's folder is on sys.path)

from agentkit.evals.report import write_json_atomic

SCORES = ("success", "finished", "first_call_right", "answer_has_value", "two_tool_right", "got_result")


def rows_of(path: str | Path, mode: str) -> dict[str, dict]:
    doc = json.loads(Path(path).read_text())
    return {r["id"]: r for r in doc["items"] if r.get("framework") == "agentkit" and r.get("mode") == mode}


def paired(a: dict[str, dict], b: dict[str, dict]) -> dict:
    ids = sorted(set(a) & set(b))
    out: dict = {"tasks": len(ids), "scores": {}}
    for key in SCORES:
        both = [i for i in ids if a[i].get(key) is not None and b[i].get(key) is not None]
        if not both:
            continue
        won = sum(bool(b[i][key]) and not a[i][key] for i in both)
        lost = sum(bool(a[i][key]) and not b[i][key] for i in both)
        out["scores"][key] = {"n": len(both), "first": round(sum(bool(a[i][key]) for i in both) / len(both), 4),
                              "second": round(sum(bool(b[i][key]) for i in both) / len(both), 4),
                              "won": won, "lost": lost, "p": round(sign_test(won, lost), 4)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("first")
    ap.add_argument("second")
    ap.add_argument("--mode", default="default")
    ap.add_argument("--second-mode", default=None, help="the second file's mode (default: --mode)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    second = a.second_mode or a.mode
    res = {"first": a.first, "second": a.second, "mode": a.mode, "second_mode": second,
           **paired(rows_of(a.first, a.mode), rows_of(a.second, second))}
    print(f"{res['tasks']} shared tasks")
    for k, s in res["scores"].items():
        print(f"{k:<18} n {s['n']:>3}  {s['first']:.3f} -> {s['second']:.3f}  won {s['won']:>2} lost {s['lost']:>2}  "
              f"p {s['p']:.3f}")
    if a.out:
        write_json_atomic(Path(a.out), res)


if __name__ == "__main__":
    main()
