"""llama.cpp pass cost by GGUF type: the default model's Q4_1 GGUF requantized (Q4_0, Q8_0, BF16, F16), 1 thread.

For each type: a 600-token prefill, ms per pass of 1..32 positions after a 200-token prefix (median of 7), the
8/1 ratio, and 64 AR steps as tokens/s. Requantized files go to ``~/.cache/agentkit/quant`` (made once, ~1 s
each). Asks whether any GGUF type gives llama.cpp an 8-position pass near the cost of a 1-token one.

    python evals/bench_gguf_quant.py            # all types
    python evals/bench_gguf_quant.py q4_1 q8_0  # some

Measured on the idle 2-core EPYC (evals/results/bench_gguf_quant.txt): no type does. A 1-token pass of this
135M model is compute-bound on one core (~55 GFLOP/s), so 8 positions cost 3-7x one: Q4_0 4.9x (and a 600-token
prefill 2.8x faster than Q4_1's, AR 1.5x faster), BF16 3.2x.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import time
from pathlib import Path

import llama_cpp as L

from agentkit.models.default import gguf_path

TYPES = {"q4_1": None, "q4_0": L.LLAMA_FTYPE_MOSTLY_Q4_0, "q8_0": L.LLAMA_FTYPE_MOSTLY_Q8_0,
         "bf16": L.LLAMA_FTYPE_MOSTLY_BF16, "f16": L.LLAMA_FTYPE_MOSTLY_F16}
POSITIONS = (1, 2, 4, 8, 16, 32)


def gguf_of(name: str) -> Path:
    """The default model's GGUF in type ``name`` (q4_1: the shipped file; others requantized once)."""
    src, ftype = gguf_path(), TYPES[name]
    if ftype is None:
        return src
    out = Path(os.path.expanduser("~/.cache/agentkit/quant"))
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"smollm2-135m-{name}.gguf"
    if not path.exists():
        p = L.llama_model_quantize_default_params()
        p.ftype, p.allow_requantize, p.nthread = ftype, True, 1
        if L.llama_model_quantize(str(src).encode(), str(path).encode(), ctypes.byref(p)) != 0:
            raise RuntimeError(f"llama_model_quantize to {name} failed")
    return path


class Passes:
    """One llama.cpp context on one GGUF, 1 thread; ``run(n, pos0)`` times a pass of n positions."""

    def __init__(self, path: Path) -> None:
        self.model = L.llama_model_load_from_file(str(path).encode(), L.llama_model_default_params())
        cp = L.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads, cp.n_threads_batch, cp.no_perf = 4096, 1024, 1024, 1, 1, True
        self.ctx = L.llama_init_from_model(self.model, cp)
        self.mem = L.llama_get_memory(self.ctx)
        self.batch = L.llama_batch_init(1024, 0, 1)

    def run(self, n: int, pos0: int, keep: bool = False) -> float:
        b = self.batch
        for j in range(n):
            b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = 100 + (j * 7) % 5000, pos0 + j, 1, 1
            b.seq_id[j][0] = 0
        b.n_tokens = n
        t = time.perf_counter()
        if L.llama_decode(self.ctx, b) != 0:
            raise RuntimeError("llama_decode failed")
        dt = time.perf_counter() - t
        if not keep:
            L.llama_memory_seq_rm(self.mem, 0, pos0, -1)
        return dt

    def close(self) -> None:
        L.llama_batch_free(self.batch)
        L.llama_free(self.ctx)
        L.llama_model_free(self.model)


def measure(name: str) -> str:
    path = gguf_of(name)
    p = Passes(path)
    prefill = p.run(600, 0)
    L.llama_memory_seq_rm(p.mem, 0, 0, -1)
    p.run(200, 0, keep=True)
    ms = {n: 1000 * sorted(p.run(n, 200) for _ in range(7))[3] for n in POSITIONS}
    t = time.perf_counter()
    for k in range(64):
        p.run(1, 200 + k, keep=True)
    ar = 64 / (time.perf_counter() - t)
    p.close()
    return (f"{name:5s} size {path.stat().st_size / 1e6:6.1f}MB prefill600 {prefill * 1000:7.1f}ms "
            + " ".join(f"{n}:{v:6.1f}" for n, v in ms.items()) + f"  8/1={ms[8] / ms[1]:.2f}  AR {ar:5.1f} tok/s")


def main() -> None:
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
    L.llama_backend_init()
    for name in sys.argv[1:] or list(TYPES):
        print(measure(name), flush=True)


if __name__ == "__main__":
    main()
