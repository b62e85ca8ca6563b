"""Merge the shards of one ``evals/peers.py`` run (``--shard K/N``) into one result, table and plot.

Only items finished in every variant of every shard are kept (an interrupted shard never gives one variant more
items than another), so a run stopped early is summarized on the items all variants share, and says how many.
Besides the per-variant summaries it counts, for each dtype, how many outputs of ``verify`` equal those of
``ar-constrained`` (the lossless check), splits success by BFCL file, and pairs every variant with the first one
question by question: how many it alone got right (won), how many only the first did (lost), and the exact
two-sided sign test's p-value on those discordant questions (a success gap of a few questions in 600 is often
within chance: p well above 0.05).

    python evals/peers_merge.py evals/results/bfcl/bfcl600_peers.s0.json evals/results/bfcl/bfcl600_peers.s1.json \\
        --out evals/results/bfcl/bfcl600_peers.json --plot evals/results/bfcl/bfcl600_peers.png
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

from merge_results import complete_rows  # evals/merge_results.py (this script's folder is on sys.path)

from agentkit.evals.report import markdown_table, summarize, write_json_atomic
from agentkit.evals.runner import ENGINE_MODE, eval_mode_name


def merge(paths: list[Path]) -> dict:
    docs = [json.loads(Path(p).read_text()) for p in paths]
    variants = docs[0]["variants"]
    if any(d["variants"] != variants for d in docs):
        raise SystemExit("the shards ran different variants")
    rows, done = complete_rows(docs, variants)
    res = {k: docs[0][k] for k in ("suite", "data", "engine_dtype", "engine_backend", "peer_max_new_tokens")}
    res.update({"variants": variants, "shards": [str(p) for p in paths], "env": [d["env"] for d in docs],
                "items_done": len(done), "items_total": sum(d["items_total"] for d in docs),
                "partial": len(done) < sum(d["items_total"] for d in docs),
                "modes": {v: summarize([r for r in rows if r["mode"] == v]) for v in variants}, "items": rows})
    by = defaultdict(dict)
    for r in rows:
        by[r["id"]][r["mode"]] = r
    res["verify_identical"] = {}
    for v in variants:
        if v.startswith("verify"):
            twin = "ar-constrained" + v[len("verify"):]
            if twin in variants:
                same = sum(m[v].get("text") == m[twin].get("text") for m in by.values())
                res["verify_identical"][f"{v} = {twin}"] = f"{same}/{len(by)}"
    categories = sorted({r["category"] for r in rows if "category" in r})
    res["success_by_file"] = {v: {c: round(summarize([r for r in rows if r["mode"] == v and r.get("category") == c])
                                           ["task_success"], 3) for c in categories} for v in variants}
    first = variants[0]
    res["paired_with_first"] = {v: paired(by, first, v) for v in variants[1:]}
    return res


def sign_test(won: int, lost: int) -> float:
    """Exact two-sided sign test: the chance of a split of ``won + lost`` discordant pairs at least this uneven if
    either side were equally likely to win each."""
    n, k = won + lost, min(won, lost)
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def paired(by: dict[str, dict[str, dict]], first: str, other: str) -> dict:
    """``other`` against ``first`` on the questions both ran: won / lost (success on one side only) and p."""
    both = [m for m in by.values() if first in m and other in m]
    won = sum(bool(m[other]["success"]) and not m[first]["success"] for m in both)
    lost = sum(bool(m[first]["success"]) and not m[other]["success"] for m in both)
    return {"n": len(both), "won": won, "lost": lost, "sign_test_p": round(sign_test(won, lost), 4)}


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    seen: dict[float, int] = {}  # variants at the same success: their labels stacked, not overprinted
    for v, m in res["modes"].items():
        k = seen[round(m["task_success"], 3)] = seen.get(round(m["task_success"], 3), -1) + 1
        peer = eval_mode_name(v.split(":")[0].split("+")[0]) not in ENGINE_MODE  # an agentkit mode, in any variant, or a peer
        ax.scatter(m["latency_ms_p50"] / 1000, m["task_success"], marker="s" if peer else "o", s=60)
        ax.annotate(v, (m["latency_ms_p50"] / 1000, m["task_success"]), textcoords="offset points", xytext=(5, 4 - 11 * k),
                    fontsize=8)
    ax.set_xlabel("p50 latency per request, s (compile included)")
    ax.set_ylabel("BFCL success")
    ax.set_title(f"BFCL, {res['items_done']} questions, one interleaved run (circles: agentkit, squares: peers)",
                 fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--plot", type=Path, default=None)
    a = ap.parse_args()
    res = merge(a.files)
    write_json_atomic(a.out, res)
    print(f"{res['items_done']} of {res['items_total']} items in every variant\n")
    print(markdown_table(res))
    print("\nverify = ar-constrained:", res["verify_identical"])
    print("success by file:", json.dumps(res["success_by_file"]))
    print(f"against {res['variants'][0]} (won / lost / sign-test p):",
          json.dumps(res["paired_with_first"]))
    if a.plot:
        plot(res, a.plot)


if __name__ == "__main__":
    main()
