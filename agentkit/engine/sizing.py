"""How long a verify block or a causal-canvas pass should be: as long as its expected accepted tokens pay for it.

A pass over ``n`` positions costs ``cost(n)`` (the backbone's cost curve: ms by positions, interpolated). Its
positions are of three kinds: *exact* (the first position: always kept), *pinned* (template text: kept when
everything before it was) and *draft* (kept with probability ``rate`` when everything before it was). Position
``j`` is kept with probability ``rate ** (drafts in 1..j)``; the expected output of the first ``L`` positions is
the sum of those probabilities, and the pass is cut at the ``L`` that maximizes expected tokens per unit cost.
A draft that comes with its own chance of being kept (the block drafter's confidence, :func:`keep_chance`) uses
that chance instead of ``rate``.

Sizing never changes what is decoded (a verify block keeps only what greedy AR agrees with; a causal canvas
freezes a position only when its prefix is exact): it only changes how much forward work each pass does.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

EXACT, PINNED, DRAFT = 0, 1, 2

# ms per forward by positions after a 200-token prefix, torch fp32, 2 threads (the BRIEF's figures); backbones
# replace it with their own measured curve (``Backbone.cost_curve``)
DEFAULT_CURVE: dict[int, float] = {1: 99.0, 32: 184.0, 64: 291.0, 256: 833.0}


def interpolate(curve: Mapping[int, float], n: int) -> float:
    """``curve`` (positions -> ms) at ``n``: linear between measured points, extended flat below the first and
    along the last segment's slope above the last."""
    xs = sorted(curve)
    if n <= xs[0]:
        return curve[xs[0]]
    i = bisect.bisect_left(xs, n)
    if i == len(xs):
        i -= 1
    x0, x1 = xs[i - 1], xs[i]
    y0, y1 = curve[x0], curve[x1]
    return y0 + (y1 - y0) * (n - x0) / (x1 - x0)


def pieced_curve(curve: Mapping[int, float], piece: int) -> dict[int, float]:
    """The cost curve of a backbone that runs a pass longer than ``piece`` positions as pieces of ``piece`` (its
    row-exact passes, ``Backbone.exact_rows``): ``curve`` up to ``piece``, then whole pieces plus the rest."""
    out = {n: ms for n, ms in curve.items() if n <= piece}
    out[piece] = interpolate(curve, piece)
    for n in sorted(curve):
        if n > piece:
            whole, rest = divmod(n, piece)
            out[n] = whole * out[piece] + (interpolate(curve, rest) if rest else 0.0)
    return dict(sorted(out.items()))


class AcceptRate:
    """Running share of drafted positions that were accepted (a Beta(1, 1) prior by default: 0.5 before any
    evidence; else ``accepted`` of ``proposed`` before any)."""

    def __init__(self, accepted: float = 1.0, proposed: float = 2.0) -> None:
        assert 0 <= accepted <= proposed and proposed > 0
        self.accepted, self.proposed = accepted, proposed

    def update(self, accepted: int, proposed: int) -> None:
        assert 0 <= accepted <= proposed
        self.accepted += accepted
        self.proposed += proposed

    @property
    def rate(self) -> float:
        return self.accepted / self.proposed


def keep_chance(confidence: float) -> float:
    """The chance that verify keeps a block-drafter draft whose drafter probability (among what the template allows)
    is ``confidence``: its square. The drafter is overconfident below the top. On 40 generated jobs of seeds no
    training or tuning used, every draft checked (228 drafts; ``evals/drafter_confidence.py``,
    ``evals/results/drafter/confidence_gen40.json``), drafts at 0.30 were kept 0.14 of the time, at 0.50 0.40, at
    0.69 0.49, at 0.85 0.81 and at 0.99 0.92; of the powers 1 to 3, 1.5 to 2 fit them best (log-likelihood within
    1.3 of each other)."""
    return confidence * confidence


def pass_length(kinds: Sequence[int], rate: float, curve: Mapping[int, float], floor: int = 1,
                offset: int = 0, chances: Sequence[float | None] | None = None) -> int:
    """The length ``L`` (``floor <= L <= len(kinds)``) of the pass over ``kinds[:L]`` with the most expected
    tokens per unit cost; ties go to the longer pass. ``offset``: positions the pass carries before ``kinds``
    (a causal canvas's frozen prefix), which cost but yield nothing. ``chances``: a draft's own chance of being
    kept where it has one (None elsewhere: ``rate``)."""
    assert kinds and 1 <= floor
    assert chances is None or len(chances) == len(kinds)
    floor = min(floor, len(kinds))
    best, best_len, p, expected = -1.0, floor, 1.0, 0.0
    for i, kind in enumerate(kinds):
        if kind == DRAFT:
            own = chances[i] if chances is not None else None
            p *= rate if own is None else own
        expected += p
        n = i + 1
        if n >= floor:
            value = expected / interpolate(curve, offset + n)
            if value >= best:
                best, best_len = value, n
    return best_len
