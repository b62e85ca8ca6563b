"""The eval runner on the tiny random-weight model over the real BFCL files (--limit 3 per file)."""

from __future__ import annotations

import json

import pytest

from agentkit.evals import runner
from agentkit.evals.runner import EVAL_MODES, run_eval

pytestmark = pytest.mark.usefixtures("one_thread")


MODE_KEYS = {"n", "task_success", "valid_rate", "decoder_forwards_mean", "encoder_forwards_mean", "forwards_mean",
             "tokens_per_forward", "tokens_per_forward_excl_pinned", "latency_ms_p50", "latency_ms_p95",
             "output_tokens_per_s", "compile_ms_mean"}


@pytest.fixture(scope="module")
def result(tiny, shared_data, tmp_path_factory):
    d = tmp_path_factory.mktemp("eval")
    res = run_eval("bfcl", shared_data / "bfcl", list(EVAL_MODES), limit=3, model=None, out=d / "r.json",
                   plot=d / "r.png", seed=0, engine=tiny, free_max_new_tokens=24, progress=False, quiet=True)
    return res, d


def test_json_keys_and_counts(result):
    _, d = result
    on_disk = json.loads((d / "r.json").read_text())
    assert on_disk["partial"] is False and on_disk["items_done"] == 6
    for key in ("suite", "model", "modes", "ratios_vs_ar_constrained", "env", "items"):
        assert key in on_disk
    assert set(on_disk["env"]) >= {"python", "torch", "threads", "platform", "time", "command"}
    assert set(on_disk["modes"]) == set(EVAL_MODES)
    for m, s in on_disk["modes"].items():
        assert MODE_KEYS <= set(s), m
        assert s["n"] == 6  # 3 per file, 2 files
    assert on_disk["ratios_vs_ar_constrained"]["ar-constrained"]["forwards"] == 1.0
    assert set(on_disk["ratios_vs_ar_constrained"]["diffusion"]) >= {"forwards", "latency_p50", "task_success_delta"}
    assert len(on_disk["items"]) == 6 * len(EVAL_MODES)
    ids = [r["id"] for r in on_disk["items"]]
    assert ids[0].startswith("multiple_") and ids[len(EVAL_MODES)].startswith("simple_python_")  # interleaved files


def test_constrained_modes_always_valid(result):
    res, _ = result
    for m in ("ar-constrained", "diffusion", "verify"):
        assert res["modes"][m]["valid_rate"] == 1.0, [r for r in res["items"] if r["mode"] == m and not r["valid"]]
        assert res["modes"][m]["compile_ms_mean"] > 0
    # verify reproduces greedy AR under the template exactly
    by = {(r["id"], r["mode"]): r for r in res["items"]}
    for iid in {r["id"] for r in res["items"]}:
        assert by[(iid, "verify")]["text"] == by[(iid, "ar-constrained")]["text"]


def test_plots_written(result):
    res, d = result
    for name in ("r.png", "r.tpf.png", "r.canvas.png"):
        assert (d / name).stat().st_size > 1000, name
    assert res["canvas_example"]["blocks"]


def test_markdown_table(result):
    res, _ = result
    table = runner.markdown_table(res)
    assert table.count("\n") == 1 + len(EVAL_MODES) and "| ar-constrained |" in table


def test_interrupted_run_keeps_partial_file(tiny, shared_data, tmp_path, monkeypatch):
    calls = {"n": 0}
    real = tiny.generate

    def flaky(*a, **kw):
        calls["n"] += 1
        if calls["n"] > 2 * 2 + 1:  # items 1 and 2 (2 modes each) finish; the third is interrupted
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(tiny, "generate", flaky)
    out = tmp_path / "partial.json"
    with pytest.raises(KeyboardInterrupt):
        run_eval("bfcl", shared_data / "bfcl", ["ar-constrained", "diffusion-causal"], limit=3, model=None, out=out,
                 plot=None, seed=0, engine=tiny, progress=False, quiet=True)
    part = json.loads(out.read_text())
    assert part["partial"] is True and part["items_done"] == 2 and part["items_total"] == 6
    assert len(part["items"]) == 4 and part["modes"]["diffusion-causal"]["n"] == 2
    assert not list(tmp_path.glob(".partial.json.*"))  # no temporary file left behind


