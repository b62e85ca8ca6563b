"""MaskBench-style schema coverage: does the compiled template accept every valid instance and reject every invalid
one?

Each file holds ``{"description", "meta", "schema", "tests": [{"valid", "data"}]}``. A schema *passes* when it
compiles, the canonical serialization (:func:`~agentkit.constrain.canonical.canonical_json`) of every valid
instance is in the template's language and that of every invalid instance is not (decided with
:func:`~agentkit.constrain.matcher.tree_matches`, the same language as ``Template.matches`` without compiling one
giant regex). Schemas run one at a time in a
worker process with a time limit, so a pathological schema (huge regex, catastrophic backtracking in Python ``re``)
is reported as a ``timeout`` failure instead of hanging the run.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import UnsupportedSchemaError

TIME_LIMIT_S = 20.0


def category(name: str) -> str:
    """``Github_easy---o1234.json`` → ``Github_easy``; ``BFCL_simple_10.json`` → ``BFCL_simple``."""
    stem = name.removesuffix(".json")
    if "---" in stem:
        return stem.split("---", 1)[0]
    return re.sub(r"_\d+$", "", stem)


def check_file(path: str | Path) -> dict[str, Any]:
    """Compile one MaskBench file and run its tests. Returns ``{"file", "compiled", "passed", "compile_ms",
    "stage", "error", "keyword", "detail", "tests"}`` (stage None when it passed)."""
    from .canonical import canonical_json
    from .compiler import compile_schema_uncached
    from .matcher import tree_matches

    path = Path(path)
    out: dict[str, Any] = {"file": path.name, "compiled": False, "passed": False, "compile_ms": None,
                           "stage": None, "error": None, "keyword": None, "detail": None, "tests": 0}
    doc = json.loads(path.read_text())
    schema, tests = doc["schema"], doc.get("tests") or []
    out["tests"] = len(tests)
    try:
        tpl = compile_schema_uncached(schema)
    except UnsupportedSchemaError as e:
        out.update(stage="compile", error=type(e).__name__, keyword=e.keyword, detail=f"{e.pointer}: {e.detail}"[:300])
        return out
    except Exception as e:  # noqa: BLE001 -- a bug or a malformed schema: still a failure to compile
        out.update(stage="compile", error=type(e).__name__, keyword=None, detail=str(e)[:300])
        return out
    out["compiled"], out["compile_ms"] = True, tpl.compile_ms
    for i, t in enumerate(tests):
        try:
            text = canonical_json(t["data"], schema)
            ok = tree_matches(tpl, text)
        except Exception as e:  # noqa: BLE001 -- a value that is not JSON, a recursion limit...
            out.update(stage="match_error", error=type(e).__name__, detail=f"test {i}: {e}"[:300])
            return out
        if ok != bool(t["valid"]):
            stage = "valid_rejected" if t["valid"] else "invalid_accepted"
            out.update(stage=stage, error="Mismatch", detail=f"test {i}: {text[:200]}")
            return out
    out["passed"] = True
    return out


def _worker(conn) -> None:
    sys.setrecursionlimit(20000)
    while True:
        path = conn.recv()
        if path is None:
            return
        try:
            conn.send(check_file(path))
        except Exception as e:  # noqa: BLE001 -- never let the worker die silently
            conn.send({"file": Path(path).name, "compiled": False, "passed": False, "compile_ms": None,
                       "stage": "error", "error": type(e).__name__, "keyword": None, "detail": str(e)[:300],
                       "tests": 0})


class _Pool:
    """One worker process; restarted after a timeout."""

    def __init__(self) -> None:
        self.ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        self.proc = None
        self.conn = None

    def start(self) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        self.conn = parent

    def run(self, path: Path, limit: float) -> dict[str, Any]:
        if self.proc is None or not self.proc.is_alive():
            self.start()
        self.conn.send(str(path))
        if self.conn.poll(limit):
            try:
                return self.conn.recv()
            except EOFError:
                pass
        self.stop(kill=True)
        return {"file": path.name, "compiled": False, "passed": False, "compile_ms": None, "stage": "timeout",
                "error": "Timeout", "keyword": None, "detail": f"over {limit:.0f} s", "tests": 0}

    def stop(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.proc = None


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals, per-category figures, compile-time percentiles and failures from :func:`check_file` results."""
    by_cat: dict[str, dict[str, Any]] = {}
    for r in results:
        c = by_cat.setdefault(category(r["file"]), {"schemas": 0, "compiled": 0, "passed": 0})
        c["schemas"] += 1
        c["compiled"] += bool(r["compiled"])
        c["passed"] += bool(r["passed"])
    for c in by_cat.values():
        c["coverage"] = round(c["passed"] / c["schemas"], 4) if c["schemas"] else 0.0
    ms = [r["compile_ms"] for r in results if r["compile_ms"] is not None]
    n = len(results)
    failures = [{k: r[k] for k in ("file", "stage", "error", "keyword", "detail")} for r in results if not r["passed"]]
    reasons = Counter(f"{f['stage']}:{f['keyword'] or f['error']}" for f in failures)
    return {
        "schemas": n,
        "compiled": sum(bool(r["compiled"]) for r in results),
        "passed": sum(bool(r["passed"]) for r in results),
        "coverage": round(sum(bool(r["passed"]) for r in results) / n, 4) if n else 0.0,
        "by_category": dict(sorted(by_cat.items())),
        "compile_ms_p50": _pct(ms, 0.5),
        "compile_ms_p95": _pct(ms, 0.95),
        "compile_ms_mean": statistics.fmean(ms) if ms else None,
        "top_failure_reasons": reasons.most_common(15),
        "failures": failures,
    }


def run_coverage(data_dir: str | Path, limit: int | None = None, out: str | Path | None = None,
                 *, time_limit_s: float = TIME_LIMIT_S, progress: bool = True) -> dict[str, Any]:
    """Run the coverage check over the MaskBench files in ``data_dir`` (sorted by name; the first ``limit`` when
    given). Writes the result JSON to ``out`` when given and returns it."""
    data_dir = Path(data_dir)
    if (data_dir / "maskbench").is_dir() and not any(data_dir.glob("*.json")):
        data_dir = data_dir / "maskbench"
    files = sorted(data_dir.glob("*.json"))
    if limit is not None:
        files = files[:limit]
    results: list[dict[str, Any]] = []
    pool = _Pool()
    t0 = time.perf_counter()
    try:
        if progress:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            with Progress(TextColumn("coverage"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[ok]}"),
                          TimeElapsedColumn(), transient=False) as bar:
                task = bar.add_task("coverage", total=len(files), ok="")
                for f in files:
                    results.append(pool.run(f, time_limit_s))
                    passed = sum(r["passed"] for r in results)
                    bar.update(task, advance=1, ok=f"passed {passed}/{len(results)}")
        else:
            for f in files:
                results.append(pool.run(f, time_limit_s))
    finally:
        pool.stop()
    res = summarize(results)
    res["data_dir"] = str(data_dir)
    res["wall_s"] = round(time.perf_counter() - t0, 2)
    if out is not None:
        Path(out).write_text(json.dumps(res, indent=2, ensure_ascii=False))
    return res
