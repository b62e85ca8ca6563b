"""BFCL: agentkit's modes (each in a JSON style) and the peers, on the same items, in one interleaved run.

    python evals/peers.py --data evals/data/bfcl --limit 20 \
        --modes ar-constrained:compact,ar-constrained:spaced,verify:spaced \
        --peers outlines-xgrammar,outlines-llguidance,outlines-core,llama-cpp --threads 1 \
        --out evals/results/bfcl/bfcl_peers_limit20.json

A mode is ``MODE[:STYLE[:PROMPT[:DTYPE[:WIDTH[:BACKEND[:ATTENTION[:Q4[:GREEDY[:PREPACK[:ROWS]]]]]]]]]]`` (an ``agentkit eval`` mode, a JSON
style of :mod:`agentkit.constrain.canonical` -- empty: the compiler's default --, a system prompt of
:data:`agentkit.evals.bfcl.PROMPTS`, ``default`` unless given, then ``EngineConfig`` fields, each ``--dtype``,
none, ``--backend``, ``auto`` and ``auto`` unless given: dtype, ``pass_width``, backend, attention, q4_steps; one
engine per distinct set. ``verify::::8`` is verify on fixed-shape passes of 8, ``ar-constrained:::::llama.cpp``
runs on the llama.cpp backbone, ``ar-constrained::::::sdpa:off`` as the engine ran before the decode-step attention
and the 4-bit short passes; GREEDY is ``DecodeConfig.greedy``, ``byte`` unless given:
``ar-constrained:spaced-schema-order:::::::token`` decodes as agentkit did before byte greedy and required-first
members; PREPACK is ``EngineConfig.prepack``, ``auto`` unless given: ``ar-constrained:::::::::off`` runs without
the prepacked weights; ROWS is ``EngineConfig.row_exact``, ``auto`` unless given:
``verify::::::::::off`` verifies in one pass per block, as before the row-exact passes; a ``+FIELD=VALUE`` suffix sets
a decoding field: ``ar-constrained+copy_bias=0`` decodes without the copy prior of :mod:`agentkit.engine.copy`). ``--shard K/N`` runs items K, K+N, K+2N, ... of the list (two processes on two cores; merge their
files with ``evals/merge_results.py``). Items run item-major and the order of the variants rotates per item, as in
``agentkit eval``, and each agentkit row starts from an empty prefix cache (a peer has none to reuse). agentkit
rows use the runner's decoding settings; their ``latency_ms`` here adds the template's
compile (``compile_ms``: schema compile + token DFAs), as a peer's includes its own. Peers get 256 new tokens at
most (``--peer-max-new-tokens``). Results (per-variant summaries with the same keys as ``agentkit eval``, and
every row) are rewritten after each item (``"partial": true`` until the end).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path


def _agentkit_row(engine, ctx, item, mode: str, style: str | None, prompt: str) -> dict:
    from agentkit.evals import bfcl

    prepared = bfcl.compile_call(item, style=style)
    template = prepared.template()
    res = ctx.generate(engine, bfcl.build_prompt(item, prompt), mode, template=template)
    getattr(engine, "_constraints", {}).pop(id(template), None)
    stats = res.stats.to_dict()
    stats["latency_ms"] = round(stats["latency_ms"] + stats.get("compile_ms", 0.0), 3)
    return {"category": item.category, **bfcl.evaluate(item, res.text, res.value), "text": res.text[:2000],
            "finish_reason": res.stats.finish_reason, "stats": stats}


def _variant(name: str) -> tuple[str, str, str, tuple[str, int | None, str, str, str, str, str], dict]:
    """``MODE[:STYLE[:PROMPT[:DTYPE[:WIDTH[:BACKEND[:ATTENTION[:Q4[:GREEDY[:PREPACK[:ROWS]]]]]]]]]][+FIELD=VALUE...]``:
    mode, style, prompt (empty when missing), the engine key (dtype, width or None, backend, attention, q4_steps,
    prepack, row_exact; empty strings where missing) and the decoding settings of the run context (``greedy``,
    ``byte`` when missing, and each ``+FIELD=VALUE``: ``+copy_bias=2`` decodes with ``DecodeConfig.copy_bias=2``)."""
    from agentkit.config import GREEDY

    head, *extra = name.split("+")
    parts = head.split(":")
    if len(parts) > 11:
        raise SystemExit(f"mode {name!r}: at most 11 ':'-separated fields")
    parts += [""] * (11 - len(parts))
    try:
        width = int(parts[4]) if parts[4] else None
    except ValueError:
        raise SystemExit(f"mode {name!r}: WIDTH must be an integer, got {parts[4]!r}") from None
    if parts[8] and parts[8] not in GREEDY:
        raise SystemExit(f"mode {name!r}: GREEDY must be 'byte' or 'token', got {parts[8]!r}")
    settings: dict = {"greedy": parts[8] or "byte"}
    for e in extra:
        field, eq, value = e.partition("=")
        if field not in CONTEXT_FIELDS or not eq:
            raise SystemExit(f"mode {name!r}: +{e!r} must be +FIELD=VALUE with FIELD one of {sorted(CONTEXT_FIELDS)}")
        try:
            settings[field] = CONTEXT_FIELDS[field](value)
        except ValueError:
            raise SystemExit(f"mode {name!r}: {field} must be a {CONTEXT_FIELDS[field].__name__}, got {value!r}") from None
    key = (parts[3], width, parts[5], parts[6], parts[7], parts[9], parts[10])
    return parts[0], parts[1], parts[2], key, settings


def _flag(value: str) -> bool:
    if value not in ("0", "1", "true", "false"):
        raise ValueError(value)
    return value in ("1", "true")


_flag.__name__ = "flag (0 or 1)"
CONTEXT_FIELDS = {"copy_bias": float, "copy_from": str, "copy_numbers": _flag}  # EvalContext fields a variant sets: +FIELD=VALUE


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent / "data" / "bfcl"))
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--modes", default="ar-constrained:compact,ar-constrained:spaced,verify:spaced")
    ap.add_argument("--peers", default="outlines-xgrammar")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="auto", help="agentkit engine dtype (EngineConfig.dtype)")
    ap.add_argument("--backend", default="torch",
                    help="agentkit engine backend (torch: the same safetensors the Outlines peers run)")
    ap.add_argument("--peer-max-new-tokens", type=int, default=256)
    ap.add_argument("--out", default="evals/results/bfcl_peers.json")
    ap.add_argument("--shard", default="0/1", help="K/N: every N-th item from the K-th")
    ap.add_argument("--from-item", type=int, default=0,
                    help="skip this shard's first N items (another process took them: a slow shard's tail on a "
                         "freed core)")
    args = ap.parse_args(argv)
    k, _, n = args.shard.partition("/")
    shard, shards = int(k), int(n or 1)
    if not 0 <= shard < shards:
        ap.error(f"--shard {args.shard!r}: K must be in 0..N-1")

    import torch

    from agentkit.config import NO_LORA, EngineConfig
    from agentkit.engine.engine import Engine
    from agentkit.evals import bfcl
    from agentkit.evals.peers import load_peers, run_peer
    from agentkit.evals.report import environment, markdown_table, summarize, write_json_atomic
    from agentkit.evals.runner import EvalContext
    from agentkit.evals.timing import cold_prompts
    from agentkit.models.loader import resolve_dtype

    torch.set_num_threads(args.threads)
    variants = [m.strip() for m in args.modes.split(",") if m.strip()]
    # the peers run the checkpoint's weights as loaded, so agentkit does too (no loop adapter: lora="none")
    ecfg = EngineConfig(threads=args.threads, dtype=args.dtype, backend=args.backend, lora=NO_LORA)
    engines: dict[tuple, Engine] = {}

    def engine_for(key: tuple[str, int | None, str, str, str, str, str]) -> Engine:
        dtype, width, backend, attention, q4, prepack, rows = key
        cfg = EngineConfig(threads=args.threads, dtype=dtype or args.dtype, backend=backend or args.backend,
                           pass_width=width, attention=attention or "auto", q4_steps=q4 or "auto",
                           prepack=prepack or "auto", row_exact=rows or "auto", lora=NO_LORA)
        k = (cfg.dtype, cfg.pass_width, cfg.backend, cfg.attention, cfg.q4_steps, cfg.prepack, cfg.row_exact)
        if k not in engines:
            engines[k] = Engine(cfg)
        return engines[k]

    for v in variants:
        engine_for(_variant(v)[3])
    peers = load_peers([p.strip() for p in args.peers.split(",") if p.strip()], threads=args.threads,
                       log=lambda m: print(m, file=sys.stderr))
    names = variants + list(peers)
    items = bfcl.load_bfcl(Path(args.data), args.limit)[shard::shards][args.from_item:]
    ctx = EvalContext(seed=0)
    result: dict = {"suite": "bfcl", "data": args.data, "limit": args.limit, "shard": args.shard,
                    "from_item": args.from_item, "variants": names,
                    "engine_dtype": resolve_dtype(ecfg.dtype, ecfg.device), "engine_backend": ecfg.backend,
                    "peer_max_new_tokens": args.peer_max_new_tokens,
                    "env": environment("python evals/peers.py " + " ".join(argv or sys.argv[1:])),
                    "partial": True, "items_done": 0, "items_total": len(items), "modes": {}, "items": []}
    rows: list[dict] = result["items"]
    out = Path(args.out)
    t_run = time.perf_counter()
    for i, item in enumerate(items):
        for name in names[i % len(names):] + names[: i % len(names)]:
            t0 = time.perf_counter()
            try:
                if name in peers:
                    row = run_peer(peers[name], item, args.peer_max_new_tokens)
                else:
                    mode, style, prompt, key, settings = _variant(name)
                    engine = engine_for(key)
                    cold_prompts(engine)
                    row = _agentkit_row(engine, replace(ctx, **settings), item, mode, style or None,
                                        prompt or "default")
            except Exception as e:  # noqa: BLE001 -- recorded, counted, the run goes on
                row = {"success": False, "valid": False, "error": f"{type(e).__name__}: {e}",
                       "error_type": "exception", "stats": None}
            rows.append({"id": item.id, "mode": name, **row, "wall_ms": round(1000 * (time.perf_counter() - t0), 2)})
        result["items_done"] = i + 1
        result["modes"] = {m: summarize([r for r in rows if r["mode"] == m]) for m in names}
        result["wall_s"] = round(time.perf_counter() - t_run, 1)
        write_json_atomic(out, result)
    result["partial"] = False
    write_json_atomic(out, result)
    print(markdown_table(result))
    return result


if __name__ == "__main__":
    main()
