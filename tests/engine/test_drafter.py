"""The block drafter in verify: it drafts each block in one pass, the base checks it, the output is greedy AR's."""

import logging
import random
from dataclasses import replace

import pytest
import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.constrain.nodes import Choice, Lit, Repeat, Slot, Template, seq
from agentkit.engine import decode
from agentkit.engine.drafter import BlockDrafter, DrafterConfig, FeatureTap, load_drafter
from agentkit.engine.engine import Engine
from agentkit.engine.ties import NEAR_TIE, first_difference
from agentkit.errors import DrafterMismatchError
from agentkit.models.head import int8_head_available
from agentkit.models.q4 import use_q4_steps
from agentkit.models.tiny import tiny_llama, tiny_q4_llama
from agentkit.training.distill import DistillJob
from agentkit.training.drafter_data import features, record
from agentkit.training.drafter_train import acceptance, step_loss

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(not int8_head_available(), reason="torch's int8 weight kernel does not run here")]
PROMPTS = ["What is the weather in Paris today?", "def add(a, b):", '{"name":"Alice","age":31', "The quick brown"]


def _template():
    name = Slot(r"[a-z]{1,6}", max_tokens=6, name="/name")
    tags = Repeat(seq(Lit('"'), Slot(r"[a-z]{1,4}", max_tokens=4), Lit('"')), ",", 0, 3)
    return Template(seq(Lit('{"name":"'), name, Lit('","ok":'), Choice((Lit("true"), Lit("false"))),
                        Lit(',"tags":['), tags, Lit("]}")))


@pytest.fixture(scope="module")
def base():
    """A tiny Llama with 4-bit layer weights (row-exact passes, as the default model's) in bf16."""
    lm, source = tiny_q4_llama(5, dtype=torch.bfloat16)
    use_q4_steps(lm.model, source.get, float32=True)
    return lm


@pytest.fixture(scope="module")
def drafter_dir(base, tmp_path_factory):
    """A drafter for ``base`` trained a few dozen steps on its own greedy outputs (the training code's own steps)."""
    eng = Engine.from_loaded(base)
    cfg = DrafterConfig.for_base(base.model, layers=1, block=8)
    tap = FeatureTap(base.model, cfg.feature_layers)
    recs = [record(eng, tap, DistillJob("free", [{"role": "user", "content": p}])) for p in PROMPTS]
    tap.remove()
    recs = [r for r in recs if r is not None]
    fresh_tap = FeatureTap(base.model, cfg.feature_layers)
    for rec in recs:  # the generation's own passes gave the features: as one fresh pass over the text computes them
        fresh = features(base.model, fresh_tap, rec.ids)
        assert len(rec.feats) >= len(rec.ids) - 3
        assert torch.allclose(rec.feats.float(), fresh[: len(rec.feats)].float(), atol=0.1, rtol=0.05)
    fresh_tap.remove()
    torch.manual_seed(0)
    d = BlockDrafter(cfg)
    d.init_from_base(base.model)
    opt = torch.optim.Adam(d.parameters(), lr=3e-3)
    r = random.Random(0)
    before = acceptance(base.model, d, recs, 8)["accepted_per_pass"]
    for _ in range(60):
        rec = r.choice(recs)
        anchors = sorted(r.sample(range(rec.prompt_len, rec.last_anchor + 1), 4))
        loss, _ = step_loss(base.model, d, rec, anchors, gamma=4.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = acceptance(base.model, d, recs, 8)["accepted_per_pass"]
    assert after > before  # it learns the base's continuations (on what it saw)
    out = tmp_path_factory.mktemp("drafter")
    d.save(out)
    return out


@pytest.fixture(scope="module")
def engine(base, drafter_dir):
    return Engine.from_loaded(base, EngineConfig(drafter_path=str(drafter_dir)))


@pytest.fixture
def no_lookup(monkeypatch):
    """Prompt lookup finds nothing: the block drafter drafts every block (it drafts the blocks lookup has no guess
    for, and this tiny model's outputs repeat what its prompt holds)."""
    monkeypatch.setattr(decode, "lookup", lambda *args, **kwargs: [])


@pytest.mark.parametrize("prompt", PROMPTS)
def test_drafter_verify_equals_ar_greedy_with_row_exact_passes(engine, prompt, no_lookup):
    assert engine.backbone.exact_rows  # verify's blocks run as row-exact pieces: each logit is an AR step's
    for template in (None, _template()):
        ar = engine.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=40), template=template)
        ver = engine.generate(prompt, DecodeConfig(mode="verify", draft="drafter", max_new_tokens=40),
                              template=template)
        assert ver.token_ids == ar.token_ids
        assert ver.stats.drafter_passes >= 1 and ver.stats.verify_forwards >= 1


