"""``agentkit calibrate``: measure every mode on the same BFCL questions, in one run, and write the calibration
that :mod:`agentkit.calibration` reads (the measuring half lives here, with the suite it runs)."""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

from ..calibration import Calibration, ModeResult, model_key
from ..config import DecodeConfig
from . import bfcl


def calibrate(engine, data: Path, *, limit: int = 10, modes: tuple[str, ...] = ("ar", "diffusion", "verify"),
              tolerance: float = 0.0, device: str = "cpu", command: str = "", log=print) -> Calibration:
    """Run the first ``limit`` questions of each BFCL file in every mode on ``engine`` (same questions, same
    run) and return the calibration. Compile time is not counted (it is paid once per template)."""
    items = bfcl.load_bfcl(Path(data), limit=limit)
    warm = bfcl.compile_call(items[0], cached=True)
    for m in modes:  # first-use costs (adapter copy, token tables) are not what a request pays
        engine.generate(bfcl.build_prompt(items[0]), DecodeConfig(mode=m), template=warm.template())
    rows: dict[str, list[tuple[bool, int, float]]] = {m: [] for m in modes}
    for item in items:
        calls = bfcl.compile_call(item, cached=True)
        for m in modes:
            res = engine.generate(bfcl.build_prompt(item), DecodeConfig(mode=m), template=calls.template())
            ok = bool(bfcl.evaluate(item, res.text, res.value)["success"])
            rows[m].append((ok, res.stats.forwards, res.stats.latency_ms))
        if log:
            log(f"{item.id}: " + "  ".join(f"{m} {rows[m][-1][0]:d}/{rows[m][-1][1]}/{rows[m][-1][2]:.0f}ms"
                                            for m in modes))
    results = [ModeResult(m, len(r), round(statistics.mean(x[0] for x in r), 4),
                          round(statistics.mean(x[1] for x in r), 2), round(statistics.median(x[2] for x in r), 1))
               for m, r in rows.items()]
    return Calibration(model=model_key(engine.name.split(" + ")[0] if engine.name else None), device=device,
                       results=results, tolerance=tolerance, command=command, date=time.strftime("%Y-%m-%d"),
                       hardware=f"{platform.machine()} {platform.processor()}".strip(),
                       notes={"questions": len(items), "per_file": limit, "data": Path(data).name,
                              "adapter": str(engine.adapter_path) if engine.adapter_path else None,
                              "engine": {k: getattr(engine.config, k, None) for k in ("backend", "dtype", "threads")},
                              "load_average": [round(x, 1) for x in os.getloadavg()]})
