"""The end-to-end agent benchmark (``agentkit eval agent-loop``): each task of :mod:`agentkit.evals.agent_tasks`
through the real ``Agent`` loop, per decoding mode, scored by :mod:`agentkit.evals.agent_env`; peer rows from
:mod:`agentkit.evals.agent_peers`.

Modes: ``default`` (the agent's own routing: each step kind in its calibrated mode), ``ar``
(``ar-constrained`` is the same: every agent step is constrained), ``verify``, ``diffusion`` (structured steps in
that mode, the reply in AR), ``drafter`` (the default routing with the reply in verify, its drafts from prompt lookup
and the block drafter: the reply AR writes, in fewer forwards where drafts hold). Each run: ``Agent(engine, tools=..., instructions=INSTRUCTIONS,
limits=Limits(max_iterations))`` on the task's prompt; iterations and per-iteration latency come from the run's
``Trace`` (``e.trace`` when it stopped early).

Per mode (see :func:`summarize` and ``docs/agent_loop.md``): ``finished_rate``, ``iterations_mean/p95``,
``iterations_median_one_tool``, ``right_call_rate`` (first call = ground truth, BFCL scoring; one_tool and
fail_once tasks) next to ``bfcl_single_call_success`` (the BFCL suite's single call on the same items, same mode),
``answer_has_result_rate`` (among one_tool/fail_once runs that received the canned result), ``no_tool_rate``,
``two_tool_finished_rate``/``two_tool_right_rate``, ``fail_once_finished_rate``, ``iteration_latency_ms`` (p50/p95
by iteration 1, 2, 3) and ``run_latency_ms_p50/p95``.

    agentkit eval agent-loop --data evals/agent_loop --limit 30 --out agent_loop.json
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError
from .agent_env import TaskEnv, agentkit_tools, score_run
from .agent_tasks import INSTRUCTIONS, KINDS, AgentTask, load
from .report import environment, pct, write_json_atomic
from .timing import cold_prompts

REPO = Path(__file__).resolve().parents[2]
TASKS_DIR = REPO / "evals" / "agent_loop"
AGENT_LOOP_MODES: tuple[str, ...] = ("default", "ar", "verify", "diffusion", "drafter")
MODE_ALIASES = {"ar-constrained": "ar"}
BFCL_MODE = {"ar": "ar-constrained", "verify": "verify", "diffusion": "diffusion"}  # agent mode -> BFCL suite mode
CALL_KINDS = ("one_tool", "fail_once")  # tasks whose first call is one BFCL item's call
MAX_ITERATIONS = 6
TIMEOUT_S = 300.0


def check_modes(modes: list[str]) -> list[str]:
    """The agentkit modes to run (empty: ``default``; ``none``: no agentkit run, the peers only)."""
    if modes == ["none"]:
        return []
    out = list(dict.fromkeys(MODE_ALIASES.get(m, m) for m in modes)) or ["default"]
    bad = [m for m in out if m not in AGENT_LOOP_MODES]
    if bad:
        raise UserError(f"unknown agent-loop mode(s) {bad}; the modes are {', '.join(AGENT_LOOP_MODES)} (ar-constrained = ar)")
    return out


def _agent_options(mode: str) -> dict[str, Any]:
    """The ``Agent`` keywords of a mode (``default``: none, the agent's own routing)."""
    from ..sdk import RoutingPolicy

    if mode == "default":
        return {}
    if mode == "drafter":  # the reply in verify: DecodeConfig's draft="auto" drafts free text with the drafter
        return {"routing": RoutingPolicy(reply="verify")}
    return {"routing": RoutingPolicy(plan=mode, tool_call=mode, tool_input=mode, extract=mode, reply="ar")}


# -- one run ----------------------------------------------------------------------------------------------------


def run_agentkit(task: AgentTask, model: Any, mode: str = "default", *, max_iterations: int = MAX_ITERATIONS,
                 timeout_s: float | None = TIMEOUT_S, agent_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One task through agentkit's ``Agent`` on ``model`` (an Engine, a Generator or a test model); a row.
    ``agent_options``: more ``Agent`` keywords (a loop choice being measured, e.g. ``after_failure``)."""
    from ..errors import AgentRunError
    from ..sdk import Agent, Limits

    env = TaskEnv(task)
    kw = {**_agent_options(mode), **(agent_options or {})}
    agent = Agent(model, tools=agentkit_tools(task, env), instructions=INSTRUCTIONS, name="agent-loop",
                  limits=Limits(max_iterations=max_iterations, timeout_s=timeout_s), **kw)
    t0 = time.perf_counter()
    output, error, trace = None, None, None
    try:
        result = agent.run_sync(task.prompt)
        output, trace = result.output, result.trace
    except AgentRunError as e:
        error, trace = f"{type(e).__name__}: {e}", e.trace
    except Exception as e:  # noqa: BLE001 (a crash in the loop is a failed run, recorded; the benchmark goes on)
        error = f"{type(e).__name__}: {e}"
    run_ms = 1000 * (time.perf_counter() - t0)
    records = list(trace or [])
    row = score_run(task, env, output, error, run_ms, iterations=len(records),
                    iter_ms=[round(r.total_ms, 1) for r in records])
    row["steps"] = [f"{r.step}:{r.tool}" if r.tool else r.step for r in records]
    row["iter_forwards"] = [r.encoder_forwards + r.decoder_forwards for r in records]
    row["iter_modes"] = [r.mode for r in records]  # the mode each iteration decoded in (a sampled verify step: ar)
    return {"framework": "agentkit", "mode": mode, **row}


def interleaved_options(ap: Any) -> None:
    """The options every interleaved comparison script takes (``evals/decision_prompts.py``,
    ``evals/prefetch_call.py``): the task file, its kinds, a limit and the output file."""
    ap.add_argument("--data", default="evals/agent_loop/tasks.jsonl", help="an agent-loop task file")
    ap.add_argument("--kinds", default=None, help="comma-separated task kinds (default all)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", required=True)


def interleaved_setup(args: Any, script: str, argv: list[str] | None,
                      **settings: Any) -> tuple[list[AgentTask], Any, dict[str, Any]]:
    """The tasks :func:`interleaved_options` chose, the default engine, and the run's header for
    :func:`run_interleaved` (its data, ``settings``, the command that ``script`` was run with and the environment)."""
    from ..engine import default_engine

    kinds = args.kinds.split(",") if args.kinds else None
    tasks = load(args.data, kinds=kinds, limit=args.limit)
    engine = default_engine()
    command = f"python {script} " + " ".join(sys.argv[1:] if argv is None else argv)
    header = {"suite": "agent-loop", "model": engine.name, "data": args.data, "kinds": kinds,
              "max_iterations": MAX_ITERATIONS, **settings, "cores": os.cpu_count(), "tasks": len(tasks),
              "command": command, "env": environment(command)}
    return tasks, engine, header


RUN_PREFETCH = {"off": False, "on": True}  # Agent(prefetch=...)
RUN_NAMES = {"one_pass": True, "each": False}  # agentkit.engine.backbone.ONE_PASS_CONTINUATIONS
RUN_SPEC = "MODE/PREFETCH[/NAMES] (PREFETCH: on or off; NAMES: one_pass, the default, or each)"


def parse_run(run: str) -> tuple[str, bool, bool]:
    """An interleaved script's run ``MODE/PREFETCH[/NAMES]`` as (agent-loop mode, the pass ahead on, the decision's
    names read in one pass); a ``ValueError`` naming ``run`` when it is not one (:data:`RUN_SPEC`)."""
    parts = run.split("/")
    if len(parts) not in (2, 3) or parts[1] not in RUN_PREFETCH or parts[2:] not in ([], *([n] for n in RUN_NAMES)):
        raise ValueError(run)
    return parts[0], RUN_PREFETCH[parts[1]], RUN_NAMES[(parts + ["one_pass"])[2]]


def run_spec(task: AgentTask, engine: Any, run: str) -> dict[str, Any]:
    """``task`` run once under the :func:`parse_run` run ``run``."""
    from unittest import mock

    from ..engine import backbone

    mode, prefetch, one_pass = parse_run(run)
    with mock.patch.object(backbone, "ONE_PASS_CONTINUATIONS", one_pass):
        return run_agentkit(task, engine, mode, agent_options={"prefetch": prefetch})


def run_interleaved(tasks: list[AgentTask], engine: Any, names: list[str],
                    run_one: Callable[[AgentTask, str], dict[str, Any]], out: str | Path,
                    result: dict[str, Any]) -> dict[str, Any]:
    """Each task run once per name in ``names``, the order rotating from task to task, on ``engine`` with its prefix
    cache emptied before each run (else a task's second run reuses the first one's prompts): ``run_one(task, name)``
    gives the row, whose ``mode`` becomes the name, so the agent loop's own tools (``merge``,
    ``evals/agent_loop_steps.py``, ``evals/paired_agent_loop.py``) compare the names. ``result`` (the run's header:
    its command, data, settings) gets the rows, their summary and the wall time, written to ``out`` after each task."""
    result.update(partial=True, items=[])
    t0 = time.perf_counter()
    for i, task in enumerate(tasks):
        for name in names[i % len(names):] + names[: i % len(names)]:
            cold_prompts(engine)
            row = {**run_one(task, name), "mode": name}
            result["items"].append(row)
            print(f"[{name}] {task.id} success={row['success']} iters={row['iterations']} "
                  f"{row['run_ms'] / 1000:.1f}s", flush=True)
        result.update(summary=summarize_all(result["items"]), wall_s=round(time.perf_counter() - t0, 1))
        write_json_atomic(Path(out), result)
    result["partial"] = False
    write_json_atomic(Path(out), result)
    return result


def bfcl_single(engine: Any, task: AgentTask, mode: str) -> bool | None:
    """The BFCL suite's single constrained call on the task's item (its question, its functions), in the agent mode's
    BFCL mode; None for tasks that are not one item's call."""
    if task.kind not in CALL_KINDS:
        return None
    from . import bfcl
    from .runner import EvalContext, get_suite

    item = bfcl.BfclItem(id=task.source, category="agent-loop", messages=[{"role": "user", "content": task.prompt}],
                         functions=task.functions, ground_truth=task.expected)
    if mode in ("default", "drafter"):  # the drafter mode's calls are the default's
        from ..calibration import step_mode

        mode = step_mode("tool_call")
    row = get_suite("bfcl").run(engine, item, bfcl.compile_call(item), BFCL_MODE[MODE_ALIASES.get(mode, mode)],
                                EvalContext())
    return bool(row["success"])


