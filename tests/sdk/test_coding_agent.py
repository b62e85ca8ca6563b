"""The coding-assistant example end to end: templated tools (SDK hook), scripted and random-weight models,
workspace confinement, and the coding eval's plumbing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentkit.config import DecodeConfig
from agentkit.constrain.edits import parse_edits
from agentkit.constrain.nodes import Lit, Template
from agentkit.errors import UnexpectedModelBehavior, UserError
from agentkit.evals import coding
from agentkit.sdk import Agent, FunctionModel, RoutingPolicy, Tool
from agentkit.sdk._generator import EngineGenerator
from agentkit.steps.kinds import tool_call_schema, tool_call_template

REPO = Path(__file__).resolve().parents[2]

ca = coding.example_module()

OFF_BY_ONE = {
    "calc.py": "def total(xs):\n    return sum(xs[1:])\n",
    "test_calc.py": "from calc import total\n\n\ndef test_total():\n    assert total([1, 2, 3]) == 6\n",
}


def repo(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    coding.write_repo(files, root)
    return root


def script(*outputs):
    """A FunctionModel answering each step with the next output (dicts are JSON; str for edits and the reply)."""
    it = iter(outputs)
    seen = []

    def fn(messages, info):
        seen.append(info)
        out = next(it)
        if info.step == "tool_input":
            assert info.template.matches(out), f"scripted edit outside the template: {out!r}"
        return out

    model = FunctionModel(fn)
    model.seen = seen
    return model


def call(name, **args):
    return {"name": name, "arguments": args}


# -- the SDK hook: templated tools ----------------------------------------------------------------------------


def _echo(text: str, upper: bool = False) -> str:
    """Echo the text.

    Args:
        text: what to echo
        upper: shout it
    """
    return text.upper() if upper else text


def test_templated_tool_is_a_bare_choice_in_the_call_template():
    counter = {"n": 0}

    def factory() -> Template:
        counter["n"] += 1
        return Template(Lit(f"v{counter['n']}"), kind="regex")

    echo = Tool(_echo, template_factory=factory)
    assert echo.templated and echo.input_parameter == "text"
    assert echo.spec["parameters"] == {"type": "object", "properties": {}, "additionalProperties": False}
    assert "next message" in echo.spec["description"]
    template = tool_call_template([echo])
    assert template.matches('{"name": "_echo", "arguments": {}}')
    assert not template.matches('{"name": "_echo", "arguments": {"text": "x"}}')
    assert tool_call_schema([echo])["anyOf"][0]["properties"]["arguments"]["properties"] == {}
    assert counter["n"] == 0  # built at call time, not when the agent is


def test_templated_tool_definition_errors():
    with pytest.raises(UserError, match="first parameter"):
        Tool(_int_first, template_factory=lambda: Template(Lit("x")))
    with pytest.raises(UserError, match="need defaults"):
        Tool(_two_required, template_factory=lambda: Template(Lit("x")))


def _int_first(n: int) -> int:
    return n


def _two_required(text: str, n: int) -> str:
    return text * n


async def test_tool_input_step_decodes_under_a_template_built_per_call():
    state = {"version": 0}

    def factory() -> Template:
        state["version"] += 1
        return Template(Lit(f"v{state['version']}"), kind="regex", meta={"note": "mine"})

    echo = Tool(_echo, template_factory=factory, input_prompt="Write the echo text.")

    def fn(messages, info):
        if info.step == "tool_call":
            n = sum(1 for m in messages if m["content"].startswith("Tool _echo returned"))
            return call("_echo") if n < 2 else call("final_answer")
        if info.step == "tool_input":
            assert info.mode == "verify"
            assert messages[-1] == {"role": "user", "content": "Write the echo text."}
            assert info.template.meta["step"] == "tool_input" and info.template.meta["note"] == "mine"
            return f"v{state['version']}"  # the template's only string: built just now
        return "done"

    agent = Agent(FunctionModel(fn), tools=[echo], routing=RoutingPolicy(tool_input="verify"))
    result = await agent.run("echo twice")
    call_mode = RoutingPolicy().tool_call  # the calibrated default (agentkit/calibrations)
    assert [(r.step, r.tool, r.mode) for r in result.trace] == [
        ("tool_call", "_echo", call_mode), ("tool_input", "_echo", "verify"),
        ("tool_call", "_echo", call_mode), ("tool_input", "_echo", "verify"),
        ("tool_call", "final_answer", call_mode), ("reply", None, RoutingPolicy().reply)]
    observations = [m["content"] for m in result.messages if m["content"].startswith("Tool _echo")]
    assert observations == ["Tool _echo returned: v1", "Tool _echo returned: v2"]
    assert RoutingPolicy.force("ar").tool_input == "ar"


async def test_templated_tool_refuses_call_arguments_and_reports_factory_errors():
    def broken() -> Template:
        raise RuntimeError("no files")

    echo = Tool(_echo, template_factory=broken, retries=1)
    model = script(call("_echo", text="sneaky"), call("_echo"), call("_echo"))
    agent = Agent(model, tools=[echo], output_retries=1)
    with pytest.raises(UnexpectedModelBehavior, match="no files") as e:
        await agent.run("x")
    errors = [r.error for r in e.value.trace]
    assert "takes no arguments" in errors[0]
    assert all("cannot build the input template: RuntimeError: no files" in x for x in errors[1:])
    assert [s.step for s in model.seen] == ["tool_call"] * 3  # no tool_input step without a template


def test_engine_generator_release_drops_the_cached_constraint(tiny):
    gen = EngineGenerator(tiny)
    template = ca.edit_template(ca.Workspace(REPO / "examples"), ["unit_converter.py"])
    tiny.constraint(template)
    assert id(template) in tiny._constraints
    gen.release(template)
    assert id(template) not in tiny._constraints


# -- the example agent, scripted -------------------------------------------------------------------------------


def test_scripted_agent_fixes_the_failing_test(tmp_path, capsys):
    root = repo(tmp_path, OFF_BY_ONE)
    assert coding.check_task(root, {"tests": True})[0] is False
    model = script(
        {"steps": ["read calc.py", "fix the slice", "run the tests"]},
        call("list_files"),
        call("read_file", path="calc.py"),
        call("apply_edits"),
        "calc.py\n<<<<<<< SEARCH\n    return sum(xs[1:])\n=======\n    return sum(xs)\n>>>>>>> REPLACE\n",
        call("run_tests"),
        call("final_answer"),
        "Fixed total() in calc.py: it skipped the first element; the tests pass.",
    )
    agent = ca.build_agent(root, model)
    result = agent.run_sync("make the failing test pass")
    assert "tests pass" in result.output
    assert coding.check_task(root, {"tests": True}) == (True, "")
    steps = [(r.step, r.tool) for r in result.trace]
    assert steps[0] == ("plan", None) and steps[-1] == ("reply", None)
    assert ("tool_input", "apply_edits") in steps
    runs = [m["content"] for m in result.messages if m["content"].startswith("Tool run_tests returned")]
    assert len(runs) == 1 and json.loads(runs[0].split("returned: ", 1)[1])["exit_code"] == 0
    # the workflow the tools' ``prepare`` offers: the file list once, the edit after a read, the tests after an edit
    offered = [sorted(s.tools) for s in model.seen if s.step == "tool_call"]
    assert offered[:4] == [["list_files", "read_file"], ["read_file"], ["apply_edits", "read_file"],
                           ["read_file", "run_tests"]]
    modes = {r.step: r.mode for r in result.trace}
    assert modes["reply"] == RoutingPolicy().reply and modes["tool_input"] == RoutingPolicy().tool_input  # calibrated default
    edit_step = next(s for s in model.seen if s.step == "tool_input")
    assert edit_step.template.meta["format"] == "search_replace"
    assert edit_step.config.max_new_tokens == edit_step.template.meta["max_new_tokens"]
    assert edit_step.template.meta["paths"] == ["calc.py"]  # the files read in this run, not test_calc.py
    assert "agent trace" in result.trace.render()


def test_edit_template_sees_the_files_as_they_are_now(tmp_path):
    root = repo(tmp_path, coding.load_tasks()[4]["files"])  # rename_function: three files, two edits
    rename_def = "shapes.py\n<<<<<<< SEARCH\ndef calc_area(w, h):\n=======\ndef area(w, h):\n>>>>>>> REPLACE\n"
    rename_import = ("report.py\n<<<<<<< SEARCH\nfrom shapes import calc_area\n=======\nfrom shapes import area\n"
                     ">>>>>>> REPLACE\n")
    rename_use = ('report.py\n<<<<<<< SEARCH\n    return f"area={calc_area(w, h)}"\n=======\n'
                  '    return f"area={area(w, h)}"\n>>>>>>> REPLACE\n')
    model = script(call("apply_edits"), rename_def, call("apply_edits"), rename_import, call("apply_edits"),
                   rename_use, call("run_tests"), call("final_answer"), "Renamed calc_area to area.")
    ca.build_agent(root, model, plan=False, workflow=False).run_sync("rename calc_area to area everywhere")
    ok, why = coding.check_task(root, coding.load_tasks()[4]["check"])
    assert ok, why
    later = [s.template for s in model.seen if s.step == "tool_input"][1]
    assert not later.matches(rename_def)  # the first edit changed shapes.py: its old line is gone


# -- random weights: every proposed edit applies -----------------------------------------------------------------


class _EditsFromEngine:
    """Scripted tool calls (``apply_edits`` ``n`` times, then stop); the edits themselves from a real engine."""

    def __init__(self, engine, n: int) -> None:
        self.engine, self.n, self.texts = EngineGenerator(engine), n, []

    async def generate(self, messages, config, template=None, on_draft=None):
        step = template.meta.get("step") if template is not None else "reply"
        if step == "tool_input":
            result = await self.engine.generate(messages, config, template, on_draft)
            self.texts.append((result.text, template))
            return result
        out = call("apply_edits") if step == "tool_call" and len(self.texts) < self.n else call("final_answer")
        return await FunctionModel(lambda m, i: out if step != "reply" else "done").generate(
            messages, config, template, on_draft)

    def release(self, template):
        self.engine.release(template)


@pytest.fixture(scope="module")
def tiny_long():
    """The tiny engine with 4096 positions: its tokenizer spends about a token per character, so the coding agent's
    system prompt (the tools' specs and the call example) with two edits' turns passes 2048."""
    from agentkit.engine.engine import Engine
    from agentkit.models.tiny import tiny_llama

    return Engine.from_loaded(tiny_llama(1, context=4096))


@pytest.mark.parametrize("mode", ["ar", "diffusion", "verify"])
def test_random_weight_edits_all_apply(tmp_path, tiny_long, mode, monkeypatch):
    monkeypatch.setattr(ca, "MAX_REPLACE_TOKENS", 24)  # random weights rarely end a REPLACE: keep it short
    root = repo(tmp_path, OFF_BY_ONE)
    model = _EditsFromEngine(tiny_long, n=2)
    agent = ca.build_agent(root, model, plan=False, routing=RoutingPolicy.force(mode), workflow=False)
    result = agent.run_sync("edit anything")
    edits = [r for r in result.trace if r.step == "tool_input"]
    assert len(edits) == 2 and len(model.texts) == 2
    for (text, template), rec in zip(model.texts, edits, strict=True):
        closed, _ = ca.close_cut_edit(text)  # an edit cut by the token budget is closed at its last whole line
        assert template.matches(closed), text
        assert len(parse_edits(closed)) == 1
        search, replace = parse_edits(closed)[0].search, parse_edits(closed)[0].replace
        if search == replace:  # random weights copy a line into REPLACE: a no-op is a typed failure, not "applied"
            assert "changes nothing" in rec.error, rec.error
        elif rec.error is not None:  # random words in a module that parsed: the edit guard refuses, typed
            assert "unparsable" in rec.error, rec.error
    assert edits[0].mode == mode  # after a refused edit the next call is a retry, decoded in ar
    applied = [r for r in edits if r.error is None]
    assert bool(applied) == any(m["content"].startswith("Tool apply_edits returned: applied 1 edit(s)")
                                for m in result.messages)


def test_random_weight_agent_runs_the_whole_loop(tmp_path, tiny, monkeypatch):
    """Every step from the random model; whatever it proposes is a valid call, and any edit applies."""
    monkeypatch.setattr(ca, "MAX_REPLACE_TOKENS", 24)
    root = repo(tmp_path, OFF_BY_ONE)
    agent = ca.build_agent(root, tiny, max_iterations=3, routing=RoutingPolicy.force("diffusion"), workflow=False)
    agent.decode = DecodeConfig(max_new_tokens=48)
    try:
        trace = agent.run_sync("fix the bug").trace
    except Exception as e:  # noqa: BLE001 -- iteration limit or a tool failing too often: the trace is what counts
        trace = e.trace
    assert len(trace) >= 2
    for r in trace:
        if r.step == "tool_input":
            assert r.error is None, r.error
        if r.step == "tool_call" and r.error is not None:
            assert "output unusable" not in r.error and "not JSON" not in r.error


def test_replace_slot_cannot_end_mid_line(tiny, tmp_path):
    """Regression: the slot DFA once took its NUL end sentinel, read as content by ``[^\\n]``, for "the slot may
    end here", so ``>>>>>>> REPLACE`` could follow a REPLACE line without its newline."""
    files = {"a.py": "def f():\n    return 1\n"}
    template = ca.edit_template(ca.Workspace(repo(tmp_path, files)))
    good = "a.py\n<<<<<<< SEARCH\n    return 1\n=======\n    return 2\n>>>>>>> REPLACE\n"
    glued = "a.py\n<<<<<<< SEARCH\n    return 1\n=======\n    return 2>>>>>>> REPLACE\n"

    def ends(text):
        c = tiny.constraint(template)
        state = c.start()
        for t in tiny.tokenizer.encode(text, add_special_tokens=False):
            state = c.advance(state, t)
            if state is None:
                return False
        return c.can_end(state)

    assert ends(good) and not ends(glued) and not template.matches(glued)


def test_close_cut_edit():
    cut = "a.py\n<<<<<<< SEARCH\n    return 1\n=======\n    return 2\n    0000"
    assert ca.close_cut_edit(cut) == (
        "a.py\n<<<<<<< SEARCH\n    return 1\n=======\n    return 2\n>>>>>>> REPLACE\n", True)
    whole = "a.py\n<<<<<<< SEARCH\n    return 1\n=======\n>>>>>>> REPLACE\n"
    assert ca.close_cut_edit(whole) == (whole, False)


# -- confinement, end to end ------------------------------------------------------------------------------------


def test_agent_cannot_write_outside_the_workspace(tmp_path):
    root = repo(tmp_path, OFF_BY_ONE)
    secret = tmp_path / "secret.py"
    secret.write_text("KEY = 1\n")
    (root / "link.py").symlink_to(secret)
    model = script(
        call("write_file", path="../escaped.py", content="x = 1\n"),
        call("write_file", path=str(tmp_path / "abs.py"), content="x = 1\n"),
        call("read_file", path="link.py"),
        call("apply_edits"),
        "calc.py\n<<<<<<< SEARCH\n    return sum(xs[1:])\n=======\n    return sum(xs)\n>>>>>>> REPLACE\n",
        call("final_answer"),
        "done",
    )
    result = ca.build_agent(root, model, plan=False, extra_tools=True, workflow=False).run_sync("try to escape")
    errors = [r.error for r in result.trace if r.error]
    assert len(errors) == 3
    assert "escapes the workspace root" in errors[0] and "absolute paths are not allowed" in errors[1]
    assert "outside the workspace root" in errors[2]
    edit_template = next(s.template for s in model.seen if s.step == "tool_input")
    assert "link.py" not in edit_template.meta["paths"]  # a link leading out is never offered for editing
    assert not edit_template.matches(
        "link.py\n<<<<<<< SEARCH\nKEY = 1\n=======\nKEY = 2\n>>>>>>> REPLACE\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo", "secret.py"]
    assert secret.read_text() == "KEY = 1\n"


# -- the eval --------------------------------------------------------------------------------------------------


def test_every_task_fails_its_check_before_the_fix(tmp_path):
    tasks = coding.load_tasks()
    assert 4 <= len(tasks) <= 6 and len({t["id"] for t in tasks}) == len(tasks)
    for t in tasks:
        root = tmp_path / t["id"]
        root.mkdir()
        coding.write_repo(t["files"], root)
        ok, why = coding.check_task(root, t["check"])
        assert not ok, (t["id"], why)


def test_eval_reports_per_mode_and_is_registered(tmp_path):
    from agentkit.evals.runner import get_suite

    assert get_suite("agent") is coding._suite
    answers = {"plan": {"steps": ["give up"]}, "tool_call": call("final_answer"), "reply": "nothing done"}
    model = FunctionModel(lambda messages, info: answers[info.step])
    res = coding.run_coding(modes=["ar", "ar-constrained", "diffusion"], limit=1, engine=model,
                            out=tmp_path / "r.json", verbose=False)
    assert list(res["modes"]) == ["ar", "diffusion"]
    for s in res["modes"].values():
        assert s["n"] == 1 and s["task_success"] == 0.0 and s["edits_proposed"] == 0 and s["tasks_edited"] == 0
        assert s["edit_apply_rate"] is None and s["iterations_mean"] == 3  # plan, final_answer, reply
    assert json.loads((tmp_path / "r.json").read_text())["modes"] == res["modes"]
    assert "| ar |" in coding.table(res)


def test_guided_eval_scripts_tool_choices_and_keeps_the_models_edits():
    task = coding.load_tasks()[0]  # off_by_one: stats.py
    fix = "stats.py\n<<<<<<< SEARCH\n    return sum(xs[1:])\n=======\n    return sum(xs)\n>>>>>>> REPLACE\n"

    def fn(messages, info):
        assert info.step != "tool_call"  # scripted by GuidedModel
        if info.step == "tool_input":
            assert info.template.matches(fix)
            return fix
        return {"steps": ["fix"]} if info.step == "plan" else "fixed"

    row = coding.run_task(task, "diffusion", FunctionModel(fn), guided=True)
    assert row["success"] and row["error"] is None
    assert row["tools"] == ["read_file", "apply_edits", "run_tests", "final_answer"]
    assert (row["edits_proposed"], row["edits_applied"]) == (1, 1)
    assert row["timed_iterations"] == 3  # plan, the edit, reply


def test_an_edit_that_changes_nothing_is_proposed_not_applied():
    """The 135M model's REPLACE often copied its SEARCH: the workspace reports it as an error, so the eval counts
    only edits that changed a file (and the model is told)."""
    task = coding.load_tasks()[0]  # off_by_one: stats.py
    same = "stats.py\n<<<<<<< SEARCH\n    return sum(xs[1:])\n=======\n    return sum(xs[1:])\n>>>>>>> REPLACE\n"

    def fn(messages, info):
        if info.step == "tool_input":
            return same
        return {"steps": ["fix"]} if info.step == "plan" else "done"

    row = coding.run_task(task, "ar", FunctionModel(fn), guided=True)
    assert not row["success"]
    assert row["edits_proposed"] >= 1 and row["edits_applied"] == 0
    assert all("changes nothing" in e for e in row["edit_errors"])
    assert coding.summarize([row])["tasks_edited"] == 0


def test_the_assistant_without_a_sandbox_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    from agentkit.tools import sandbox

    monkeypatch.setattr(sandbox, "bwrap_ok", lambda: False)
    monkeypatch.setattr(sandbox, "unshare_ok", lambda: False)
    root = repo(tmp_path, OFF_BY_ONE)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert ca.main([str(root), "make the failing test pass"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "install bubblewrap" in err and "Traceback" not in err
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
