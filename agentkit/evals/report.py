"""Eval reports: per-mode summaries from item rows, ratios against the baseline, the markdown table, and the JSON
output (atomic writes, the environment a run records)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BASELINE = "ar-constrained"


# -- summaries ----------------------------------------------------------------------------------------------------


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    import numpy as np

    return float(np.percentile(np.asarray(xs, dtype=float), q))


def _mean(xs) -> float:
    xs = list(xs)
    return float(sum(xs) / len(xs)) if xs else 0.0


def stats_dict(s) -> dict | None:
    if s is None:
        return None
    return s if isinstance(s, dict) else s.to_dict()


def summarize(rows: list[dict]) -> dict[str, float]:
    """Per-mode figures. Forward counts and times are per request (means); tokens per forward and output tokens/s
    are ratios of totals (all tokens over all forwards / all time). Rows without stats (a generation that raised)
    count in ``n`` and the rates, not in the costs."""
    st = [r["stats"] for r in rows if r.get("stats")]
    out_tok = sum(s["output_tokens"] for s in st)
    pinned = sum(s["pinned_tokens"] for s in st)
    fwd = sum(s["forwards"] for s in st)
    lat = [s["latency_ms"] for s in st]
    checks = sum(s.get("verify_forwards", 0) for s in st)
    return {
        "n": len(rows),
        "task_success": round(_mean(float(bool(r.get("success"))) for r in rows), 4),
        "valid_rate": round(_mean(float(bool(r.get("valid"))) for r in rows), 4),
        "decoder_forwards_mean": round(_mean(s["decoder_forwards"] for s in st), 3),
        "encoder_forwards_mean": round(_mean(s["encoder_forwards"] for s in st), 3),
        "forwards_mean": round(_mean(s["forwards"] for s in st), 3),
        "tokens_per_forward": round(out_tok / fwd, 4) if fwd else 0.0,
        "tokens_per_forward_excl_pinned": round((out_tok - pinned) / fwd, 4) if fwd else 0.0,
        # verify: drafted slot tokens kept per checking pass, over all requests (0 where no pass checked drafts)
        "accepted_per_pass": round(sum(s.get("accepted_slot_tokens", 0) for s in st) / checks, 4) if checks else 0.0,
        "latency_ms_p50": round(pct(lat, 50), 2),
        "latency_ms_p95": round(pct(lat, 95), 2),
        "latency_ms_mean": round(_mean(lat), 2),
        "output_tokens_per_s": round(1000.0 * out_tok / sum(lat), 2) if sum(lat) > 0 else 0.0,
        "output_tokens_mean": round(_mean(s["output_tokens"] for s in st), 2),
        "pinned_tokens_mean": round(_mean(s["pinned_tokens"] for s in st), 2),
        "compile_ms_mean": round(_mean(s.get("compile_ms", 0.0) for s in st), 3),
        "prefill_ms_mean": round(_mean(s.get("prefill_ms", 0.0) for s in st), 2),
        "constraint_ms_mean": round(_mean(s.get("constraint_ms", 0.0) for s in st), 3),
        "errors": sum(1 for r in rows if r.get("error_type") == "exception"),
    }


def ratios(modes: dict[str, dict], baseline: str = BASELINE) -> dict[str, dict[str, float | None]]:
    """Each mode against the baseline: forwards and p50 latency as ratios (mode / baseline), success as a delta."""
    base = modes.get(baseline)
    if not base:
        return {}

    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 4) if b else None

    return {m: {"forwards": ratio(s["forwards_mean"], base["forwards_mean"]),
                "latency_p50": ratio(s["latency_ms_p50"], base["latency_ms_p50"]),
                "task_success_delta": round(s["task_success"] - base["task_success"], 4)}
            for m, s in modes.items()}


def markdown_table(result: dict) -> str:
    cols = [("n", "n", "{:d}"), ("success", "task_success", "{:.3f}"), ("valid", "valid_rate", "{:.3f}"),
            ("dec fwd", "decoder_forwards_mean", "{:.2f}"), ("enc fwd", "encoder_forwards_mean", "{:.2f}"),
            ("fwd", "forwards_mean", "{:.2f}"), ("tok/fwd", "tokens_per_forward", "{:.2f}"),
            ("tok/fwd excl pinned", "tokens_per_forward_excl_pinned", "{:.2f}"),
            ("p50 ms", "latency_ms_p50", "{:.0f}"), ("p95 ms", "latency_ms_p95", "{:.0f}"),
            ("out tok/s", "output_tokens_per_s", "{:.1f}"), ("compile ms", "compile_ms_mean", "{:.1f}")]
    rat = result.get("ratios_vs_ar_constrained") or {}
    head = ["mode", *(c[0] for c in cols)] + (["fwd vs AR-c", "p50 vs AR-c", "Δ success"] if rat else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for mode, s in result.get("modes", {}).items():
        cells = [mode] + [fmt.format(s[key]) if key in s else "" for _, key, fmt in cols]
        if rat:
            r = rat.get(mode, {})
            cells += ["" if r.get("forwards") is None else f"{r['forwards']:.2f}x",
                      "" if r.get("latency_p50") is None else f"{r['latency_p50']:.2f}x",
                      f"{r.get('task_success_delta', 0):+.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- output -------------------------------------------------------------------------------------------------------


def read_json(path: Path) -> Any:
    """A results file, plain JSON or gzipped (``.gz``: how the larger committed results are kept)."""
    if path.suffix == ".gz":
        import gzip

        return json.loads(gzip.decompress(path.read_bytes()))
    return json.loads(path.read_text())


def write_json_atomic(path: Path, obj: Any) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=1, default=str)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parent,
                              capture_output=True, text=True, timeout=5, check=False).stdout.strip() or None
    except Exception:  # noqa: BLE001 -- no git, no commit id
        return None


def environment(command: str) -> dict[str, Any]:
    import torch

    return {
        "python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(), "platform": platform.platform(), "machine": platform.machine(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": command, "argv": list(sys.argv),
        "git": _git_commit(),
    }
