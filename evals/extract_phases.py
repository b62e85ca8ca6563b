"""Where an ``extract`` call's time goes, per mode: the prompt pass, decoding, and settling against the text (with
the rest: the agent's step, the template). Items from an extraction split, each call from an empty prefix cache,
the modes in turn per item; medians over the items. One engine, one thread; run it alone on the machine.

    python evals/extract_phases.py --data evals/extract_user/dev --limit 20 --modes ar,verify \
        --out evals/results/extract_user/phases_dev20.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import agentkit  # noqa: F401  (sets OpenMP's wait policy before torch loads)
from agentkit import extract
from agentkit.config import EngineConfig
from agentkit.engine.engine import Engine
from agentkit.evals.extract import load_items
from agentkit.evals.timing import cold_prompts

PHASES = ("total_ms", "prompt_ms", "decode_ms", "generate_ms", "settle_ms")


class TimedEngine:
    """``engine`` with each ``generate`` call's wall time and stats recorded; everything else is the engine's."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.calls = engine, []

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        result = self.engine.generate(*args, **kwargs)
        self.calls.append((1000 * (time.perf_counter() - t0), result.stats))
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def phases(timed: TimedEngine, item: Any, mode: str) -> dict[str, float]:
    """One item's ``extract`` call in ``mode``: its phases in ms. ``settle_ms`` is the call's time outside its
    ``generate`` calls, settling and the step around the decode."""
    cold_prompts(timed.engine)
    timed.calls.clear()
    t0 = time.perf_counter()
    extract(item.schema, item.text, model=timed, mode=mode)
    total = 1000 * (time.perf_counter() - t0)
    generate = sum(ms for ms, _ in timed.calls)
    return {"total_ms": total, "prompt_ms": sum(s.prefill_ms for _, s in timed.calls),
            "decode_ms": sum(s.denoise_ms + s.commit_ms for _, s in timed.calls), "generate_ms": generate,
            "settle_ms": total - generate}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("evals/extract_user/dev"))
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--modes", default="ar,verify")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    modes = args.modes.split(",")
    timed = TimedEngine(Engine(EngineConfig(threads=args.threads)))
    items = load_items(args.data, args.limit)
    rows: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for i, item in enumerate(items):
        for mode in modes[i % len(modes):] + modes[:i % len(modes)]:
            rows[mode].append({"id": item.id, **phases(timed, item, mode)})
    summary = {m: {k: round(statistics.median(r[k] for r in rs), 1) for k in PHASES} for m, rs in rows.items()}
    print("| mode | " + " | ".join(PHASES) + " |\n" + "|---" * (len(PHASES) + 1) + "|")
    for m, s in summary.items():
        print(f"| {m} | " + " | ".join(f"{s[k]:,.0f}" for k in PHASES) + " |")
    if args.out:
        args.out.write_text(json.dumps({"command": "python evals/extract_phases.py " + " ".join(argv or []),
                                        "data": str(args.data), "items": len(items), "summary": summary,
                                        "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
