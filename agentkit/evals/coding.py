"""The coding-assistant eval (the ``agent`` suite): the example agent on toy repositories, per decoding mode.

Each task of ``evals/coding_tasks/tasks.py`` is copied to a fresh temp folder per mode; the agent of
``examples/coding_assistant.py`` runs on it with every structured step (plan, tool calls, edits) in the mode and
the closing reply in AR; then the task's check runs on the folder. Reported per mode: success rate, edits
proposed (``tool_input`` steps of ``apply_edits``), edits that applied, iterations, and latency per iteration.
A run that stops early (iteration limit, a tool failing too often) is a failed task, not a crash; its trace counts.

``--guided`` scripts the tool *choices* (read each non-test file, then one apply_edits per such file, run_tests,
final_answer) while the plan, the edits and the reply still come from the model: it measures the model's edits
(do they apply, do they fix the task) when a small model would otherwise never get as far as proposing one.
Latency per iteration then counts only the model's steps.

    python -m agentkit.evals.coding --modes ar,diffusion --limit 3
    agentkit eval agent --data evals/coding_tasks --modes ar,diffusion,verify
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import sys
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..config import MODES
from .report import write_json_atomic
from .runner import register_suite

REPO = Path(__file__).resolve().parents[2]
TASKS_DIR = REPO / "evals" / "coding_tasks"
EXAMPLE = REPO / "examples" / "coding_assistant.py"
MODE_ALIASES = {"ar-constrained": "ar"}  # every agent step is constrained: the runner's constrained AR is "ar"


def load_tasks(data: str | Path | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """The tasks of ``data`` (a folder holding ``tasks.py``, or the file itself; default ``evals/coding_tasks``)."""
    path = Path(data) if data is not None else TASKS_DIR
    if path.is_dir():
        path = path / "tasks.py"
    if not path.is_file():
        raise FileNotFoundError(f"no coding tasks at {path}")
    spec = importlib.util.spec_from_file_location("coding_tasks", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    tasks = list(module.TASKS)
    return tasks[:limit] if limit is not None else tasks


def _repo_on_path() -> None:
    if str(REPO) not in sys.path:  # the top-level ``tools`` package of the repository
        sys.path.insert(0, str(REPO))


@lru_cache(maxsize=1)
def example_module() -> Any:
    """``examples/coding_assistant.py`` as a module (the repository root on ``sys.path`` for ``tools``)."""
    _repo_on_path()
    spec = importlib.util.spec_from_file_location("coding_assistant", EXAMPLE)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def write_repo(files: dict[str, str], root: Path) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def check_task(root: Path, check: dict[str, Any], timeout_s: float = 60) -> tuple[bool, str]:
    """Whether the repository at ``root`` passes ``check``; and why not (empty when it does)."""
    _repo_on_path()
    from agentkit.tools.workspace import Workspace

    texts = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
             for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}
    for rx in check.get("absent", []):
        hits = [rel for rel, t in texts.items() if re.search(rx, t)]
        if hits:
            return False, f"{rx!r} still in {', '.join(hits)}"
    for rx in check.get("present", []):
        if not any(re.search(rx, t) for t in texts.values()):
            return False, f"{rx!r} not found"
    if check.get("docstring"):
        rel, name = check["docstring"].split(":")
        try:
            tree = ast.parse(texts.get(rel, ""))
        except SyntaxError as e:
            return False, f"{rel}: syntax error: {e}"
        fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                   and n.name == name), None)
        if fn is None or not ast.get_docstring(fn):
            return False, f"{rel}:{name} has no docstring"
    if check.get("tests"):
        ws = Workspace(root, command_timeout_s=timeout_s)
        res = ws.run_tests(["-q", "-p", "no:cacheprovider"])
        if res["exit_code"] != 0:
            return False, f"tests fail (exit {res['exit_code']})"
    return True, ""


class GuidedModel:
    """A generator whose ``tool_call`` steps follow ``calls`` (then ``final_answer``); every other step (plan,
    ``tool_input`` edits, reply) is generated by ``model``."""

    SCRIPTED = frozenset({"tool_call"})

    def __init__(self, model: Any, calls: list[dict[str, Any]]) -> None:
        from ..sdk._generator import as_generator

        self.inner = as_generator(model)
        self.calls = calls

    @classmethod
    def for_task(cls, model: Any, task: dict[str, Any]) -> GuidedModel:
        sources = sorted(p for p in task["files"] if not Path(p).name.startswith("test_"))
        calls = [{"name": "read_file", "arguments": {"path": p}} for p in sources]
        calls += [{"name": "apply_edits", "arguments": {}}] * len(sources) + [{"name": "run_tests", "arguments": {}}]
        return cls(model, calls)

    async def generate(self, messages, config, template=None, on_draft=None):
        from ..sdk import FunctionModel

        if template is None or template.meta.get("step") != "tool_call":
            return await self.inner.generate(messages, config, template, on_draft)
        done = 0
        for m in messages:
            if m["role"] == "assistant" and m["content"].startswith('{"name":'):  # a call (steps.kinds.call_text)
                done += 1
        out = self.calls[done] if done < len(self.calls) else {"name": "final_answer", "arguments": {}}
        return await FunctionModel(lambda _m, _i: out).generate(messages, config, template)

    def release(self, template: Any) -> None:
        release = getattr(self.inner, "release", None)
        if release is not None:
            release(template)

    def decode(self, token_ids: list[int]) -> str:
        return self.inner.decode(token_ids)  # type: ignore[attr-defined]


def _routing(mode: str) -> Any:
    from ..sdk import RoutingPolicy

    return RoutingPolicy(plan=mode, tool_call=mode, tool_input=mode, extract=mode, reply="ar")


def run_task(task: dict[str, Any], mode: str, model: Any, *, max_iterations: int = 10,
             trace_dir: str | Path | None = None, guided: bool = False) -> dict[str, Any]:
    """One task in one mode on a fresh copy of its repository; a row of the results.

    ``trace_dir``: append each iteration to ``<trace_dir>/<id>-<mode>.jsonl`` as it ends (to watch a slow run)."""
    from ..errors import AgentRunError

    mode = MODE_ALIASES.get(mode, mode)
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    with tempfile.TemporaryDirectory(prefix=f"coding-{task['id']}-") as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        write_repo(task["files"], root)
        if guided:
            model = GuidedModel.for_task(model, task)
            max_iterations = max(max_iterations, len(model.calls) + 3)
        agent = example_module().build_agent(root, model, max_iterations=max_iterations, routing=_routing(mode))
        t0 = time.perf_counter()
        error, output, trace = None, None, None
        try:
            trace_path = None
            if trace_dir is not None:
                Path(trace_dir).mkdir(parents=True, exist_ok=True)
                trace_path = str(Path(trace_dir) / f"{task['id']}-{mode}.jsonl")
            result = agent.run_sync(task["task"], trace_path=trace_path)
            output, trace = result.output, result.trace
        except AgentRunError as e:
            error, trace = f"{type(e).__name__}: {e}", e.trace
        wall_s = time.perf_counter() - t0
        success, why = check_task(root, task.get("check", {"tests": True}))
        outside = sorted(p.name for p in Path(tmp).iterdir() if p.name != "repo")
    records = list(trace or [])
    timed = [r for r in records if not (guided and r.step in GuidedModel.SCRIPTED)]  # the model's own steps
    edits = [r for r in records if r.step == "tool_input" and r.tool == "apply_edits"]
    applied = [r for r in edits if r.error is None]
    return {
        "id": task["id"], "mode": mode, "success": success, "check": why or "ok", "error": error,
        "output": (output or "")[:500] if isinstance(output, str) else output,
        "iterations": len(records), "edits_proposed": len(edits), "edits_applied": len(applied),
        "edit_errors": [r.error for r in edits if r.error is not None],
        "tools": [r.tool for r in records if r.step == "tool_call"],
        "timed_iterations": len(timed),
        "iter_ms_mean": round(sum(r.total_ms for r in timed) / len(timed), 1) if timed else 0.0,
        "gen_ms_per_iter": round(sum(r.total_ms - r.tool_ms for r in timed) / len(timed), 1) if timed else 0.0,
        "wall_s": round(wall_s, 2), "written_outside_repo": outside,
        "trace": [r.to_dict() for r in records],
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    proposed = sum(r["edits_proposed"] for r in rows)
    applied = sum(r["edits_applied"] for r in rows)
    iters = sum(r["iterations"] for r in rows)
    timed = sum(r["timed_iterations"] for r in rows)
    return {
        "n": n,
        "task_success": round(sum(r["success"] for r in rows) / n, 4) if n else 0.0,
        "valid_rate": round(applied / proposed, 4) if proposed else 1.0,  # the runner's column: edit-apply rate
        "edits_proposed": proposed,
        "edits_applied": applied,  # edits that changed a file (one that changes nothing is a tool error)
        "tasks_edited": sum(1 for r in rows if r["edits_applied"]),
        "edit_apply_rate": round(applied / proposed, 4) if proposed else None,
        "iterations_mean": round(iters / n, 2) if n else 0.0,
        "iter_ms_mean": round(sum(r["iter_ms_mean"] * r["timed_iterations"] for r in rows) / timed, 1) if timed else 0.0,
        "gen_ms_per_iter": round(sum(r["gen_ms_per_iter"] * r["timed_iterations"] for r in rows) / timed, 1)
        if timed else 0.0,
        "runs_stopped_early": sum(1 for r in rows if r["error"]),
    }


def table(result: dict[str, Any]) -> str:
    cols = [("n", "n"), ("success", "task_success"), ("edits proposed", "edits_proposed"),
            ("edits applied", "edits_applied"), ("tasks edited", "tasks_edited"), ("apply rate", "edit_apply_rate"),
            ("iterations (mean)", "iterations_mean"), ("ms / iteration", "iter_ms_mean"),
            ("gen ms / iteration", "gen_ms_per_iter"), ("stopped early", "runs_stopped_early")]
    lines = ["| mode | " + " | ".join(c for c, _ in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for mode, s in result["modes"].items():
        cells = ["n/a" if s[k] is None else str(s[k]) for _, k in cols]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_coding(*, data: str | Path | None = None, modes: list[str] | tuple[str, ...] = ("ar", "diffusion"),
               limit: int | None = None, engine: Any = None, seed: int = 0, out: str | Path | None = None,
               max_iterations: int = 10, verbose: bool = True, trace_dir: str | Path | None = None,
               guided: bool = False) -> dict[str, Any]:
    """Run every task (up to ``limit``) in each mode; write ``out`` (JSON) after every run; return the results.

    ``engine``: an Engine or Generator for the agent (default: the embedded model)."""
    modes = [MODE_ALIASES.get(m, m) for m in modes]
    modes = list(dict.fromkeys(modes))
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise ValueError(f"unknown mode(s) {bad}; expected some of {MODES}")
    tasks = load_tasks(data, limit)
    if engine is None:
        from ..engine import default_engine

        engine = default_engine()
    rows: list[dict[str, Any]] = []
    result: dict[str, Any] = {"suite": "agent", "model": getattr(engine, "name", repr(engine)), "seed": seed,
                              "limit": limit, "max_iterations": max_iterations, "guided": guided, "modes": {},
                              "items": rows}
    t0 = time.perf_counter()
    for i, task in enumerate(tasks):
        order = modes[i % len(modes):] + modes[: i % len(modes)]  # rotate so warm-up costs spread over modes
        for mode in order:
            row = run_task(task, mode, engine, max_iterations=max_iterations, trace_dir=trace_dir, guided=guided)
            rows.append(row)
            if verbose:
                print(f"[{task['id']} {mode}] success={row['success']} ({row['check']}) iters={row['iterations']} "
                      f"edits={row['edits_applied']}/{row['edits_proposed']} {row['wall_s']:.1f}s"
                      + (f" stopped: {row['error'][:120]}" if row["error"] else ""), file=sys.stderr, flush=True)
            result["modes"] = {m: summarize([r for r in rows if r["mode"] == m]) for m in modes
                               if any(r["mode"] == m for r in rows)}
            result["wall_s"] = round(time.perf_counter() - t0, 1)
            if out is not None:
                write_json_atomic(Path(out), result)
    return result


def _suite(*, data, modes, limit, engine, seed, out) -> dict[str, Any]:
    """The ``agent`` suite for ``agentkit.evals.runner`` (``agentkit eval agent --data evals/coding_tasks``)."""
    return run_coding(data=data, modes=list(modes) or ["ar", "diffusion"], limit=limit, engine=engine, seed=seed,
                      out=None)


register_suite("agent", _suite)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agentkit.evals.coding", description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default="ar,diffusion", help="comma-separated: ar, diffusion, verify")
    ap.add_argument("--limit", type=int, default=None, help="at most N tasks")
    ap.add_argument("--data", default=None, help="folder with tasks.py (default evals/coding_tasks)")
    ap.add_argument("--model", default=None, help="local model directory (default: the embedded model)")
    ap.add_argument("--max-iterations", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None, help="torch threads")
    ap.add_argument("--out", default="coding_eval.json", help="results JSON")
    ap.add_argument("--guided", action="store_true", help="script the tool choices; plan, edits, reply from the model")
    ap.add_argument("--trace-dir", default=None, help="write each run's per-iteration trace (JSONL) here")
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from ..engine import default_engine

    engine = default_engine(args.model)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    res = run_coding(data=args.data, modes=modes, limit=args.limit, engine=engine, out=args.out,
                     max_iterations=args.max_iterations, trace_dir=args.trace_dir, guided=args.guided)
    kind = "guided (scripted tool choices)" if args.guided else "autonomous"
    print(f"\ncoding tasks · {kind} · {res['model']} · limit {args.limit} · {res['wall_s']:.0f} s\n")
    print(table(res))
    print(json.dumps({m: {k: s[k] for k in ("task_success", "edit_apply_rate")} for m, s in res["modes"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
