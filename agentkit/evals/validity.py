"""Schema validity under random weights: do the constraints alone make every output valid?

A fixed sample of MaskBench schemas (the first ``n`` files ordered by a hash of their name, so the sample is stable
and spread over every category) is compiled; each schema that compiles is decoded by *random-weight* tiny models in
every mode, sampling at temperature 1 (verify: greedy), and each output is checked with ``jsonschema`` (format
checks on). With no model skill to lean on, any hole in the compiler, the token runtime, the seams between pinned
text and slots, the canvas layout or the length budget shows up as an invalid output.

Modes (each on its own tiny model, seeded per schema):

- ``ar``: constrained AR with jump-forward (random 2-layer Llama);
- ``diffusion``: bidirectional canvas, absorbing-mask sampler (random Llama with a mask token, canvas attention
  bidirectional: positions are decided out of order, the hardest case for the constraint walk);
- ``diffusion-causal``: causal canvas, Jacobi sampler;
- ``diffusion-gemma``: transformers' ``DiffusionGemmaForBlockDiffusion`` (random), entropy-bound uniform sampler;
- ``verify``: canvas drafts checked by one causal pass (greedy).

``agentkit eval validity --data ../shared/data/maskbench --limit 200 --out validity.json`` runs the whole sample;
CI runs a slice (``tests/evals/test_validity.py``).
"""

from __future__ import annotations

import hashlib
import json
import signal
import statistics
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .runner import register_suite

VALIDITY_MODES = ("ar", "diffusion", "diffusion-causal", "diffusion-gemma", "verify")
SAMPLE = 200
BUDGET_SLACK = 96  # tokens beyond the template's shortest completion: room for random choices, closed in time
TIME_LIMIT_S = 300  # a large schema (1,000+ tokens) on a loaded CPU takes a minute


class _Timeout(Exception):
    pass


def _raise_timeout(*_) -> None:
    raise _Timeout


@contextmanager
def _time_limit(seconds: int):
    """SIGALRM-based limit (main thread, Unix); elsewhere no limit."""
    try:
        old = signal.signal(signal.SIGALRM, _raise_timeout)
    except (ValueError, AttributeError):  # not the main thread / no SIGALRM
        yield
        return
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def sample_files(data_dir: Path, n: int | None) -> list[Path]:
    """The first ``n`` MaskBench files ordered by the SHA-1 of their name: stable, and spread over categories."""
    data_dir = Path(data_dir)
    if (data_dir / "maskbench").is_dir() and not any(data_dir.glob("*.json")):
        data_dir = data_dir / "maskbench"
    files = sorted(data_dir.glob("*.json"), key=lambda p: hashlib.sha1(p.name.encode()).hexdigest())
    if not files:
        raise FileNotFoundError(f"no MaskBench .json files in {data_dir}")
    return files[: n or SAMPLE]


def engines(seed: int = 0) -> dict[str, Any]:
    """One random-weight engine per mode family."""
    from ..engine.engine import Engine
    from ..models.loader import wrap
    from ..models.tiny import tiny_diffusion_gemma, tiny_llama

    masked = tiny_llama(seed + 1, mask_token=True)
    masked = wrap(masked.model, masked.tokenizer, name="tiny-llama-mask-bidirectional",
                  mask_token_id=masked.mask_token_id, bidirectional=True)
    plain = Engine.from_loaded(tiny_llama(seed))
    return {"ar": plain, "diffusion-causal": plain, "verify": plain, "diffusion": Engine.from_loaded(masked),
            "diffusion-gemma": Engine.from_loaded(tiny_diffusion_gemma(seed, canvas_length=16))}


def _config(mode: str, budget: int, seed: int):
    from ..config import DecodeConfig

    if mode == "verify":
        return DecodeConfig(mode="verify", max_new_tokens=budget, canvas_length=16)
    if mode == "ar":
        return DecodeConfig(mode="ar", max_new_tokens=budget, temperature=1.0, seed=seed)
    sampler = {"diffusion": "mask", "diffusion-causal": "jacobi", "diffusion-gemma": "auto"}[mode]
    return DecodeConfig(mode="diffusion", max_new_tokens=budget, temperature=1.0, seed=seed, canvas_length=16,
                        sampler=sampler, max_denoising_steps=8)


