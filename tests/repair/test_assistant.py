"""The coding assistant's planner (a grounded extraction), its routing order, and the request handling."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkit.repair import OperatorDrafter, RepairBudget
from agentkit.repair.assistant import handle
from agentkit.repair.request import (
    ACTIONS,
    CodingPlan,
    function_file,
    plan_request,
    plan_schema,
    route,
    taken_new_name,
)

REPO = {"geo.py": "def span(a, b):\n    return b - a\n\n\nclass Box:\n    pass\n",
        "use.py": "from geo import span\n\n\ndef width(a, b):\n    return span(a, b)\n",
        "test_geo.py": "from geo import span\n\n\ndef test_span():\n    assert span(1, 4) == 3\n"}


def test_the_schema_offers_the_repositorys_names_and_files() -> None:
    props = plan_schema(REPO, "Please rename span to distance_between in geo.py (not to width)")["properties"]
    assert props["action"]["enum"] == list(ACTIONS)
    assert props["old_name"]["anyOf"][0]["enum"] == ["Box", "span", "width"]
    assert props["function"]["anyOf"][0]["enum"] == ["span", "width"]
    assert props["file"]["anyOf"][0]["enum"] == ["geo.py", "use.py"]  # no test file
    # the new name: a word of the request, not a function word, a keyword, a builtin or a name the code defines
    assert props["new_name"]["anyOf"][0]["enum"] == ["distance_between", "geo"]


@pytest.mark.parametrize(("plan", "request_text", "expected"), [
    (CodingPlan("rename", "span", "distance"), "Rename span to distance", "rename"),
    (CodingPlan("rename", "span", "distance"), "Rename it", "agent"),  # the names are not in the request: not trusted
    (CodingPlan("rename", "span", "span"), "Rename span to span", "agent"),
    (CodingPlan("docstring", function="width"), "Add a docstring to width", "docstring"),
    (CodingPlan("docstring", function="width"), "Add a docstring", "agent"),
    (CodingPlan("repair"), "span(1, 4) fails", "repair"),
    (CodingPlan("other"), "Fix span", "repair"),  # a bug word sends it to the repair loop, whatever the plan says
    (CodingPlan("repair"), "Please repair span", "repair"),
    (CodingPlan("repair"), "Add type hints to span", "agent"),  # a repair the request does not say is not trusted
    (CodingPlan("other"), "Write a README", "agent"),
])
def test_the_routing_order(plan: CodingPlan, request_text: str, expected: str) -> None:
    assert route(plan, request_text).route == expected


NAMES, FUNCTIONS = {"Box", "span", "width"}, {"span", "width"}


@pytest.mark.parametrize(("plan", "request_text", "expected"), [
    (CodingPlan("docstring"), "add a docstring to f", "unnamed"),  # no f in the code
    (CodingPlan("rename", None, "g"), "rename f to g", "unnamed"),
    (CodingPlan("rename", "span", "g"), "rename span to g", "rename"),
    (CodingPlan("docstring"), "add a docstring to Box", "unnamed"),  # a class: no function to document
    (CodingPlan("rename", None, "g"), "rename f to g and fix the bug", "repair"),  # a bug word: the repair loop
    (CodingPlan("docstring"), "explain what f does", "agent"),  # the request does not say docstring
])
def test_a_rename_or_docstring_of_a_name_the_code_lacks_is_not_done(plan, request_text, expected) -> None:
    got = route(plan, request_text, NAMES, FUNCTIONS)
    assert got.route == expected
    if expected == "unnamed":
        assert "span, width" in got.why and "the code defines" in got.why


def test_handle_says_why_an_unnamed_request_changes_nothing(tmp_path: Path) -> None:
    root = write(tmp_path, REPO)
    res = handle(root, "add a docstring to f", model=None,
                 plan=route(CodingPlan("docstring"), "add a docstring to f", NAMES, FUNCTIONS))
    assert not res.done and res.summary == res.reason and "none of the functions" in res.reason
    assert {p.name: p.read_text() for p in root.glob("*.py")} == REPO


def test_a_tiny_model_plans_under_the_grounded_schema() -> None:
    from agentkit.engine import tiny_engine

    plan = plan_request("Rename span to distance in geo.py", REPO, tiny_engine(seed=1))
    assert plan.action == "rename"  # the only action the request names: the grounding leaves no other
    assert plan.old_name in (None, "span") and plan.file in (None, "geo.py")
    assert plan.new_name in (None, "distance", "geo")


def test_the_function_file_is_the_one_that_defines_it() -> None:
    assert function_file(CodingPlan("docstring", function="width"), REPO) == "use.py"
    assert function_file(CodingPlan("docstring", function="width", file="geo.py"), REPO) == "use.py"
    assert function_file(CodingPlan("docstring", function="nowhere"), REPO) is None


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_handle_runs_the_planned_rename_and_the_repair_loop(tmp_path: Path) -> None:
    root = write(tmp_path, {**REPO, "test_geo.py": REPO["test_geo.py"].replace("span", "distance")})
    plan = route(CodingPlan("rename", "span", "distance"), "rename span to distance")
    done = handle(root, "rename span to distance", model=None, plan=plan)
    assert done.done and "+def distance(a, b):" in done.diff and "use.py" in done.diff
    (tmp_path / "r2").mkdir()
    root2 = write(tmp_path / "r2", {**REPO, "geo.py": REPO["geo.py"].replace("b - a", "b + a")})
    fixed = handle(root2, "fix span", model=None, plan=route(CodingPlan("other"), "fix span"),
                   drafter=OperatorDrafter(), budget=RepairBudget(workers=1))
    assert fixed.plan.route == "repair" and fixed.done and "+    return b - a" in fixed.diff


def test_handle_without_a_general_agent_says_so_and_changes_nothing(tmp_path: Path) -> None:
    root = write(tmp_path, REPO)
    res = handle(root, "Write a README", model=None, plan=route(CodingPlan("other"), "Write a README"))
    assert not res.done and "no general agent" in res.reason
    assert {p.name: p.read_text() for p in root.glob("*.py")} == REPO


def test_a_rename_to_a_taken_name_is_planned_so_that_it_is_refused_as_a_clash(tmp_path: Path) -> None:
    request = "Rename span to width"  # width is defined: no word is on offer as the new name
    assert plan_schema(REPO, request)["properties"]["new_name"]["anyOf"][0] == {"type": "null"}
    plan = CodingPlan("rename", "span", None)
    plan.new_name = taken_new_name(plan, request, REPO)
    assert route(plan, request).route == "rename"
    out = handle(write(tmp_path, REPO), request, model=None, plan=plan)
    assert not out.done and "already used" in out.reason
    assert {p.name: p.read_text() for p in tmp_path.glob("*.py")} == REPO
