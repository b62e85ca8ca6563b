"""How a call template offers an optional property against closing the object, measured on BFCL outputs.

    python evals/bench_optional.py --results evals/results/bfcl_peers_limit20.json \
        --modes ar-constrained:compact,ar-constrained:spaced --threads 1

For every output of the given variants (``MODE:STYLE`` rows of an ``evals/peers.py`` run), the call is replayed
token by token through its template's constraint; at each *offer* -- a state where the template allows both closing
the arguments object (a token starting with ``}``) and another property (a token starting with ``,``) and pins
nothing -- one causal forward over prompt + output gives the model's probability mass on each side (softmax over
the allowed tokens only, as the decoder picks). Reported per variant: offers, how often the model went on, the mean
probability of closing, and how many properties it wrote that the ground truth does not have (junk: BFCL scores
them wrong) or left out although required by the answer.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _offers(engine, item, text: str, style: str) -> list[tuple[int, bool]]:
    """(output position, the model went on) at each offer along ``text``'s tokens; [] if the text does not replay."""
    from agentkit.evals import bfcl

    c = engine.constraint(bfcl.compile_call(item, style=style).template())
    tok = engine.tokenizer
    ids = tok.encode(text, add_special_tokens=False)
    state, out = c.start(), []
    for i, t in enumerate(ids):
        if not c.forced(state):
            allowed = c.allowed(state).nonzero().flatten().tolist()
            starts = {tok.decode([a])[:1] for a in allowed}
            if "}" in starts and "," in starts:
                out.append((i, tok.decode([t]).startswith(",")))
        state = c.advance(state, t)
        if state is None:
            return []
    return out, ids, c  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default="evals/results/bfcl_peers_limit20.json")
    ap.add_argument("--modes", default="ar-constrained:compact,ar-constrained:spaced")
    ap.add_argument("--data", default=None, help="BFCL data (default: the run's)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import torch

    from agentkit.config import EngineConfig
    from agentkit.engine.engine import Engine
    from agentkit.evals import bfcl

    torch.set_num_threads(args.threads)
    run = json.loads(Path(args.results).read_text())
    items = {it.id: it for it in bfcl.load_bfcl(Path(args.data or run["data"]), run["limit"])}
    engine = Engine(EngineConfig(threads=args.threads))
    report = {}
    for variant in args.modes.split(","):
        style = variant.split(":")[1]
        offers = went_on = junk = dropped = replayed = 0
        p_close: list[float] = []
        for row in (r for r in run["items"] if r["mode"] == variant and r.get("call")):
            item = items[row["id"]]
            found = _offers(engine, item, row["text"], style)
            if not found:
                continue
            replayed += 1
            spots, ids, c = found
            prompt = engine.encode_prompt(bfcl.build_prompt(item))
            with torch.no_grad():
                logits = engine.lm.model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1].float()
            state = c.start()
            marks = dict(spots)
            for i, t in enumerate(ids):
                if i in marks:
                    allowed = c.allowed(state).nonzero().flatten()
                    p = torch.softmax(logits[i, allowed], -1)
                    close = torch.tensor([engine.tokenizer.decode([a]).startswith("}") for a in allowed.tolist()])
                    p_close.append(float(p[close].sum()))
                    offers += 1
                    went_on += marks[i]
                state = c.advance(state, t)
            gt = item.ground_truth[0]
            want = next(iter(gt))
            if row["call"]["name"] == want:
                ans = gt[want]
                junk += sum(1 for k in row["call"]["arguments"] if k not in ans or ans[k] == [""])
                dropped += sum(1 for k, v in ans.items() if "" not in v and k not in row["call"]["arguments"])
        report[variant] = {"rows_replayed": replayed, "offers": offers,
                           "went_on": went_on, "p_close_mean": round(sum(p_close) / max(1, len(p_close)), 4),
                           "junk_args": junk, "missing_needed_args": dropped}
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({"results": args.results, "report": report}, indent=1))
    return report


if __name__ == "__main__":
    main()
