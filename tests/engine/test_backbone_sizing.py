"""Sized verify blocks and causal-canvas passes: the length rule, and the same output as fixed 32-position passes."""

import pytest
import torch

from agentkit.config import DecodeConfig
from agentkit.constrain.nodes import Choice, Lit, Slot, Template, seq
from agentkit.engine.engine import Engine
from agentkit.engine.sizing import DRAFT, EXACT, PINNED, AcceptRate, interpolate, keep_chance, pass_length
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


def test_a_draft_with_its_own_chance_is_sized_by_it_not_by_the_running_rate():
    kinds = [EXACT] + [DRAFT] * 7
    curve = {1: 30.0, 8: 55.0}
    sure, unsure = [None] + [0.98] * 7, [None] + [0.05] * 7
    assert pass_length(kinds, 0.05, curve) == 1 < pass_length(kinds, 0.05, curve, chances=sure) == 8
    assert pass_length(kinds, 0.95, curve) == 8 > pass_length(kinds, 0.95, curve, chances=unsure) == 1
    # only the positions that carry a chance use it: the rest follow the running rate
    mixed = [None, 0.98, 0.98, None, None, None, None, None]
    assert pass_length(kinds, 0.05, curve, chances=mixed) == 3
    with pytest.raises(AssertionError):
        pass_length(kinds, 0.5, curve, chances=[None])


def test_keep_chance_discounts_the_drafters_unsure_drafts():
    assert keep_chance(1.0) == 1.0 and keep_chance(0.0) == 0.0
    assert keep_chance(0.3) < 0.3 and keep_chance(0.7) < 0.7
    assert keep_chance(0.4) < keep_chance(0.6) < keep_chance(0.9)


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
    """A CPU with AMX, one with avx512_bf16 alone and one without native bf16 read their own measured curves (a
    combination one kind did not measure, its nearest kind's); another model reads DEFAULT_CURVE's shape on any;
    every curve is non-decreasing."""
    from types import SimpleNamespace

    from agentkit.engine.backbone import SHIPPED_CURVES, cost_curve, cpu_kind, shipped_table
    from agentkit.engine.sizing import DEFAULT_CURVE

    assert cpu_kind({"avx2", "avx512_bf16"}) == "avx512_bf16"
    assert cpu_kind({"amx_bf16"}) == "amx" and cpu_kind({"avx512_bf16", "amx_bf16"}) == "amx"
    assert cpu_kind({"avx2", "fma"}) == "avx2" and cpu_kind(set()) == "avx2"
    default, other = SimpleNamespace(meta={"default": True}), SimpleNamespace(meta={})
    for kind in SHIPPED_CURVES:
        table = shipped_table(kind)
        assert ("torch", "float32") in table and ("llama.cpp", "q4_1") in table
        for (backend, dtype), shipped in table.items():
            got = cost_curve(backend, dtype, default, kind)
            assert set(got) == set(shipped) and got[1] == min(shipped.values())
            assert all(got[a] <= got[b] for a, b in zip(sorted(got), sorted(got)[1:]))
        assert cost_curve("torch", "float32", other, kind) == DEFAULT_CURVE
    assert cost_curve("torch", "float32", default, "amx") != cost_curve("torch", "float32", default, "avx2")
    q4 = ("torch", "bfloat16+q4+packed")
    assert cost_curve(*q4, default, "avx512_bf16") == SHIPPED_CURVES["avx512_bf16"][q4] != SHIPPED_CURVES["amx"][q4]
    assert cost_curve("llama.cpp", "q4_1", default, "avx512_bf16") == cost_curve("llama.cpp", "q4_1", default, "amx")


def test_an_unmeasured_engine_reads_the_nearest_measured_curve():
    from types import SimpleNamespace

    from agentkit.engine.backbone import SHIPPED_CURVES, cost_curve

    default = SimpleNamespace(meta={"default": True})
    assert cost_curve("torch", "float32+packed", default, "avx2") == cost_curve("torch", "float32", default, "avx2")
    assert cost_curve("torch", "float32+q4+packed", default, "avx2") == cost_curve("torch", "float32+q4", default,
                                                                                   "avx2")
    assert cost_curve("torch", "float32+q4", default, "amx") == cost_curve("torch", "float32", default, "amx")
    assert cost_curve("torch", "bfloat16+q4+packed", default, "avx2") == cost_curve("torch", "bfloat16+q4", default,
                                                                                    "avx2")
    assert ("torch", "bfloat16+q4+packed") in SHIPPED_CURVES["amx"]


class EvenOnly:
    """A template constraint that allows the even token ids only."""

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab

    def start(self) -> int:
        return 0

    def advance(self, state: int, token: int) -> int | None:
        return state if token % 2 == 0 else None

    def allowed(self, state: int) -> torch.Tensor:
        m = torch.zeros(self.vocab, dtype=torch.bool)
        m[::2] = True
        return m


def _decoder(constraint):
    from agentkit.engine.backbone import Backbone
    from agentkit.engine.decode import Decoder

    lm = tiny_llama(0)
    return Decoder(Backbone(lm), DecodeConfig(mode="verify", max_new_tokens=8), constraint, lm.eos_ids)


def test_a_drafted_token_is_the_likeliest_the_template_allows_with_its_chance_among_them():
    from agentkit.engine.decode import DRAFT_CANDIDATES

    vocab = 64
    free, even = _decoder(None), _decoder(EvenOnly(vocab))
    logits = torch.full((2, vocab), -30.0)
    logits[0, 3], logits[0, 4] = 2.0, 1.0  # the drafter's best (3) is ruled out; 4 is the best allowed
    p = torch.softmax(logits[0], -1)
    assert free._drafted(logits, 1, None) == (3, pytest.approx(keep_chance(float(p[3]))))
    assert even._drafted(logits, 1, 0) == (4, pytest.approx(keep_chance(float(p[4] / (1 - p[3])))))
    # none of the drafter's best candidates allowed: the whole mask decides, and the chance is among what it allows
    odd = torch.arange(1, 2 * DRAFT_CANDIDATES + 1, 2)
    logits[1, odd] = 5.0
    logits[1, 10] = 0.0
    p = torch.softmax(logits[1], -1)
    t, chance = even._drafted(logits, 2, 0)
    assert t == 10 and chance == pytest.approx(keep_chance(float(p[10] / p[::2].sum())))
    assert even._drafted(logits, 3, 0) == (None, None)  # no row for that position
    ruled_out = torch.full((1, vocab), float("-inf"))
    ruled_out[0, 1] = 0.0  # the drafter's vocabulary holds one token, and the template rules it out
    assert even._drafted(ruled_out, 1, 0) == (None, None)
