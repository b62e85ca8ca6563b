"""The loop adapter's trainer (LoRA on the causal weights, loss on the target only) and merging it into an engine."""

import pytest
import torch

from agentkit.config import EngineConfig
from agentkit.engine.engine import Engine, merged_lora
from agentkit.errors import InvalidRequestError, ModelNotFoundError
from agentkit.models.adapter import AdapterConfig, load_adapter, merge_lora, save_adapter
from agentkit.models.tiny import tiny_llama
from agentkit.training.sft import SFTConfig, SFTTrainer, tokenize, train

pytestmark = pytest.mark.usefixtures("one_thread")
EXAMPLES = [{"step": "reply", "messages": [{"role": "user", "content": f"code {i}?"}], "prefix": "",
             "target": f"It is {i}{i}."} for i in range(4)] + \
           [{"step": "decide", "messages": [{"role": "user", "content": "call?"}], "prefix": '{"name": "',
             "target": 'lookup"'}]
CFG = {"batch_size": 2, "lr": 3e-2, "warmup": 1, "rank": 4, "alpha": 8.0, "cpu_bf16": False, "ckpt_every": 2,
       "snapshot_every": 0}


def _rows(lm):
    return [tokenize(e, lm.tokenizer, lm.eos_ids[0]) for e in EXAMPLES]


def test_the_loss_is_on_the_target_only_and_ends_with_end_of_turn():
    lm = tiny_llama(0)
    rows = _rows(lm)
    reply, decide = rows[0], rows[-1]
    prompt = lm.tokenizer.apply_chat_template(EXAMPLES[0]["messages"], add_generation_prompt=True, tokenize=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    assert reply.ids[:reply.start] == prompt and reply.ids[-1] == lm.eos_ids[0]
    assert lm.tokenizer.decode(reply.ids[reply.start:-1]) == "It is 00."
    assert lm.tokenizer.decode(decide.ids[decide.start:]) == 'lookup"'  # a decision: no end of turn
    assert lm.tokenizer.decode(decide.ids[:decide.start]).endswith('{"name": "')


def test_steps_lower_the_loss():
    lm = tiny_llama(0)
    rows = _rows(lm)
    tr = SFTTrainer(lm, SFTConfig(steps=1000, **CFG))
    losses = [tr.step(rows) for _ in range(20)]  # the same batch: a random 2-layer model learns it slowly
    assert losses[-1] < losses[0] - 0.1


def test_training_saves_and_resumes(tmp_path):
    lm = tiny_llama(0)
    rows = _rows(lm)
    tr = train(lm, rows, SFTConfig(steps=12, **CFG), tmp_path, log=lambda *_: None)
    state, acfg = load_adapter(tmp_path)
    assert acfg.kind == "ar" and "mask_embedding" not in state and tr.step_no == 12
    again = train(tiny_llama(0), rows, SFTConfig(steps=14, **CFG), tmp_path, log=lambda *_: None)
    assert again.step_no == 14 and len((tmp_path / "log.jsonl").read_text().splitlines()) == 14


def test_merging_adds_the_trained_deltas(tmp_path):
    lm = tiny_llama(0)
    tr = SFTTrainer(tiny_llama(0), SFTConfig(steps=3, **CFG))
    for _ in range(3):
        tr.step(_rows(lm)[:2])
    tr.save(tmp_path)
    merged = merge_lora(lm, tmp_path, copy_model=True)
    name = "model.layers.0.self_attn.q_proj"
    w0, w1 = lm.model.get_submodule(name).weight, merged.model.get_submodule(name).weight
    delta = tr.loras[name].delta().detach()
    assert torch.allclose(w1 - w0, delta, atol=1e-6) and delta.abs().max() > 0
    ids = torch.tensor([_rows(lm)[0].ids])
    with torch.no_grad():
        assert torch.allclose(merged.model(ids).logits, tr.model(ids).logits, atol=1e-4)  # the same function
    engine = Engine.from_loaded(merged_lora(tiny_llama(0), str(tmp_path)))
    assert engine.lm.meta["weights"] is None and "LoRA" in engine.name
    from agentkit.sdk._generator import EngineGenerator

    assert EngineGenerator(engine).calibrate is False  # trained on the decisions: the agent reads them raw
    assert EngineGenerator(Engine.from_loaded(tiny_llama(0))).calibrate is True


def test_a_wrong_adapter_is_a_typed_error(tmp_path):
    lm = tiny_llama(0)
    with pytest.raises(ModelNotFoundError, match="lora"):
        merged_lora(lm, str(tmp_path / "missing"))
    save_adapter(tmp_path, {"mask_embedding": torch.zeros(64)}, AdapterConfig(rank=4))  # a block-diffusion one
    with pytest.raises(ModelNotFoundError, match="block-diffusion"):
        merged_lora(lm, str(tmp_path))
    with pytest.raises(InvalidRequestError, match="lora"):
        EngineConfig(lora=str(tmp_path), backend="llama.cpp")


def test_the_default_model_merges_its_loop_adapter_unless_told_not_to(monkeypatch, caplog):
    """``EngineConfig.lora``: None is the model's own LoRA (the embedded default model's loop adapter; another
    model has none), "none" the weights as loaded; without the adapter's file the default model says so."""
    from agentkit.engine.engine import engine_lora
    from agentkit.models import adapter

    assert engine_lora(EngineConfig()) == str(adapter.LOOP_DIR)
    assert engine_lora(EngineConfig(lora="none")) is None
    assert engine_lora(EngineConfig(model="some/other-model")) is None
    assert engine_lora(EngineConfig(lora="x/y")) == "x/y"
    EngineConfig(backend="llama.cpp", lora="none")  # nothing to merge there, and nothing asked
    monkeypatch.setattr(adapter, "LOOP_DIR", adapter.LOOP_DIR.parent / "missing")
    with caplog.at_level("WARNING", logger="agentkit.engine"):
        assert engine_lora(EngineConfig()) is None
    assert "loop adapter is not at" in caplog.text


def test_the_command_line_trains_the_layers_it_names(tmp_path):
    """``python -m agentkit.training.sft --targets q_proj,v_proj``: the adapter adapts those layers only."""
    import json

    from agentkit.training.sft import main

    lm = tiny_llama(0)
    model_dir = tmp_path / "model"
    lm.model.save_pretrained(model_dir)
    lm.tokenizer.save_pretrained(model_dir)
    traces = tmp_path / "traces.jsonl"
    traces.write_text("".join(json.dumps(e) + "\n" for e in EXAMPLES))
    out = tmp_path / "out"
    assert main(["--traces", str(traces), "--out", str(out), "--model", str(model_dir), "--fp32", "--steps", "2",
                 "--batch-size", "2", "--rank", "4", "--targets", "q_proj,v_proj", "--snapshot-every", "0"]) == 0
    state, cfg = load_adapter(out)
    assert cfg.targets == ("q_proj", "v_proj")
    assert {k.rsplit(".", 2)[-2] for k in state} == {"q_proj", "v_proj"}
    with pytest.raises(SystemExit):
        main(["--traces", str(traces), "--out", str(out), "--targets", " , "])
