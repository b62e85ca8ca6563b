"""The value-based literal operator (``string_diff``) and the assertion values it reads from pytest's report."""

from __future__ import annotations

import ast
from pathlib import Path

from agentkit.repair import OperatorDrafter, RepairBudget, Site, repair
from agentkit.repair.draft import operator_edits
from agentkit.repair.failures import assertion_values
from agentkit.repair.literals import KIND, literal_variants, mapped_values, requote

GREET = 'def greeting(name):\n    return "Helo, " + name + "!"\n'
GREET_TESTS = 'from greet import greeting\n\n\ndef test_greeting():\n    assert greeting("Ada") == "Hello, Ada!"\n'
REPORT = "AssertionError: assert 'Helo, Ada!' == 'Hello, Ada!'\n\n- Hello, Ada!\n?    -\n+ Helo, Ada!"


def test_the_diff_operator_proposes_the_corrected_literal() -> None:
    [edit] = literal_variants(GREET, 2, [("Helo, Ada!", "Hello, Ada!")])
    assert edit.text == '    return "Hello, " + name + "!"' and edit.kind == KIND


def test_the_values_the_wrong_way_round_propose_nothing_here() -> None:
    assert literal_variants(GREET, 2, [("Hello, Ada!", "Helo, Ada!")]) == []  # "Helo, " is not in that actual


def test_a_literal_not_in_the_actual_value_is_left_alone() -> None:
    assert literal_variants("x = 'abc'\n", 1, [("abd", "abe")]) == []
    assert literal_variants("x = f'abc{y}'\n", 1, [("abc1", "abd1")]) == []  # f-strings are not rewritten


def test_deletions_replacements_and_quotes() -> None:
    assert mapped_values("colour", "colour: red", "color: red") == ["color"]
    assert mapped_values("a-b", "a-b", "a_b") == ["a_b"]
    [edit] = literal_variants("s = 'it is ' + x\n", 1, [("it is 5", "it's 5")])
    assert ast.literal_eval(edit.text.split(" = ", 1)[1].split(" + ")[0]) == "it's "
    assert requote("'x'", "it's") == "'it\\'s'" and requote('r"x"', "a\\b") == 'r"a\\b"'
    assert requote("'x'", "a\nb") == "'a\\nb'"


def test_an_insertion_at_a_boundary_is_proposed_on_either_side() -> None:
    # "Hi" + name: the missing "," could belong to either literal; both are proposed, the tests choose
    src = 'def f(name):\n    return "Hi" + " " + name\n'
    texts = {e.text for e in literal_variants(src, 2, [("Hi Bo", "Hi, Bo")])}
    assert '    return "Hi," + " " + name' in texts and '    return "Hi" + ", " + name' in texts


def test_assertion_values_are_read_from_the_report() -> None:
    assert assertion_values(REPORT) == [("Helo, Ada!", "Hello, Ada!"), ("Hello, Ada!", "Helo, Ada!")]
    assert assertion_values("assert 'x' == 'y'\n +  where 'y' = f(1)") == [("y", "x")]
    assert assertion_values("assert f(x) == 3") == []  # a side that is not a literal gives no pair
    assert assertion_values("TypeError: bad") == []


def test_the_operators_hold_the_literal_rewrite() -> None:
    site = Site("greet.py", GREET, 2, "test_greet.py::test_greeting\n" + REPORT)
    assert '    return "Hello, " + name + "!"' in {e.text for e in operator_edits(site)}


def test_the_loop_fixes_the_typo_and_still_refuses_the_expected_string(tmp_path: Path) -> None:
    (tmp_path / "greet.py").write_text(GREET, encoding="utf-8")
    (tmp_path / "test_greet.py").write_text(GREET_TESTS, encoding="utf-8")
    res = repair(tmp_path, OperatorDrafter(), RepairBudget(workers=1))
    assert res.fixed and res.accepted.kind == KIND
    assert (tmp_path / "greet.py").read_text() == GREET.replace("Helo", "Hello")
    assert (tmp_path / "test_greet.py").read_text() == GREET_TESTS
    # a literal equal to the whole actual value maps to the whole expected string: validation refuses it
    (tmp_path / "greet.py").write_text('def greeting(name):\n    return "Helo, Ada!"\n', encoding="utf-8")
    res = repair(tmp_path, OperatorDrafter(), RepairBudget(workers=1))
    refused = [v for v in res.tried if v.candidate.kind == KIND]
    assert refused and all(v.stage == "refused" and "expected value" in v.detail for v in refused)
    assert (tmp_path / "greet.py").read_text() == 'def greeting(name):\n    return "Helo, Ada!"\n'
