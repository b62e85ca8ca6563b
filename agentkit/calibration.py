"""Routing by measurement: which decoding mode structured steps use, for a model on a kind of hardware.

A calibration file records, for one model on one device, each mode's task success, forwards per request and p50
latency on the same questions in one run (``agentkit calibrate``, BFCL by default). The mode structured steps use
is then :func:`choose`: the fastest (p50) among the modes whose success is within ``tolerance`` of the best, so the
choice is never a mode that another one beats on both speed and success. Calibrations ship as package data in
``agentkit/calibrations/<model>.<device>.json``; a missing one falls back to ``"ar"`` (ar-constrained: the
lossless, fastest-to-first-token mode) with one warning.
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import InvalidRequestError

DIRECTORY = Path(__file__).resolve().parent / "calibrations"
FALLBACK = "ar"
DEFAULT_MODEL = "SmolLM2-135M-Instruct"
_warned: set[tuple[str, str]] = set()


class CalibrationWarning(UserWarning):
    """No calibration for this model and device: structured steps use the fallback mode."""


@dataclass
class ModeResult:
    mode: str
    n: int
    success: float
    forwards: float  # mean forwards per request after prefill
    p50_ms: float  # median complete-request latency


@dataclass
class Calibration:
    model: str
    device: str
    results: list[ModeResult]
    tolerance: float = 0.0  # success within this of the best counts as equal
    command: str = ""
    date: str = ""
    hardware: str = ""
    notes: dict = field(default_factory=dict)

    @property
    def structured(self) -> str:
        return choose(self.results, self.tolerance)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "structured": self.structured}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        d = json.loads(text)
        d.pop("structured", None)
        d["results"] = [ModeResult(**r) for r in d["results"]]
        return cls(**d)


def choose(results: list[ModeResult], tolerance: float = 0.0) -> str:
    """The fastest mode among those whose success is within ``tolerance`` of the best (ties: more successful)."""
    if not results:
        raise InvalidRequestError("a calibration needs at least one measured mode")
    best = max(r.success for r in results)
    ok = [r for r in results if r.success >= best - tolerance - 1e-12]
    return min(ok, key=lambda r: (r.p50_ms, -r.success)).mode


def model_key(model: str | None) -> str:
    """File-name key of a model: the default model's short name, else a slug of its name or path."""
    name = DEFAULT_MODEL if model is None else model
    return re.sub(r"[^A-Za-z0-9.]+", "-", name.split(" (")[0].rstrip("/").split("/")[-1]).strip("-").lower()


def path_for(model: str | None, device: str = "cpu", directory: Path | None = None) -> Path:
    return (directory or DIRECTORY) / f"{model_key(model)}.{device}.json"


def load(model: str | None = None, device: str = "cpu", directory: Path | None = None) -> Calibration | None:
    p = path_for(model, device, directory)
    return Calibration.from_json(p.read_text()) if p.is_file() else None


def structured_mode(model: str | None = None, device: str = "cpu", directory: Path | None = None) -> str:
    """The calibrated mode for structured steps, or :data:`FALLBACK` with one warning per model and device."""
    cal = load(model, device, directory)
    if cal is not None:
        return cal.structured
    key = (model_key(model), device)
    if key not in _warned:
        _warned.add(key)
        warnings.warn(f"agentkit: no calibration for {key[0]} on {device} ({path_for(model, device, directory)}); "
                      f"structured steps use {FALLBACK!r} (run `agentkit calibrate` to measure)",
                      CalibrationWarning, stacklevel=3)
    return FALLBACK


def calibrate(engine, data: Path, *, limit: int = 10, modes: tuple[str, ...] = ("ar", "diffusion", "verify"),
              tolerance: float = 0.0, device: str = "cpu", command: str = "", log=print) -> Calibration:
    """Run the first ``limit`` questions of each BFCL file in every mode on ``engine`` (same questions, same
    run) and return the calibration. Compile time is not counted (it is paid once per template)."""
    from .config import DecodeConfig
    from .evals import bfcl

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
