"""Routing by measurement: which decoding mode structured steps use, for a model on a kind of hardware.

A calibration file records, for one model on one device, each mode's task success, forwards per request and p50
latency on the same questions in one run (``agentkit calibrate``, BFCL by default). The mode structured steps use
is then :func:`choose`: the fastest (p50) among the modes whose success is within ``tolerance`` of the best, so the
choice is never a mode that another one beats on both speed and success. A step kind measured on its own requests
(``Calibration.steps``: the templated tools' SEARCH/REPLACE edits, ``evals/drafter_verify.py --calibrate tool_input``)
takes its own choice, :func:`step_mode`. Calibrations ship as package data in
``agentkit/calibrations/<model>.<device>.json``; a missing one falls back to ``"ar"`` (ar-constrained: the
lossless, fastest-to-first-token mode) with one warning.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import InvalidRequestError

DIRECTORY = Path(__file__).resolve().parent / "calibrations"
FALLBACK = "ar"
FREE_TEXT = "ar"  # a reply's mode where the calibration did not measure replies
DEFAULT_MODEL = "SmolLM2-135M-Instruct"
_warned: set[tuple[str, str]] = set()


class CalibrationWarning(UserWarning):
    """No calibration for this model and device: structured steps use the fallback mode."""


@dataclass
class ModeResult:
    mode: str
    n: int
    success: float
    forwards: float | None  # mean forwards per request after prefill (None: the run did not record them)
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
    # a step kind (RoutingPolicy's names) measured on its own requests -> its modes' results
    steps: dict[str, list[ModeResult]] = field(default_factory=dict)

    @property
    def structured(self) -> str:
        return choose(self.results, self.tolerance)

    def mode_for(self, step: str) -> str:
        """The step kind's mode: chosen from its own measurement where it has one, else the structured steps' (a
        reply: :data:`FREE_TEXT`)."""
        if step in self.steps:
            return choose(self.steps[step], self.tolerance)
        return FREE_TEXT if step == "reply" else self.structured

    def to_json(self) -> str:
        chosen = {step: self.mode_for(step) for step in self.steps}
        return json.dumps({**asdict(self), "structured": self.structured, "step_modes": chosen}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        d = json.loads(text)
        d.pop("structured", None)
        d.pop("step_modes", None)
        d["results"] = [ModeResult(**r) for r in d["results"]]
        d["steps"] = {step: [ModeResult(**r) for r in rows] for step, rows in d.get("steps", {}).items()}
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
    return step_mode(None, model, device, directory)


def step_mode(step: str | None, model: str | None = None, device: str = "cpu", directory: Path | None = None) -> str:
    """The calibrated mode for a step kind (None: structured steps in general), or :data:`FALLBACK` (a reply:
    :data:`FREE_TEXT`) with one warning per model and device."""
    cal = load(model, device, directory)
    if cal is not None:
        return cal.structured if step is None else cal.mode_for(step)
    key = (model_key(model), device)
    if key not in _warned:
        _warned.add(key)
        warnings.warn(f"agentkit: no calibration for {key[0]} on {device} ({path_for(model, device, directory)}); "
                      f"structured steps use {FALLBACK!r} (run `agentkit calibrate` to measure)",
                      CalibrationWarning, stacklevel=3)
    return FREE_TEXT if step == "reply" else FALLBACK
