"""Sized verify blocks and causal-canvas passes: the length rule, and the same output as fixed 32-position passes."""

import pytest

from agentkit.config import DecodeConfig
from agentkit.constrain.nodes import Choice, Lit, Slot, Template, seq
from agentkit.engine.engine import Engine
from agentkit.engine.sizing import DRAFT, EXACT, PINNED, AcceptRate, interpolate, pass_length
from agentkit.models.tiny import tiny_llama

pytestmark = pytest.mark.usefixtures("one_thread")
PROMPTS = ["hello there", "def add(a, b): return", "The quick brown fox", '{"name":"Alice","age":']
FLAT = {1: 10.0, 64: 10.0}
STEEP = {1: 10.0, 2: 20.0, 64: 640.0}  # cost proportional to positions: one position per pass pays best


def test_interpolate_between_and_beyond_points():
    curve = {1: 10.0, 8: 17.0, 32: 41.0}
    assert interpolate(curve, 1) == 10.0 and interpolate(curve, 0) == 10.0
    assert interpolate(curve, 4) == pytest.approx(13.0)
    assert interpolate(curve, 20) == pytest.approx(29.0)
    assert interpolate(curve, 64) == pytest.approx(73.0)  # the last slope, extended


def test_pass_length_follows_cost_and_acceptance():
    kinds = [EXACT] + [DRAFT] * 31
    assert pass_length(kinds, 0.5, FLAT) == 32  # free positions: take them all
    assert pass_length(kinds, 0.9, STEEP) == 1  # linear cost, acceptance < 1: each draft loses
    mid = {1: 60.0, 8: 68.0, 32: 144.0}
    assert 1 < pass_length(kinds, 0.5, mid) < pass_length(kinds, 0.95, mid) <= 32


def test_pinned_runs_ride_along_when_cheap():
    kinds = [EXACT] + [PINNED] * 6 + [DRAFT] * 5
    curve = {1: 60.0, 8: 68.0, 32: 144.0}
    assert pass_length(kinds, 0.05, curve) == 7  # the certain pinned run, not the unlikely drafts
    assert pass_length(kinds, 0.05, curve, offset=20) == 7


def test_accept_rate_starts_at_half_and_tracks():
    r = AcceptRate()
    assert r.rate == 0.5
    r.update(8, 8)
    assert r.rate == pytest.approx(9 / 10)


class Counting:
    """A backbone proxy counting the positions each pass feeds."""

    def __init__(self, bb) -> None:
        self._bb, self.positions = bb, 0

    def __getattr__(self, name):
        return getattr(self._bb, name)

    def encode(self, ids, *a, **k):
        self.positions += len(ids)
        return self._bb.encode(ids, *a, **k)

    def denoise(self, ids, *a, **k):
        self.positions += len(ids)
        return self._bb.denoise(ids, *a, **k)


def _run(eng: Engine, prompt: str, cfg: DecodeConfig, curve, template=None):
    counting = Counting(eng.backbone)
    counting.cost_curve = curve
    eng.backbone, saved = counting, eng.backbone
    try:
        res = eng.generate(prompt, cfg, template=template, raw=True)
    finally:
        eng.backbone = saved
    return res, counting.positions


def _template():
    name = Slot(r"[a-z]{1,6}", max_tokens=6, name="/name")
    return Template(seq(Lit('{"name":"'), name, Lit('","ok":'), Choice((Lit("true"), Lit("false"))), Lit("}")))


@pytest.mark.parametrize("mode", ["verify", "diffusion"])
@pytest.mark.parametrize("seed", [1, 2])
def test_sized_passes_give_the_fixed_32_output_with_less_work(mode, seed):
    eng = Engine.from_loaded(tiny_llama(seed))
    sized_work = fixed_work = 0
    for prompt in PROMPTS:
        fixed, fw = _run(eng, prompt, DecodeConfig(mode=mode, max_new_tokens=40, sized_passes=False), STEEP)
        sized, sw = _run(eng, prompt, DecodeConfig(mode=mode, max_new_tokens=40), STEEP)
        assert sized.token_ids == fixed.token_ids
        sized_work, fixed_work = sized_work + sw, fixed_work + fw
    assert sized_work < fixed_work
    tpl = _template()
    fixed, _ = _run(eng, "data:", DecodeConfig(mode=mode, max_new_tokens=40, sized_passes=False), STEEP, tpl)
    sized, _ = _run(eng, "data:", DecodeConfig(mode=mode, max_new_tokens=40), STEEP, tpl)
    assert sized.text == fixed.text and tpl.matches(sized.text)


@pytest.mark.parametrize("mode", ["verify", "diffusion"])
def test_a_flat_cost_curve_keeps_full_passes(mode):
    eng = Engine.from_loaded(tiny_llama(3))
    for prompt in PROMPTS[:2]:
        fixed, fw = _run(eng, prompt, DecodeConfig(mode=mode, max_new_tokens=40, sized_passes=False), FLAT)
        sized, sw = _run(eng, prompt, DecodeConfig(mode=mode, max_new_tokens=40), FLAT)
        assert sized.token_ids == fixed.token_ids and sw == fw


def test_shipped_cost_curves_follow_the_cpu_kind():
    """A CPU with native bf16 (avx512_bf16 / AMX) and one without read their own measured curves; another model reads
    DEFAULT_CURVE's shape on either; every curve is non-decreasing."""
    from types import SimpleNamespace

    from agentkit.engine.backbone import SHIPPED_CURVES, cost_curve, cpu_kind
    from agentkit.engine.sizing import DEFAULT_CURVE

    assert cpu_kind({"avx2", "avx512_bf16"}) == "bf16" and cpu_kind({"amx_bf16"}) == "bf16"
    assert cpu_kind({"avx2", "fma"}) == "avx2" and cpu_kind(set()) == "avx2"
    default, other = SimpleNamespace(meta={"default": True}), SimpleNamespace(meta={})
    for kind, table in SHIPPED_CURVES.items():
        assert ("torch", "float32") in table and ("llama.cpp", "q4_1") in table
        for (backend, dtype), shipped in table.items():
            got = cost_curve(backend, dtype, default, kind)
            assert set(got) == set(shipped) and got[1] == min(shipped.values())
            assert all(got[a] <= got[b] for a, b in zip(sorted(got), sorted(got)[1:]))
        assert cost_curve("torch", "float32", other, kind) == DEFAULT_CURVE
    assert cost_curve("torch", "float32", default, "bf16") != cost_curve("torch", "float32", default, "avx2")


def test_an_unmeasured_engine_reads_the_nearest_measured_curve():
    from types import SimpleNamespace

    from agentkit.engine.backbone import SHIPPED_CURVES, cost_curve

    default = SimpleNamespace(meta={"default": True})
    assert cost_curve("torch", "float32+packed", default, "avx2") == cost_curve("torch", "float32", default, "avx2")
    assert cost_curve("torch", "float32+q4+packed", default, "avx2") == cost_curve("torch", "float32+q4", default,
                                                                                   "avx2")
    assert cost_curve("torch", "float32+q4", default, "bf16") == cost_curve("torch", "float32", default, "bf16")
    assert cost_curve("torch", "bfloat16+q4+packed", default, "avx2") == cost_curve("torch", "bfloat16+q4", default,
                                                                                    "avx2")
    assert ("torch", "bfloat16+q4+packed") in SHIPPED_CURVES["bf16"]
