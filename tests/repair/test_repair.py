"""The repair loop on constructed repositories: localisation, the edit guard, time limits, budgets, drafters."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentkit.tools.edit_guard import EditGuard, files_named_by_tests, is_test_path
from agentkit.tools.workspace import Workspace

from agentkit.errors import WorkspaceError
from agentkit.repair import LineEdit, ModelDrafter, OperatorDrafter, RepairBudget, Site, repair
from agentkit.repair.draft import DraftStats, strip_comment
from agentkit.repair.failures import parse_failures, run_tests
from agentkit.repair.localise import rank, spectrum
from agentkit.repair.mutate import apply_line, function_mutants, line_variants
from agentkit.repair.validate import Candidate, Validator, copy_repo

SIGN = '''def sign(n):
    if n < 0:
        return -1
    if n == 0:
        return 1
    return 1
'''
SIGN_TESTS = '''from sign import sign


def test_negative():
    assert sign(-5) == -1


def test_positive():
    assert sign(3) == 1


def test_zero():
    assert sign(0) == 0
'''
STEPS = '''def steps(n):
    count = 0
    while n > 1:
        n = n // 3
        count += 1
    return count
'''
STEPS_TESTS = '''from steps import steps


def test_steps():
    assert steps(8) == 3
    assert steps(1) == 0
'''


def make_repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


class ScriptedDrafter:
    """A drafter that proposes fixed lines for one line number (no model)."""

    name = "scripted"

    def __init__(self, line: int, texts: list[str]) -> None:
        self.line, self.texts = line, texts

    def draft(self, site: Site, k: int) -> tuple[list[LineEdit], DraftStats]:
        if site.line != self.line:
            return [], DraftStats()
        return [LineEdit(self.line, t, "model") for t in self.texts], DraftStats()


def test_localiser_ranks_the_mutated_line_first(tmp_path: Path) -> None:
    root = make_repo(tmp_path, {"sign.py": SIGN, "test_sign.py": SIGN_TESTS})
    report = run_tests(Workspace(root))
    assert [f.test_id for f in report.failures] == ["test_sign.py::test_zero"]
    cov = spectrum(copy_repo(root, tmp_path.parent / f"{tmp_path.name}-cov"), 30)
    suspects = rank(root, report.failures, cov)
    assert (suspects[0].path, suspects[0].line, suspects[0].source) == ("sign.py", 5, "ochiai")
    assert suspects[0].score == 1.0 and suspects[1].score < 1.0


def test_localiser_puts_the_crashing_frame_first(tmp_path: Path) -> None:
    src = "def last(xs):\n    n = len(xs)\n    return xs[n]\n"
    tests = "from pick import last\n\n\ndef test_last():\n    assert last([1, 2]) == 2\n"
    root = make_repo(tmp_path, {"pick.py": src, "test_pick.py": tests})
    report = run_tests(Workspace(root))
    suspects = rank(root, report.failures, None)
    assert (suspects[0].path, suspects[0].line, suspects[0].source) == ("pick.py", 3, "traceback")


def test_the_operators_fix_a_flipped_constant_and_only_the_diff_is_written(tmp_path: Path) -> None:
    root = make_repo(tmp_path, {"sign.py": SIGN, "test_sign.py": SIGN_TESTS})
    res = repair(root, OperatorDrafter(seed=1), RepairBudget(max_candidates=40, time_limit_s=10))
    assert res.fixed and res.accepted is not None and res.accepted.path == "sign.py"
    assert (root / "test_sign.py").read_text() == SIGN_TESTS
    assert res.diff.startswith("--- a/sign.py") and run_tests(Workspace(root)).ok
    assert {s.step for s in res.steps} == {"localise", "draft", "validate"}
    assert all(s.ms >= 0 for s in res.steps)


def test_a_candidate_that_edits_a_test_file_is_refused(tmp_path: Path) -> None:
    root = make_repo(tmp_path, {"sign.py": SIGN, "test_sign.py": SIGN_TESTS})
    v = Validator(root, ["test_sign.py::test_zero"], EditGuard(protect_tests=True))
    cheat = Candidate("test_sign.py", LineEdit(13, "    assert sign(0) == 1", "model"))
    verdict = v.check(cheat)
    assert not verdict.passed and verdict.stage == "refused" and "test file" in verdict.detail
    ws = Workspace(root, guard=EditGuard(protect_tests=True))
    with pytest.raises(WorkspaceError, match="read-only"):
        ws.apply_edits("test_sign.py\n<<<<<<< SEARCH\n    assert sign(0) == 0\n=======\n    assert True\n"
                       ">>>>>>> REPLACE\n")
    assert (root / "test_sign.py").read_text() == SIGN_TESTS


def test_the_edit_tool_refuses_markers_and_runaway_repeats(tmp_path: Path) -> None:
    root = make_repo(tmp_path, {"m.py": "def f():\n    return 1\n", "README.md": "Title\n=======\n"})
    ws = Workspace(root)
    with pytest.raises(WorkspaceError, match="merge-marker"):
        ws.apply_edits("m.py\n<<<<<<< SEARCH\n    return 1\n=======\n    return 2\n>>>>>>> REPLACE x\n"
                       ">>>>>>> REPLACE\n")
    loop = "".join('    """Return one."""\n' for _ in range(6))
    with pytest.raises(WorkspaceError, match="runaway"):
        ws.apply_edits(f"m.py\n<<<<<<< SEARCH\n    return 1\n=======\n{loop}    return 1\n>>>>>>> REPLACE\n")
    with pytest.raises(WorkspaceError, match="unparsable"):  # a short marker a 7-character check misses
        ws.apply_edits("m.py\n<<<<<<< SEARCH\n    return 1\n=======\n    return 1\n>>>>>> x\n>>>>>>> REPLACE\n")
    with pytest.raises(WorkspaceError, match="unparsable"):  # a new module is held to parse too
        ws.write_file("new.py", "def f(:\n    return 1\n")
    assert (root / "m.py").read_text() == "def f():\n    return 1\n" and not (root / "new.py").exists()
    (root / "draft.py").write_text("not Python yet (\n")  # a module that did not parse before: not judged
    ws.apply_edits("draft.py\n<<<<<<< SEARCH\nnot Python yet (\n=======\nstill not Python (\n>>>>>>> REPLACE\n")
    ws.apply_edits("README.md\n<<<<<<< SEARCH\nTitle\n=======\nHeading\n>>>>>>> REPLACE\n")  # a kept ===== line
    assert (root / "README.md").read_text() == "Heading\n=======\n"


def test_test_files_and_the_data_they_read_are_recognised() -> None:
    assert is_test_path("tests/unit/helpers.py") and is_test_path("conftest.py") and is_test_path("a/x_test.py")
    assert not is_test_path("src/testing_utils_x.py")
    files = {"test_io.py": 'open("expected.txt")\nPath("data/cases.json")', "expected.txt": "1",
             "data/cases.json": "{}", "io.py": "", "other.txt": ""}
    assert files_named_by_tests(files) == {"expected.txt", "data/cases.json"}


def test_a_looping_candidate_is_stopped_and_the_loop_goes_on(tmp_path: Path) -> None:
    root = make_repo(tmp_path, {"steps.py": STEPS, "test_steps.py": STEPS_TESTS})
    drafter = ScriptedDrafter(4, ["        n = n // 1", "        n = n // 2"])
    res = repair(root, drafter, RepairBudget(time_limit_s=2, max_lines=10, workers=2))
    assert res.fixed and res.accepted.edit.text == "        n = n // 2"
    looped = res.tried[0]
    assert looped.timed_out and not looped.passed and looped.stage == "failing tests"
    assert "n = n // 2" in (root / "steps.py").read_text()


def test_the_budget_ends_the_search_and_leaves_the_repository_as_it_was(tmp_path: Path) -> None:
    root = make_repo(tmp_path, {"sign.py": SIGN, "test_sign.py": SIGN_TESTS})
    before = snapshot(root)
    drafter = ScriptedDrafter(5, ["        return 2", "        return 3", "        return 4"])
    res = repair(root, drafter, RepairBudget(max_candidates=2))
    assert not res.fixed and res.validated == 2 and res.reason == "candidate budget spent (2 validated)"
    assert "nothing was fixed" in res.summary() and res.diff == ""
    assert snapshot(root) == before
    res = repair(root, ScriptedDrafter(5, ["        return 2"]), RepairBudget(max_seconds=1e-6))
    assert not res.fixed and res.reason.startswith("time budget spent") and snapshot(root) == before


def test_operators_cover_the_kinds_and_undo_themselves() -> None:
    src = ("def f(xs, k):\n    total = 0\n    for i in range(1, len(xs)):\n        if xs[i] < k and not xs[i - 1]:\n"
           "            total += xs[i] * 2\n        g(i, k)\n    return total\n")
    kinds = {m.kind for m in function_mutants(src, "f")}
    assert kinds == {"off_by_one", "comparison", "arithmetic", "boolean", "variable", "negation", "constant",
                     "arguments", "return"}
    for m in function_mutants(src, "f"):
        if m.kind in ("comparison", "boolean", "arguments", "negation"):
            mutated = apply_line(src, m)
            assert src.splitlines()[m.line - 1] in {v.text for v in line_variants(mutated, m.line)}, m


def test_pytest_failures_are_parsed() -> None:
    out = ("F.\n=================================== FAILURES ===================================\n"
           "__________________________________ test_mean ___________________________________\n"
           "test_stats.py:5: in test_mean\n    assert mean([1, 2, 3]) == 2\nstats.py:6: in mean\n"
           "    return total / len(x)\nE   TypeError: object of type 'int' has no len()\n"
           "=========================== short test summary info ============================\n"
           "FAILED test_stats.py::test_mean - TypeError: object of type 'int' has no len()\n1 failed, 1 passed\n")
    [f] = parse_failures(out)
    assert f.test_id == "test_stats.py::test_mean" and "TypeError" in f.message
    assert [(fr.path, fr.line, fr.func) for fr in f.frames] == [("test_stats.py", 5, "test_mean"),
                                                                 ("stats.py", 6, "mean")]


def test_comments_are_not_a_change() -> None:
    assert strip_comment("    return x  # fixed") == "    return x"
    assert strip_comment('    s = "# not a comment"') == '    s = "# not a comment"'


def test_the_model_drafter_batches_the_same_lines_it_draws_one_at_a_time() -> None:
    from agentkit.engine import tiny_engine

    eng = tiny_engine(seed=3)
    site = Site("stats.py", "def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n", 2, "assert 3.0 == 2")
    batched = ModelDrafter(eng, "hybrid", batched=True, seed=1)
    single = ModelDrafter(eng, "hybrid", batched=False, seed=1)
    a, sa = batched.draft(site, 4)
    b, sb = single.draft(site, 4)
    assert [e.text for e in a] == [e.text for e in b]
    assert sa.rows == sb.rows and sa.forwards < sb.forwards
    assert len(sa.scores) == len(a) and sa.scores == sorted(sa.scores, reverse=True)
    assert all(e.text != site.original for e in a)
    assert any(e.text == "    return sum(xs) / (len(xs))" for e in a)  # the operators' candidates are scored too


def test_the_example_sends_fix_requests_to_the_repair_loop() -> None:
    from agentkit.evals.coding import example_module, load_tasks

    rx = example_module().REPAIR_REQUEST
    routed = {t["id"]: bool(rx.search(t["task"])) for t in load_tasks()}
    assert routed == {"off_by_one": True, "wrong_operator": True, "missing_return": True, "typo_string": True,
                      "rename_function": False, "add_docstring": False}
    assert rx.search("make the failing test pass")


def test_a_line_that_hard_codes_a_tests_expected_string_is_refused(tmp_path: Path) -> None:
    src = 'def greeting(name):\n    return "Helo, " + name + "!"\n'
    tests = 'from greet import greeting\n\n\ndef test_greeting():\n    assert greeting("Ada") == "Hello, Ada!"\n'
    root = make_repo(tmp_path, {"greet.py": src, "test_greet.py": tests})
    drafter = ScriptedDrafter(2, ['    return "Hello, Ada!"', '    return "Hello, " + name + "!"'])
    res = repair(root, drafter, RepairBudget())
    assert res.tried[0].stage == "refused" and "expected value" in res.tried[0].detail
    assert res.fixed and res.accepted.edit.text == '    return "Hello, " + name + "!"'
