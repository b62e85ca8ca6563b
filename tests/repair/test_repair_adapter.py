"""The repair adapter's seam: an "ar" LoRA trained on top of another one loads stacked on it, gives the weights
it was trained on, and is refused (typed) for other weights."""

import json

import pytest
import torch

from agentkit.config import EngineConfig
from agentkit.engine.engine import Engine
from agentkit.errors import AdapterMismatchError
from agentkit.models.adapter import load_adapter, merge_lora, read_adapter
from agentkit.models.tiny import tiny_llama
from agentkit.repair import adapter as repair_adapter
from agentkit.training.sft import SFTConfig, SFTTrainer, main, merged_base, tokenize

pytestmark = pytest.mark.usefixtures("one_thread")
CFG = {"batch_size": 2, "lr": 3e-2, "warmup": 1, "rank": 4, "alpha": 8.0, "cpu_bf16": False, "ckpt_every": 2,
       "snapshot_every": 0}
EXAMPLES = [{"step": "repair", "messages": [{"role": "user", "content": f"fix {i}"}], "prefix": "```python\nx = 1",
             "target": f"\n    return x + {i}\n"} for i in range(3)]


def _trained(lm, out, on=None, steps=3):
    rows = [tokenize(e, lm.tokenizer, lm.eos_ids[0]) for e in EXAMPLES]
    tr = SFTTrainer(lm, SFTConfig(steps=steps, **CFG), on)
    for _ in range(steps):
        tr.step(rows)
    tr.save(out)
    return tr, rows


def test_a_repair_target_ends_at_the_line_without_end_of_turn():
    lm = tiny_llama(0)
    row = tokenize(EXAMPLES[1], lm.tokenizer, lm.eos_ids[0])
    assert lm.tokenizer.decode(row.ids[row.start:]) == "\n    return x + 1\n"
    assert lm.tokenizer.decode(row.ids[:row.start]).endswith("x = 1")


def test_an_adapter_trained_on_another_loads_stacked_on_it(tmp_path):
    lower, upper = tmp_path / "loop", tmp_path / "repair"
    _trained(tiny_llama(0), lower)
    tr, rows = _trained(merged_base(tiny_llama(0), lower), upper, on=lower)
    _, cfg = read_adapter(upper)
    assert cfg.on == "loop" and len(cfg.on_sha256) == 64 and cfg.base == tiny_llama(0).name
    state, stacked = load_adapter(upper)
    assert stacked.rank == 8 and stacked.scale == 1.0 and state["model.layers.0.self_attn.q_proj.lora_a"].shape[0] == 8
    merged = merge_lora(tiny_llama(0), upper)
    ids = torch.tensor([rows[0].ids])
    with torch.no_grad():  # the two LoRAs merged give the function the second one was trained as
        assert torch.allclose(merged.model(ids).logits, tr.model(ids).logits, atol=1e-4)
        plain = tiny_llama(0).model(ids).logits
        assert not torch.allclose(merged.model(ids).logits, plain, atol=1e-3)


def test_an_adapter_for_other_weights_is_refused(tmp_path):
    lower, upper = tmp_path / "loop", tmp_path / "repair"
    _trained(tiny_llama(0), lower)
    _trained(merged_base(tiny_llama(0), lower), upper, on=lower)
    other = tiny_llama(0)
    other.name = "another model"
    with pytest.raises(AdapterMismatchError, match="another model"):
        merge_lora(other, upper)
    bigger = tiny_llama(0)
    bigger.model.resize_token_embeddings(bigger.model.get_input_embeddings().weight.shape[0] + 8)
    with pytest.raises(AdapterMismatchError, match="tokens"):
        merge_lora(bigger, upper)
    _trained(tiny_llama(1), lower, steps=1)  # the adapter underneath is not the one it was trained on
    with pytest.raises(AdapterMismatchError, match="trained on top of 'loop'"):
        load_adapter(upper)


def test_the_engine_seam_takes_the_adapter_and_refuses_it_for_other_weights(tmp_path):
    lm = tiny_llama(0)
    model_dir = tmp_path / "model"
    lm.model.save_pretrained(model_dir)
    lm.tokenizer.save_pretrained(model_dir)
    traces = tmp_path / "traces.jsonl"
    traces.write_text("".join(json.dumps(e) + "\n" for e in EXAMPLES))
    lower, upper = tmp_path / "loop", tmp_path / "repair"
    args = ["--traces", str(traces), "--model", str(model_dir), "--fp32", "--steps", "2", "--batch-size", "2",
            "--rank", "4", "--snapshot-every", "0"]
    assert main([*args, "--out", str(lower)]) == 0
    assert main([*args, "--out", str(upper), "--on", str(lower)]) == 0
    engine = repair_adapter.repair_engine(str(upper), model=str(model_dir))
    assert engine.lm.meta["lora"] == str(upper)
    other = tmp_path / "other-model"  # the other weights under another name: not what the adapter names
    tiny_llama(1).model.save_pretrained(other)
    lm.tokenizer.save_pretrained(other)
    with pytest.raises(AdapterMismatchError, match="was trained on"):
        Engine(EngineConfig(model=str(other), lora=str(upper)))


def test_the_assistant_takes_the_shipped_adapter_only_when_it_is_the_default(monkeypatch, tmp_path):
    monkeypatch.setattr(repair_adapter, "REPAIR_DIR", tmp_path)
    (tmp_path / "adapter.safetensors").write_bytes(b"")
    monkeypatch.setattr(repair_adapter, "ON_BY_DEFAULT", True)
    assert repair_adapter.resolve(None) == str(tmp_path)
    assert repair_adapter.resolve("none") is None and repair_adapter.resolve("x/y") == "x/y"
    monkeypatch.setattr(repair_adapter, "ON_BY_DEFAULT", False)
    assert repair_adapter.resolve(None) is None
    monkeypatch.setattr(repair_adapter, "ON_BY_DEFAULT", True)
    (tmp_path / "adapter.safetensors").unlink()
    assert repair_adapter.resolve(None) is None  # not shipped in this install


def test_the_benchmark_rows_with_the_adapter_draft_on_its_engine():
    from agentkit.evals.repair import drafter_for

    plain, adapted = object(), object()
    d = drafter_for("hybrid-repair", plain, 0, adapted)
    assert d.engine is adapted and d.mode == "hybrid" and d.name == "hybrid-repair"
    assert drafter_for("rank-repair", plain, 0, adapted).mode == "rank"
    assert drafter_for("hybrid", plain, 0, adapted).engine is plain
    with pytest.raises(ValueError, match="repair adapter"):
        drafter_for("hybrid-repair", plain, 0)


def test_the_shipped_repair_adapter_stacks_on_the_shipped_loop_adapter():
    """A loop adapter trained again makes the repair adapter's weights stale: it must be trained again too."""
    from agentkit.models.adapter import LOOP_DIR, adapter_sha256

    if repair_adapter.shipped() is None:
        pytest.skip("no repair adapter in this install")
    _, cfg = read_adapter(repair_adapter.REPAIR_DIR)
    assert cfg.kind == "ar" and cfg.on == LOOP_DIR.name and cfg.on_sha256 == adapter_sha256(LOOP_DIR)
    _, stacked = load_adapter(repair_adapter.REPAIR_DIR)
    assert stacked.rank == cfg.rank + read_adapter(LOOP_DIR)[1].rank
