"""What the template constraint costs per denoising step, against the forward pass, on the default model.

For a few tool-call schemas: generate under the compiled template in diffusion, verify and AR-constrained modes and
split the time into ``constraint_ms`` (token-mask computation, measured inside the decode loop) and forward time
(``denoise_ms`` + ``commit_ms``). The schemas are closed (``additionalProperties: false``), as tool schemas
usually are: an open object adds an "any other key" branch whose key regex (every string but the declared names)
can make the slot DFA build blow up. Each request runs twice: *cold* on a fresh template object (every mask computed)
and *warm* on the same object again (masks memoised per constraint state); the slot DFAs (per regex, shared by
templates) are built and timed before the runs. Target: constraint under 5% of step time.

    python evals/bench_constraint_cost.py [--model DIR]

About 2 minutes on 2 CPU cores. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import copy
import time

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.constrain.nodes import Repeat, Slot
from agentkit.constrain.vocab import slot_index
from agentkit.engine.engine import Engine

CASES = [
    ("What's the weather in Lisbon for the next 3 days, in celsius?", {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14},
                       "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "days", "unit"], "additionalProperties": False}),
    ("Search for recent papers about protein folding, at most 5 results, sorted by date.", {
        "type": "object",
        "properties": {"query": {"type": "string", "maxLength": 80}, "limit": {"type": "integer"},
                       "sort": {"enum": ["relevance", "date"]}, "tags": {"type": "array", "items": {"type": "string"},
                                                                         "maxItems": 4}},
        "required": ["query", "limit", "sort"], "additionalProperties": False}),
    ("Book a table for 4 people at Luigi's on 2025-06-01 at 19:30 and mention a birthday.", {
        "type": "object",
        "properties": {"restaurant": {"type": "string"}, "people": {"type": "integer"},
                       "when": {"type": "object", "properties": {"date": {"type": "string", "format": "date"},
                                                                 "time": {"type": "string"}},
                                "required": ["date", "time"], "additionalProperties": False},
                       "notes": {"type": "string", "maxLength": 60}},
        "required": ["restaurant", "people", "when"], "additionalProperties": False}),
    ("Convert 250 US dollars to euros.", {
        "type": "object",
        "properties": {"amount": {"type": "number"}, "from": {"type": "string", "pattern": "^[A-Z]{3}$"},
                       "to": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "required": ["amount", "from", "to"], "additionalProperties": False}),
]
SYSTEM = "Call the tool by writing its arguments as JSON. Arguments schema: {schema}"
CONSTRAINED_MODES = ("diffusion", "verify", "ar-constrained")


def _slots(node):
    if isinstance(node, Slot):
        yield node
    for child in getattr(node, "items", ()) or getattr(node, "options", ()):
        yield from _slots(child)
    if isinstance(node, Repeat):
        yield from _slots(node.item)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (1 is faster on a loaded shared CPU)")
    ap.add_argument("--canvas-length", type=int, default=32)
    args = ap.parse_args()
    import json

    from agentkit.constrain.compiler import compile_schema_uncached

    t_all = time.perf_counter()
    engine = Engine(EngineConfig(model=args.model, threads=args.threads))
    engine.generate("Hi", DecodeConfig(max_new_tokens=2))
    print(f"model {engine.name}\n")
    print("| schema | mode | run | steps (dec fwd) | enc fwd | constraint ms | constraint ms/step | forward ms/fwd "
          "| constraint share of step | compile ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    totals: dict[tuple[str, str], list[float]] = {}
    for ci, (prompt, schema) in enumerate(CASES):
        msgs = [{"role": "system", "content": SYSTEM.format(schema=json.dumps(schema))},
                {"role": "user", "content": prompt}]
        t0 = time.perf_counter()  # slot DFAs over the vocabulary: built once per regex (cached across templates)
        n_slots = 0
        for slot in _slots(compile_schema_uncached(copy.deepcopy(schema)).root):
            slot_index(slot.regex, engine.vocab)
            n_slots += 1
        print(f"| {ci + 1} | (slot DFAs: {n_slots} slots, built in {1000 * (time.perf_counter() - t0):.0f} ms, "
              "before the runs below) |||||||||")
        for mode in CONSTRAINED_MODES:
            template = compile_schema_uncached(copy.deepcopy(schema))  # fresh object: no token mask memoised yet
            cfg = DecodeConfig(mode="ar" if mode == "ar-constrained" else mode, max_new_tokens=256,
                               canvas_length=args.canvas_length)
            for run in ("cold", "warm"):
                s = engine.generate(msgs, cfg, template=template).stats
                fwd_ms = s.denoise_ms + s.commit_ms
                n_fwd = s.decoder_forwards + s.encoder_forwards - 1  # after the prefill
                steps = s.decoder_forwards if mode == "diffusion" else n_fwd
                share = s.constraint_ms / (s.constraint_ms + fwd_ms) if fwd_ms else 0.0
                totals.setdefault((mode, run), [0.0, 0.0])
                totals[(mode, run)][0] += s.constraint_ms
                totals[(mode, run)][1] += fwd_ms
                print(f"| {ci + 1} | {mode} | {run} | {s.decoder_forwards} | {s.encoder_forwards} "
                      f"| {s.constraint_ms:.1f} | {s.constraint_ms / max(steps, 1):.2f} | {fwd_ms / max(n_fwd, 1):.0f} "
                      f"| {100 * share:.1f}% | {template.compile_ms:.1f} |", flush=True)
            engine._constraints.pop(id(template), None)
    print("\n| mode | run | constraint ms total | forward ms total | constraint share |")
    print("|---|---|---|---|---|")
    for (mode, run), (c, f) in totals.items():
        print(f"| {mode} | {run} | {c:.0f} | {f:.0f} | {100 * c / (c + f):.1f}% |")
    print(f"\ntotal {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