def _validator(schema):
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def check_schema(path: Path, modes: list[str], engs: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """Compile one schema and decode it in every mode; one row per mode (or one ``compiled: False`` row)."""
    from ..constrain.compiler import compile_schema_uncached
    from ..errors import UnsupportedSchemaError

    schema = json.loads(path.read_text())["schema"]
    try:
        tpl = compile_schema_uncached(schema)
    except UnsupportedSchemaError as e:
        return {"file": path.name, "compiled": False, "error": f"{type(e).__name__}: {e.keyword} at {e.pointer}"}
    except Exception as e:  # noqa: BLE001 -- reported, never hidden
        return {"file": path.name, "compiled": False, "error": f"{type(e).__name__}: {str(e)[:200]}"}
    validator = _validator(schema)
    rows = []
    for mode in modes:
        eng = engs[mode]
        row: dict[str, Any] = {"mode": mode, "valid": False, "error": None}
        t0 = time.perf_counter()
        try:
            with _time_limit(TIME_LIMIT_S):
                c = eng.constraint(tpl)
                budget = int(c.min_tokens(c.start())) + BUDGET_SLACK
                res = eng.generate("Write the JSON value.", _config(mode, budget, seed), template=tpl, raw=True)
            row.update(tokens=len(res.token_ids), budget=budget, finish=res.stats.finish_reason,
                       forwards=res.stats.forwards)
            if res.stats.finish_reason != "template":
                row["error"] = f"ended by {res.stats.finish_reason!r}: {res.text[-120:]!r}"
            else:
                errors = sorted(validator.iter_errors(res.value), key=lambda e: list(e.absolute_path))
                row["valid"] = not errors
                if errors:
                    row["error"] = f"{errors[0].message[:200]} at /{'/'.join(map(str, errors[0].absolute_path))}"
                    row["text"] = res.text[:400]
        except _Timeout:
            row["error"] = f"timeout: over {TIME_LIMIT_S} s"
        except Exception as e:  # noqa: BLE001 -- an engine bug on this schema: a failure, reported
            row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        row["seconds"] = round(time.perf_counter() - t0, 3)
        rows.append(row)
    return {"file": path.name, "compiled": True, "rows": rows}


def run_validity(data: Path, modes: list[str] | None = None, limit: int | None = None, seed: int = 0,
                 out: Path | None = None, progress: bool = True, engs: dict[str, Any] | None = None) -> dict:
    modes = [m for m in (modes or VALIDITY_MODES)]
    bad = [m for m in modes if m not in VALIDITY_MODES]
    if bad:
        raise ValueError(f"validity suite has no mode(s) {bad}; modes: {', '.join(VALIDITY_MODES)}")
    files = sample_files(data, limit)
    engs = engs or engines(seed)
    results = []
    t0 = time.perf_counter()
    bar = None
    if progress:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(TextColumn("validity"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[s]}"),
                       TimeElapsedColumn())
        bar.start()
        task = bar.add_task("validity", total=len(files), s="")
    try:
        for f in files:
            results.append(check_schema(f, modes, engs, seed))
            if bar is not None:
                bad_n = sum(not r["valid"] for x in results for r in x.get("rows", ()))
                bar.update(task, advance=1, s=f"invalid outputs so far: {bad_n}")
            if out is not None:
                _write(out, summarize(results, modes, partial=True, seconds=time.perf_counter() - t0))
    finally:
        if bar is not None:
            bar.stop()
    res = summarize(results, modes, partial=False, seconds=time.perf_counter() - t0)
    if out is not None:
        _write(out, res)
    return res


def summarize(results: list[dict], modes: list[str], *, partial: bool, seconds: float) -> dict:
    compiled = [r for r in results if r["compiled"]]
    by_mode: dict[str, dict] = {}
    for m in modes:
        rows = [row for r in compiled for row in r["rows"] if row["mode"] == m]
        toks = [row["tokens"] for row in rows if "tokens" in row]
        by_mode[m] = {"n": len(rows), "valid": sum(row["valid"] for row in rows),
                      "valid_rate": round(sum(row["valid"] for row in rows) / len(rows), 4) if rows else None,
                      "output_tokens_mean": round(statistics.fmean(toks), 1) if toks else None,
                      "seconds_mean": round(statistics.fmean(row["seconds"] for row in rows), 3) if rows else None}
    failures = [{"file": r["file"], **row} for r in compiled for row in r["rows"] if not row["valid"]]
    return {"suite": "validity", "model": "random-weight tiny models", "partial": partial, "schemas": len(results),
            "compiled": len(compiled), "seconds": round(seconds, 1), "modes": by_mode, "failures": failures,
            "not_compiled": [{"file": r["file"], "error": r["error"]} for r in results if not r["compiled"]]}


def _write(path: Path, obj: dict) -> None:
    from .report import write_json_atomic

    write_json_atomic(Path(path), obj)


def _suite(*, data: Path, modes, limit, engine, seed, out) -> dict:
    return run_validity(data, list(modes) or list(VALIDITY_MODES), limit, seed, out)


register_suite("validity", _suite)
