"""The README's two examples in every mode: ar-constrained, diffusion (adapter), verify (lookup and adapter drafts).

1. ``agentkit generate "Extract: Ana, 31, Lisbon" --schema schemas/person.json`` (user message only);
2. ``agentkit demo``'s extraction (the Meeting model, strict, with its system prompt).

Prints each output, its forwards and latency, and whether its values equal ar-constrained's. ``--adapter DIR``
decodes diffusion and adapter drafts with another adapter (e.g. a training snapshot). Asserts nothing.

    python evals/bench_readme_examples.py --threads 1 [--adapter out/adapter-v3/snapshots/step-00400]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from pydantic import BaseModel

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.constrain.compiler import compile_schema
from agentkit.engine.engine import Engine

ROOT = Path(__file__).resolve().parents[1]


class Meeting(BaseModel):
    person: str
    city: str
    day: str
    attendees: int


def cases():
    yield ("person.json", "Extract: Ana, 31, Lisbon",
           compile_schema(json.loads((ROOT / "schemas" / "person.json").read_text())), 256)
    text = "Lunch with Maria Lopez in Lisbon on Friday, the four of us."
    yield ("demo", [{"role": "system", "content": "Extract the meeting as JSON with keys person, city, day, attendees."},
                    {"role": "user", "content": text}], compile_schema(Meeting, strict=True), 96)


SETTINGS = [("ar", {"mode": "ar"}), ("diffusion", {"mode": "diffusion"}), ("verify/lookup", {"mode": "verify"}),
            ("verify/adapter:1", {"mode": "verify", "draft": "adapter", "draft_steps": 1})]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adapter", default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--backend", default="auto", help="EngineConfig.backend")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    engine = Engine(EngineConfig(adapter_path=a.adapter, threads=a.threads, backend=a.backend))
    print(f"adapter: {engine.adapter_path}")
    for name, prompt, template, n in cases():
        base = None
        for label, kw in SETTINGS:
            engine.generate(prompt, DecodeConfig(max_new_tokens=n, **kw), template=template)  # warm
            res = engine.generate(prompt, DecodeConfig(max_new_tokens=n, **kw), template=template)
            base = res.value if base is None else base
            s = res.stats
            print(f"{name:<12} {label:<17} forwards {s.forwards:>3} (draft {s.draft_forwards:>2}) "
                  f"{s.latency_ms:>7.0f} ms  same values as ar: {res.value == base!s:<5}  {res.text}")


if __name__ == "__main__":
    main()