# -- summaries --------------------------------------------------------------------------------------------------


def _rate(rows: list[dict], key: str | Callable[[dict], bool]) -> float | None:
    if not rows:
        return None
    f = key if callable(key) else (lambda r: bool(r[key]))
    return round(sum(1 for r in rows if f(r)) / len(rows), 4)


def _dist(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "p50": round(pct(xs, 50), 1), "p95": round(pct(xs, 95), 1)}


def first_called(row: dict) -> bool:
    """Whether the run's first model step called a tool: agentkit's first trace step chose a tool (not
    ``final_answer``); a peer's first response had tool calls (its loop ends at the first one without)."""
    if row["framework"] == "agentkit":
        first = row.get("steps", [])[:1]
        return bool(first) and first[0].startswith("tool_call:") and first[0] != "tool_call:final_answer"
    return row["tool_calls"] > 0


def summarize(rows: list[dict]) -> dict[str, Any]:
    """The figures of one framework and mode (rates over the tasks of the kind they are about; None: no such
    task)."""
    kind = {k: [r for r in rows if r["kind"] == k] for k in KINDS}
    calls = kind["one_tool"] + kind["fail_once"]
    with_result = [r for r in calls if r["got_result"]]
    iters = [r["iterations"] for r in rows]
    single = [r["bfcl_single"] for r in rows if r.get("bfcl_single") is not None]
    return {
        "n": len(rows), "n_by_kind": {k: len(v) for k, v in kind.items()},
        "task_success": _rate(rows, "success"),
        "finished_rate": _rate(rows, "finished"),
        "iterations_mean": round(sum(iters) / len(iters), 2) if iters else None,
        "iterations_p95": round(pct(iters, 95), 2) if iters else None,
        "iterations_median_one_tool": round(pct([r["iterations"] for r in kind["one_tool"]], 50), 2)
        if kind["one_tool"] else None,
        "right_call_rate": _rate(calls, "first_call_right"),
        "bfcl_single_call_success": round(sum(single) / len(single), 4) if single else None,
        "answer_has_result_rate": _rate(with_result, "answer_has_value"),
        "n_with_result": len(with_result),
        "json_reply_rate": _rate([r for r in rows if r["finished"]], lambda r: (r["output"] or "").lstrip()[:1] in "{["
                                 and bool((r["output"] or "").strip())),
        "tool_decision_rate": _rate(rows, lambda r: first_called(r) == (r["kind"] != "no_tool")),
        "no_tool_rate": _rate(kind["no_tool"], lambda r: r["finished"] and r["tool_calls"] == 0),
        "no_tool_answer_rate": _rate(kind["no_tool"], "success"),
        "two_tool_finished_rate": _rate(kind["two_tool"], "finished"),
        "two_tool_right_rate": _rate(kind["two_tool"], "two_tool_right"),
        "two_tool_success": _rate(kind["two_tool"], "success"),
        "fail_once_finished_rate": _rate(kind["fail_once"], "finished"),
        "fail_once_recovered_rate": _rate(kind["fail_once"], "got_result"),
        "finished_rate_by_kind": {k: _rate(v, "finished") for k, v in kind.items()},
        "iteration_latency_ms": {str(i): _dist([r["iter_ms"][i - 1] for r in rows if len(r["iter_ms"]) >= i])
                                 for i in (1, 2, 3)},
        "run_latency_ms_p50": round(pct([r["run_ms"] for r in rows], 50), 1),
        "run_latency_ms_p95": round(pct([r["run_ms"] for r in rows], 95), 1),
        "errors": sum(1 for r in rows if r["error"] and not r["error"].startswith(("UsageLimitExceeded",
                                                                                  "UnexpectedModelBehavior"))),
    }


