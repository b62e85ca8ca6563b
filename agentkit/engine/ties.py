"""Where two greedy outputs of one model part, and how close the model's choice was there (the near-tie report).

A verify pass checks many positions at once; where its kernels group rows differently from a one-token AR step
(passes wider than the row-exact pieces, or ``row_exact="off"``), a logit can move by a rounding, and where the top
two tokens are that close the greedy pick can flip. :func:`first_difference` finds the first position where two
outputs of the same request differ and measures, with one fresh pass of the base over the prompt and the common
prefix, the gap between the top two tokens the template allows there: a difference is a *near tie* when that gap
is within :data:`NEAR_TIE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

# logits: a greedy pick whose top two are closer than this may flip with the pass's shape (a bf16 rounding of a
# logit of magnitude ~20 is ~0.06-0.125)
NEAR_TIE = 0.25


@dataclass
class Difference:
    index: int  # first output position where the two differ
    first: int  # the token the first output has there
    second: int  # ... and the second
    margin: float  # the base's gap between its top two allowed tokens there (one fresh pass)
    gap: float  # the base's logit of ``first`` minus that of ``second`` there

    @property
    def near_tie(self) -> bool:
        return self.margin <= NEAR_TIE

    def to_dict(self) -> dict:
        return {**asdict(self), "near_tie": self.near_tie}


def first_difference(engine, prompt, first: Sequence[int], second: Sequence[int], template=None,
                     raw: bool = False) -> Difference | None:
    """The first position where ``first`` and ``second`` (outputs of ``engine`` for ``prompt`` under
    ``template``) differ, with the base's margins there; None when one is a prefix of the other."""
    i = next((k for k, (a, b) in enumerate(zip(first, second)) if a != b), None)
    if i is None:
        return None
    ids = engine.encode_prompt(prompt, raw=raw) + list(first[:i])
    bb = engine.backbone
    logits = bb.encode(ids, bb.new_cache(), rows=[-1], whole=True)[0].float()
    if template is not None:
        c = engine.constraint(template)
        state = c.start()
        for t in first[:i]:
            state = c.advance(state, t)
        allowed = c.allowed(state) if state is not None else None
        if allowed is not None:
            logits = logits.masked_fill(~allowed, float("-inf"))
    top = torch.topk(logits, 2).values
    return Difference(i, int(first[i]), int(second[i]), float(top[0] - top[1]),
                      float(logits[first[i]] - logits[second[i]]))
