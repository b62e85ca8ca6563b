"""Routing by measurement: the calibrated mode, and the fallback when no calibration exists."""

import itertools
import json
import warnings

import pytest

from agentkit import calibration as C
from agentkit.errors import InvalidRequestError
from agentkit.sdk import RoutingPolicy


def _cal(**modes):
    return C.Calibration(model="m", device="cpu",
                         results=[C.ModeResult(k, 20, s, f, p) for k, (s, f, p) in modes.items()])


def test_choose_is_the_fastest_at_equal_success_and_never_dominated():
    assert C.choose(_cal(ar=(0.4, 9, 3000), diffusion=(0.4, 12, 4100), verify=(0.4, 8, 2900)).results) == "verify"
    assert C.choose(_cal(ar=(0.4, 9, 3000), diffusion=(0.35, 6, 2000)).results) == "ar"  # faster but worse
    assert C.choose(_cal(ar=(0.4, 9, 3000), diffusion=(0.35, 6, 2000)).results, tolerance=0.05) == "diffusion"
    for perm in itertools.permutations([("ar", 0.4, 3000.0), ("diffusion", 0.45, 2500.0), ("verify", 0.3, 1000.0)]):
        res = [C.ModeResult(m, 20, s, 1, p) for m, s, p in perm]
        chosen = next(r for r in res if r.mode == C.choose(res))
        assert not any(r.success > chosen.success and r.p50_ms < chosen.p50_ms for r in res)
    with pytest.raises(InvalidRequestError):
        C.choose([])


def test_routing_picks_the_calibrated_mode(tmp_path):
    cal = _cal(ar=(0.4, 9, 3000), verify=(0.4, 7, 2500))
    C.path_for("my-model", "cpu", tmp_path).write_text(cal.to_json())
    assert C.Calibration.from_json(cal.to_json()).structured == "verify"
    policy = RoutingPolicy.calibrated("my-model", "cpu", tmp_path)
    assert (policy.plan, policy.tool_call, policy.tool_input, policy.extract, policy.reply) == (
        "verify", "verify", "verify", "verify", "ar")


