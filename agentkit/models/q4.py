"""Short passes on the checkpoint's own 4-bit weights.

The embedded default model is a Q4_1 GGUF: every linear weight of its decoder layers is, per group of 32 inputs,
``d * q + m`` with ``q`` in 0..15. The engine runs it from the dequantized values in bf16, 2 bytes a weight, so a
one-token step reads ~210 MB of layer weights and is bound by memory bandwidth. torch's CPU int4 kernel
(``_weight_int4pack_mm_for_cpu``: 4-bit values, a bf16 scale and zero per group) reads a quarter of that. Measured
over the default model's 210 linear layers, 1 thread (``python evals/bench_q4.py``, ``evals/results/engine/bench_q4.txt``):
3.6x faster for 1 row, 1.6x for 8, even at 16, 2.5x slower for a 300-token prompt. So a pass of up to :data:`MAX_ROWS` positions (AR steps, short verify blocks,
fixed-shape passes of 8) runs on the 4-bit weights and a longer one (the prompt, long pinned runs, batches) on the
dense ones; both are kept.

The 4-bit form is recovered exactly from the float32 checkpoint: per group, ``m`` is the minimum, ``d`` a fifteenth
of the range, and every value must be ``d * q + m`` for an integer ``q`` (a layer that is not is left dense: any
other checkpoint is unchanged). The kernel computes ``(q - 8) * d + (m + 8 d)`` with ``d`` and the zero rounded to
bf16, where the dense path rounds each weight to bf16: the same weights up to bf16 rounding, in a different place,
so greedy tokens can part at near ties between the two paths (a pass's kernel depends only on its row count, so
fixed-shape passes stay exact).

A LoRA merged into those weights (``EngineConfig.lora``) moves them off the grid by 1-2% of a step, which the
checkpoint's grid would round away; there short passes read 4-bit grids fitted to the merged weights
(:mod:`.gptq`, passed to :func:`use_q4_steps` as ``grids``), or with ``q4_steps="int8"`` an 8-bit copy of them
(:class:`Q8Linear`: twice the 4-bit copy's bytes, half the dense weights').
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .packed import PackedCopy, PackedLinear, packed_linear

GROUP = 32
MAX_ROWS = 8  # passes of at most this many positions use the 4-bit weights (bench_q4: 1.6x at 8 rows)


def q4_groups(w: torch.Tensor, group: int = GROUP) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """``(q, d, m)`` with ``w == d * q + m`` per group of ``group`` inputs exactly (q int in 0..15, d and m [N, K /
    group]), or None if ``w`` (float32 [N, K]) is not such a 4-bit group quantization."""
    n, k = w.shape
    if k % group or w.dtype != torch.float32:
        return None
    g = w.view(n, k // group, group)
    m = g.min(-1).values
    d = (g.max(-1).values - m) / 15
    q = ((g - m[..., None]) / torch.where(d == 0, 1.0, d)[..., None]).round_()
    if q.min() < 0 or q.max() > 15:
        return None
    # GGUF stores d in float16 (then d * q is exact in float32); the range of a group can miss 15 d by an ulp
    for dd in (d.half().float(), d):
        if torch.equal(torch.addcmul(m[..., None], q, dd[..., None]), g):
            return q.view(n, k).to(torch.int32), dd, m
    return None


class ShortPassLinear(PackedCopy, torch.nn.Module):
    """A bias-free ``nn.Linear`` that keeps its dense weight and a low-bit copy; passes of at most ``max_rows`` rows
    in the layer's dtype use the copy (:meth:`short`), longer ones the dense weight (prepacked for oneDNN once
    :func:`~agentkit.models.packed.use_packed_weights` has run)."""

    packed_slot = "packed_dense"

    def __init__(self, dense: torch.nn.Linear, max_rows: int = MAX_ROWS) -> None:
        super().__init__()
        self.weight = dense.weight
        self.in_features, self.out_features, self.max_rows = dense.in_features, dense.out_features, max_rows
        self.packed_dense: torch.Tensor | None = None  # the dense weight prepacked for oneDNN (models/packed.py)

    def short(self, a: torch.Tensor) -> torch.Tensor:
        """``a`` [rows, K] times the low-bit copy: [rows, N]."""
        raise NotImplementedError

    def rows_independent(self) -> bool:
        """Whether :meth:`short` computes each row of a pass of up to ``max_rows`` on its own (row-exact passes,
        ``agentkit.engine.backbone.row_exact_width``)."""
        return False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // self.in_features
        if rows > self.max_rows or x.dtype != self.weight.dtype:
            if self.usable(x):
                return packed_linear(x, self.packed_dense, self.out_features)
            return torch.nn.functional.linear(x, self.weight)
        out = self.short(x.reshape(rows, self.in_features))
        return out.to(x.dtype).view(*x.shape[:-1], self.out_features)


class Q4Linear(ShortPassLinear):
    """Short passes on the checkpoint's 4-bit weights. The kernel's scales are always bf16 (its fast path on every
    x86 CPU, AVX2 included; with float32 scales it runs a scalar reference loop, ~15x slower): in a float32 model a
    short pass rounds its input to bf16 for the kernel and returns float32."""

    def __init__(self, dense: torch.nn.Linear, q: torch.Tensor, d: torch.Tensor, m: torch.Tensor,
                 max_rows: int = MAX_ROWS) -> None:
        super().__init__(dense, max_rows)
        self.register_buffer("packed", torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 2), persistent=False)
        zero = m + 8 * d  # the kernel reads (q - 8) * d + zero
        scales = torch.stack([d.t(), zero.t()], -1).to(torch.bfloat16).contiguous()  # [K / group, N, 2]
        self.register_buffer("scales", scales, persistent=False)

    def short(self, a: torch.Tensor) -> torch.Tensor:
        a = a.to(self.scales.dtype)  # bf16 (a no-op in a bf16 model)
        return torch.ops.aten._weight_int4pack_mm_for_cpu(a, self.packed, GROUP, self.scales)

    def rows_independent(self) -> bool:
        return True  # the CPU int4 kernel runs the rows of a pass one by one


class Q8Linear(ShortPassLinear):
    """Short passes on an 8-bit copy of a float32 weight (one bf16 scale per output row; torch's int8 kernel). For
    weights that are not a 4-bit grid any more: a LoRA merged into the 4-bit checkpoint, whose deltas (1-2% of a
    4-bit step) the checkpoint's grid would round away (``q4_steps="int8"``; by default such layers get grids fitted
    to them, :mod:`.gptq`). ``python evals/bench_lora_steps.py`` (the loop adapter, 1 thread): a one-position
    forward 1.37x the base weights' 4-bit one (the fitted grids 1.04x, dense bf16 1.56x)."""

    def __init__(self, dense: torch.nn.Linear, w: torch.Tensor, max_rows: int = MAX_ROWS) -> None:
        super().__init__(dense, max_rows)
        scale = w.abs().amax(1).clamp_min(torch.finfo(torch.float32).tiny) / 127
        self.register_buffer("q8", (w / scale[:, None]).round_().clamp_(-127, 127).to(torch.int8), persistent=False)
        self.register_buffer("scales", scale.to(torch.bfloat16), persistent=False)

    def short(self, a: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._weight_int8pack_mm(a.to(self.scales.dtype), self.q8, self.scales)

    def rows_independent(self) -> bool:
        """Probed (once per shape): a pass of ``max_rows`` random rows against each row alone, bit for bit."""
        key = (self.in_features, self.out_features, self.max_rows)
        if key not in _INT8_ROWS:
            a = torch.randn(self.max_rows, self.in_features, generator=torch.Generator().manual_seed(0))
            whole = self.short(a)
            _INT8_ROWS[key] = all(torch.equal(whole[i:i + 1], self.short(a[i:i + 1])) for i in range(len(a)))
        return _INT8_ROWS[key]


_INT8_ROWS: dict[tuple[int, int, int], bool] = {}  # Q8Linear.rows_independent's probes, by shape


def q4_applies(model: torch.nn.Module, float32: bool = False) -> bool:
    """Whether :func:`use_q4_steps` would replace layers of ``model``: a bf16 model on CPU, or a float32 one when
    ``float32``."""
    p = next(model.parameters())
    return p.dtype in ((torch.bfloat16, torch.float32) if float32 else (torch.bfloat16,)) and p.device.type == "cpu"


def use_q4_steps(model: torch.nn.Module, source: Callable[[str], torch.Tensor | None],
                 max_rows: int = MAX_ROWS, float32: bool = False, int8: bool = False,
                 grids: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] | None = None) -> int:
    """Replace each bias-free linear layer of ``model``'s decoder layers whose float32 weight (``source(name)``,
    the checkpoint's tensor for parameter ``name``; None: unknown) is a 4-bit group quantization by a
    :class:`Q4Linear`, and with ``int8`` any other by a :class:`Q8Linear` (``source`` then gives the merged
    weights: :func:`merged_source`). For a bf16 model on CPU, and a float32 one when ``float32`` (the engine asks
    for it where float32 was its ``dtype="auto"`` choice: a CPU without native bf16, where the kernel's bf16 path
    still reads a quarter of the bytes; an explicit float32 engine keeps float32 arithmetic); returns how many
    were replaced. ``grids``: a 4-bit grid ``(q, d, m)`` by layer name that takes precedence (fitted to a merged
    LoRA's weights: :mod:`.gptq`)."""
    if not q4_applies(model, float32):
        return 0
    swaps = []
    for name, mod in model.named_modules():
        if type(mod) is not torch.nn.Linear or mod.bias is not None or ".layers." not in f".{name}":
            continue
        if grids and name in grids:
            swaps.append((name, Q4Linear(mod, *grids[name], max_rows=max_rows)))
            continue
        w = source(f"{name}.weight")
        if w is None or tuple(w.shape) != tuple(mod.weight.shape):
            continue
        found = q4_groups(w)
        if found is not None:
            swaps.append((name, Q4Linear(mod, *found, max_rows=max_rows)))
        elif int8:
            swaps.append((name, Q8Linear(mod, w.float(), max_rows=max_rows)))
    for name, new in swaps:
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, attr, new)
    return len(swaps)


