"""Cost of one forward by positions, and AR tokens/s, for each backend and dtype, in one process.

For every backend (torch float32, torch bfloat16 with and without its 4-bit short passes, the default dtype's torch
engine with ``row_exact="off"`` (every pass in one piece), llama.cpp on the Q4_1 GGUF when llama-cpp-python is installed,
and the default ``EngineConfig()``: ``auto``, whose passes run on torch and whose free-text AR replies go to
llama.cpp when its cost curve says so; its AR row names the backbone that ran):

- ms per forward by positions (1, 2, 4, 8, 16, 32, 64) after a ~200-token prefix: a causal pass with logits at
  every position (a verify block's shape), cropped away afterwards; the median over ``--repeats`` rounds, the
  rounds interleaved over positions and backends so that load drifts hit every row alike;
- ms to encode a 512-token prompt into an empty cache (a request's prefill), interleaved the same way;
- AR decoding tokens/s of ``Engine.generate(mode="ar")`` on the default model (free text, greedy): output tokens
  after the first over the time after prefill;
- the reference: plain llama.cpp (``llama_cpp.Llama.generate``, greedy) on the same GGUF, prompt and threads,
  tokens/s over the same span (tokens after the first).

    python evals/bench_forward.py --threads 1 --json evals/results/engine/bench_forward.json

``--json FILE`` writes one object per backend and dtype, the default backend first::

    {"backend": ..., "dtype": ..., "threads": ..., "ms_by_positions": {"1": ms, ...}, "prompt_ms": {"512": ms},
     "ar_tokens_per_s": ..., "llama_cpp_tokens_per_s": ...}
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.engine.llama_cpp import available, choose_backend
from agentkit.models.loader import resolve_dtype
from agentkit.models.q4 import Q4Linear

POSITIONS = (1, 2, 4, 8, 16, 32, 64)
PROMPT_TOKENS = 512  # a prefill as long as a BFCL prompt with a few functions
PROMPT = ("Write a detailed, step by step explanation of how a hash map works, with its collision handling, "
          "resizing and the cost of each operation.")


def prefix_ids(engine: Engine, n: int) -> list[int]:
    text = " ".join(["The history of computing spans calculators, mainframes and phones."] * 40)
    return engine.tokenizer.encode(text, add_special_tokens=False)[:n]


def time_forward(engine: Engine, cache, ids: list[int], p: int) -> float:
    bb = engine.backbone
    t0 = time.perf_counter()
    bb.denoise(ids[:p], cache, rows=list(range(p)), bidirectional=False)
    return 1000 * (time.perf_counter() - t0)


def forward_table(engines: dict[str, Engine], prefix: int, repeats: int) -> dict[str, dict[str, float]]:
    caches, ids = {}, {}
    for key, eng in engines.items():
        pre = prefix_ids(eng, prefix + 64)
        caches[key] = eng.backbone.new_cache()
        eng.backbone.encode(pre[:prefix], caches[key])
        ids[key] = pre[prefix:]
        for p in POSITIONS:  # warm-up
            time_forward(eng, caches[key], ids[key], p)
    samples: dict[str, dict[int, list[float]]] = {k: {p: [] for p in POSITIONS} for k in engines}
    for _ in range(repeats):
        for p in POSITIONS:
            for key, eng in engines.items():
                samples[key][p].append(time_forward(eng, caches[key], ids[key], p))
    return {k: {str(p): round(statistics.median(v[p]), 2) for p in POSITIONS} for k, v in samples.items()}


def prompt_table(engines: dict[str, Engine], tokens: int, repeats: int) -> dict[str, float]:
    """ms to encode a ``tokens``-long prompt into an empty cache (a request's prefill), per engine: the median of
    ``repeats`` rounds interleaved over the engines."""
    samples: dict[str, list[float]] = {k: [] for k in engines}
    for r in range(repeats + 1):  # the first round warms up
        for key, eng in engines.items():
            ids = prefix_ids(eng, tokens)
            t0 = time.perf_counter()
            eng.backbone.encode(ids, eng.backbone.new_cache(tokens))
            if r:
                samples[key].append(1000 * (time.perf_counter() - t0))
    return {k: round(statistics.median(v), 1) for k, v in samples.items()}


def bandwidth_gb_s(threads: int, mb: int = 512, repeats: int = 5) -> float:
    """Read bandwidth: the best of ``repeats`` sums over a ``mb``-MB float32 tensor (too big for any cache)."""
    x = torch.ones(mb * 2**20 // 4)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t0)
    return mb * 2**20 / best / 1e9


def weight_bytes(engine: Engine) -> int:
    """Bytes of weights a one-position forward reads: every parameter once (the tied embedding as the output head;
    its row lookups are negligible; 4-bit layers: their 4-bit copy), plus the fp32 head copy a bf16 model keeps;
    the GGUF's size for llama.cpp."""
    bb = engine.backbone
    if engine.backend == "llama.cpp":
        from agentkit.models.default import gguf_path

        return gguf_path().stat().st_size
    n = sum(p.numel() * p.element_size() for p in engine.lm.model.parameters())
    for m in engine.lm.model.modules():  # a 1-position pass reads the 4-bit copy instead of the dense weight
        if isinstance(m, Q4Linear):
            n -= m.weight.numel() * m.weight.element_size()
            n += sum(b.numel() * b.element_size() for b in (m.packed, m.scales))
    head_w = getattr(bb, "_head_w", None)
    if head_w is not None:
        n += head_w.numel() * head_w.element_size() - bb.head.weight.numel() * bb.head.weight.element_size()
    return n


def ar_tokens_per_s(engine: Engine, max_new: int) -> tuple[float, int, str]:
    """Free-text AR tokens/s after prefill, output tokens, and the backbone that ran it (auto may pick per request)."""
    res = engine.generate(PROMPT, DecodeConfig(mode="ar", max_new_tokens=max_new))
    s = res.stats
    decode_s = (s.latency_ms - s.prefill_ms) / 1000
    return (s.output_tokens - 1) / decode_s, s.output_tokens, s.backend


_LLM = None


def llama_reference(prompt_ids: list[int], max_new: int, threads: int | None, eos: set[int]) -> tuple[float, int]:
    """Plain llama.cpp: ``Llama.generate`` greedy on the same GGUF; tokens after the first per second."""
    from agentkit.engine.llama_cpp import plain_llama
    from agentkit.models.default import gguf_path

    global _LLM
    if _LLM is None:
        kw = {"n_threads": threads, "n_threads_batch": threads} if threads else {}
        _LLM = plain_llama(gguf_path(), n_ctx=2048, verbose=False, **kw)
    llm = _LLM
    n, t1 = 0, 0.0
    for tok in llm.generate(prompt_ids, temp=0.0, top_k=1, reset=True):
        if tok in eos:
            break
        n += 1
        if n == 1:
            t1 = time.perf_counter()
        if n >= max_new:
            break
    return (n - 1) / (time.perf_counter() - t1), n


def bfcl_table(engines: dict, data: Path, limit: int, modes: list[str], threads: int) -> dict:
    """Success, p50 latency and forwards per request on the first ``limit`` questions of each BFCL file, per
    backend and mode (the engines in turn, in one process)."""
    import tempfile

    from agentkit.evals.runner import run_eval

    out = {}
    for key, eng in engines.items():
        with tempfile.TemporaryDirectory() as tmp:
            res = run_eval("bfcl", data, modes, limit, engine=eng, out=Path(tmp) / "bfcl.json", threads=threads,
                           progress=False, quiet=True)
        out[key] = {m: {f: res["modes"][m][f] for f in ("n", "task_success", "latency_ms_p50", "forwards_mean")}
                    for m in modes}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prefix", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--ar-tokens", type=int, default=64)
    ap.add_argument("--ar-repeats", type=int, default=5, help="AR rounds (the median is reported)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--bfcl", type=Path, default=None, help="BFCL data folder: also run BFCL per backend")
    ap.add_argument("--bfcl-limit", type=int, default=10, help="questions per BFCL file")
    ap.add_argument("--bfcl-modes", default="ar-constrained,verify")
    ap.add_argument("--skip-forward", action="store_true", help="only the BFCL table")
    ap.add_argument("--dtype", default=None,
                    help="only the rows whose dtype starts with this (float32: what a CPU without native bf16 runs)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    configs = {("torch", "float32"): EngineConfig(backend="torch", dtype="float32", threads=args.threads),
               ("torch", "bfloat16"): EngineConfig(backend="torch", dtype="bfloat16", threads=args.threads),
               ("torch", "bfloat16, prepack=off"): EngineConfig(backend="torch", dtype="bfloat16", prepack="off",
                                                                 threads=args.threads),
               ("torch", "bfloat16, q4_steps=off"): EngineConfig(backend="torch", dtype="bfloat16", q4_steps="off",
                                                                  threads=args.threads)}
    # the default's torch engine with every pass in one piece (EngineConfig.row_exact="off": longer passes on the
    # dense weights, not pieces of 8)
    configs[("torch", f"{resolve_dtype('auto')}, row_exact=off")] = EngineConfig(backend="torch", row_exact="off",
                                                                               threads=args.threads)
    if available():
        configs[("llama.cpp", "q4_1")] = EngineConfig(backend="llama.cpp", threads=args.threads)
    default = EngineConfig(threads=args.threads)
    default_key = (("llama.cpp", "q4_1") if choose_backend(default) == "llama.cpp"
                   else ("torch", resolve_dtype(default.dtype, default.device)))
    if default_key[0] == "torch" and available():  # auto: torch passes, free-text AR on llama.cpp when it pays
        default_key = ("auto", default_key[1])
        configs[default_key] = default
    built = {}
    if default_key[0] == "torch" and configs[default_key] != default:  # an explicit dtype is not auto's engine
        engine = Engine(default)
        default_key = ("torch", engine.backbone.curve_dtype)  # (auto's float32 takes the 4-bit passes)
        configs[default_key], built[default_key] = default, engine
    configs = {k: c for k, c in configs.items()
               if k == default_key or args.dtype is None or k[1].startswith(args.dtype)}
    engines = {k: built.get(k) or Engine(c) for k, c in configs.items()}
    keys = [default_key] + [k for k in engines if k != default_key]
    if args.bfcl is not None:
        modes = args.bfcl_modes.split(",")
        table = bfcl_table({k: engines[k] for k in keys}, args.bfcl, args.bfcl_limit, modes, args.threads)
        print(f"BFCL, first {args.bfcl_limit} questions of each file, threads={args.threads}")
        print("| backend | dtype | mode | n | success | p50 ms | forwards |\n|---|---|---|---|---|---|---|")
        for k in keys:
            for m in modes:
                r = table[k][m]
                print(f"| {k[0]} | {k[1]} | {m} | {r['n']} | {r['task_success']:.3f} | {r['latency_ms_p50']:.0f} | "
                      f"{r['forwards_mean']:.1f} |")
        if args.json:
            args.json.with_suffix(".bfcl.json").write_text(json.dumps(
                [{"backend": k[0], "dtype": k[1], "threads": args.threads, "modes": table[k]} for k in keys], indent=1))
        if args.skip_forward:
            return
    table = forward_table({k: engines[k] for k in keys}, args.prefix, args.repeats)
    prompts = prompt_table({k: engines[k] for k in keys}, PROMPT_TOKENS, max(3, args.repeats // 2))
    # AR rounds interleaved (each backend, then plain llama.cpp, per round) so that load drifts hit all alike;
    # the median round of each is reported
    runs: dict = {k: [] for k in keys}
    refs: list[tuple[float, int]] = []
    prompt_ids = engines[keys[0]].encode_prompt(PROMPT)
    for k in keys:  # warm-up (auto loads its llama.cpp backbone on the first free-text request)
        ar_tokens_per_s(engines[k], 4)
    for _ in range(args.ar_repeats):
        for k in keys:
            runs[k].append(ar_tokens_per_s(engines[k], args.ar_tokens))
        if available():
            refs.append(llama_reference(prompt_ids, args.ar_tokens, args.threads, set(engines[keys[0]].lm.eos_ids)))
    ar = {k: sorted(v)[len(v) // 2] for k, v in runs.items()}
    ref, ref_n = sorted(refs)[len(refs) // 2] if refs else (None, 0)
    gbs = bandwidth_gb_s(args.threads)
    floor = {k: weight_bytes(engines[k]) / gbs / 1e6 for k in keys}  # ms to read the weights once
    rows = [{"backend": k[0], "dtype": k[1], "threads": args.threads, "ms_by_positions": table[k],
             "prompt_ms": {str(PROMPT_TOKENS): prompts[k]},
             "weight_mb": round(weight_bytes(engines[k]) / 1e6, 1), "bandwidth_floor_ms": round(floor[k], 2),
             "ar_tokens_per_s": round(ar[k][0], 2), "ar_tokens": ar[k][1], "ar_backend": ar[k][2],
             "llama_cpp_tokens_per_s": None if ref is None else round(ref, 2), "llama_cpp_tokens": ref_n,
             "default": k == default_key} for k in keys]
    print(f"threads={args.threads} prefix={args.prefix} repeats={args.repeats} cpu={platform.processor() or '?'} "
          f"read bandwidth {gbs:.1f} GB/s")
    for r in rows:
        print(f"  {r['backend']} {r['dtype']}: {r['weight_mb']} MB of weights per forward -> bandwidth floor "
              f"{r['bandwidth_floor_ms']} ms; 1-position forward {r['ms_by_positions']['1']} ms "
              f"({r['ms_by_positions']['1'] / r['bandwidth_floor_ms']:.1f}x the floor)")
    print("| backend | dtype | " + " | ".join(f"{p} pos ms" for p in POSITIONS)
          + f" | 8/1 | {PROMPT_TOKENS}-token prompt ms | AR tok/s | vs llama.cpp |")
    print("|---|---|" + "---|" * (len(POSITIONS) + 4))
    for r in rows:
        ms = r["ms_by_positions"]
        vs = f"{r['ar_tokens_per_s'] / ref:.2f}x" if ref else "n/a"
        ran = f" (AR ran on {r['ar_backend']})" if r["backend"] == "auto" else ""
        print(f"| {r['backend']}{' (default)' if r['default'] else ''}{ran} | {r['dtype']} | "
              + " | ".join(f"{ms[str(p)]:.1f}" for p in POSITIONS)
              + f" | {ms['8'] / ms['1']:.2f} | {r['prompt_ms'][str(PROMPT_TOKENS)]:.0f} | {r['ar_tokens_per_s']:.1f} ({r['ar_tokens']} tok) | {vs} |")
    if ref is not None:
        print(f"| plain llama.cpp (Llama.generate) | q4_1 | | | | | | | | | | {ref:.1f} ({ref_n} tok) | 1.00x |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