def summarize_all(rows: list[dict]) -> dict[str, dict[str, Any]]:
    """``{"agentkit": {mode: summary}, PEER: {"server": summary}}`` over the rows so far."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        out.setdefault(r["framework"], {}).setdefault(r["mode"], None)
    return {fw: {m: summarize([r for r in rows if r["framework"] == fw and r["mode"] == m]) for m in ms}
            for fw, ms in out.items()}


TABLE = [("n", "n"), ("success", "task_success"), ("finished", "finished_rate"), ("JSON reply", "json_reply_rate"),
         ("iters", "iterations_mean"),
         ("iters p95", "iterations_p95"), ("iters med 1-tool", "iterations_median_one_tool"),
         ("tool decision", "tool_decision_rate"), ("right call", "right_call_rate"),
         ("BFCL single", "bfcl_single_call_success"), ("answer has result", "answer_has_result_rate"), ("no tool", "no_tool_rate"),
         ("no-tool answer", "no_tool_answer_rate"), ("2-tool finished", "two_tool_finished_rate"),
         ("2-tool right", "two_tool_right_rate"), ("fail-once finished", "fail_once_finished_rate"),
         ("fail-once recovered", "fail_once_recovered_rate"), ("run p50 ms", "run_latency_ms_p50"),
         ("run p95 ms", "run_latency_ms_p95")]


def table(result: dict[str, Any]) -> str:
    """The summary as markdown: one row per framework and mode, then iteration latency p50 by index."""
    head = ["framework", "mode", *(c for c, _ in TABLE)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for fw, modes in result.get("summary", {}).items():
        for mode, s in modes.items():
            cells = ["" if s.get(k) is None else str(s[k]) for _, k in TABLE]
            lines.append(f"| {fw} | {mode} | " + " | ".join(cells) + " |")
    lines += ["", "| framework | mode | iter 1 p50/p95 ms | iter 2 p50/p95 ms | iter 3 p50/p95 ms |", "|---|---|---|---|---|"]
    for fw, modes in result.get("summary", {}).items():
        for mode, s in modes.items():
            lat = s["iteration_latency_ms"]
            cells = [f"{lat[i]['p50']:.0f} / {lat[i]['p95']:.0f} (n={lat[i]['n']})" if lat[i]["n"] else "" for i in "123"]
            lines.append(f"| {fw} | {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- the run ----------------------------------------------------------------------------------------------------


def _command(data: Path, modes: list[str], kinds: list[str] | None, limit: int | None, peers: list[str],
             base_url: str | None, out: Path, plot: Path | None, max_iterations: int, resume: Any = None,
             lora: str | None = None, agent_options: dict[str, Any] | None = None) -> str:
    parts = ["agentkit", "eval", "agent-loop", "--data", str(data), "--modes", ",".join(modes) or "none"]
    if kinds:
        parts += ["--kinds", ",".join(kinds)]
    if limit is not None:
        parts += ["--limit", str(limit)]
    if peers:
        parts += ["--peers", ",".join(peers)]
    if base_url:
        parts += ["--base-url", base_url]
    if max_iterations != MAX_ITERATIONS:
        parts += ["--max-iterations", str(max_iterations)]
    if resume:
        parts += ["--resume", str(resume)]
    if lora:
        parts += ["--lora", lora]
    for k, v in (agent_options or {}).items():
        parts += [f"--{k.replace('_', '-')}", str(v)]
    parts += ["--out", str(out)]
    return " ".join(parts + (["--plot", str(plot)] if plot else []))


def run_agent_loop(data: str | Path = TASKS_DIR, modes: list[str] | tuple[str, ...] = ("default",), *,
                   kinds: list[str] | None = None, limit: int | None = None, engine: Any = None,
                   out: str | Path = "agent_loop.json", plot: str | Path | None = None, peers: list[str] = (),
                   base_url: str | None = None, bfcl: bool = True, max_iterations: int = MAX_ITERATIONS,
                   seed: int = 0, verbose: bool = True, resume: str | Path | None = None,
                   model: str | None = None, lora: str | None = None,
                   agent_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every task (``kinds``/``limit`` select them) in each agentkit mode, then through each peer (against
    ``base_url``, or an ``agentkit serve`` started here); ``out`` rewritten after every run (``partial`` until the
    end); a plot at ``plot``. ``engine``: the agent's model (default: ``model``, a local model directory, or the
    embedded default model, with the LoRA ``lora`` merged in when given; so does the spawned server's; a server at
    ``base_url`` is as it was started). ``agent_options``: more ``Agent`` keywords for every agentkit run (a loop choice being
    measured, e.g. ``{"after_result": "null"}``). ``bfcl``:
    also the single BFCL call on the one_tool/fail_once items, per mode. ``resume``: an earlier result JSON
    (e.g. a ``--limit 30`` run, or one stopped part way) whose rows for the same task, framework and mode are kept,
    not rerun. Returns the results."""
    from .agent_peers import PEERS

    data, out = Path(data), Path(out)
    modes, peers = check_modes(list(modes)), list(peers)
    bad = [p for p in peers if p not in PEERS]
    if bad:
        raise UserError(f"unknown peer(s) {bad}; the peers are {', '.join(PEERS)}")
    tasks = load(data, kinds=kinds, limit=limit, seed=seed)
    if not tasks:
        raise UserError(f"no tasks in {str(data)!r} (kinds {kinds})")
    if engine is None and modes:
        from ..engine import default_engine

        engine = default_engine(model, lora=lora)
    rows: list[dict[str, Any]] = []
    result: dict[str, Any] = {
        "suite": "agent-loop", "model": getattr(engine, "name", None) or "the server's default model",
        "lora": engine.lm.meta.get("lora") if getattr(engine, "lm", None) is not None else lora,
        "agent_options": agent_options or {},
        "data": str(data), "limit": limit,
        "kinds": kinds or list(KINDS), "max_iterations": max_iterations, "instructions": INSTRUCTIONS,
        "env": environment(_command(data, modes, kinds, limit, peers, base_url, out, plot, max_iterations, resume,
                                       lora, agent_options)),
        "partial": True, "tasks": len(tasks), "summary": {}, "items": rows}
    kept = _resumable(resume, max_iterations)
    t0 = time.perf_counter()

    def publish(row: dict[str, Any] | None, partial: bool = True) -> None:
        if row is not None:
            rows.append(row)
            if verbose:
                _log(row)
        result.update(summary=summarize_all(rows), partial=partial, wall_s=round(time.perf_counter() - t0, 1))
        result["modes"] = result["summary"].get("agentkit", {})
        write_json_atomic(out, result)

    for i, task in enumerate(tasks if modes else []):
        for mode in modes[i % len(modes):] + modes[: i % len(modes)]:  # rotate: warm-up costs spread over modes
            if ("agentkit", mode, task.id) in kept:
                publish(kept[("agentkit", mode, task.id)])
                continue
            if len(modes) > 1 and getattr(engine, "prefixes", None) is not None:
                engine.prefixes.clear()  # else a task's second mode reuses the first one's prompts: order, not mode
            row = run_agentkit(task, engine, mode, max_iterations=max_iterations, agent_options=agent_options)
            if bfcl:
                row["bfcl_single"] = _safe_bfcl(engine, task, mode)
            publish(row)
    if peers:
        _run_peers(tasks, peers, base_url, max_iterations, publish, kept, model, lora)
    publish(None, partial=False)
    if plot is not None:
        from .agent_plot import plot_agent_loop

        result["plots"] = [str(plot_agent_loop(result, Path(plot)))]
        write_json_atomic(out, result)
    return result


