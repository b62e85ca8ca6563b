"""How fast the engine's door refuses bad requests (agentkit/validate.py), in-process on the tiny model.

python evals/door_s15.py  ->  evals/results/s15/door.json (seconds from the call to the typed error, median of 5)
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import torch

from agentkit.config import DecodeConfig
from agentkit.engine import tiny_engine
from agentkit.errors import AgentkitError

CASES = {
    "over_context_200k_chars": ("a " * 100000, {}),
    "seed_2_pow_70": ("hi", {"seed": 2**70}),
    "lone_surrogate": ("a\ud800", {}),
}


def main() -> None:
    torch.set_num_threads(1)
    engine = tiny_engine(0)
    out = {}
    for name, (prompt, kw) in CASES.items():
        times, error = [], ""
        for _ in range(5):
            t = time.perf_counter()
            try:
                engine.generate(prompt, DecodeConfig(max_new_tokens=8, **kw) if "seed" not in kw else _late(kw))
            except AgentkitError as e:
                error = f"{type(e).__name__}: {str(e)[:120]}"
            times.append(time.perf_counter() - t)
        out[name] = {"median_s": round(statistics.median(times), 6), "max_s": round(max(times), 6), "error": error}
    out["command"] = "OMP_NUM_THREADS=1 python evals/door_s15.py (tiny random model, 1 torch thread)"
    dest = Path(__file__).resolve().parent / "results" / "s15" / "door.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(out, indent=2, ensure_ascii=False))


def _late(kw: dict) -> DecodeConfig:
    """A config whose seed is set after construction (DecodeConfig itself refuses it): the engine's own check."""
    cfg = DecodeConfig(max_new_tokens=8)
    cfg.seed = kw["seed"]
    return cfg


if __name__ == "__main__":
    main()
