"""What fixed-shape passes cost: ms per pass of the dynamic and the fixed-shape backbone, by positions.

The default model in bfloat16, 1 thread, a ~300-token prompt. For 1, 4, 8 and 16 new positions: a causal pass
with logits at every position, cropped away afterwards, on ``Backbone`` (passes as long as their tokens) and on
``FixedShapeBackbone`` of width 4 and 8 (16 positions are several passes). Medians over ``--repeats`` rounds,
interleaved.

    python evals/bench_fixed.py --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from agentkit.config import EngineConfig
from agentkit.engine.backbone import Backbone
from agentkit.engine.engine import Engine
from agentkit.engine.fixed import FixedShapeBackbone

POSITIONS = (1, 4, 8, 16)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    eng = Engine(EngineConfig(dtype="bfloat16", backend="torch", threads=a.threads))
    text = " ".join(["The history of computing spans calculators, mainframes and phones."] * 60)
    ids = eng.tokenizer.encode(text, add_special_tokens=False)[:300 + max(POSITIONS)]
    prompt, new = ids[:300], ids[300:]
    rows = {"dynamic": (Backbone(eng.lm), 0)}
    for width in (4, 8):
        rows[f"fixed, width {width}"] = (FixedShapeBackbone(eng.lm, width), 256)
    caches = {}
    for name, (bb, room) in rows.items():
        caches[name] = bb.new_cache(room=room)
        bb.encode(prompt, caches[name])
    ts: dict[tuple[str, int], list[float]] = {(n, p): [] for n in rows for p in POSITIONS}
    for _ in range(a.repeats + 1):
        for p in POSITIONS:
            for name, (bb, _) in rows.items():
                t0 = time.perf_counter()
                bb.denoise(new[:p], caches[name], rows=list(range(p)), bidirectional=False)
                ts[name, p].append(1000 * (time.perf_counter() - t0))
    print(f"default model, bfloat16, {a.threads} thread(s), 300-token prompt, median of {a.repeats} (first round "
          "dropped)")
    print("| backbone | " + " | ".join(f"{p} pos ms" for p in POSITIONS) + " | 8 pos / dynamic 1 pos |")
    print("|---|" + "---|" * (len(POSITIONS) + 1))
    base = statistics.median(ts["dynamic", 1][1:])
    for name in rows:
        med = [statistics.median(ts[name, p][1:]) for p in POSITIONS]
        print(f"| {name} | " + " | ".join(f"{m:.1f}" for m in med) + f" | {med[POSITIONS.index(8)] / base:.2f} |")


if __name__ == "__main__":
    with torch.inference_mode():
        main()
