"""``agentkit calibrate``: measure every mode on the same BFCL questions, in one run, and write the calibration
that :mod:`agentkit.calibration` reads (the measuring half lives here, with the suite it runs)."""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

from ..calibration import Calibration, ModeResult, device_key, model_key
from ..config import DecodeConfig
from ..errors import InvalidRequestError
from . import bfcl
from .timing import cold_prompts


def calibrate(engine, data: Path, *, limit: int = 10, modes: tuple[str, ...] = ("ar", "diffusion", "verify"),
              tolerance: float = 0.0, device: str = "cpu", command: str = "", log=print) -> Calibration:
    """Run the first ``limit`` questions of each BFCL file in every mode on ``engine`` (same questions, same
    run; each request from an empty prefix cache, the modes' order rotating by one per question) and return the
    calibration. Compile time is not counted (it is paid once per template)."""
    items = bfcl.load_bfcl(Path(data), limit=limit)
    warm = bfcl.compile_call(items[0], cached=True)
    for m in modes:  # first-use costs (adapter copy, token tables) are not what a request pays
        engine.generate(bfcl.build_prompt(items[0]), DecodeConfig(mode=m), template=warm.template())
    rows: dict[str, list[tuple[bool, int, float]]] = {m: [] for m in modes}
    for i, item in enumerate(items):
        calls = bfcl.compile_call(item, cached=True)
        for m in modes[i % len(modes):] + modes[: i % len(modes)]:
            cold_prompts(engine)  # else a later mode reuses the first one's prompt pass
            res = engine.generate(bfcl.build_prompt(item), DecodeConfig(mode=m), template=calls.template())
            ok = bool(bfcl.evaluate(item, res.text, res.value)["success"])
            rows[m].append((ok, res.stats.forwards, res.stats.latency_ms))
        if log:
            log(f"{item.id}: " + "  ".join(f"{m} {rows[m][-1][0]:d}/{rows[m][-1][1]}/{rows[m][-1][2]:.0f}ms"
                                            for m in modes))
    results = [ModeResult(m, len(r), round(statistics.mean(x[0] for x in r), 4),
                          round(statistics.mean(x[1] for x in r), 2), round(statistics.median(x[2] for x in r), 1))
               for m, r in rows.items()]
    return Calibration(model=model_key(engine.name.split(" + ")[0] if engine.name else None), device=device_key(device),
                       results=results, tolerance=tolerance, command=command, date=time.strftime("%Y-%m-%d"),
                       hardware=hardware(),
                       notes={"questions": len(items), "per_file": limit, "data": Path(data).name,
                              "adapter": str(engine.adapter_path) if engine.adapter_path else None,
                              "engine": {k: getattr(engine.config, k, None) for k in ("backend", "dtype", "threads")},
                              "load_average": [round(x, 1) for x in os.getloadavg()]})


def hardware() -> str:
    """The machine in words: architecture, CPU model (Linux), kind and cores."""
    from ..engine.backbone import cpu_kind
    from ..models.loader import cpu_info

    name = cpu_info("model name") or platform.processor()
    return f"{platform.machine()} {name} ({cpu_kind()}), {os.cpu_count()} cores".replace("  ", " ")


