"""The repair adapter's data: the drafter's own prompt for a mutated stdlib line, the original line as the target,
and no benchmark function ever."""

import ast

import pytest

from agentkit.evals.repair_tasks import load_programs
from agentkit.repair.draft import HOLE, Site, build_prompt
from agentkit.repair.mutate import LineEdit, apply_line
from agentkit.training.repair_data import (
    BenchmarkLeakError,
    benchmark_keys,
    build,
    check_no_leak,
    module_functions,
)

OWN = '''
def spread(values, low):
    total = 0
    for v in values:
        if v > low and v != 0:
            total += v - low
    return total


class Box:
    def grow(self, n):
        size = self.size * 2
        return size + n
'''


def _benchmark_function() -> str:
    """The first top-level function of the first benchmark program, renamed, re-commented and re-spaced."""
    text = load_programs()[0]["module"]
    fn = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and len(n.body) > 1)
    src = "\n".join(text.splitlines()[fn.lineno - 1:fn.end_lineno])
    return src.replace(f"def {fn.name}(", "def renamed_copy(", 1).replace("\n", "  # a comment\n", 1) + "\n"


def test_the_generator_never_emits_a_benchmark_function(tmp_path):
    (tmp_path / "mod.py").write_text(OWN + "\n\n" + _benchmark_function())
    keys = benchmark_keys()
    examples, stats = build(["mod"], benchmark=keys, seed=0, root=tmp_path)
    assert stats["benchmark_removed"] == 1 and stats["functions"] == 3
    assert {e["meta"]["function"] for e in examples} <= {"spread", "Box.grow"} and examples
    check_no_leak(examples, keys)
    leaked, _ = build(["mod"], benchmark=set(), seed=0, root=tmp_path)
    assert "renamed_copy" in {e["meta"]["function"] for e in leaked}
    with pytest.raises(BenchmarkLeakError, match="renamed_copy"):
        check_no_leak(leaked, keys)


def test_an_example_is_the_drafters_prompt_and_its_target_the_original_line(tmp_path):
    (tmp_path / "mod.py").write_text(OWN)
    examples, stats = build(["mod"], benchmark=set(), seed=0, root=tmp_path, per_function=10)
    assert stats["examples"] == len(examples) >= 5
    for ex in examples:
        m = ex["meta"]
        lines = m["source"].splitlines()
        assert ex["target"] == "\n" + m["original"] + "\n" and lines[m["line"] - 1] == m["original"]
        assert m["mutated"] != m["original"]
        site = Site("mod.py", apply_line(m["source"], LineEdit(m["line"], m["mutated"], m["kind"])), m["line"])
        assert (ex["messages"], ex["prefix"]) == build_prompt(site)
        assert HOLE in ex["messages"][1]["content"] and m["original"].strip() not in ex["prefix"].splitlines()[-1:]
    assert len({(e["meta"]["function"], e["meta"]["line"]) for e in examples}) == len(examples)  # a site once


def test_methods_keep_their_indentation_and_long_functions_are_left_out(tmp_path):
    long_fn = "def long():\n" + "".join(f"    x{i} = {i}\n" for i in range(60))
    (tmp_path / "mod.py").write_text(OWN + "\n\n" + long_fn)
    fns = {f.qualname: f for f in module_functions("mod", tmp_path)}
    assert set(fns) == {"spread", "Box.grow"}
    assert fns["Box.grow"].source.splitlines()[1] == "    def grow(self, n):"


def test_real_stdlib_modules_hold_no_benchmark_function():
    examples, stats = build(["textwrap", "bisect"], benchmark=benchmark_keys(), seed=0)
    assert stats["examples"] > 20
    check_no_leak(examples, benchmark_keys())
