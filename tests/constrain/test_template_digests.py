"""The compiler's output held fixed: the template (and refusal) of every MaskBench schema, in three option sets,
against the digests in ``data/template_digests.json``, and which schemas pass their tests (the coverage).

By default every ``STEP``-th file is checked; ``AGENTKIT_DIGESTS_ALL=1`` checks all of them (what a change to the
compiler should run once: ``python -m agentkit.constrain.digest ../shared/data/maskbench --check
tests/constrain/data/template_digests.json`` does the same from the shell). A change that alters templates on
purpose rewrites the reference with ``--out`` and says why in its commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentkit.constrain.digest import VARIANTS, all_digests, diff, node_digest, schema_digest
from agentkit.constrain.nodes import Choice, Lit, Repeat, Slot, seq

REFERENCE = Path(__file__).parent / "data" / "template_digests.json"
# the reference holds the MaskBench files whose digests were computed from the compiler before the refactor (commit
# 5162fe9) in the time the work had: extend it with that commit's `python -m agentkit.constrain.digest ... --out`
STEP = 1 if os.environ.get("AGENTKIT_DIGESTS_ALL") else 18


@pytest.fixture(scope="module")
def maskbench(shared_data: Path) -> Path:
    d = shared_data / "maskbench"
    if not d.is_dir():
        pytest.skip(f"MaskBench files not found at {d}")
    return d


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(REFERENCE.read_text())


def test_reference_is_whole_and_adds_up(reference, maskbench):
    names = {p.name for p in maskbench.glob("*.json")}
    assert set(reference["files"]) <= names and len(reference["files"]) >= 1000  # see REFERENCE's note above
    for d in reference["files"].values():
        assert set(d) == {*VARIANTS, "passed"}
        assert all(d[k][0] in "te" and len(d[k]) == 21 for k in VARIANTS)
    assert reference["passed"] == sum(d["passed"] for d in reference["files"].values())
    assert reference["coverage"] == round(reference["passed"] / reference["schemas"], 4)


def test_templates_and_coverage_unchanged(reference, maskbench):
    got = all_digests(maskbench, STEP, sorted(reference["files"]))
    assert got["schemas"] == len(sorted(reference["files"])[::STEP])
    lines = diff(reference, got)
    assert not lines, "\n".join(lines[:30])


def test_digest_sees_every_part_of_a_tree():
    base = seq(Lit("["), Repeat(Slot("[0-9]+", 4, "/0"), ", ", 0, 3), Lit("]"))
    variants = [
        seq(Lit("("), Repeat(Slot("[0-9]+", 4, "/0"), ", ", 0, 3), Lit("]")),  # a literal
        seq(Lit("["), Repeat(Slot("[0-9]*", 4, "/0"), ", ", 0, 3), Lit("]")),  # a regex
        seq(Lit("["), Repeat(Slot("[0-9]+", 5, "/0"), ", ", 0, 3), Lit("]")),  # a token cap
        seq(Lit("["), Repeat(Slot("[0-9]+", 4, "/1"), ", ", 0, 3), Lit("]")),  # a slot name
        seq(Lit("["), Repeat(Slot("[0-9]+", 4, "/0"), ",", 0, 3), Lit("]")),  # a separator
        seq(Lit("["), Repeat(Slot("[0-9]+", 4, "/0"), ", ", 1, 3), Lit("]")),  # a bound
        seq(Lit("["), Repeat(Slot("[0-9]+", 4, "/0"), ", ", 0, None), Lit("]")),
        Choice((base, Lit("null"))),
    ]
    digests = {node_digest(n)[0] for n in [base, *variants]}
    assert len(digests) == 1 + len(variants)
    assert node_digest(base) == node_digest(seq(Lit("["), Repeat(Slot("[0-9]+", 4, "/0"), ", ", 0, 3), Lit("]")))


def test_digest_counts_shared_nodes_once():
    item = Slot("[a-z]+", 8, "/x")
    shared = Choice((seq(Lit("a"), item), seq(Lit("b"), item)))
    copied = Choice((seq(Lit("a"), item), seq(Lit("b"), Slot("[a-z]+", 8, "/x"))))
    assert node_digest(shared)[0] == node_digest(copied)[0]  # the same language and tree...
    assert node_digest(shared)[1] == node_digest(copied)[1] - 1  # ...but one node fewer: the DAG is part of it


def test_schema_digest_tells_templates_errors_and_options_apart():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    d = schema_digest(schema)
    assert d[0] == "t" and d == schema_digest(json.loads(json.dumps(schema)))
    assert schema_digest(schema, style="compact") != d
    assert schema_digest(schema, strict=True) != d
    def refused(name: str) -> str:
        return schema_digest({"type": "object", "properties": {name: {"not": {"multipleOf": 3}}}})

    assert refused("a")[0] == "e" and refused("a") != refused("b")  # the pointer is part of it