def _resumable(resume: str | Path | None, max_iterations: int) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The rows of an earlier result, by (framework, mode, task id); it must have used the same iteration limit."""
    if resume is None:
        return {}
    import json

    earlier = json.loads(Path(resume).read_text(encoding="utf-8"))
    if earlier.get("max_iterations") != max_iterations:
        raise UserError(f"--resume {str(resume)!r} ran with max_iterations={earlier.get('max_iterations')}, "
                        f"this run with {max_iterations}")
    return {(r["framework"], r["mode"], r["id"]): r for r in earlier.get("items", [])}


def _safe_bfcl(engine: Any, task: AgentTask, mode: str) -> bool | None:
    try:
        return bfcl_single(engine, task, mode)
    except Exception as e:  # noqa: BLE001 (a schema the compiler refuses scores as a failed single call)
        print(f"[{task.id}] bfcl single call: {type(e).__name__}: {e}", file=sys.stderr)
        return False


def _run_peers(tasks: list[AgentTask], peers: list[str], base_url: str | None, max_iterations: int,
               publish: Callable[[dict[str, Any]], None], kept: dict[tuple[str, str, str], dict[str, Any]],
               model: str | None = None, lora: str | None = None) -> None:
    from contextlib import nullcontext

    from .agent_peers import API_KEY, run_peer, serve

    key = API_KEY if base_url is None else os.environ.get("OPENAI_API_KEY", "none")
    todo = [(t, p) for t in tasks for p in peers if (p, "server", t.id) not in kept]
    for task, peer in [(t, p) for t in tasks for p in peers if (p, "server", t.id) in kept]:
        publish(kept[(peer, "server", task.id)])
    if not todo:
        return
    with serve(model, lora=lora) if base_url is None else nullcontext(base_url) as url:
        for task, peer in todo:
            publish(run_peer(peer, task, url, max_iterations=max_iterations, api_key=key))


def _log(row: dict[str, Any]) -> None:
    calls = ", ".join(f"{c['name']}({c['outcome']})" for c in row["calls"]) or "no calls"
    print(f"[{row['framework']} {row['mode']} {row['id']}] success={row['success']} finished={row['finished']} "
          f"iters={row['iterations']} {calls} {row['run_ms'] / 1000:.1f}s"
          + (f" stopped: {row['error'][:100]}" if row["error"] else ""), file=sys.stderr, flush=True)


def merge_results(paths: list[str | Path], out: str | Path, plot: str | Path | None = None) -> dict[str, Any]:
    """One result from several runs' JSON (e.g. a ``--limit`` run, its continuation, a peers-only run): their rows
    (the first of any duplicate task, framework and mode), summarized again; a plot at ``plot``."""
    import json

    runs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in paths]
    limits = {r.get("max_iterations") for r in runs}
    if len(limits) != 1:
        raise UserError(f"the runs used different max_iterations ({sorted(map(str, limits))}); not merged")
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in runs:
        for row in r.get("items", []):
            seen.setdefault((row["framework"], row["mode"], row["id"]), row)
    rows = list(seen.values())
    model = next((r["model"] for r in runs if "server" not in r.get("model", "")), runs[0].get("model"))
    result = {**{k: runs[0].get(k) for k in ("suite", "kinds", "max_iterations", "instructions")}, "model": model,
              "merged_from": [{"path": str(p), "command": r.get("env", {}).get("command"),
                               "git": r.get("env", {}).get("git"), "partial": r.get("partial")}
                              for p, r in zip(paths, runs)],
              "partial": any(r.get("partial") for r in runs), "tasks": len({row["id"] for row in rows}),
              "summary": summarize_all(rows), "items": rows}
    result["modes"] = result["summary"].get("agentkit", {})
    write_json_atomic(Path(out), result)
    if plot is not None:
        from .agent_plot import plot_agent_loop

        result["plots"] = [str(plot_agent_loop(result, Path(plot)))]
        write_json_atomic(Path(out), result)
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m agentkit.evals.agent_loop merge A.json B.json --out C.json [--plot C.png]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m agentkit.evals.agent_loop")
    ap.add_argument("command", choices=["merge"])
    ap.add_argument("results", nargs="+", help="result JSON files of agent-loop runs")
    ap.add_argument("--out", required=True)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args(argv)
    print(table(merge_results(args.results, args.out, args.plot)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
