"""Routing by measurement: which decoding mode structured steps use, for a model on a kind of hardware.

A calibration file records, for one model on one device, each mode's task success, forwards per request and p50
latency on the same questions in one run (``agentkit calibrate``, BFCL by default). The mode structured steps use
is then :func:`choose`: the fastest (p50) among the modes whose success is within ``tolerance`` of the best, so the
choice is never a mode that another one beats on both speed and success. A step kind measured on its own requests
(``Calibration.steps``: the templated tools' SEARCH/REPLACE edits, ``evals/drafter_verify.py --calibrate tool_input``)
takes its own choice, :func:`step_mode`. Calibrations ship as package data in
``agentkit/calibrations/<model>.<device>.json``, a CPU's device named by its kind (:func:`device_key`:
``cpu-avx2``, ``cpu-avx512_bf16``), since a pass's relative cost, and so which mode is fastest, differs between
them. A kind without its own file reads its nearest kind's (:data:`NEAREST`) with one warning; a missing one falls
back to ``"ar"`` (ar-constrained: the lossless, fastest-to-first-token mode) with one warning.
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
NEAREST = {"cpu-amx": "cpu-avx512_bf16"}  # a device without its own calibration -> the one whose file it reads
_warned: set[tuple[str, str]] = set()


class CalibrationWarning(UserWarning):
    """No calibration for this model and device: structured steps use its nearest device's modes, or the fallback
    mode."""


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

    def why(self, step: str | None = None) -> str:
        """One line on why the step kind (None: structured steps in general) takes its mode: the measurement's
        size, and the chosen mode's p50 and success against the others'."""
        mode = self.structured if step is None else self.mode_for(step)
        if step == "reply" and step not in self.steps:
            return f"{mode}: replies were not measured on {self.device}"
        rows, what = (self.steps[step], f"{step} steps'") if step in self.steps else (self.results, "BFCL's")
        chosen = next(r for r in rows if r.mode == mode)
        others = ", ".join(f"{r.mode} {r.p50_ms:.0f} ms, success {r.success:.3f}" for r in rows if r is not chosen)
        return (f"{mode}: calibrated on {self.device}, {what} {chosen.n} requests: p50 {chosen.p50_ms:.0f} ms, "
                f"success {chosen.success:.3f}" + (f" (against {others})" if others else ""))

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


def device_key(device: str = "cpu") -> str:
    """A calibration's device key: ``"cpu"`` is this machine's CPU kind (``cpu-avx2``, ``cpu-avx512_bf16`` or
    ``cpu-amx``, :func:`agentkit.engine.backbone.cpu_kind`); any other name is its own key."""
    if device != "cpu":
        return device
    from .engine.backbone import cpu_kind

    return f"cpu-{cpu_kind()}"


def path_for(model: str | None, device: str = "cpu", directory: Path | None = None) -> Path:
    return (directory or DIRECTORY) / f"{model_key(model)}.{device_key(device)}.json"


def load(model: str | None = None, device: str = "cpu", directory: Path | None = None) -> Calibration | None:
    """The calibration of ``model`` on ``device``, else its nearest device's (:data:`NEAREST`, with one warning),
    else None."""
    key = device_key(device)
    p = path_for(model, key, directory)
    if p.is_file():
        return Calibration.from_json(p.read_text())
    near = NEAREST.get(key)
    near_path = path_for(model, near, directory) if near else None
    if near_path is None or not near_path.is_file():
        return None
    _warn_once((model_key(model), key), f"agentkit: no calibration for {model_key(model)} on {key}; its modes "
               f"are {near}'s ({near_path}; run `agentkit calibrate` to measure)")
    return Calibration.from_json(near_path.read_text())


def structured_mode(model: str | None = None, device: str = "cpu", directory: Path | None = None) -> str:
    """The calibrated mode for structured steps, or :data:`FALLBACK` with one warning per model and device."""
    return step_mode(None, model, device, directory)


def why(step: str | None, model: str | None = None, device: str = "cpu", directory: Path | None = None) -> str:
    """One line on why :func:`step_mode` picks the step kind's mode (:meth:`Calibration.why`), or that no
    calibration was found."""
    cal = load(model, device, directory)
    if cal is None:
        return f"{step_mode(step, model, device, directory)}: no calibration for {model_key(model)} on {device_key(device)}"
    return cal.why(step)


def step_mode(step: str | None, model: str | None = None, device: str = "cpu", directory: Path | None = None) -> str:
    """The calibrated mode for a step kind (None: structured steps in general), or :data:`FALLBACK` (a reply:
    :data:`FREE_TEXT`) with one warning per model and device."""
    cal = load(model, device, directory)
    if cal is not None:
        return cal.structured if step is None else cal.mode_for(step)
    key = (model_key(model), device_key(device))
    _warn_once(key, f"agentkit: no calibration for {key[0]} on {key[1]} ({path_for(model, device, directory)}); "
               f"structured steps use {FALLBACK!r} (run `agentkit calibrate` to measure)")
    return FREE_TEXT if step == "reply" else FALLBACK


def _warn_once(key: tuple[str, str], message: str) -> None:
    """One :class:`CalibrationWarning` per model and device."""
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, CalibrationWarning, stacklevel=4)
