"""The block-diffusion training recipe, end to end on the tiny model (well under a minute on 2 CPU cores)."""

import random

import pytest
import torch

from agentkit.config import DecodeConfig
from agentkit.constrain.nodes import Lit, Slot, Template, seq
from agentkit.engine.engine import Engine
from agentkit.errors import InvalidRequestError
from agentkit.models.adapter import apply_adapter, load_adapter
from agentkit.models.tiny import tiny_llama
from agentkit.training.data import Tokenized, synthetic, tokenize
from agentkit.training.recipe import TrainConfig, Trainer, block_diffusion_mask, make_batch, make_row, train

CFG = {"batch_size": 4, "block": 8, "max_prefix": 32, "lr": 3e-2, "warmup": 1, "rank": 8, "alpha": 16.0,
       "log_every": 0}


def _examples(lm, n=32):
    return [tokenize(e, lm.tokenizer, lm.eos_ids[0]) for e in synthetic(n, seed=3)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A short run on a fixed batch: the trainer, its batch and the saved adapter directory."""
    torch.manual_seed(0)
    lm = tiny_llama(0)
    cfg = TrainConfig(steps=25, **CFG)
    tr = Trainer(lm, cfg)
    batch = make_batch(_examples(lm)[:4], cfg, tr.mask_id, tr.acfg.vocab_size, lm.tokenizer.pad_token_id,
                       random.Random(0))
    for _ in range(cfg.steps):
        tr.step(batch)
    out = tmp_path_factory.mktemp("adapter")
    tr.save(out)
    return tr, batch, out


def test_block_diffusion_mask_is_causal_over_prefix_and_bidirectional_in_block():
    m = block_diffusion_mask([3, 2], [2, 2], 5)
    assert m.shape == (2, 1, 5, 5) and m.dtype == torch.bool
    a = m[0, 0]
    assert torch.equal(a[:3, :3], torch.ones(3, 3, dtype=torch.bool).tril())  # causal prefix
    assert not a[:3, 3:].any()  # the prefix never sees the block
    assert a[3:5, :5].all()  # the block sees the whole prefix and itself, both directions
    b = m[1, 0]  # prefix 2, block 2, one padding position
    assert b[2:4, :4].all() and not b[:4, 4].any()  # padding is never attended
    assert b[4, 4] and b[4].sum() == 1  # a padding row attends only to itself


def test_token_shift_targets_and_template_aware_noise():
    ex = Tokenized(prompt=[10, 11, 12], answer=[20, 21, 22, 23, 24, 2], pinned=[True, False, True, False, False, False])
    cfg = TrainConfig(block=4, template_frac=1.0, value_start_frac=0.0, max_prefix=100)
    padded = ex.answer + [2] * cfg.block  # past the answer's EOS the block holds more EOS
    seen, pad_labels = set(), 0
    for seed in range(200):
        ids, rows, labels, p = make_row(ex, cfg, mask_id=99, vocab=100, r=random.Random(seed))
        s = p - len(ex.prompt)  # block start inside the answer
        assert ids[:p] == (ex.prompt + ex.answer)[:p]  # clean prefix
        assert len(ids) - p == cfg.block  # full-length blocks, as decoding canvases are
        assert rows and len(rows) == len(labels)
        for q, y in zip(rows, labels):
            j = q + 1 - p  # the output at p+j-1 predicts block position j
            assert ids[p + j] == 99 and y == padded[s + j]
            assert s + j >= len(ex.pinned) or not ex.pinned[s + j]  # pinned positions are never noised
            seen.add(j)
            pad_labels += s + j >= len(ex.answer)
        for j in range(len(ids) - p):
            if ids[p + j] != 99:
                assert ids[p + j] == padded[s + j]
    assert 0 in seen  # block position 0 is predicted from the last prefix position
    assert pad_labels  # the EOS padding is learned too
    short = 0
    for seed in range(50):  # without padding a block stops at the answer's end
        ids, _, _, p = make_row(ex, TrainConfig(block=4, eos_pad=False, value_start_frac=0.0), 99, 100,
                                random.Random(seed))
        assert len(ids) - p == min(4, len(ex.answer) - (p - len(ex.prompt)))
        short += len(ids) - p < 4
    assert short


def test_loss_goes_down_on_a_fixed_batch(trained):
    tr, _, _ = trained
    first, last = tr.losses[0], sum(tr.losses[-3:]) / 3
    assert last < first - 0.3, tr.losses


def test_adapter_round_trip_gives_identical_logits(trained):
    tr, batch, out = trained
    state, acfg = load_adapter(out)
    assert acfg.mask_token_id == tr.mask_id and acfg.rank == 8
    tr.model.eval()
    with torch.no_grad():
        want = tr.loss(batch)
    lm2 = apply_adapter(tiny_llama(0), out)  # merged into a fresh copy of the same base
    assert lm2.bidirectional and lm2.mask_token_id == tr.mask_id
    tr2 = Trainer(lm2, TrainConfig(steps=1, **CFG))  # zero-initialised LoRA on top: same function
    tr2.mask_row.data.copy_(state["mask_embedding"])
    tr2.model.eval()
    with torch.no_grad():
        got = tr2.loss(batch)
    assert torch.allclose(want, got, atol=1e-5), (want, got)


def test_adapted_tiny_model_decodes_in_diffusion_mode_under_a_template(trained):
    _, _, out = trained
    lm = apply_adapter(tiny_llama(0), out)
    engine = Engine.from_loaded(lm)
    cfg = DecodeConfig(mode="diffusion", canvas_length=8, max_new_tokens=32)
    assert engine._sampler(cfg) == "mask"
    tpl = Template(root=seq(Lit('{"age":'), Slot("[1-9][0-9]?", max_tokens=2), Lit(',"ok":'),
                            Slot("true|false", max_tokens=2), Lit("}")), kind="json")
    res = engine.generate("Extract the age.", cfg, template=tpl)
    assert tpl.matches(res.text), res.text
    assert res.stats.decoder_forwards >= 1


def test_weights_select_base_or_adapted_in_every_mode(trained):
    from agentkit.config import EngineConfig
    from agentkit.errors import UnsupportedModeError

    _, _, out = trained
    engine = Engine.from_loaded(tiny_llama(0), EngineConfig(adapter_path=str(out)))
    adapted = Engine.from_loaded(apply_adapter(tiny_llama(0), out))
    base = Engine.from_loaded(tiny_llama(0))
    prompt = "hello there"
    ar = DecodeConfig(mode="ar", max_new_tokens=12)
    assert engine.generate(prompt, ar).token_ids == base.generate(prompt, ar).token_ids  # auto: AR on base
    ar_adapted = DecodeConfig(mode="ar", max_new_tokens=12, weights="adapted")
    assert engine.generate(prompt, ar_adapted).token_ids == adapted.generate(prompt, ar).token_ids
    causal = DecodeConfig(mode="diffusion", max_new_tokens=12, canvas_length=4, weights="base")
    assert engine.generate(prompt, causal).token_ids == base.generate(prompt, ar).token_ids  # Jacobi fixed point
    with pytest.raises(UnsupportedModeError, match="weights='adapted' needs a block-diffusion adapter"):
        base.generate(prompt, ar_adapted)
    with pytest.raises(InvalidRequestError, match="weights must be"):
        DecodeConfig(weights="lora")


def test_train_resumes_from_checkpoint(tmp_path):
    lm = tiny_llama(0)
    exs = _examples(lm, 8)
    cfg = TrainConfig(steps=2, ckpt_every=1, **CFG)
    tr = train(lm, exs, cfg, tmp_path)
    assert (tmp_path / "adapter.safetensors").is_file() and tr.step_no == 2
    cfg.steps = 3
    tr2 = train(tiny_llama(0), exs, cfg, tmp_path, log=lambda *_: None)
    assert tr2.step_no == 3 and tr2.losses[:2] == tr.losses


def test_snapshots_keep_the_adapter_at_each_interval(tmp_path):
    lm = tiny_llama(0)
    exs = _examples(lm, 8)
    tr = train(lm, exs, TrainConfig(steps=4, snapshot_every=2, **CFG), tmp_path, log=lambda *_: None)
    snaps = sorted((tmp_path / "snapshots").iterdir())
    assert [d.name for d in snaps] == ["step-00002", "step-00004"]
    import json

    meta = [json.loads((d / "snapshot.json").read_text()) for d in snaps]
    assert [m["step"] for m in meta] == [2, 4] and 0 < meta[0]["tokens"] < meta[1]["tokens"] == tr.tokens
    first, _ = load_adapter(snaps[0])
    last, _ = load_adapter(snaps[1])
    final, _ = load_adapter(tmp_path)
    assert all(torch.equal(last[k], final[k]) for k in final)  # the last snapshot is the saved adapter
    assert any(not torch.equal(first[k], last[k]) for k in final)  # an earlier one is not


def test_an_adapter_path_without_an_adapter_is_a_typed_error(tmp_path):
    from agentkit.config import EngineConfig
    from agentkit.errors import ModelNotFoundError

    engine = Engine.from_loaded(tiny_llama(0), EngineConfig(adapter_path=str(tmp_path / "nowhere")))
    with pytest.raises(ModelNotFoundError, match="nowhere.*no block-diffusion adapter"):
        engine.generate("hi", DecodeConfig(mode="diffusion", max_new_tokens=4))


def test_model_card_lists_every_run_and_the_evaluation_note(tmp_path):
    from agentkit.training.__main__ import write_card

    runs = [{"date": "2026-11-30", "from_step": 0, "to_step": 110, "from_tokens": 0, "to_tokens": 92531,
             "seconds": 1446.0, "eos_pad": False, "generated_frac": 0.0, "command": "python -m agentkit.training A"},
            {"date": "2026-11-30", "from_step": 110, "to_step": 300, "from_tokens": 92531, "to_tokens": 250000,
             "seconds": 3000.0, "eos_pad": True, "generated_frac": 0.5, "command": "python -m agentkit.training B"}]
    info = {"base": "tiny", "curve": [(1, 5.0, 100), (2, 4.0, 200)], "steps": 300, "tokens": 250000,
            "seconds": 4446.0, "n_synthetic": 10, "n_free": 0, "hardware": "cpu", "command": "B", "runs": runs,
            "eval_note": "EVAL-NOTE-TEXT"}
    write_card(tmp_path, TrainConfig(), info)
    card = (tmp_path / "MODEL_CARD.md").read_text()
    assert "| 0 → 110 | 0 → 92531 | 24.1 | no | 0.0 | `python -m agentkit.training A` |" in card
    assert "| 110 → 300 | 92531 → 250000 | 50.0 | yes | 0.5 | `python -m agentkit.training B` |" in card
    assert "EVAL-NOTE-TEXT" in card and "automatically for diffusion mode" in card
