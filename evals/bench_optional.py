"""How a call template offers an optional property against closing the object, measured on BFCL outputs.

    python evals/bench_optional.py --results evals/results/bfcl/bfcl_peers_limit20.json \
        --modes ar-constrained:compact,ar-constrained:spaced --threads 1

For every output of the given variants (``MODE:STYLE`` rows of an ``evals/peers.py`` run), the call is replayed
token by token through its template's constraint; at each *offer* -- a state where the template allows both closing
an object (pinned text starting with ``}``) and another property (pinned text starting with ``,``) -- one causal
forward over prompt + output gives the model's probability mass on each side (softmax over
the allowed tokens only, as the decoder picks). Reported per variant: offers, how often the model went on, the mean
probability of closing and of going on (the rest: a number still growing), and how many optional arguments it
wrote that BFCL rejects (junk) or left out although the answer needs them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _first_char_masks(engine):
    """Bool masks over the vocabulary: tokens whose text starts with ``}`` and with ``,``."""
    import torch

    tok = engine.tokenizer
    n = engine.vocab.mask([]).shape[0]
    first = [tok.decode([i])[:1] if i < len(tok) else "" for i in range(n)]
    return (torch.tensor([f == "}" for f in first]), torch.tensor([f == "," for f in first]))


def _is_offer(c, state) -> bool:
    """The template may close an object here or go on with another member: among the state's pinned-text threads
    (slot threads -- a number that could grow -- aside) one starts with ``}`` and one with ``,``."""
    nxt = {c._lit_bytes[id(th[1])][th[2]:th[2] + 1] for th in state if th != ("end",) and th[0] == "lit"}
    return b"}" in nxt and b"," in nxt


def _offers(engine, masks, item, text: str, style: str):
    """(offer positions -> the model went on, output ids, constraint); None if the text does not replay."""
    from agentkit.evals import bfcl

    c = engine.constraint(bfcl.compile_call(item, style=style).template())
    ids = engine.tokenizer.encode(text, add_special_tokens=False)
    state, out = c.start(), {}
    for i, t in enumerate(ids):
        if _is_offer(c, state):
            out[i] = bool(masks[1][t])
        state = c.advance(state, t)
        if state is None:
            return None
    return out, ids, c


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default="evals/results/bfcl/bfcl_peers_limit20.json")
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
    engine = Engine(EngineConfig(threads=args.threads, backend="torch"))  # logits from the torch model
    masks = _first_char_masks(engine)
    report = {}
    for variant in args.modes.split(","):
        style = variant.split(":")[1]
        offers = went_on = junk = dropped = replayed = 0
        p_close: list[float] = []
        p_more: list[float] = []
        for row in (r for r in run["items"] if r["mode"] == variant and r.get("call")):
            item = items[row["id"]]
            found = _offers(engine, masks, item, row["text"], style)
            if found is None:
                continue
            replayed += 1
            marks, ids, c = found
            prompt = engine.encode_prompt(bfcl.build_prompt(item))
            with torch.no_grad():
                logits = engine.lm.model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1].float()
            state = c.start()
            for i, t in enumerate(ids):
                if i in marks:
                    allowed = c.allowed(state)
                    p = torch.softmax(logits[i, : allowed.shape[0]].masked_fill(~allowed, float("-inf")), -1)
                    p_close.append(float(p[masks[0]].sum()))
                    p_more.append(float(p[masks[1]].sum()))
                    offers += 1
                    went_on += marks[i]
                state = c.advance(state, t)
            gt = item.ground_truth[0]
            want = next(iter(gt))
            if row["call"]["name"] == want:
                ans = gt[want]
                junk += sum(1 for k, v in row["call"]["arguments"].items()  # an optional argument BFCL rejects
                            if k not in ans or ("" in ans[k] and v not in ans[k]))
                dropped += sum(1 for k, v in ans.items() if "" not in v and k not in row["call"]["arguments"])
        report[variant] = {"rows_replayed": replayed, "offers": offers,
                           "went_on": went_on, "p_close_mean": round(sum(p_close) / max(1, len(p_close)), 4),
                           "p_more_mean": round(sum(p_more) / max(1, len(p_more)), 4),
                           "junk_args": junk, "missing_needed_args": dropped}
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({"results": args.results, "report": report}, indent=1))
    return report


if __name__ == "__main__":
    main()
