"""Merge eval result files of one suite (e.g. shards of a BFCL run that ran as parallel processes) into one table.

Kept only to rebuild the results already in ``evals/results/`` that were sharded by hand (``bfcl600.json`` and the
adapter runs: their README entries name this script). New runs need no shards: ``agentkit eval ... --ray local
--workers N`` (or ``--ray ADDRESS`` on a cluster) runs the items on Ray actors and writes one JSON directly
(``agentkit/evals/distributed.py``).

Per-item rows are concatenated (a repeated ``(id, mode)`` is an error: shards must not overlap), every mode is
summarized again from the rows, and the merged JSON, the markdown table and the plots are written as
``agentkit eval`` writes them. Only items finished in *every* mode are kept, so an interrupted shard never gives
one mode more items than another.

    python evals/merge_results.py bfcl_s.json bfcl_m.json bfcl_m2.json --out bfcl.json --plot bfcl.png
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from agentkit.evals.report import markdown_table, ratios, summarize, write_json_atomic


def complete_rows(docs: list[dict], modes: list[str]) -> tuple[list[dict], set[str]]:
    """The shards' rows of the items finished in every mode, and those items' ids; overlapping shards (an item
    twice in one mode) are an error."""
    rows = [r for d in docs for r in d["items"]]
    seen = Counter((r["id"], r["mode"]) for r in rows)
    dup = [k for k, n in seen.items() if n > 1]
    if dup:
        raise SystemExit(f"shards overlap: {dup[:5]} ...")
    complete = {i for i in {r["id"] for r in rows} if all((i, m) in seen for m in modes)}
    return [r for r in rows if r["id"] in complete], complete


def merge(paths: list[Path]) -> dict:
    docs = [json.loads(Path(p).read_text()) for p in paths]
    suites = {d["suite"] for d in docs}
    if len(suites) != 1:
        raise SystemExit(f"cannot merge different suites: {sorted(suites)}")
    modes = list(dict.fromkeys(m for d in docs for m in d["modes"]))
    rows, complete = complete_rows(docs, modes)
    out = dict(docs[0])
    out["items"] = rows
    out["modes"] = {m: summarize([r for r in rows if r["mode"] == m]) for m in modes}
    out["ratios_vs_ar_constrained"] = ratios(out["modes"])
    out["partial"] = any(d.get("partial") for d in docs)
    out["items_done"] = out["items_total"] = len(complete)
    out["data"] = [d["data"] for d in docs]
    out["limit"] = [d.get("limit") for d in docs]
    out["shards"] = [{"file": str(p), "command": d["env"].get("command"), "items_done": d.get("items_done"),
                      "partial": d.get("partial"), "wall_s": d.get("wall_s")} for p, d in zip(paths, docs)]
    out["wall_s"] = max(d.get("wall_s") or 0 for d in docs)
    out["canvas_example"] = next((d["canvas_example"] for d in docs if d.get("canvas_example")), None)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--plot", type=Path, default=None)
    a = ap.parse_args()
    res = merge(a.files)
    write_json_atomic(a.out, res)
    print(f"{res['suite']} · {res['model']} · {res['items_done']} items (all modes) from {len(a.files)} shards\n")
    print(markdown_table(res))
    if a.plot is not None:
        from agentkit.evals.plots import plot_all

        res["plots"] = [str(p) for p in plot_all(res, a.plot)]
        write_json_atomic(a.out, res)


if __name__ == "__main__":
    main()
