"""How an agent's steps are routed and bounded: ``RoutingPolicy`` (the decoding mode of each step kind) and
``Limits`` (iterations, tokens, time and tool-result size of a run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..config import MODES, Mode
from ..errors import UserError
from ..steps import kinds as steps


def _calibrated(step: str) -> Mode:
    from ..calibration import step_mode

    return step_mode(step)  # type: ignore[return-value]


@dataclass(frozen=True)
class RoutingPolicy:
    """The decoding mode of each step kind, as the calibration of the default model on CPU chose it
    (``agentkit/calibration.py``, ``step_mode``): a step kind measured on its own requests (``tool_call``: BFCL's
    questions; ``extract``: users' texts; ``tool_input``: SEARCH/REPLACE edits; ``plan`` and ``reply``: the agent
    loop's tasks) takes that run's choice; a structured step kind not measured on its own takes the mode measured
    fastest at equal success on BFCL, a reply AR (``"ar"`` for every step, with a warning, when no calibration file
    is found).
    ``RoutingPolicy.calibrated(model, device)`` reads another calibration. A step routed to ``verify`` that samples
    (``temperature > 0``) keeps the tokens AR samples with the same seed (``agentkit.engine.sampler.PositionNoise``)."""

    plan: Mode = field(default_factory=partial(_calibrated, "plan"))
    tool_call: Mode = field(default_factory=partial(_calibrated, "tool_call"))
    tool_input: Mode = field(default_factory=partial(_calibrated, "tool_input"))
    extract: Mode = field(default_factory=partial(_calibrated, "extract"))
    reply: Mode = field(default_factory=partial(_calibrated, "reply"))

    def __post_init__(self) -> None:
        bad = [f"{k}={getattr(self, k)!r}" for k in steps.STEP_KINDS if getattr(self, k) not in MODES]
        if bad:
            raise UserError(f"RoutingPolicy modes must be one of {MODES}: {', '.join(bad)}")

    @classmethod
    def calibrated(cls, model: str | None = None, device: str = "cpu", directory: Any = None) -> RoutingPolicy:
        """Each step kind in the calibrated mode of ``model`` (None: the default model) on ``device``."""
        from ..calibration import step_mode

        return cls(**{s: step_mode(s, model, device, directory) for s in steps.STEP_KINDS})  # type: ignore[arg-type]

    @classmethod
    def force(cls, mode: Mode) -> RoutingPolicy:
        """Every step in ``mode`` (e.g. ``"ar"`` as a baseline, or ``"verify"``)."""
        return cls(plan=mode, tool_call=mode, tool_input=mode, extract=mode, reply=mode)

    def mode_for(self, step: str) -> Mode:
        return getattr(self, step)


@dataclass(frozen=True)
class Limits:
    """Bounds on a run. ``max_tokens`` counts output tokens over all steps; ``timeout_s`` the whole run (the
    generation in progress stops at its next forward); ``max_tool_result_chars``: the characters of one tool result
    (or error) kept in the conversation, its start and end with a marker saying how much was cut between them
    (None: all; a long pytest log or file otherwise fills a 2,048-token context in one call)."""

    max_iterations: int = 16
    max_tokens: int | None = None
    timeout_s: float | None = None
    max_tool_result_chars: int | None = 4000

    def __post_init__(self) -> None:
        if not isinstance(self.max_iterations, int) or self.max_iterations < 1:
            raise UserError(f"max_iterations must be an integer >= 1, got {self.max_iterations!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UserError(f"max_tokens must be >= 1 or None, got {self.max_tokens!r}")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise UserError(f"timeout_s must be > 0 or None, got {self.timeout_s!r}")
        n = self.max_tool_result_chars
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 100):
            raise UserError(f"max_tool_result_chars must be an integer >= 100 or None, got {n!r}")
