"""``agentkit run`` and ``agentkit eval`` argument handling: sibling imports, one error line, --debug."""

from __future__ import annotations

import textwrap

import pytest
from typer.testing import CliRunner

from agentkit.cli import SUITES, _check_suite, app
from agentkit.evals.runner import get_suite


def lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.strip()]


@pytest.fixture
def script(tmp_path):
    (tmp_path / "helpers.py").write_text("GREETING = 'hello from a sibling module'\n")
    path = tmp_path / "my_agent.py"
    path.write_text(textwrap.dedent("""
        from helpers import GREETING

        from agentkit.sdk import Agent, TestModel

        agent = Agent(TestModel(output_text=GREETING))
    """))
    return path


def test_run_imports_a_sibling_module_of_the_script(script):
    res = CliRunner().invoke(app, ["run", f"{script}:agent", "say hi"])
    assert res.exit_code == 0, res.output
    assert "hello from a sibling module" in res.output


def test_run_errors_are_one_line(script):
    res = CliRunner().invoke(app, ["run", f"{script}:nope", "x"])
    assert res.exit_code == 2 and lines(res.output) == [f"error: UserError: '{script}' has no attribute 'nope'"]
    broken = script.parent / "broken.py"
    broken.write_text("import not_a_module_anywhere\n")
    res = CliRunner().invoke(app, ["run", f"{broken}:agent", "x"])
    assert res.exit_code == 1
    assert lines(res.output) == [("error: ModuleNotFoundError: No module named 'not_a_module_anywhere' "
                                  "(agentkit --debug ... for the traceback)")]
    res = CliRunner().invoke(app, ["--debug", "run", f"{broken}:agent", "x"])
    assert res.exit_code == 1 and "Traceback" in res.output and lines(res.output)[-1].startswith("error: ")


@pytest.mark.parametrize("args, message", [
    (["eval", "bfcl"], "error: UserError: --data is required for the bfcl suite: the folder with its data"),
    (["eval", "bfcl", "--data", "/no/such/dir"], ("error: UserError: --data '/no/such/dir': no such file or folder; "
                                                  "the BFCL questions ship in evals/data/bfcl (simple, multiple) and "
                                                  "evals/data/bfcl_parallel")),
    (["eval", "nosuch", "--data", "."], ("error: UserError: unknown eval suite 'nosuch'; the suites are "
                                         "bfcl, coverage, validity, agent, extract, agent-loop, repair")),
])
def test_eval_bad_arguments_give_one_error_line(args, message):
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and lines(res.output) == [message]


def test_every_listed_suite_resolves(tmp_path):
    for suite in SUITES:
        _check_suite(suite, tmp_path)
        if suite not in ("extract", "agent-loop"):  # these two the CLI runs itself (their own option sets)
            assert get_suite(suite) is not None
    assert _check_suite("agent", None).name == "coding_tasks"  # the agent suite's tasks by default