def test_unknown_suite_and_registered_suite(tiny, tmp_path):
    with pytest.raises(ValueError, match="unknown eval suite"):
        run_eval("nope", tmp_path, ["ar"], out=tmp_path / "x.json", engine=tiny, progress=False, quiet=True)

    def load(data, limit):
        return ["a", "b"][:limit]

    def run(engine, item, prepared, mode, ctx):
        res = engine.generate("hi " + item, ctx.config(mode), raw=True)
        return {"success": item == "a", "valid": True, "stats": res.stats}

    runner.register_suite("toy", runner.Suite(name="toy", load=load, run=run, modes=("ar-unconstrained", "verify")))
    res = run_eval("toy", tmp_path, ["ar-unconstrained", "verify"], limit=2, out=tmp_path / "t.json", engine=tiny,
                   free_max_new_tokens=4, max_new_tokens=4, progress=False, quiet=True)
    assert res["modes"]["ar-unconstrained"]["task_success"] == 0.5 and res["ratios_vs_ar_constrained"] == {}


def test_each_mode_of_an_item_starts_from_an_empty_prefix_cache(tiny, tmp_path):
    """A mode that ran second would reuse the prompt the first one encoded, and its latency would say where it ran."""
    seen = []

    def run(engine, item, prepared, mode, ctx):
        seen.append((mode, engine.prefixes.stats()["blocks"]))
        res = engine.generate([{"role": "user", "content": "hi " + item}], ctx.config(mode))
        return {"success": True, "valid": True, "stats": res.stats}

    runner.register_suite("toy_cache", runner.Suite(name="toy_cache", load=lambda data, limit: ["a", "b"], run=run,
                                                    modes=("ar-unconstrained", "verify")))
    run_eval("toy_cache", tmp_path, ["ar-unconstrained", "verify"], out=tmp_path / "t.json", engine=tiny,
             free_max_new_tokens=2, max_new_tokens=2, progress=False, quiet=True)
    assert [m for m, _ in seen] == ["ar-unconstrained", "verify", "verify", "ar-unconstrained"]
    assert [blocks for _, blocks in seen] == [0, 0, 0, 0]


def test_plain_ar_names_no_bfcl_mode(tiny, shared_data, tmp_path):
    """The engine's ``ar`` runs twice in BFCL, under the template and without it; ``ar`` alone is refused with
    both names, and result files that say ``ar`` read as the unconstrained mode."""
    from agentkit.errors import UserError

    with pytest.raises(UserError, match="ar-constrained .*ar-unconstrained"):
        run_eval("bfcl", shared_data / "bfcl", ["ar", "verify"], limit=1, out=tmp_path / "x.json", engine=tiny,
                 progress=False, quiet=True)
    assert not (tmp_path / "x.json").exists()
    assert runner.eval_mode_name("ar") == "ar-unconstrained" and runner.eval_mode_name("verify") == "verify"
    assert runner.EvalContext().constrained("ar-constrained") and not runner.EvalContext().constrained("ar-unconstrained")
    with pytest.raises(ValueError, match="unknown mode 'ar'"):
        runner.EvalContext().config("ar")


def test_the_bfcl_prompt_is_a_run_setting(tiny, shared_data, tmp_path, monkeypatch):
    from agentkit.errors import UserError
    from agentkit.evals import bfcl

    seen = []
    build = bfcl.build_prompt
    monkeypatch.setattr(bfcl, "build_prompt", lambda item, prompt="default": seen.append(prompt) or build(item, prompt))
    res = run_eval("bfcl", shared_data / "bfcl", ["ar-constrained"], limit=1, out=tmp_path / "r.json", engine=tiny,
                   prompt="example", progress=False, quiet=True)
    assert seen == ["example", "example"] and "--prompt example" in res["env"]["command"]
    with pytest.raises(UserError, match="unknown bfcl prompt 'chatty'; known: default, plain, expert, example, rules"):
        run_eval("bfcl", shared_data / "bfcl", ["ar-constrained"], limit=1, out=tmp_path / "r.json", engine=tiny,
                 prompt="chatty", quiet=True)
    with pytest.raises(UserError, match="--prompt chooses bfcl's system prompt"):
        run_eval("coverage", shared_data / "maskbench", [], limit=1, out=tmp_path / "r.json", prompt="example")