def test_missing_calibration_falls_back_to_ar_with_one_warning(tmp_path):
    with pytest.warns(C.CalibrationWarning, match="no calibration") as rec:
        assert RoutingPolicy.calibrated("unmeasured-model", "cuda", tmp_path).tool_call == C.FALLBACK == "ar"
    assert len(rec) == 1 and "\n" not in str(rec[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second lookup is silent
        assert C.structured_mode("unmeasured-model", "cuda", tmp_path) == "ar"


def test_the_default_policy_uses_the_shipped_calibration():
    cal = C.load(None, "cpu")
    assert cal is not None, "no calibration shipped for the default model on CPU (agentkit calibrate)"
    policy = RoutingPolicy()
    assert policy.plan == cal.mode_for("plan") and policy.reply == cal.mode_for("reply")
    assert policy.tool_call == cal.mode_for("tool_call") and policy.extract == cal.mode_for("extract")
    for step in (None, *cal.steps):
        results = cal.results if step is None else cal.steps[step]
        chosen = next(r for r in results if r.mode == (cal.structured if step is None else cal.mode_for(step)))
        assert chosen.success >= max(r.success for r in results) - cal.tolerance, step
    assert C.model_key("SmolLM2-135M-Instruct (embedded, Q4_1 dequantized)") == C.model_key(None)


def test_a_step_measured_on_its_own_requests_takes_its_own_mode(tmp_path):
    cal = _cal(ar=(0.4, 9, 3000), verify=(0.4, 7, 3500))  # structured steps in general: ar
    cal.steps["tool_input"] = [C.ModeResult("ar", 24, 1.0, 70, 2300), C.ModeResult("verify", 24, 1.0, 27, 1440)]
    C.path_for("my-model", "cpu", tmp_path).write_text(cal.to_json())
    back = C.Calibration.from_json(cal.to_json())
    assert (back.structured, back.mode_for("tool_input"), back.mode_for("extract")) == ("ar", "verify", "ar")
    assert json.loads(cal.to_json())["step_modes"] == {"tool_input": "verify"}
    policy = RoutingPolicy.calibrated("my-model", "cpu", tmp_path)
    assert (policy.tool_call, policy.tool_input, policy.extract) == ("ar", "verify", "ar")
    cal.steps["tool_input"][1].success = 0.9  # a mode that writes other outputs is not chosen for being faster
    assert C.Calibration.from_json(cal.to_json()).mode_for("tool_input") == "ar"


def test_the_default_policy_routes_each_step_as_the_shipped_calibration_says():
    cal = C.load(None, "cpu")
    policy = RoutingPolicy()
    assert (policy.tool_input, policy.extract, policy.reply) == (
        cal.mode_for("tool_input"), cal.mode_for("extract"), cal.mode_for("reply"))
    assert _cal(ar=(0.4, 9, 3000), diffusion=(0.4, 6, 2000)).mode_for("reply") == "ar"  # unmeasured: never a canvas
    assert policy.plan == cal.mode_for("plan") and policy.tool_call == cal.mode_for("tool_call")


def test_a_steps_measurement_is_read_from_the_runs_that_made_it():
    from agentkit.evals.calibrate import with_step

    def loop_run(mode, reply_ms, success):
        items = [{"framework": "agentkit", "mode": mode, "success": ok, "iter_ms": [900.0, ms],
                  "iter_forwards": [12, 6], "steps": ["tool_call:add", "reply"]} for ms, ok in zip(reply_ms, success)]
        return {"suite": "agent-loop", "command": f"agentkit eval agent-loop --modes {mode}", "items": items}

    cal = _cal(ar=(0.4, 9, 3000))
    runs = [loop_run("default", [300, 320, 340], [1, 0, 1]), loop_run("drafter", [200, 260, 250], [1, 0, 1])]
    with_step(cal, "reply", runs, "two runs")
    assert [(r.mode, r.n, r.success, r.forwards, r.p50_ms) for r in cal.steps["reply"]] == [
        ("ar", 3, 0.6667, 6, 320.0), ("verify", 3, 0.6667, 6, 250.0)]
    assert cal.mode_for("reply") == "verify" and "agent-loop --modes drafter" in cal.notes["steps.reply"]
    with pytest.raises(InvalidRequestError, match="twice"):
        with_step(cal, "reply", runs + runs[:1], "a mode twice")
    with pytest.raises(InvalidRequestError, match="measures the 'extract' step"):
        with_step(cal, "extract", runs, "an agent loop says nothing of extraction")
    with pytest.raises(InvalidRequestError, match="unknown step kind"):
        with_step(cal, "planning", runs, "no such step")


def test_reply_steps_are_grouped_by_the_mode_each_ran_in():
    from agentkit.evals.calibrate import step_results

    def row(mode, modes, reply_ms, ok):
        return {"framework": "agentkit", "mode": mode, "success": ok, "iter_ms": [900.0, reply_ms],
                "iter_forwards": [12, 6 if modes[1] == "verify" else 11], "steps": ["tool_call:add", "reply"],
                "iter_modes": modes}

    run = {"suite": "agent-loop", "items": [
        row("ar", ["ar", "ar"], 400.0, 1), row("default", ["verify", "verify"], 300.0, 1),
        row("ar", ["ar", "ar"], 420.0, 0), row("default", ["verify", "verify"], 310.0, 0),
        row("default", ["verify", "ar"], 500.0, 1),  # a sampled reply decodes in ar: counted with ar's
        {"framework": "smolagents", "mode": "default", "success": 1, "iter_ms": [1.0], "steps": ["reply"]}]}
    got = {r.mode: (r.n, r.success, r.forwards, r.p50_ms) for r in step_results(run, "reply")}
    assert got == {"ar": (3, 0.6667, 11, 420.0), "verify": (2, 0.5, 6, 305.0)}
    with pytest.raises(InvalidRequestError, match="no plan iterations"):
        step_results(run, "plan")
    planned = {"suite": "agent-loop", "items": [
        {"framework": "agentkit", "mode": m, "success": 1, "iter_ms": [ms, 900.0, 300.0], "iter_forwards": [fw, 9, 8],
         "steps": ["plan", "tool_call:add", "reply"], "iter_modes": [m, m, "ar"]}
        for m, ms, fw in (("ar", 700.0, 30), ("verify", 500.0, 14))]}
    assert [(r.mode, r.forwards, r.p50_ms) for r in step_results(planned, "plan")] == [("ar", 30, 700.0),
                                                                                       ("verify", 14, 500.0)]


def test_calibrate_reads_a_steps_run_from_a_gzipped_results_file(tmp_path):
    import gzip

    from typer.testing import CliRunner

    from agentkit.cli import app

    items = [{"framework": "agentkit", "mode": m, "success": 1, "iter_ms": [900.0, ms], "iter_forwards": [12, 6],
              "steps": ["tool_call:add", "reply"]} for m, ms in (("default", 300.0), ("drafter", 200.0))]
    run = {"suite": "agent-loop", "command": "agentkit eval agent-loop --modes default,drafter", "items": items}
    (tmp_path / "run.json.gz").write_bytes(gzip.compress(json.dumps(run).encode()))
    dest = tmp_path / "cal.json"
    dest.write_text(_cal(ar=(0.4, 9, 3000)).to_json())
    res = CliRunner().invoke(app, ["calibrate", "--step", "reply", "--results", str(tmp_path / "run.json.gz"),
                                   "--out", str(dest)])
    assert res.exit_code == 0, res.output
    assert C.Calibration.from_json(dest.read_text()).mode_for("reply") == "verify"


def test_a_cpu_is_calibrated_by_its_kind_and_amx_reads_avx512s(tmp_path):
    """A pass's relative cost differs by several times between CPU kinds, so "cpu" is keyed by this CPU's kind; an
    AMX CPU without its own file reads avx512_bf16's (both native bf16) with one warning, AVX2 nobody else's."""
    from agentkit.engine.backbone import cpu_kind

    assert C.device_key("cpu") == f"cpu-{cpu_kind()}" and C.device_key("cuda") == "cuda"
    assert C.path_for("m2", "cpu", tmp_path).name == f"m2.cpu-{cpu_kind()}.json"
    cal = _cal(ar=(0.4, 9, 3000), verify=(0.4, 7, 2500))
    C.path_for("kinds-model", "cpu-avx512_bf16", tmp_path).write_text(cal.to_json())
    assert C.structured_mode("kinds-model", "cpu-avx512_bf16", tmp_path) == "verify"
    with pytest.warns(C.CalibrationWarning, match="are cpu-avx512_bf16's") as rec:
        assert C.structured_mode("kinds-model", "cpu-amx", tmp_path) == "verify"
    assert len(rec) == 1 and "\n" not in str(rec[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second lookup is silent
        assert C.step_mode("extract", "kinds-model", "cpu-amx", tmp_path) == "verify"
    with pytest.warns(C.CalibrationWarning, match="no calibration for kinds-model on cpu-avx2"):
        assert C.structured_mode("kinds-model", "cpu-avx2", tmp_path) == C.FALLBACK


@pytest.mark.parametrize("kind", ["avx2", "avx512_bf16", "amx"])
def test_the_default_model_is_calibrated_on_every_cpu_kind(kind):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.CalibrationWarning)  # amx: avx512_bf16's, with a warning
        cal = C.load(None, f"cpu-{kind}")
    assert cal is not None and cal.device == f"cpu-{kind if kind != 'amx' else 'avx512_bf16'}"
    assert set(cal.steps) == {"plan", "tool_call", "tool_input", "extract", "reply"}


def test_why_names_the_measurement_that_chose_the_mode(tmp_path):
    cal = _cal(ar=(0.4, 9, 3000), verify=(0.4, 7, 2500))
    cal.steps["extract"] = [C.ModeResult("ar", 85, 0.88, 30, 1360), C.ModeResult("verify", 85, 0.88, 17, 1250)]
    assert cal.why("extract") == ("verify: calibrated on cpu, extract steps' 85 requests: p50 1250 ms, success 0.880 "
                                  "(against ar 1360 ms, success 0.880)")
    assert cal.why(None).startswith("verify: calibrated on cpu, BFCL's 20 requests: p50 2500 ms")
    assert cal.why("plan").startswith("verify: calibrated on cpu, BFCL's")  # not measured on its own: BFCL's choice
    assert cal.why("reply") == "ar: replies were not measured on cpu"
    C.path_for("why-model", "cpu-avx2", tmp_path).write_text(cal.to_json())
    assert C.why("extract", "why-model", "cpu-avx2", tmp_path) == cal.why("extract")
    with pytest.warns(C.CalibrationWarning):
        assert C.why("extract", "why-model", "cuda", tmp_path) == "ar: no calibration for why-model on cuda"


def test_calibrate_times_each_mode_from_an_empty_prefix_cache():
    """Every mode encodes the question's prompt itself (a later mode reusing the first one's prompt pass measured
    verify at 0.23x ar's p50 on AVX2), and the modes' order rotates per question."""
    from pathlib import Path
    from types import SimpleNamespace

    from agentkit.evals.calibrate import calibrate

    class Recording:
        name, adapter_path, batches = "m", None, False
        config = SimpleNamespace(backend="torch", dtype="auto", threads=1)

        def __init__(self):
            self.prefixes, self.seen = {}, []

        def generate(self, prompt, cfg, template=None, **kw):
            self.seen.append((cfg.mode, len(self.prefixes)))
            self.prefixes[str(prompt)] = True
            return SimpleNamespace(text="[]", value=[], stats=SimpleNamespace(forwards=3, latency_ms=5.0))

    engine = Recording()
    cal = calibrate(engine, Path(__file__).parents[1] / "evals" / "data" / "bfcl", limit=2, modes=("ar", "verify"),
                    log=None)
    timed = engine.seen[2:]  # after one warm-up request per mode
    assert [n for _, n in timed] == [0] * len(timed) and len(timed) == 2 * cal.results[0].n
    assert [m for m, _ in timed[:4]] == ["ar", "verify", "verify", "ar"]