@pytest.mark.parametrize("prompt", PROMPTS[:2])
def test_drafter_verify_keeps_ars_samples(engine, prompt, no_lookup):
    for template in (None, _template()):
        for seed in (0, 1):
            cfg = DecodeConfig(mode="ar", max_new_tokens=30, temperature=0.8, top_p=0.95, seed=seed)
            ar = engine.generate(prompt, cfg, template=template)
            ver = engine.generate(prompt, replace(cfg, mode="verify", draft="drafter"), template=template)
            assert ver.token_ids == ar.token_ids
            assert ver.stats.drafter_passes >= 1


def test_the_drafter_drafts_only_the_blocks_prompt_lookup_has_no_guess_for(engine, monkeypatch):
    cfg = DecodeConfig(mode="verify", draft="drafter", max_new_tokens=40)
    # this tiny model answers with a run of newlines, as its chat prompt holds: lookup guesses every block
    with_lookup = engine.generate(PROMPTS[0], cfg)
    assert with_lookup.stats.drafter_passes == 0 and with_lookup.stats.accepted_slot_tokens > 0
    monkeypatch.setattr(decode, "lookup", lambda *args, **kwargs: [])
    monkeypatch.setattr(decode, "DRAFTER_TRIAL", 10**6)  # it drafts on whether or not it pays
    alone = engine.generate(PROMPTS[0], cfg)
    assert alone.token_ids == with_lookup.token_ids
    # one drafter pass a block with room for a draft (the last block, at a budget of one token, has none)
    assert alone.stats.verify_forwards - 1 <= alone.stats.drafter_passes <= alone.stats.verify_forwards


def test_a_drafter_that_keeps_too_little_stops_after_its_trial(engine, no_lookup):
    cfg = DecodeConfig(mode="verify", draft="drafter", max_new_tokens=40)
    ar = engine.generate(PROMPTS[0], DecodeConfig(mode="ar", max_new_tokens=40))
    stopped = engine.generate(PROMPTS[0], cfg)
    assert stopped.token_ids == ar.token_ids
    # this tiny drafter's drafts are too unsure to be checked, so none is kept: it stops after its trial passes
    assert stopped.stats.accepted_slot_tokens == 0
    assert stopped.stats.drafter_passes == decode.DRAFTER_TRIAL < stopped.stats.verify_forwards


def test_the_drafter_pays_while_its_kept_drafts_save_more_than_its_passes_cost(base):
    dec = decode.Decoder(Engine.from_loaded(base).backbone, DecodeConfig(mode="verify"), None, base.eos_ids)
    t1 = decode.interpolate(dec._curve, 1)
    assert not dec._drafter_pays()  # no drafter
    dec.block_drafter = object()
    dec.stats.drafter_passes = decode.DRAFTER_TRIAL - 1
    assert dec._drafter_pays()  # on trial, whatever it kept
    dec.stats.drafter_passes, dec._drafter_pass_ms = 10, 0.25 * t1
    for kept, pays in ((0, False), (2, False), (3, True), (10, True)):
        dec.drafter_kept = kept
        assert dec._drafter_pays() is pays


def test_a_drafted_request_reuses_a_cached_prompt_with_its_features(base, drafter_dir, no_lookup):
    eng = Engine.from_loaded(base, EngineConfig(drafter_path=str(drafter_dir), prompt_chunk=8))
    assert eng.prefixes is not None
    prompt = "What is the weather in Paris today? Tell me about the Eiffel tower and the river too."
    ar = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=30))  # stores keys/values, no features
    cfg = DecodeConfig(mode="verify", draft="drafter", max_new_tokens=30)
    cold = eng.generate(prompt, cfg)  # reuses nothing (no features held), gives the held pieces theirs
    warm = eng.generate(prompt, cfg)
    assert cold.stats.cached_prompt_tokens == 0 < warm.stats.cached_prompt_tokens and cold.stats.drafter_passes >= 1
    assert warm.token_ids == cold.token_ids == ar.token_ids
    # the same features, restored or encoded: the same drafts kept
    assert (warm.stats.accepted_slot_tokens, warm.stats.verify_forwards, warm.stats.drafter_passes) == (
        cold.stats.accepted_slot_tokens, cold.stats.verify_forwards, cold.stats.drafter_passes)
    # once the drafter is loaded, an undrafted request keeps its prompt's features: a drafted one after it reuses them
    other = prompt.replace("Paris", "Rome")
    eng.generate(other, DecodeConfig(mode="ar", max_new_tokens=30))
    after_ar = eng.generate(other, cfg)
    alone = Engine.from_loaded(base, EngineConfig(drafter_path=str(drafter_dir), prompt_chunk=8, prefix_cache=False)
                               ).generate(other, cfg)
    assert after_ar.stats.cached_prompt_tokens > 0 and after_ar.token_ids == alone.token_ids
    assert after_ar.stats.accepted_slot_tokens == alone.stats.accepted_slot_tokens


