"""Resuming: from a checkpoint, or from a finished adapter directory (a copy of the shipped one); LoRA placement."""

import json
import math
import random

import pytest
import torch

from agentkit.models.adapter import load_adapter
from agentkit.models.tiny import tiny_llama
from agentkit.training.data import synthetic, tokenize
from agentkit.training.recipe import TrainConfig, Trainer, make_batch

pytestmark = pytest.mark.usefixtures("one_thread")
CFG = {"batch_size": 2, "block": 8, "max_prefix": 32, "lr": 3e-2, "warmup": 1, "rank": 4, "alpha": 8.0,
       "log_every": 0, "device": "cpu"}


def _batch(lm, tr, cfg):
    exs = [tokenize(e, lm.tokenizer, lm.eos_ids[0]) for e in synthetic(4, seed=3)]
    return make_batch(exs[:2], cfg, tr.mask_id, tr.acfg.vocab_size, lm.tokenizer.pad_token_id, random.Random(0))


def test_resume_from_an_adapter_directory_without_checkpoint(tmp_path):
    lm = tiny_llama(0)
    cfg = TrainConfig(steps=3, **CFG)
    tr = Trainer(lm, cfg)
    tr.step(_batch(lm, tr, cfg))
    tr.save(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps({"steps": 350, "tokens": 312906, "seconds": 7140.0}))
    tr2 = Trainer(tiny_llama(0), TrainConfig(steps=400, **{**CFG, "lora_prefix": False}))
    assert tr2.resume(tmp_path)
    assert (tr2.step_no, tr2.tokens, tr2.start_step) == (350, 312906, 350)
    state, _ = load_adapter(tmp_path)
    for name, m in tr2.loras.items():
        assert torch.equal(m.lora_b.detach(), state[f"{name}.lora_b"])
    assert tr2.acfg.prefix == "base"  # this run's placement is recorded in what it saves
    assert not Trainer(tiny_llama(0), TrainConfig(steps=1, **CFG)).resume(tmp_path / "empty")


def test_block_only_lora_leaves_the_prefix_to_the_base_weights():
    lm = tiny_llama(0)
    cfg = TrainConfig(steps=1, **{**CFG, "lora_prefix": False})
    tr = Trainer(lm, cfg)
    with torch.no_grad():
        for m in tr.loras.values():
            m.lora_b.normal_(0, 0.5)
    batch = _batch(lm, tr, cfg)
    tr.loss(batch)
    m = next(iter(tr.loras.values()))
    p = batch.prefix_lens[0]
    assert m.rows.shape == (*batch.input_ids.shape, 1)
    assert not m.rows[0, :p].any() and m.rows[0, p:].all()
    x = torch.randn(1, 5, m.base.in_features)
    m.rows = torch.tensor([[[0.0]] * 5])
    torch.testing.assert_close(m(x), m.base(x))  # a row outside the block: the base projection exactly


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cuda_bf16_training_step_and_saved_adapter(tmp_path):
    """The command's ``--device cuda`` path: bf16 autocast with fp32 master weights, on a tiny model."""
    from agentkit.models.adapter import apply_adapter

    lm = tiny_llama(0)
    cfg = TrainConfig(steps=2, **{**CFG, "device": "cuda", "lora_prefix": False})
    tr = Trainer(lm, cfg)
    assert tr.device.type == "cuda" and tr.autocast.fast_dtype == torch.bfloat16 and tr.autocast._enabled
    batch = _batch(lm, tr, cfg)
    losses = [tr.step(batch) for _ in range(2)]
    assert all(torch.isfinite(torch.tensor(losses)))
    assert all(p.dtype == torch.float32 for m in tr.loras.values() for p in (m.lora_a, m.lora_b))
    tr.save(tmp_path)
    assert apply_adapter(tiny_llama(0), tmp_path).mask_token_id is not None


def test_cpu_bf16_autocast_is_opt_in():
    lm = tiny_llama(0)
    assert not Trainer(lm, TrainConfig(steps=1, **CFG)).autocast._enabled
    tr = Trainer(tiny_llama(0), TrainConfig(steps=1, **{**CFG, "cpu_bf16": True}))
    assert tr.autocast._enabled and tr.autocast.fast_dtype == torch.bfloat16
    loss = tr.step(_batch(tiny_llama(0), tr, tr.cfg))
    assert math.isfinite(loss)  # under CPU bf16 autocast


def test_a_killed_run_is_listed_by_the_next_invocation(tmp_path):
    from types import SimpleNamespace

    from agentkit.training.__main__ import record_interrupted

    (tmp_path / "runs.jsonl").write_text(json.dumps({"command": "first", "from_step": 0, "to_step": 350,
                                                     "from_tokens": 0, "to_tokens": 312906, "seconds": 7140.0}) + "\n")
    (tmp_path / "run_current.json").write_text(json.dumps({"command": "v3 cmd", "date": "2026-11-30"}))
    tr = SimpleNamespace(start_step=420, start_tokens=400000, start_seconds=9000.0, cfg=TrainConfig())
    record_interrupted(tmp_path, tr)
    record_interrupted(tmp_path, tr)  # listed once
    runs = [json.loads(x) for x in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 2 and runs[1]["command"].startswith("v3 cmd")
    assert (runs[1]["from_step"], runs[1]["to_step"], runs[1]["to_tokens"]) == (350, 420, 400000)
    assert runs[1]["seconds"] == 1860.0
