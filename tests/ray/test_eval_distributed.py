"""``agentkit eval --ray``: a distributed eval on 2 Ray workers equals the local eval item for item (tiny model,
10 real BFCL items); Ray missing gives one line naming the extra."""

from __future__ import annotations

import json

import pytest

from agentkit.evals.runner import EVAL_MODES, run_eval

pytestmark = pytest.mark.usefixtures("one_thread")

TIMING = {"wall_ms", "stats"}
COST = ("output_tokens", "pinned_tokens", "slot_tokens", "encoder_forwards", "decoder_forwards", "forwards",
        "steps_per_block", "finish_reason", "mode")
KW = {"limit": 5, "seed": 0, "free_max_new_tokens": 24, "max_new_tokens": 96, "progress": False, "quiet": True}


@pytest.fixture(scope="module")
def runs(ray_local, shared_data, tmp_path_factory):
    from agentkit.engine import tiny_engine
    from agentkit.evals.distributed import RayEvalConfig, RayExecutor

    d = tmp_path_factory.mktemp("ray_eval")
    local = run_eval("bfcl", shared_data / "bfcl", list(EVAL_MODES), out=d / "local.json", engine=tiny_engine(0), **KW)
    cfg = RayEvalConfig(address="local", workers=2, engine_factory="agentkit.engine:tiny_engine",
                        num_cpus_per_worker=0.5)
    dist = run_eval("bfcl", shared_data / "bfcl", list(EVAL_MODES), out=d / "ray.json", plot=d / "ray.png",
                    executor=RayExecutor(cfg), **KW)
    return local, dist, d


def _same(row: dict) -> dict:
    out = {k: v for k, v in row.items() if k not in TIMING}
    st = row.get("stats") or {}
    out["cost"] = {k: st.get(k) for k in COST}
    return out


def test_distributed_equals_local_item_for_item(runs):
    local, dist, _ = runs
    assert local["items_done"] == dist["items_done"] == 10
    assert len(local["items"]) == len(dist["items"]) == 10 * len(EVAL_MODES)
    for a, b in zip(local["items"], dist["items"], strict=True):
        assert _same(a) == _same(b), (a["id"], a["mode"])
    assert dist["modes"].keys() == local["modes"].keys()
    for m in EVAL_MODES:
        for k in ("n", "task_success", "valid_rate", "forwards_mean", "tokens_per_forward"):
            assert dist["modes"][m][k] == local["modes"][m][k], (m, k)
    assert dist["model"] == local["model"]


def test_distributed_json_plots_and_command(runs):
    _, dist, d = runs
    on_disk = json.loads((d / "ray.json").read_text())
    assert on_disk["partial"] is False and on_disk["items_total"] == 10
    assert on_disk["items"] == dist["items"]
    assert "--ray local --workers 2" in on_disk["env"]["command"]
    assert set(on_disk["ratios_vs_ar_constrained"]) == set(EVAL_MODES)
    assert (d / "ray.png").stat().st_size > 1000


def test_every_mode_of_an_item_on_one_worker(ray_local, runs):
    """Rows of one item come back together, in the rotated mode order of a local run."""
    _, dist, _ = runs
    for i in range(10):
        block = dist["items"][i * len(EVAL_MODES):(i + 1) * len(EVAL_MODES)]
        assert len({r["id"] for r in block}) == 1
        assert [r["order"] for r in block] == list(range(len(EVAL_MODES)))
        assert [r["mode"] for r in block] == list(EVAL_MODES[i % len(EVAL_MODES):] + EVAL_MODES[: i % len(EVAL_MODES)])


class _Interrupted:
    """An executor that returns two items (out of order) and is then interrupted (Ctrl-C)."""

    command_args = ("--ray", "local", "--workers", "2")
    closed = False

    def info(self):
        return {"model": "fake", "diffusion": "none"}

    def run(self, suite, jobs, modes, settings, on_mode=None):
        from agentkit.evals.runner import ItemResult

        for index, item in (jobs[1], jobs[0]):
            rows = [{"id": item.id, "mode": m, "order": k, "success": True, "valid": True, "stats": None}
                    for k, m in enumerate(modes)]
            yield ItemResult(index, rows)
        raise KeyboardInterrupt

    def close(self):
        self.closed = True


def test_interrupted_run_keeps_finished_items_in_order(shared_data, tmp_path):
    ex = _Interrupted()
    with pytest.raises(KeyboardInterrupt):
        run_eval("bfcl", shared_data / "bfcl", ["ar-unconstrained", "verify"], limit=3, out=tmp_path / "r.json", executor=ex,
                 progress=False, quiet=True)
    on_disk = json.loads((tmp_path / "r.json").read_text())
    assert ex.closed and on_disk["partial"] is True and on_disk["items_done"] == 2 and on_disk["items_total"] == 6
    ids = [r["id"] for r in on_disk["items"]]
    assert ids[0] == ids[1] != ids[2] == ids[3] and ids[0].startswith("multiple_")  # item order, not arrival
    assert on_disk["modes"]["ar-unconstrained"]["n"] == on_disk["modes"]["verify"]["n"] == 2
