"""The coding assistant's checked refactorings: rename everywhere, add a docstring under a template."""

from __future__ import annotations

import re
from pathlib import Path

from agentkit.repair.checked import check_and_apply, verdict
from agentkit.repair.docstring import SLOT_REGEX, EngineWriter, add_docstring, docstring_problem
from agentkit.repair.failures import Failure
from agentkit.repair.failures import TestReport as Report
from agentkit.repair.rename import fstring_fields, plan_rename, rename

GEOM = {
    "geom.py": "def perim(a, b):\n    return 2 * (a + b)\n",
    "label.py": "import geom\nfrom geom import perim\n\n__all__ = ['tag']\n\n\ndef tag(a, b):\n"
                "    return f\"p={perim(a, b)} q={geom.perim(b, a)!r:>4}\"\n",
    "test_geom.py": "from geom import perimeter\nfrom label import tag\n\n\ndef test_perimeter():\n"
                    "    assert perimeter(1, 2) == 6\n\n\ndef test_tag():\n    assert tag(1, 2) == 'p=6 q=   6'\n",
}


def make_repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).write_text(text, encoding="utf-8")
    return root


def snapshot(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(root.glob("*.py"))}


def test_the_rename_edits_every_use_in_the_code_and_no_test(tmp_path: Path) -> None:
    root = make_repo(tmp_path, GEOM)
    out = rename(root, "perim", "perimeter")
    assert out.applied, out.reason
    assert out.failing_before == ["test_geom.py"]  # its import of perimeter fails: a collection error
    assert out.failing_after == []
    after = snapshot(root)
    assert after["test_geom.py"] == GEOM["test_geom.py"]
    assert not re.search(r"\bperim\b", after["geom.py"] + after["label.py"])
    assert "f\"p={perimeter(a, b)} q={geom.perimeter(b, a)!r:>4}\"" in after["label.py"]
    assert "+from geom import perimeter" in out.diff and "test_geom.py" not in out.diff


def test_the_rename_refuses_a_clash_and_a_test_file_and_leaves_the_repo(tmp_path: Path) -> None:
    root = make_repo(tmp_path, GEOM)
    before = snapshot(root)
    clash = rename(root, "perim", "tag")
    assert not clash.applied and "already used in label.py" in clash.reason
    tests = rename(root, "tag", "label_of")
    assert not tests.applied and "test file" in tests.reason
    assert not rename(root, "nothing_here", "x2").applied
    assert "builtin" in rename(root, "perim", "len").reason
    assert "identifier" in rename(root, "perim", "2x").reason
    assert snapshot(root) == before


def test_a_rename_that_breaks_a_passing_test_is_refused(tmp_path: Path) -> None:
    files = {"ops.py": "def inc(x):\n    return x + 1\n\n\ndef call(x):\n    return globals()['in' + 'c'](x)\n",
             "test_ops.py": "from ops import call\n\n\ndef test_call():\n    assert call(1) == 2\n"}
    root = make_repo(tmp_path, files)
    out = rename(root, "inc", "increment")
    assert not out.applied and "test_ops.py::test_call" in out.reason
    assert snapshot(root) == files


def test_plan_and_fstring_fields() -> None:
    plan = plan_rename(GEOM, "perim", "perimeter")
    assert plan.uses == 4 and plan.defined_in == ["geom.py"] and set(plan.texts) == {"geom.py", "label.py"}
    assert [e for _, e in fstring_fields('f"{a} {{b}} {c!r:>{w}}"')] == ["a", "c!r:>{w}"]


class Scripted:
    """A docstring writer that returns a fixed slot text inside the pinned answer."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = 0

    def write(self, messages: list[dict[str, str]], pinned: str, template: object, max_new_tokens: int) -> str:
        self.calls += 1
        return self.text


STATS = {"stats.py": "def median(xs):\n    xs = sorted(xs)\n    return xs[len(xs) // 2]\n",
         "test_stats.py": "from stats import median\n\n\ndef test_median():\n    assert median([3, 1, 2]) == 2\n"}


def test_the_docstring_edit_refuses_marker_text_and_repeats(tmp_path: Path) -> None:
    root = make_repo(tmp_path, STATS)
    for text in ("Return x\n>>>>>>> REPLACE", "Return the <<<<<<< SEARCH middle", "Return ======= the value",
                 "the median of the median of the median of the median", "Return the the the value", "Ret"):
        out = add_docstring(root, "stats.py", "median", "document median", Scripted(text))
        assert not out.applied, text
    assert snapshot(root) == STATS
    assert docstring_problem("Return the middle value of xs after sorting.") == ""


def test_the_docstring_is_inserted_checked_and_diffed(tmp_path: Path) -> None:
    root = make_repo(tmp_path, STATS)
    out = add_docstring(root, "stats.py", "median", "document median", Scripted("Return the middle value of xs."))
    assert out.applied, out.reason
    assert (root / "stats.py").read_text().splitlines()[1] == '    """Return the middle value of xs."""'
    assert '+    """Return the middle value of xs."""' in out.diff
    again = add_docstring(root, "stats.py", "median", "document median", Scripted("Another docstring here."))
    assert not again.applied and "docstring already" in again.reason
    assert not add_docstring(root, "test_stats.py", "test_median", "x", Scripted("Tests the median.")).applied


def test_a_tiny_model_fills_the_slot_under_the_template(tmp_path: Path) -> None:
    from agentkit.engine import tiny_engine
    from agentkit.repair.docstring import find_site, write_docstring

    site = find_site(STATS["stats.py"], "stats.py", "median")
    text = write_docstring(site, STATS["stats.py"], "document median", EngineWriter(tiny_engine(seed=2)))
    assert re.fullmatch(SLOT_REGEX, text), text  # no quote, newline, marker character: the template forbids them


def test_the_verdict_compares_the_suites() -> None:
    ok = Report(0, [], 2, False, "")
    one = Report(1, [Failure("t.py::a")], 1, False, "")
    other = Report(1, [Failure("t.py::b")], 1, False, "")
    assert verdict(one, ok) == "" and verdict(one, one) == ""
    assert "t.py::b" in verdict(one, other) and "could not run" in verdict(ok, Report(2, [], 0, False, ""))
    assert "out of time" in verdict(ok, Report(1, [], 0, True, ""))


def test_an_unparsable_edit_never_runs(tmp_path: Path) -> None:
    root = make_repo(tmp_path, STATS)
    out = check_and_apply(root, {"stats.py": "def median(:\n"}, "edit")
    assert not out.applied and "does not parse" in out.reason and snapshot(root) == STATS
