"""The ``agentkit`` command through typer's runner: its commands, ``generate`` on a local model directory, and
one ``error:`` line for bad arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentkit.cli import app
from agentkit.models.tiny import tiny_llama

runner = CliRunner()


def _json_line(out) -> dict:
    """The command's JSON object (loading progress bars go to stderr, which the runner may mix in)."""
    text = out.stdout
    return json.loads(text[text.index('{"text"'):].splitlines()[0])


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    lm = tiny_llama(0)
    d = tmp_path_factory.mktemp("tiny-model")
    lm.model.save_pretrained(d)
    lm.tokenizer.save_pretrained(d)
    return d


def test_help_lists_every_command():
    out = runner.invoke(app, ["--help"])
    assert out.exit_code == 0
    for cmd in ("generate", "demo", "eval", "run", "serve", "calibrate"):
        assert cmd in out.output


@pytest.mark.parametrize("mode", ["ar", "verify"])
def test_generate_on_a_local_model_directory_prints_one_json_object(model_dir, mode):
    out = runner.invoke(app, ["generate", "hello", "--model", str(model_dir), "--mode", mode,
                              "--max-new-tokens", "6", "--json"])
    assert out.exit_code == 0, out.output
    obj = _json_line(out)
    assert obj["mode"] == mode and isinstance(obj["text"], str)
    assert 1 <= obj["stats"]["output_tokens"] <= 6


def test_generate_under_a_schema_gives_a_valid_value(model_dir, tmp_path):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
              "required": ["n"], "additionalProperties": False}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    out = runner.invoke(app, ["generate", "a digit", "--model", str(model_dir), "--schema", str(path),
                              "--max-new-tokens", "24", "--json"])
    assert out.exit_code == 0, out.output
    value = _json_line(out)["value"]
    assert set(value) == {"n"} and 0 <= value["n"] <= 9


def test_a_missing_model_directory_is_one_error_line(tmp_path):
    out = runner.invoke(app, ["generate", "hi", "--model", str(tmp_path / "nope")])
    assert out.exit_code != 0
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "nope" in lines[0]


def test_eval_with_missing_data_is_one_error_line(tmp_path):
    out = runner.invoke(app, ["eval", "bfcl", "--data", str(tmp_path / "missing")])
    assert out.exit_code != 0
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), out.output
    assert "evals/data/bfcl" in lines[0]  # where the data is, from a clone


def test_the_bfcl_data_the_readme_names_ships_with_the_repository():
    from agentkit.evals.bfcl import load_bfcl

    repo = Path(__file__).resolve().parents[1]
    assert len(load_bfcl(repo / "evals" / "data" / "bfcl")) == 600


@pytest.mark.parametrize("suite, flag, value, says"
, [("coverage", "--lora", "x", "not used: --lora"),
                                                     ("coverage", "--model", "x", "not used: --model"),
                                                     ("coverage", "--dtype", "bfloat16", "not used: --dtype"),
                                                     ("extract", "--after-result", "null", "--after-result is")])
def test_a_loop_option_on_another_suite_is_an_error_not_ignored(tmp_path, suite, flag, value, says):
    data = tmp_path
    out = runner.invoke(app, ["eval", suite, "--data", str(data), flag, value])
    assert out.exit_code != 0 and says in out.output, out.output


def _bfcl_dir(tmp_path):
    """One BFCL-format question (and its possible answer) in a folder of its own."""
    d = tmp_path / "bfcl"
    (d / "possible_answer").mkdir(parents=True)
    q = {"id": "simple_python_0", "question": [[{"role": "user", "content": "Area of a triangle, base 10, height 5?"}]],
         "function": [{"name": "area", "description": "Triangle area.", "parameters": {
             "type": "dict", "properties": {"base": {"type": "integer"}, "height": {"type": "integer"}},
             "required": ["base", "height"]}}]}
    a = {"id": "simple_python_0", "ground_truth": [{"area": {"base": [10], "height": [5]}}]}
    (d / "BFCL_v4_simple_python.json").write_text(json.dumps(q) + "\n")
    (d / "possible_answer" / "BFCL_v4_simple_python.json").write_text(json.dumps(a) + "\n")
    return d


def test_eval_takes_the_engines_dtype_and_backend(model_dir, tmp_path):
    out = tmp_path / "eval.json"
    res = runner.invoke(app, ["eval", "bfcl", "--data", str(_bfcl_dir(tmp_path)), "--modes", "ar-constrained",
                              "--model", str(model_dir), "--dtype", "bfloat16", "--backend", "torch",
                              "--pass-width", "8", "--out", str(out), "--threads", "1"])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["modes"]["ar-constrained"]["n"] == 1 and doc["modes"]["ar-constrained"]["valid_rate"] == 1.0
    assert "--dtype bfloat16 --backend torch --pass-width 8" in doc["env"]["command"]


@pytest.mark.parametrize(("flag", "value", "name"), [("--dtype", "float16", "dtype"), ("--pass-width", "0", "pass_width")])
def test_eval_with_a_bad_engine_option_is_one_error_line(tmp_path, flag, value, name):
    out = runner.invoke(app, ["eval", "bfcl", "--data", str(_bfcl_dir(tmp_path)), flag, value])
    assert out.exit_code != 0
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and name in lines[0], out.output


@pytest.mark.parametrize(("flag", "value", "name"), [("--dtype", "float16", "dtype"), ("--backend", "onnx", "backend"),
                                                     ("--pass-width", "0", "pass_width"),
                                                     ("--attention", "flash", "attention"),
                                                     ("--q4-steps", "always", "q4_steps"),
                                                     ("--prepack", "always", "prepack"),
                                                     ("--row-exact", "on", "row_exact"),
                                                     ("--prefix-cache-mb", "-1", "prefix_cache_bytes"),
                                                     ("--prompt-chunk", "-8", "prompt_chunk")])
def test_serve_with_a_bad_engine_option_is_one_error_line(flag, value, name):
    out = runner.invoke(app, ["serve", flag, value])
    assert out.exit_code != 0
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and name in lines[0], out.output


def test_eval_extract_runs_the_tiny_directory(model_dir, tmp_path):
    from pathlib import Path

    tiny = Path(__file__).resolve().parents[1] / "evals" / "extract" / "tiny"
    out = tmp_path / "extract.json"
    res = runner.invoke(app, ["eval", "extract", "--data", str(tiny), "--modes", "ar,ar+compact", "--limit", "2",
                              "--model", str(model_dir), "--out", str(out), "--threads", "1"])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["items"] == 2 and set(doc["summary"]) == {"ar", "ar+compact"} and "| ar+compact |" in res.output
    bad = runner.invoke(app, ["eval", "extract", "--data", str(tiny), "--modes", "ar+bogus", "--model", str(model_dir)])
    assert bad.exit_code != 0 and "unknown setting" in bad.output


@pytest.mark.parametrize("command", ["generate", "serve"])
def test_generate_and_serve_take_threads(command):
    out = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0 and "--threads" in out.output


def test_the_agent_suite_runs_on_the_engine_the_options_name(model_dir, tmp_path):
    """``eval agent`` runs itself (not item by item); ``--model`` and the other engine options used to be
    ignored there (always the default model)."""
    out = tmp_path / "agent.json"
    res = runner.invoke(app, ["eval", "agent", "--model", str(model_dir), "--modes", "ar", "--limit", "1",
                              "--out", str(out), "--threads", "1"])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["model"] != "SmolLM2-135M-Instruct" and "SmolLM2" not in doc["model"], doc["model"]
    assert f"--model {model_dir}" in doc["env"]["command"] and len(doc["items"]) == 1
