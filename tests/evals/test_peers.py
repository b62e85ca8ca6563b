"""The peer runner (agentkit.evals.peers) on a tiny random model, each Outlines backend; missing packages."""

import json

import pytest

from agentkit.evals import peers
from agentkit.evals.bfcl import BfclItem, build_prompt

pytestmark = pytest.mark.usefixtures("one_thread")

ITEM = BfclItem(
    id="t_0", category="simple_python",
    messages=[{"role": "user", "content": "Area of a triangle with base 10 and height 5?"}],
    functions=[{"name": "area", "description": "Triangle area.",
                "parameters": {"type": "dict", "properties": {"base": {"type": "integer"},
                                                              "height": {"type": "integer"},
                                                              "unit": {"type": "string", "enum": ["cm", "m"]}},
                               "required": ["base", "height"]}}],
    ground_truth=[{"area": {"base": [10], "height": [5], "unit": ["", "cm"]}}],
)


@pytest.fixture(scope="module")
def tiny_hf():
    from agentkit.models.tiny import tiny_llama

    loaded = tiny_llama(3)
    return loaded.model, loaded.tokenizer


@pytest.mark.parametrize("name", ["outlines-xgrammar", "outlines-llguidance", "outlines-core"])
def test_outlines_peer_writes_a_valid_call_on_a_tiny_model(name, tiny_hf):
    for pkg in peers._PACKAGES[name]:
        pytest.importorskip(pkg)
    peer = peers.OutlinesPeer(name, *tiny_hf)
    row = peers.run_peer(peer, ITEM, max_new_tokens=64)
    st = row["stats"]
    # the model is given agentkit's prompt through the chat template once, as the engine encodes it
    tok = tiny_hf[1]
    once = tok.apply_chat_template(build_prompt(ITEM), add_generation_prompt=True, tokenize=False)
    assert peer.last_prompt_ids == tok(once, add_special_tokens=False)["input_ids"]
    assert st["prompt_tokens"] == len(peer.last_prompt_ids)
    assert 0 < st["output_tokens"] <= 64 and st["latency_ms"] >= st["compile_ms"] > 0
    if row["finish_reason"] == "stop":  # a random model may run out of tokens inside a string
        value = json.loads(row["text"])
        assert value["name"] == "area" and set(value["arguments"]) >= {"base", "height"}
        assert row["valid"]
    assert set(st) >= {"output_tokens", "latency_ms", "compile_ms", "forwards", "pinned_tokens"}


def test_item_schema_is_the_closed_call_schema():
    schema = peers.item_schema(ITEM)
    assert schema["properties"]["name"] == {"const": "area"}
    assert schema["properties"]["arguments"]["additionalProperties"] is False


def test_missing_peer_package_is_one_line_not_a_traceback(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "xgrammar" else real(n, *a))
    lines: list[str] = []
    got = peers.load_peers(["outlines-xgrammar"], log=lines.append)
    assert got == {} and len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].startswith("peer outlines-xgrammar skipped: xgrammar not installed")
    with pytest.raises(ValueError, match="unknown peer"):
        peers.load_peers(["vllm"])


def test_llama_cpp_peer_is_skipped_or_runs(monkeypatch):
    """llama-cpp-python builds from source (~8 min), so CI may not have it: then it is one skipped line."""
    import importlib.util

    lines: list[str] = []
    if importlib.util.find_spec("llama_cpp") is None:
        assert peers.load_peers(["llama-cpp"], log=lines.append) == {}
        assert len(lines) == 1 and "llama_cpp not installed" in lines[0]
    else:
        pytest.skip("llama-cpp-python installed: test_llama_cpp_peer_on_the_default_gguf runs it")


@pytest.mark.model
def test_llama_cpp_peer_on_the_default_gguf():
    """Where llama-cpp-python is installed (it builds from source, ~8 min: not in the dev extra), its runner writes
    a call under the closed schema on the default model's GGUF."""
    pytest.importorskip("llama_cpp")
    got = peers.load_peers(["llama-cpp"], log=pytest.skip)
    row = peers.run_peer(got["llama-cpp"], ITEM, max_new_tokens=64)
    assert row["valid"] and row["call"]["name"] == "area", row["text"]
    assert 0 < row["stats"]["output_tokens"] <= 64 and row["stats"]["latency_ms"] > 0
