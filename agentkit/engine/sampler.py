"""Turning logits into tokens: temperature, top-k, allowed-token masks, confidence and entropy; sampling by
position-keyed Gumbel noise, so every decoding mode that reads the same logits at a position draws the same token."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..errors import InvalidRequestError


def masked_logits(logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """logits: [k, V] (or [V]); allowed: same shape bool, or None."""
    if allowed is None:
        return logits
    extra = logits.shape[-1] - allowed.shape[-1]
    if extra > 0:  # tokens added after the constraint's vocabulary (e.g. an adapter's mask token): never allowed
        allowed = torch.nn.functional.pad(allowed, (0, extra), value=False)
    return logits.masked_fill(~allowed, float("-inf"))


def penalize(logits: torch.Tensor, output: Sequence[int], frequency: float, presence: float) -> torch.Tensor:
    """OpenAI's penalties: ``logits`` (one row) less ``frequency`` times each token's count in ``output`` and less
    ``presence`` for each token that occurs there. ``logits`` itself when both are 0 or the output is empty."""
    if not output or (frequency == 0 and presence == 0):
        return logits
    counts = torch.bincount(torch.as_tensor(list(output), dtype=torch.long), minlength=logits.shape[-1])
    counts = counts[: logits.shape[-1]].to(torch.float32)
    return logits.float() - frequency * counts - presence * (counts > 0).to(torch.float32)


def bias_rows(bias: dict[int, float], vocab_size: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``DecodeConfig.logit_bias`` as (token ids, bonuses) for :func:`add_bias`; None when empty. A token id outside
    the vocabulary is an ``InvalidRequestError`` naming it."""
    if not bias:
        return None
    bad = sorted(t for t in bias if t >= vocab_size)
    if bad:
        raise InvalidRequestError(f"logit_bias: token id(s) {bad[:5]} not in this model's vocabulary "
                                  f"(0..{vocab_size - 1})", param="logit_bias")
    return torch.tensor(list(bias), dtype=torch.long), torch.tensor(list(bias.values()), dtype=torch.float32)


def add_bias(logits: torch.Tensor, rows: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``logits`` (one row) with :func:`bias_rows`' bonuses added (a new float32 tensor)."""
    return logits.float().index_add(0, rows[0], rows[1])


def logits_to_probs(logits: torch.Tensor, temperature: float, top_k: int | None = None,
                    top_p: float | None = None) -> torch.Tensor:
    if temperature <= 0:
        temperature = 1.0
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None and top_p < 1.0:
        probs = nucleus(probs, top_p)
    return probs


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Top-p (nucleus) filter: keep the smallest set of most likely tokens whose mass reaches ``top_p`` (always
    the most likely one), renormalised. probs: [..., V]."""
    sorted_p, order = torch.sort(probs, dim=-1, descending=True)
    before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass of the tokens ranked above each one
    keep_sorted = before < top_p
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = probs.masked_fill(~keep, 0.0)
    return kept / kept.sum(-1, keepdim=True)


class PositionNoise:
    """Gumbel noise keyed by output position: ``at(i, V)`` is the same ``[V]`` draw for position ``i`` however often
    and in whatever order it is asked for. A token sampled as ``argmax(log p + noise)`` is an exact draw from ``p``
    (the Gumbel-max trick), and it is a function of the position's logits alone: so verify, which checks a drafted
    block position by position, keeps exactly the tokens AR samples with the same seed, as it keeps greedy AR's.
    ``seed`` None draws a base seed from torch's global generator (``torch.manual_seed`` makes it repeatable)."""

    def __init__(self, seed: int | None) -> None:
        self.seed = int(torch.randint(0, 2**62, ())) if seed is None else seed
        self._held: dict[int, torch.Tensor] = {}

    def at(self, position: int, vocab: int) -> torch.Tensor:
        g = self._held.get(position)
        if g is None or g.shape[-1] != vocab:
            gen = torch.Generator().manual_seed((self.seed * 1_000_003 + position) % 2**63)
            u = torch.rand(vocab, generator=gen).clamp_(1e-20, 1.0 - 1e-7)
            g = -torch.log(-torch.log(u))
            self._held = {k: v for k, v in self._held.items() if k > position - 64}  # a verify block's reach
            self._held[position] = g
        return g


def pick(
    logits: torch.Tensor,
    allowed: torch.Tensor | None = None,
    temperature: float = 0.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    top_p: float | None = None,
    noise: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Choose one token per row. logits: [k, V] -> (tokens [k], confidence [k], entropy [k]).

    Greedy when ``temperature == 0`` (confidence/entropy still come from the T=1 distribution); ``top_p`` < 1
    samples from the nucleus only (greedy ignores it: the argmax is always in the nucleus). A sample is drawn with
    ``noise`` (Gumbel, [k, V] or [V], :class:`PositionNoise`) where given, else from ``generator``.
    """
    z = masked_logits(logits, allowed)
    probs = logits_to_probs(z, temperature if temperature > 0 else 1.0, top_k, top_p if temperature > 0 else None)
    if temperature > 0 and noise is not None:
        tokens = (torch.log(probs) + noise[..., : probs.shape[-1]]).argmax(dim=-1)
    elif temperature > 0:
        tokens = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    else:
        tokens = z.argmax(dim=-1)
    conf = probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    logp = torch.log(probs.clamp_min(1e-12))
    entropy = -(probs * logp).sum(-1)
    return tokens, conf, entropy


def greedy_by_byte(logits: torch.Tensor, allowed: torch.Tensor, first_bytes: torch.Tensor,
                   token_bytes: list[bytes | None], k: int = 64) -> int:
    """Greedy over bytes, not tokens. logits, allowed: [V]; first_bytes: [V'] long, each token's first byte (256:
    none; tokens past V' count as 256); token_bytes: each token's bytes.

    The first byte is the one with the most allowed probability summed over the tokens that start with it (all of
    them); then, among the ``k`` likeliest tokens starting with it, byte after byte, the next byte (or the token
    ending there) with the most mass, down to one token. So a choice the vocabulary spells several ways is weighed
    as one: after ``"heat_capacity": 5`` the default model gives ``}}`` 0.25 and ``}`` 0.25 but ``,`` 0.33 --
    token greedy writes another, unwanted, argument; byte greedy closes the object (0.50 on ``}``). The argmax is
    kept whenever it holds over half the allowed mass (no other byte can then outweigh it)."""
    z = masked_logits(logits, allowed).float()
    p = torch.softmax(z, -1)
    best = int(z.argmax())
    if float(p[best]) > 0.5:
        return best
    fb = torch.nn.functional.pad(first_bytes, (0, z.shape[-1] - first_bytes.shape[-1]), value=256)
    mass = torch.zeros(257).index_add_(0, fb, p)
    group = z.masked_fill(fb != int(mass.argmax()), float("-inf"))
    top = torch.topk(group, min(k, int(torch.isfinite(group).sum())))
    cands = [(token_bytes[t] or b"", w, t) for t, w in zip(top.indices.tolist(), p[top.indices].tolist())]
    depth = 1
    while len(cands) > 1:
        weight: dict[bytes, float] = {}
        for tb, w, _t in cands:  # most likely first: a tie goes to the likeliest token's byte
            key = tb[depth:depth + 1]  # b"": the token ends here
            weight[key] = weight.get(key, 0.0) + w
        key = max(weight, key=weight.__getitem__)
        cands = [c for c in cands if c[0][depth:depth + 1] == key]
        if not key:
            break
        depth += 1
    return cands[0][2]
