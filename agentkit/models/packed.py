"""Dense passes on weights prepacked once for oneDNN.

On CPU a bf16 ``nn.Linear`` runs oneDNN's matmul, which first reorders the weight into its blocked layout (the one
its AMX / AVX-512 micro-kernels read) -- on every call, so each pass reads and writes every weight once more than it
multiplies with it. ``torch.ops.mkldnn._reorder_linear_weight`` does that reorder once (what Inductor's freezing
passes do for CPU inference) and ``torch.ops.mkldnn._linear_pointwise`` multiplies with the result. The values are
the same bf16 weights; only the layout changes (row results can differ from ``nn.Linear``'s in the last bit at
some row counts, as two oneDNN blockings do).

The engine prepacks the decoder layers' linear weights and the output head of a bf16 model on CPU
(``EngineConfig.prepack="auto"``): plain ``nn.Linear`` layers become :class:`PackedLinear`, and a
:class:`~agentkit.models.q4.Q4Linear` (4-bit short passes) gets the packed copy for its long passes. The packed copy
is kept beside the dense weight (the adapter merge and anything reading ``.weight`` see the plain tensor): 2 bytes a
weight more. Figures: README, "Prepacked weights".
"""

from __future__ import annotations

import functools

import torch

ROWS_HINT = 512  # the row count oneDNN picks its packed layout for (a prompt's); other counts run on it as well


@functools.cache
def prepack_available() -> bool:
    """Whether this torch has oneDNN and the two private ops used here, and this CPU runs their bf16 path (oneDNN
    refuses it without avx512bw/vl/dq or avx_ne_convert, e.g. on an AVX2-only AMD EPYC: checked once, on a tiny
    weight)."""
    ops = torch.ops.mkldnn
    if not (torch.backends.mkldnn.is_available() and hasattr(ops, "_reorder_linear_weight")
            and hasattr(ops, "_linear_pointwise")):
        return False
    try:
        w = torch.ones(16, 32, dtype=torch.bfloat16)
        out = packed_linear(torch.ones(2, 32, dtype=torch.bfloat16), pack(w), 16)
    except RuntimeError:
        return False
    return bool((out == 32).all())


def pack(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` ([out, in], bf16, CPU) reordered for oneDNN's matmul."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), ROWS_HINT)


def packed_linear(x: torch.Tensor, packed: torch.Tensor, out_features: int,
                  bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` with ``packed = pack(weight)``."""
    rows = x.numel() // x.shape[-1]
    out = torch.ops.mkldnn._linear_pointwise(x.reshape(rows, x.shape[-1]), packed, bias, "none", [], "")
    return out.view(*x.shape[:-1], out_features)


class PackedCopy:
    """For a module holding a packed copy of its ``weight`` in the attribute named ``packed_slot`` (a plain
    attribute, not a buffer: a oneDNN-packed tensor is opaque, it cannot be copied, moved or saved). Copies and
    pickles of the module (``copy.deepcopy`` of a model, as the adapter merge makes) leave it out and pack the
    copied weight again; ``usable`` says whether an input may take the packed path."""

    packed_slot = "packed"

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_repack"] = state.get(self.packed_slot) is not None
        state[self.packed_slot] = None
        return state

    def __setstate__(self, state: dict) -> None:
        repack = state.pop("_repack", False)
        super().__setstate__(state)  # type: ignore[misc]
        if repack:
            setattr(self, self.packed_slot, pack(self.weight))  # type: ignore[attr-defined]

    def usable(self, x: torch.Tensor) -> bool:
        packed = getattr(self, self.packed_slot)
        return packed is not None and x.dtype == packed.dtype == self.weight.dtype  # type: ignore[attr-defined]


class PackedLinear(PackedCopy, torch.nn.Linear):
    """An ``nn.Linear`` (same ``weight`` and ``bias`` parameters, same state-dict names) whose forward reads a
    prepacked copy of its weight; an input in another dtype takes the plain path."""

    def __init__(self, dense: torch.nn.Linear) -> None:
        torch.nn.Module.__init__(self)
        self.in_features, self.out_features = dense.in_features, dense.out_features
        self.weight, self.bias = dense.weight, dense.bias
        self.packed: torch.Tensor | None = pack(dense.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.usable(x):
            return torch.nn.functional.linear(x, self.weight, self.bias)
        return packed_linear(x, self.packed, self.out_features, self.bias)


def use_packed_weights(model: torch.nn.Module) -> int:
    """Prepack the linear weights of ``model``'s decoder layers and its output head (a bf16 model on CPU with
    oneDNN; anything else is left as it is): plain ``nn.Linear`` layers become :class:`PackedLinear`; a
    :class:`PackedCopy` layer whose copy is not made yet (:class:`~agentkit.models.q4.Q4Linear`: for its long
    passes) gets it. Returns how many layers were packed."""
    p = next(model.parameters())
    if p.dtype != torch.bfloat16 or p.device.type != "cpu" or not prepack_available():
        return 0
    swaps, n = [], 0
    for name, mod in model.named_modules():
        if ".layers." not in f".{name}":
            continue
        if isinstance(mod, PackedCopy) and getattr(mod, mod.packed_slot) is None:
            setattr(mod, mod.packed_slot, pack(mod.weight))
            n += 1
        elif type(mod) is torch.nn.Linear:
            swaps.append((name, PackedLinear(mod)))
    for name, new in swaps:
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, attr, new)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if type(head) is torch.nn.Linear:  # the output head (tied to the embedding: the same parameter)
        model.set_output_embeddings(PackedLinear(head))
        n += 1
    return n + len(swaps)