def safetensors_source(path) -> Callable[[str], torch.Tensor | None]:
    """``source`` for :func:`use_q4_steps` reading float32 tensors from a safetensors file."""
    from safetensors import safe_open

    f = safe_open(str(path), "pt")
    names = set(f.keys())
    return lambda name: f.get_tensor(name) if name in names else None


def merged_source(source: Callable[[str], torch.Tensor | None],
                  deltas: dict[str, torch.Tensor]) -> Callable[[str], torch.Tensor | None]:
    """``source`` with ``deltas`` (parameter name -> float32 tensor: a merged LoRA's, exactly) added: the merged
    weights in float32, whatever dtype the model runs in."""

    def get(name: str) -> torch.Tensor | None:
        w = source(name)
        return w if w is None or name not in deltas else w.float() + deltas[name]

    return get


def dense_linears(model: torch.nn.Module) -> int:
    """Put plain ``nn.Linear`` layers (the dense weights) back where :func:`use_q4_steps` put :class:`Q4Linear`
    ones and :func:`~agentkit.models.packed.use_packed_weights` :class:`~agentkit.models.packed.PackedLinear` ones,
    before weights are changed (an adapter merged in: a 4-bit or packed copy would be stale); returns how many."""
    swaps = [(name, mod) for name, mod in model.named_modules() if isinstance(mod, (ShortPassLinear, PackedLinear))]
    for name, mod in swaps:
        bias = getattr(mod, "bias", None)
        lin = torch.nn.Linear(mod.in_features, mod.out_features, bias=bias is not None, device="meta")
        lin.weight, lin.bias = mod.weight, bias
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, attr, lin)
    return len(swaps)