def test_auto_drafts_free_text_with_the_drafter_and_templated_steps_by_lookup(engine, no_lookup):
    auto = DecodeConfig(mode="verify", max_new_tokens=30)
    assert auto.draft == "auto"
    free = engine.generate(PROMPTS[1], auto)
    templated = engine.generate(PROMPTS[1], auto, template=_template())
    assert free.stats.drafter_passes >= 1 and templated.stats.drafter_passes == 0
    for out, template in ((free, None), (templated, _template())):
        assert out.token_ids == engine.generate(PROMPTS[1], DecodeConfig(mode="ar", max_new_tokens=30),
                                                template=template).token_ids


def test_accepted_drafts_are_counted_per_pass(engine, no_lookup):
    # every draft checked: sized passes would check none of this tiny drafter's unsure drafts
    stats = [engine.generate(p, DecodeConfig(mode="verify", draft="drafter", max_new_tokens=40,
                                             sized_passes=False)).stats for p in PROMPTS]
    assert sum(s.accepted_slot_tokens for s in stats) > 0  # trained on these prompts' outputs: drafts are kept
    for s in stats:
        assert s.accepted_per_pass == s.accepted_slot_tokens / s.verify_forwards
        assert s.accepted_slot_tokens <= s.slot_tokens
        assert s.to_dict()["accepted_per_pass"] == round(s.accepted_per_pass, 4)


def test_saved_drafter_holds_only_its_own_weights(base, drafter_dir):
    d = load_drafter(drafter_dir, base.model)
    vocab = base.model.config.vocab_size
    assert not any(vocab in v.shape for v in d.state_dict().values())  # no embedding or head of its own
    assert sum(v.numel() for v in d.state_dict().values()) < sum(p.numel() for p in base.model.parameters())


def test_a_drafter_for_another_base_is_a_typed_error(drafter_dir):
    other = Engine.from_loaded(tiny_llama(3), EngineConfig(drafter_path=str(drafter_dir)))
    with pytest.raises(DrafterMismatchError, match="another base model"):
        other.generate("hello", DecodeConfig(mode="verify", draft="drafter", max_new_tokens=8))


def test_a_missing_drafter_falls_back_to_lookup_drafts_with_one_warning(base, tmp_path, caplog):
    eng = Engine.from_loaded(base, EngineConfig(drafter_path=str(tmp_path / "nothing")))
    with caplog.at_level(logging.WARNING, logger="agentkit.engine.engine"):
        outs = [eng.generate(p, DecodeConfig(mode="verify", draft="drafter", max_new_tokens=24)) for p in PROMPTS[:2]]
    warned = [r for r in caplog.records if "no block drafter" in r.getMessage()]
    assert len(warned) == 1
    for p, out in zip(PROMPTS[:2], outs):
        assert out.stats.drafter_passes == 0
        assert out.token_ids == eng.generate(p, DecodeConfig(mode="ar", max_new_tokens=24)).token_ids


def test_the_near_tie_report_measures_the_bases_margin_where_outputs_part(engine):
    prompt = PROMPTS[0]
    ar = engine.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=12)).token_ids
    assert first_difference(engine, prompt, ar, ar) is None
    other = list(ar)
    other[5] = (ar[5] + 1) % 500
    diff = first_difference(engine, prompt, ar, other)
    assert (diff.index, diff.first, diff.second) == (5, ar[5], other[5])
    # the margin is the gap between the base's top two at that position, from one fresh pass
    bb = engine.backbone
    logits = bb.encode(engine.encode_prompt(prompt) + ar[:5], bb.new_cache(), rows=[-1], whole=True)[0]
    top = torch.topk(logits.float(), 2).values
    assert diff.margin == pytest.approx(float(top[0] - top[1]))
    assert diff.gap >= diff.margin >= 0  # the greedy output's token is the base's top one there
    assert diff.near_tie == (diff.margin <= NEAR_TIE)
    assert set(diff.to_dict()) >= {"index", "margin", "gap", "near_tie"}


def test_the_eval_mode_verify_drafter_is_verify_with_the_drafters_drafts():
    from agentkit.evals.report import summarize
    from agentkit.evals.runner import EvalContext

    cfg = EvalContext().config("verify-drafter")
    assert (cfg.mode, cfg.draft) == ("verify", "drafter")
    assert EvalContext().config("verify").draft == "lookup"
    rows = [{"success": True, "stats": {"output_tokens": 9, "pinned_tokens": 3, "forwards": 3, "latency_ms": 5.0,
                                        "decoder_forwards": 0, "encoder_forwards": 4, "verify_forwards": v,
                                        "accepted_slot_tokens": a}} for v, a in ((2, 3), (4, 1))]
    assert summarize(rows)["accepted_per_pass"] == round(4 / 6, 4)


def test_the_base_fingerprint_is_the_same_in_float32_and_bf16():
    from agentkit.engine.drafter import base_fingerprint

    lm = tiny_llama(7)
    f32 = base_fingerprint(lm.model)
    lm.model.to(torch.bfloat16)
    assert base_fingerprint(lm.model) == f32
    assert base_fingerprint(tiny_llama(8).model) != f32
