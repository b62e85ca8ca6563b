"""Verify with the block drafter against ar-constrained, on the same requests in one interleaved run.

For each request, in turn: ar-constrained greedy, verify with the block drafter (``draft="drafter"``) and, with
``--lookup``, verify with prompt-lookup drafts. Reported apart: equal outputs (token for token; every difference
with the base's top-two margin where the outputs part, ``agentkit/engine/ties.py``), accepted drafted slot tokens
per verify pass, base passes (forwards) per request, latency p50 and, for BFCL, task success.

Requests: ``--bfcl DIR`` (BFCL items: the benchmark, never trained on), ``--edits FILE`` (SEARCH/REPLACE edits of
users' files: ``evals/edit_requests/``, written by hand in users' words, never trained on) or else the drafter's own
held-out generated jobs (seeds the training never used; ``--kind`` keeps one kind: call, extract, edit, free). ::

    python evals/drafter_verify.py --bfcl evals/data/bfcl --limit 40 --out evals/results/drafter_verify_bfcl40.json

The engine's prefix cache is off (``--prefix-cache`` turns it on): every mode of a request encodes the same prompt,
so with the cache on a later mode would reuse the first one's prompt pass, and the block drafter (which reads the
base's features at every prompt position) never reuses one.

``--calibrate STEP`` (with ``--lookup``) writes the run into the shipped calibration as that step kind's own
measurement (``agentkit/calibration.py``: ``Calibration.steps``): ar-constrained as ``ar`` and verify with prompt
lookup as ``verify`` (the SDK's verify mode), success being the share of outputs equal to ar-constrained's. ::

    python evals/drafter_verify.py --edits evals/edit_requests/heldout.jsonl --lookup --calibrate tool_input \
        --out evals/results/drafter/edits_heldout.json

``--resume`` keeps the requests already written to ``--out`` (results are written after every request) and runs
the rest.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

from agentkit.engine import decode


def edit_requests(path: str, limit: int) -> list[dict]:
    """Edit requests (one JSON object a line: id, path, content, request) under a one-block SEARCH/REPLACE template."""
    from agentkit.constrain.edits import search_replace_template
    from agentkit.training.distill import EDIT_SYSTEM  # the prompt the engine's edit jobs are asked with

    out = []
    for line in Path(path).read_text().splitlines()[:limit]:
        e = json.loads(line)
        msgs = [{"role": "system", "content": EDIT_SYSTEM},
                {"role": "user", "content": f"{e['path']}\n```\n{e['content']}```\n\n{e['request']}"}]
        tpl = search_replace_template({e["path"]: e["content"]}, max_edits=1, max_search_lines=4, max_replace_tokens=64)
        out.append({"id": e["id"], "messages": msgs, "template": tpl, "item": None})
    return out


def requests(args) -> list[dict]:
    """[{id, messages, template, item}] for the chosen set."""
    if args.edits:
        return edit_requests(args.edits, args.limit)
    if args.bfcl:
        from agentkit.evals import bfcl

        items = bfcl.load_bfcl(Path(args.bfcl), None)
        step = max(1, len(items) // args.limit) if args.spread else 1
        items = items[::step][: args.limit]
        out = []
        for it in items:
            try:
                tpl = bfcl.compile_call(it).template()
            except Exception as e:  # noqa: BLE001 - a schema the compiler refuses: skipped, counted
                out.append({"id": it.id, "error": f"{type(e).__name__}: {e}"})
                continue
            out.append({"id": it.id, "messages": bfcl.build_prompt(it), "template": tpl, "item": it})
        return out
    from agentkit.training.drafter_data import job_chunk
    from agentkit.training.drafter_train import HELD_OUT_SEED

    jobs = []
    seed = HELD_OUT_SEED + args.held_out_from
    while len(jobs) < args.limit:
        jobs += [(seed, j) for j in job_chunk(seed, None, chat=False) if args.kind in (None, j.kind)]
        seed += 1
    return [{"id": f"{s}-{i}-{j.kind}", "messages": j.messages, "template": j.template, "item": None}
            for i, (s, j) in enumerate(jobs[: args.limit])]


def run_one(engine, req: dict, mode: str, draft: str, budget: int) -> dict:
    from agentkit.config import DecodeConfig

    cfg = DecodeConfig(mode=mode, draft=draft, max_new_tokens=budget if req["template"] is not None else 96)
    t0, c0 = time.perf_counter(), time.process_time()
    res = engine.generate(req["messages"], cfg, template=req["template"])
    wall, cpu = 1000 * (time.perf_counter() - t0), 1000 * (time.process_time() - c0)
    # cpu_ms: this process's CPU time for the request (one thread): its latency on an otherwise idle core, where the
    # wall time of a machine shared with other jobs is mostly waiting
    row = {"tokens": list(res.token_ids), "text": res.text, "stats": res.stats.to_dict(), "wall_ms": wall,
           "cpu_ms": cpu}
    if req["item"] is not None:
        from agentkit.evals import bfcl

        row["success"] = bool(bfcl.evaluate(req["item"], res.text, res.value)["success"])
    return row


def summary(rows: list[dict], name: str) -> dict:
    st = [r[name]["stats"] for r in rows]
    checks = sum(s["verify_forwards"] for s in st)
    out = {"n": len(rows), "forwards_mean": statistics.mean(s["forwards"] for s in st),
           "latency_ms_p50": statistics.median(s["latency_ms"] for s in st),
           "cpu_ms_p50": statistics.median(r[name]["cpu_ms"] for r in rows),
           # after the prompt pass: what drafts can shorten (the prompt pass is the same in every mode)
           "prefill_ms_p50": statistics.median(s["prefill_ms"] for s in st),
           "after_prefill_ms_p50": statistics.median(s["latency_ms"] - s["prefill_ms"] for s in st),
           "cpu_ms_mean": statistics.mean(r[name]["cpu_ms"] for r in rows),
           "output_tokens_mean": statistics.mean(s["output_tokens"] for s in st),
           "accepted_per_pass": sum(s["accepted_slot_tokens"] for s in st) / checks if checks else 0.0,
           "drafter_ms_mean": statistics.mean(s.get("drafter_ms", 0.0) for s in st)}
    if "success" in rows[0][name]:
        out["success"] = statistics.mean(float(r[name]["success"]) for r in rows)
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


def write(args, argv, rows: list[dict], skipped: list[dict], modes: list[tuple[str, str, str]]) -> dict:
    """The results so far, as JSON in ``args.out``."""
    res = {"command": "python evals/drafter_verify.py " + " ".join(argv or sys.argv[1:]),
           "n": len(rows), "skipped": [r["id"] for r in skipped],
           "summary": {n: summary(rows, n) for n, _, _ in modes},
           "equal": {n: sum(1 for r in rows if n not in r["differences"]) for n, _, _ in modes[1:]},
           "differences": [{"id": r["id"], **{n: d for n, d in r["differences"].items()}}
                           for r in rows if r["differences"]],
           "rows": [{k: ({kk: vv for kk, vv in v.items() if kk != "tokens"} if isinstance(v, dict) and "stats" in v
                         else v) for k, v in r.items()} for r in rows]}
    base = res["summary"]["ar-constrained"]
    for n, _, _ in modes[1:]:
        s = res["summary"][n]
        s["forwards_ratio"] = round(s["forwards_mean"] / base["forwards_mean"], 4)
        s["p50_ratio"] = round(s["latency_ms_p50"] / base["latency_ms_p50"], 4)
        s["cpu_p50_ratio"] = round(s["cpu_ms_p50"] / base["cpu_ms_p50"], 4)
        s["after_prefill_p50_ratio"] = round(s["after_prefill_ms_p50"] / base["after_prefill_ms_p50"], 4)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    return res


def calibrate(step: str, res: dict) -> Path:
    """Write ``res`` (a finished run with verify-lookup) into the shipped calibration as ``step``'s measurement."""
    from agentkit import calibration as C
    from agentkit.evals.calibrate import with_step

    cal = C.load(None, "cpu")
    if cal is None:
        raise SystemExit(f"no calibration at {C.path_for(None, 'cpu')} to add a step to (agentkit calibrate first)")
    path = C.path_for(None, "cpu")
    path.write_text(with_step(cal, step, [res], "evals/drafter_verify.py").to_json())
    return path


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bfcl", default=None, help="BFCL data folder (else the drafter's held-out jobs)")
    ap.add_argument("--edits", default=None, help="a JSONL file of edit requests (evals/edit_requests/*.jsonl)")
    ap.add_argument("--kind", default=None, choices=["call", "extract", "edit", "free"],
                    help="held-out jobs: only this kind")
    ap.add_argument("--held-out-from", type=int, default=0, help="held-out job chunks: the first seed offset")
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--spread", action="store_true", help="BFCL: every k-th item over all categories")
    ap.add_argument("--drafter", default=None, help="drafter folder (default: the shipped one)")
    ap.add_argument("--lookup", action="store_true", help="also verify with prompt-lookup drafts")
    ap.add_argument("--budget", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prefix-cache", action="store_true",
                    help="keep the engine's prefix cache on (a later mode then reuses the first mode's prompt pass)")
    ap.add_argument("--row-exact", default="auto", choices=["auto", "off"],
                    help="EngineConfig.row_exact: off checks a block in one pass (outputs may part at near ties)")
    ap.add_argument("--number-drafts", default="on", choices=["on", "both"],
                    help="both: also verify with prompt-lookup drafts without the copied-number drafts "
                    "(agentkit.engine.decode.NUMBER_DRAFTS), the row verify-lookup-nonum (with --lookup)")
    ap.add_argument("--string-drafts", default="on", choices=["on", "both"],
                    help="both: also verify without the drafts of phrases copied from the request "
                    "(agentkit.engine.decode.STRING_DRAFTS), the row verify-lookup-nostr (with --lookup)")
    ap.add_argument("--calibrate", default=None, metavar="STEP",
                    help="write the run into the shipped calibration as this step kind's measurement (with --lookup)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--resume", action="store_true", help="keep the requests already in --out and run the rest")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.calibrate and not args.lookup:
        ap.error("--calibrate measures verify with prompt lookup: add --lookup")
    from agentkit.config import EngineConfig
    from agentkit.constrain.limits import CompileLimits
    from agentkit.engine.engine import Engine
    from agentkit.engine.ties import first_difference
    from agentkit.errors import UserError

    engine = Engine(EngineConfig(threads=args.threads, drafter_path=args.drafter, prefix_cache=args.prefix_cache,
                                 row_exact=args.row_exact))
    modes = [("ar-constrained", "ar", "lookup"), ("verify-drafter", "verify", "drafter")]
    if args.lookup:
        modes.append(("verify-lookup", "verify", "lookup"))
    if args.lookup and args.number_drafts == "both":
        modes.append(("verify-lookup-nonum", "verify", "lookup"))
    if args.lookup and args.string_drafts == "both":
        modes.append(("verify-lookup-nostr", "verify", "lookup"))
    reqs = requests(args)
    rows, skipped = [], [r for r in reqs if "error" in r]
    if args.resume and Path(args.out).is_file():  # a run stopped early goes on after its last written request
        earlier = json.loads(Path(args.out).read_text())
        rows = [{**r, "differences": next((({k: v for k, v in d.items() if k != "id"}) for d in earlier["differences"]
                                           if d["id"] == r["id"]), {})} for r in earlier["rows"]]
        skipped += [{"id": i} for i in earlier["skipped"] if i not in {s["id"] for s in skipped}]
    done = {r["id"] for r in rows} | {s["id"] for s in skipped}
    for req in (r for r in reqs if "error" not in r and r["id"] not in done):
        row = {"id": req["id"]}
        if req["template"] is not None:  # the token automaton built once, before any timing, whatever the load
            try:
                engine.constraint(req["template"], limits=CompileLimits(max_seconds=None))
            except UserError as e:
                skipped.append({"id": req["id"], "error": f"{type(e).__name__}: {e}"})
                continue
        for name, mode, draft in modes:
            with mock.patch.object(decode, "NUMBER_DRAFTS", not name.endswith("-nonum")), \
                    mock.patch.object(decode, "STRING_DRAFTS", not name.endswith("-nostr")):
                row[name] = run_one(engine, req, mode, draft, args.budget)
        ar = row["ar-constrained"]["tokens"]
        row["differences"] = {}
        for name, _, _ in modes[1:]:
            d = first_difference(engine, req["messages"], ar, row[name]["tokens"], req["template"])
            if d is not None or len(ar) != len(row[name]["tokens"]):
                row["differences"][name] = d.to_dict() if d is not None else {"length_only": True}
        rows.append(row)
        write(args, argv, rows, skipped, modes)  # partial results after every request
        print(json.dumps({"id": req["id"], **{n: row[n]["stats"]["forwards"] for n, _, _ in modes},
                          "acc": row["verify-drafter"]["stats"]["accepted_per_pass"],
                          "diff": list(row["differences"])}), flush=True)
    res = write(args, argv, rows, skipped, modes)
    print(json.dumps({"summary": res["summary"], "equal": res["equal"], "n": res["n"]}, indent=1))
    if args.calibrate:
        print(f"{args.calibrate}: written into {calibrate(args.calibrate, res)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
