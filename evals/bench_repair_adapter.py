"""The repair adapter on its validation split: the original line written or ranked first, with and without it.

Sites: ``--n`` examples of the validation split of ``agentkit.training.repair_data`` (standard-library modules never
trained on; a seeded sample), each a function with one mutated line. For each site and each engine (the default
engine, today's drafter weights; and one with the repair adapter), in one process and interleaved site by site:

- ``top1``: the greedy line under the drafter's template (``ModelDrafter.sample`` with temperature 1e-4) is the
  original line (comments aside);
- ``in_k``: the original is among ``--k`` lines sampled as the drafter samples them (temperature 0.8, top-p 0.95,
  its seeds);
- ``rank_top1`` / ``rank_has``: ``ModelDrafter(mode="rank")`` on the site (the mutation operators' candidates for
  the mutated line, scored by the model): the original is the first candidate / among the candidates at all;
- ``target_nll``: the drafter's log-probability of the original line (its newlines included), negated.

    python evals/bench_repair_adapter.py --n 120 --k 4 --out evals/results/repair/adapter_val.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def load_sites(path: Path, n: int, seed: int) -> list[dict]:
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    random.Random(seed).shuffle(rows)
    return rows[:n]


def site_of(row: dict):
    from agentkit.repair import Site
    from agentkit.repair.mutate import LineEdit, apply_line

    m = row["meta"]
    return Site(f"{m['module']}.py", apply_line(m["source"], LineEdit(m["line"], m["mutated"], m["kind"])), m["line"])


def measure(engine, site, original: str, k: int) -> dict:
    """One engine's figures on one site (see the module docstring)."""
    import torch

    from agentkit.repair import ModelDrafter
    from agentkit.repair.draft import DraftStats, strip_comment

    greedy = ModelDrafter(engine, "sample", temperature=1e-4, top_p=1.0)
    sampler = ModelDrafter(engine, "sample")
    want = strip_comment(original).strip()
    t0 = time.perf_counter()
    stats = DraftStats()
    with engine.lock, torch.inference_mode():
        cache, first = sampler.prompt_cache(site, stats)
        top = greedy.sample(cache, first, site, 1, stats)
        lines = sampler.sample(cache, first, site, k, stats)
        lp = sampler.score(cache, first, [original], stats)[0]
    ranked, _ = ModelDrafter(engine, "rank").draft(site, k)
    texts = [c.text for c in ranked]
    return {"top1": strip_comment(top[0]).strip() == want, "in_k": any(strip_comment(x).strip() == want for x in lines),
            "rank_top1": bool(texts) and texts[0] == original, "rank_has": original in texts,
            "target_nll": round(-lp, 4), "greedy": top[0], "seconds": round(time.perf_counter() - t0, 2)}


def summarize(items: list[dict], name: str) -> dict:
    n = len(items)
    got = [it[name] for it in items]
    out = {"n": n}
    for key in ("top1", "in_k", "rank_top1", "rank_has"):
        out[key] = sum(g[key] for g in got)
    out["rank_top1_of_has"] = f"{out['rank_top1']}/{out['rank_has']}"
    out["mean_target_nll"] = round(sum(g["target_nll"] for g in got) / max(1, n), 4)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="out/repair-data/val.jsonl")
    ap.add_argument("--adapter", default="adapters/smollm2-135m-repair")
    ap.add_argument("--n", type=int, default=120)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="evals/results/repair/adapter_val.json")
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from agentkit.engine import default_engine
    from agentkit.evals.report import write_json_atomic
    from agentkit.repair.adapter import repair_engine

    engines = {"without": default_engine(), "with": repair_engine(a.adapter)}
    items: list[dict] = []
    result = {"command": "python evals/bench_repair_adapter.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "adapter": a.adapter, "data": a.data, "k": a.k, "items": items}
    for row in load_sites(Path(a.data), a.n, a.seed):
        m = row["meta"]
        site = site_of(row)
        item = {"module": m["module"], "function": m["function"], "line": m["line"], "kind": m["kind"],
                "original": m["original"], "mutated": m["mutated"]}
        for name, eng in engines.items():
            item[name] = measure(eng, site, m["original"], a.k)
        items.append(item)
        result["summary"] = {name: summarize(items, name) for name in engines}
        write_json_atomic(Path(a.out), result)
        print(len(items), {n: (s["top1"], s["in_k"], s["rank_top1"], s["mean_target_nll"])
                           for n, s in result["summary"].items()}, file=sys.stderr, flush=True)
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
