"""CI slice of the validity eval: random-weight models, every mode, every output must pass jsonschema."""

import json

import pytest

from agentkit.evals.validity import VALIDITY_MODES, check_schema, engines, run_validity, sample_files

SLICE = 16


@pytest.fixture(scope="module")
def engs():
    return engines(0)


def test_sample_is_stable_and_spread(shared_data):
    files = sample_files(shared_data / "maskbench", 200)
    assert len(files) == 200 and files == sample_files(shared_data / "maskbench", 200)
    categories = {f.name.split("---")[0].rsplit("_", 1)[0] for f in files}
    assert len(categories) >= 6


def test_every_output_of_the_slice_validates(shared_data, engs, tmp_path):
    out = tmp_path / "validity.json"
    res = run_validity(shared_data / "maskbench", list(VALIDITY_MODES), SLICE, seed=0, out=out, progress=False,
                       engs=engs)
    assert res["schemas"] == SLICE and res["compiled"] >= SLICE - 2
    for mode, m in res["modes"].items():
        assert m["n"] == res["compiled"], mode
    assert res["failures"] == [], res["failures"][:3]
    assert json.loads(out.read_text())["partial"] is False


def test_an_invalid_output_is_reported_not_hidden(tmp_path, engs):
    # a schema whose compiled template is looser than jsonschema would be caught: force it with a fake compiler
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"schema": {"type": "integer", "maximum": 5}, "tests": []}))
    from agentkit.constrain import compiler

    real = compiler.compile_schema_uncached
    try:
        compiler.compile_schema_uncached = lambda schema, **kw: real({"type": "integer", "minimum": 100, "maximum": 200})
        row = check_schema(path, ["ar"], engs)
    finally:
        compiler.compile_schema_uncached = real
    assert row["compiled"] and row["rows"][0]["valid"] is False
    assert "maximum" in row["rows"][0]["error"] or "greater" in row["rows"][0]["error"]
