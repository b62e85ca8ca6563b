"""A 4-bit grid fitted to weights that are not on one: a LoRA merged into the 4-bit checkpoint.

The engine's short passes read the checkpoint's 4-bit weights (:mod:`.q4`). A merged LoRA moves every weight off
that grid by 1-2% of a step; rounding the merged weights onto a fresh grid of the same form (``d * q + m`` per group
of 32 inputs) throws most of the LoRA away, because the rounding error of each weight is as large as the deltas.
GPTQ (Frantar et al., 2022, arXiv:2210.17323) rounds a layer's weights one input column at a time and moves each
column's rounding error onto the columns not yet rounded, weighted by the inverse of the layer inputs' second
moment ``H = E[x xᵀ]``, so that the layer's *outputs* on inputs like the calibration ones stay close. The grid it
writes has the checkpoint's form, so short passes run the same int4 kernel at the same cost as the base weights.

Measured on the loop adapter (``python evals/bench_lora_steps.py``, bf16, one-position steps): on the target tokens
of agent-loop steps it never saw, cross entropy 0.179 with dense merged weights, 0.182 on the fitted grids, 0.521
rounded onto a fresh grid, 1.53 on the weights as loaded; a step costs 1.04x the base weights' (dense: 1.56x).

Calibration inputs are agent-loop text (:data:`CALIBRATION`: the last step, the answer after a tool result, of 48
generated tasks, never a benchmark's; about 6,000 tokens); the grids
are fitted once per (adapter, checkpoint, dtype) and cached as safetensors under the model cache
(:func:`fitted_grids`), about a minute on one CPU thread the first time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from .console import first_use_step
from .q4 import GROUP

log = logging.getLogger("agentkit.models")

ALGO = "gptq-g32-b128-d0.01-v1"  # in the cache key (lora_grids): a change here refits
# agent-loop chats to fit on: ``python -m agentkit.training.loop_traces --n 48 --seed 1 --calibration --out ...``
# (generated tasks, never a benchmark; the loop adapter trained on seed 0's)
CALIBRATION = Path(__file__).resolve().parent / "data" / "loop_calibration.jsonl"
Grid = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # q int32 [N, K] in 0..15, d and m float32 [N, K / GROUP]


def calibration_ids(tokenizer, path: Path = CALIBRATION) -> list[list[int]]:
    """Token ids of the chats in ``path`` (JSON lines, one chat each), through the tokenizer's chat template (the
    messages' text joined by newlines where it has none)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        chat = json.loads(line)
        if getattr(tokenizer, "chat_template", None):
            ids = tokenizer.apply_chat_template(chat, tokenize=True)
            ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        else:
            ids = tokenizer.encode("\n".join(m["content"] for m in chat))
        rows.append(ids)
    return rows


def input_moments(model: torch.nn.Module, names: Iterable[str], rows: list[list[int]],
                  on_row: Callable[[], None] | None = None) -> dict[str, torch.Tensor]:
    """``E[x xᵀ]`` (float32 [K, K]) of the inputs of each linear layer in ``names`` over ``rows`` (one forward
    each, ``on_row()`` after each). Layers that read the same tensor in a forward (q, k, v; gate, up) compute its
    product once."""
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}
    # id of an input tensor in this forward -> (the tensor, kept so its id is not reused; x xᵀ over positions)
    products: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def hook(name: str) -> Callable:
        def record(_mod, inp, _out) -> None:
            x = inp[0].reshape(-1, inp[0].shape[-1])
            if id(inp[0]) not in products:
                x32 = x.float()
                products[id(inp[0])] = (inp[0], x32.t() @ x32)
            p = products[id(inp[0])][1]
            sums[name] = sums[name] + p if name in sums else p.clone()
            counts[name] = counts.get(name, 0) + x.shape[0]
        return record

    handles = [model.get_submodule(n).register_forward_hook(hook(n)) for n in names]
    try:
        with torch.no_grad():
            for ids in rows:
                products.clear()
                model(torch.tensor([ids]))
                if on_row is not None:
                    on_row()
    finally:
        products.clear()
        for h in handles:
            h.remove()
    return {n: sums[n] / counts[n] for n in sums}