def step_results(run: dict, step: str) -> list[ModeResult]:
    """A finished run's modes as ``step``'s calibration rows (:attr:`Calibration.steps`), the modes ``RoutingPolicy``
    can name only. An ``agentkit eval extract`` results file (success: field accuracy); an ``evals/drafter_verify.py``
    one with ``--lookup`` (ar-constrained as ``ar``, verify with lookup drafts as ``verify``; success: the share of
    outputs equal to ar-constrained's); for ``reply`` and ``plan``, an ``agentkit eval agent-loop`` one (that step's
    iterations by the mode each ran in, ``iter_modes``; in older runs ``default``'s as ``ar`` and ``drafter``'s as
    ``verify``; success: those runs' task success; p50 and forwards: the step's iterations'). p50:
    complete-request latency."""
    from ..config import MODES

    if run.get("suite") == "extract":
        return [ModeResult(m, s["items"], s["field_accuracy"],
                           round(statistics.mean(r["forwards"] for r in run["results"][m]), 2), s["p50_ms"])
                for m, s in run["summary"].items() if m in MODES]
    if run.get("suite") == "agent-loop" and step in AGENT_LOOP_STEPS:
        return _agent_loop_steps(run, step)
    if "ar-constrained" in run.get("summary", {}) and "verify-lookup" in run["summary"]:
        n, sm = run["n"], run["summary"]
        return [ModeResult("ar", n, 1.0, sm["ar-constrained"]["forwards_mean"], sm["ar-constrained"]["latency_ms_p50"]),
                ModeResult("verify", n, round(run["equal"]["verify-lookup"] / n, 4), sm["verify-lookup"]["forwards_mean"],
                           sm["verify-lookup"]["latency_ms_p50"])]
    raise InvalidRequestError(f"not a finished run that measures the {step!r} step: `agentkit eval extract`, "
                              "evals/drafter_verify.py with --lookup, or (reply, plan) an agent-loop run")


AGENT_LOOP_STEPS = ("reply", "plan")  # step kinds an agent-loop run measures (plans: with Agent(plan=True))
# the mode the reply steps of each agent-loop mode ran in, for runs that did not record ``iter_modes`` (before
# replies were calibrated to verify)
AGENT_LOOP_REPLY_MODES = {"default": "ar", "drafter": "verify"}


def _agent_loop_steps(run: dict, step: str) -> list[ModeResult]:
    """Each decoding mode's ``step`` iterations, over the agentkit rows of the run: their p50 and forwards, and the
    task success of the runs they were in (a run counted once per mode its ``step`` iterations ran in)."""
    rows = [r for r in run["items"] if r["framework"] == "agentkit"]
    if step == "reply" and not any("iter_modes" in r for r in rows):
        rows = [dict(r, iter_modes=[AGENT_LOOP_REPLY_MODES[r["mode"]]] * len(r["iter_ms"]))
                for r in rows if r["mode"] in AGENT_LOOP_REPLY_MODES]
    by_mode: dict[str, tuple[list, list]] = {}
    for r in rows:
        fws = r.get("iter_forwards") or [None] * len(r["iter_ms"])
        taken = [(ms, fw, m) for ms, fw, m, s in zip(r["iter_ms"], fws, r.get("iter_modes", ()), r["steps"])
                 if s == step]
        for m in dict.fromkeys(m for _, _, m in taken):
            runs, steps = by_mode.setdefault(m, ([], []))
            runs.append(float(r["success"]))
            steps += [(ms, fw) for ms, fw, mm in taken if mm == m]
    if not by_mode:
        raise InvalidRequestError(f"the agent-loop run has no {step} iterations (plans: a run with Agent(plan=True), "
                                  "evals/plan_steps.py)")
    return [ModeResult(m, len(runs), round(statistics.mean(runs), 4),
                       round(statistics.mean(fw for _, fw in steps), 2) if all(fw is not None for _, fw in steps)
                       else None, round(statistics.median(ms for ms, _ in steps), 1))
            for m, (runs, steps) in by_mode.items()]


def _command(run: dict) -> str:
    """The command that made a results file (an eval's ``command``, or its ``env``'s)."""
    env = run.get("env")
    return run.get("command") or (env.get("command") if isinstance(env, dict) else None) or "?"


def with_step(cal: Calibration, step: str, runs: list[dict], source: str) -> Calibration:
    """``cal`` with ``step``'s own measurement taken from ``runs`` (see :func:`step_results`; one mode in one run
    only), read from ``source``."""
    from ..steps.kinds import STEP_KINDS

    if step not in STEP_KINDS:
        raise InvalidRequestError(f"unknown step kind {step!r}: one of {', '.join(STEP_KINDS)}")
    rows = [r for run in runs for r in step_results(run, step)]
    if len({r.mode for r in rows}) != len(rows):
        raise InvalidRequestError(f"the runs measure a mode twice: {[r.mode for r in rows]}")
    cal.steps[step] = rows
    cal.notes[f"steps.{step}"] = f"{source}: " + "; ".join(f"`{_command(run)}`" for run in runs)
    return cal
