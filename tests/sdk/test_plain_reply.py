"""A plain reply (no tool result to carry) decodes with the weights as loaded beside a merged LoRA
(``DecodeConfig.weights="loaded"``) and without the SDK's default system text; agent steps keep both."""

from __future__ import annotations

from typing import Literal

import pytest
import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.errors import UnsupportedModeError
from agentkit.models.adapter import AdapterConfig, save_adapter
from agentkit.models.tiny import tiny_llama
from agentkit.sdk import Agent
from agentkit.steps.kinds import DEFAULT_INSTRUCTIONS

PROMPT = [{"role": "user", "content": "Name three colours."}]
ONE = DecodeConfig(mode="ar", max_new_tokens=12)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    lm = tiny_llama(0)
    lm.model.save_pretrained(d / "model")
    lm.tokenizer.save_pretrained(d / "model")
    g = torch.Generator().manual_seed(1)
    state = {}
    for name, mod in lm.model.named_modules():
        if isinstance(mod, torch.nn.Linear) and ".layers." in f".{name}":
            state[f"{name}.lora_a"] = torch.randn(4, mod.in_features, generator=g) * 0.5
            state[f"{name}.lora_b"] = torch.randn(mod.out_features, 4, generator=g) * 0.5
    targets = tuple(dict.fromkeys(k.rsplit(".", 2)[-2] for k in state))
    save_adapter(d / "lora", state, AdapterConfig(rank=4, alpha=8, kind="ar", targets=targets))
    return d / "model", d / "lora"


@pytest.fixture(scope="module")
def engine(folders):
    return Engine(EngineConfig(model=str(folders[0]), lora=str(folders[1]), dtype="float32", prefix_cache=False))


def test_loaded_weights_are_the_weights_without_the_lora(folders, engine):
    plain = Engine(EngineConfig(model=str(folders[0]), lora="none", dtype="float32", prefix_cache=False))
    assert engine.can_load_unmerged() and not plain.can_load_unmerged()
    merged = engine.generate(PROMPT, ONE).token_ids
    loaded = engine.generate(PROMPT, DecodeConfig(mode="ar", max_new_tokens=12, weights="loaded")).token_ids
    assert loaded == plain.generate(PROMPT, ONE).token_ids != merged
    assert engine.generate(PROMPT, ONE).token_ids == merged  # the merged weights are untouched


def test_a_model_given_merged_cannot_load_its_weights_again(engine):
    shared = Engine.from_loaded(engine.lm, EngineConfig(prefix_cache=False))
    assert not shared.can_load_unmerged()
    with pytest.raises(UnsupportedModeError, match="from_loaded"):
        shared.generate(PROMPT, DecodeConfig(mode="ar", max_new_tokens=2, weights="loaded"))


def _recorded(engine, monkeypatch) -> list[tuple[list[dict[str, str]], DecodeConfig]]:
    seen = []
    generate = engine.generate

    def spy(prompt, config=None, *a, **kw):
        seen.append((prompt, config))
        return generate(prompt, config, *a, **kw)

    monkeypatch.setattr(engine, "generate", spy)
    return seen


def test_a_plain_reply_uses_the_loaded_weights_and_the_templates_own_system_text(engine, monkeypatch):
    seen = _recorded(engine, monkeypatch)
    Agent(engine, decode=DecodeConfig(max_new_tokens=8)).run_sync("Name three colours.")
    (chat, config), = seen
    assert config.weights == "loaded" and chat == PROMPT
    seen.clear()
    Agent(engine, instructions="Be brief.", decode=DecodeConfig(max_new_tokens=8)).run_sync("Name three colours.")
    assert seen[0][0][0] == {"role": "system", "content": "Be brief."} and seen[0][1].weights == "loaded"
    seen.clear()
    Agent(engine, decode=DecodeConfig(max_new_tokens=8, weights="base")).run_sync("Name three colours.")
    assert seen[0][1].weights == "base"  # the caller's choice stands: the merged weights


def test_an_answer_that_carries_a_tool_result_keeps_the_merged_weights(engine, monkeypatch):
    def lookup(city: Literal["Paris", "Rome"]) -> str:
        """Look a city up.

        Args:
            city: the city
        """
        return "TOKEN-42"

    seen = _recorded(engine, monkeypatch)
    agent = Agent(engine, tools=[lookup], decode=DecodeConfig(max_new_tokens=64), calibrate=True)
    result = agent.run_sync("Look up Paris.")
    steps = [r.step for r in result.trace]
    if "tool_call" not in steps:
        pytest.skip("the random tiny model answered without calling")
    reply = seen[-1]
    assert reply[1].weights == "auto"
    assert reply[0][0] == {"role": "system", "content": DEFAULT_INSTRUCTIONS}


def test_an_answer_after_deciding_not_to_call_keeps_the_merged_weights(engine, monkeypatch):
    """With tools offered, the answer after the decision not to call is a loop step (the loop adapter was trained
    on it: the agent loop's no-tool tasks), so it keeps the merged weights; here no tool can be chosen (``add``
    needs numbers the task does not write), so the run answers at once."""
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    seen = _recorded(engine, monkeypatch)
    result = Agent(engine, tools=[add], decode=DecodeConfig(max_new_tokens=8)).run_sync("Name three colours.")
    assert [r.step for r in result.trace] == ["reply"] and seen[-1][1].weights == "auto"