def _group_params(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``d, m`` of a group's columns (``w`` [N, GROUP]): the checkpoint's form, ``m`` the minimum, ``d`` a fifteenth
    of the range (a flat group gets a tiny ``d``: every ``q`` is 0)."""
    m = w.min(-1).values
    d = (w.max(-1).values - m) / 15
    return d.clamp_min(torch.finfo(torch.float32).tiny), m


def fit_grid(w: torch.Tensor, h: torch.Tensor, block: int = 128, damp: float = 0.01) -> Grid:
    """GPTQ: ``w`` (float32 [N, K]) on a 4-bit grid ``d * q + m`` per group of :data:`GROUP` inputs, chosen for the
    layer's outputs on inputs whose second moment is ``h`` ([K, K]). Groups' ``d, m`` come from the columns as they
    stand (earlier columns' errors moved onto them) when the group's first column is reached."""
    w = w.detach().float().clone()
    n, k = w.shape
    if k % GROUP or block % GROUP:
        raise ValueError(f"fit_grid: {k} inputs or a block of {block} is not a multiple of {GROUP}")
    h = h.detach().float().clone()
    dead = torch.diag(h) == 0
    h[dead, dead] = 1
    w[:, dead] = 0
    h += damp * torch.diag(h).mean() * torch.eye(k)
    hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True)
    q = torch.zeros(n, k, dtype=torch.int32)
    d = torch.zeros(n, k // GROUP)
    m = torch.zeros(n, k // GROUP)
    for b0 in range(0, k, block):
        b1 = min(b0 + block, k)
        wb, err, hb = w[:, b0:b1].clone(), torch.zeros(n, b1 - b0), hinv[b0:b1, b0:b1]
        for i in range(b1 - b0):
            c, g = b0 + i, (b0 + i) // GROUP
            if c % GROUP == 0:
                d[:, g], m[:, g] = _group_params(wb[:, i:i + GROUP])
            qi = ((wb[:, i] - m[:, g]) / d[:, g]).round_().clamp_(0, 15)
            q[:, c] = qi.to(torch.int32)
            e = (wb[:, i] - (qi * d[:, g] + m[:, g])) / hb[i, i]
            wb[:, i:] -= e[:, None] * hb[i, i:][None, :]
            err[:, i] = e
        w[:, b1:] -= err @ hinv[b0:b1, b1:]
    return q, d, m


def dequantized(grid: Grid) -> torch.Tensor:
    q, d, m = grid
    n, k = q.shape
    return (q.view(n, k // GROUP, GROUP).float() * d[..., None] + m[..., None]).view(n, k)


def fitted_grids(model: torch.nn.Module, names: list[str], weights: Callable[[str], torch.Tensor],
                 rows: Callable[[], list[list[int]]], cache: Path) -> dict[str, Grid]:
    """A fitted 4-bit grid for each linear layer in ``names`` (its float32 weight: ``weights(name)``), from the
    inputs ``model`` gives those layers on ``rows()``; read from ``cache`` (a safetensors file) when it is there,
    written to it when not."""
    from safetensors.torch import load_file, save_file

    if cache.is_file():
        t = load_file(str(cache))
        if all(f"{n}.q" in t for n in names):
            return {n: (t[f"{n}.q"].to(torch.int32), t[f"{n}.d"], t[f"{n}.m"]) for n in names}
    log.info("fitting 4-bit grids to %d merged layers (GPTQ, once; cached at %s)", len(names), cache)
    calibration = rows()
    with first_use_step(f"fitting the loop adapter's 4-bit grids to {len(names)} layers (first use only, about "
                        "a minute)", len(calibration) + len(names)) as advance:
        moments = input_moments(model, names, calibration, on_row=advance)
        grids = {}
        for n in names:
            grids[n] = fit_grid(weights(n), moments[n])
            advance()
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")  # processes fitting at once (Ray replicas) each write their own
    save_file({f"{n}.{part}": t.to(torch.uint8) if part == "q" else t.contiguous()
               for n, g in grids.items() for part, t in zip("qdm", g, strict=True)}, str(tmp))
    tmp.replace(cache)
    return grids


def lora_grids(lm, state: dict[str, torch.Tensor], cfg, base: Callable[[str], torch.Tensor | None]) -> dict[str, Grid]:
    """Fitted grids for the layers a merged LoRA changed (``state``, ``cfg``: the adapter, as
    :func:`~agentkit.models.adapter.load_adapter` reads it; ``base``: the checkpoint's float32 weights by weight
    name), cached under ``cache_root()/grids`` by the adapter's tensors and scale, the checkpoint, the model's dtype,
    :data:`ALGO` and the calibration text. ``lm.model`` is the merged model, its layers still dense. The merged
    float32 weights are only built when the grids are fitted (a cached load reads none of them)."""
    from .adapter import lora_deltas
    from .default import cache_root
    from .q4 import merged_source

    names = sorted(k[: -len(".lora_a")] for k in state if k.endswith(".lora_a"))
    h = hashlib.sha256(ALGO.encode() + repr(cfg.scale).encode())
    for k in sorted(state):  # the tensors themselves (a file's bytes can differ for the same tensors)
        h.update(k.encode() + state[k].float().contiguous().numpy().tobytes())
    checkpoint = Path(lm.meta["base_weights"])
    for part in (checkpoint.name, checkpoint.stat().st_size, next(lm.model.parameters()).dtype):
        h.update(repr(part).encode())
    h.update(CALIBRATION.read_bytes())
    merged = functools.cache(lambda: merged_source(base, lora_deltas(state, cfg)))

    def weight(name: str) -> torch.Tensor:
        w = merged()(f"{name}.weight")
        if w is None:
            raise KeyError(f"no checkpoint weight for {name!r}")
        return w

    return fitted_grids(lm.model, names, weight, lambda: calibration_ids(lm.tokenizer),
                        cache_root() / "grids" / f"{h.hexdigest()[:24]}.safetensors")
