"""Per-call model settings: merged over the agent's, reaching the decoder; sampled retries; extract usage."""

import pytest

from agentkit.errors import UserError
from agentkit.sdk import Agent, FunctionModel, RoutingPolicy, RunUsage, aextract


def recorder(*outputs):
    it = iter(outputs)
    return FunctionModel(lambda m, i: next(it))


async def test_call_settings_override_agent_settings():
    model = recorder("a", "b")
    agent = Agent(model, model_settings={"temperature": 0.5, "max_tokens": 30, "seed": 3})
    await agent.run("x")
    await agent.run("x", model_settings={"temperature": 0.9, "top_p": 0.8, "mode": "diffusion"})
    first, second = (c.config for c in model.calls)
    assert (first.temperature, first.max_new_tokens, first.seed, first.top_p, first.mode) == (0.5, 30, 3, None, RoutingPolicy().reply)
    assert (second.temperature, second.max_new_tokens, second.seed, second.top_p, second.mode) == (
        0.9, 30, 3, 0.8, "diffusion")


def test_unknown_or_bad_settings_are_user_errors():
    with pytest.raises(UserError, match=r"unknown model_settings key\(s\) \['temprature'\]"):
        Agent(recorder(), model_settings={"temprature": 1})
    with pytest.raises(UserError, match="model_settings mode must be one of"):
        Agent(recorder(), model_settings={"mode": "fast"})


async def test_output_retry_samples_so_it_can_differ():
    model = recorder("not json", '{"x": 1}')
    agent = Agent(model, output_type={"type": "object"}, model_settings={"mode": "verify"})
    result = await agent.run("x")
    first, retry = (c.config for c in model.calls)
    assert (first.temperature, first.mode) == (0.0, "verify")
    assert retry.temperature == 0.7 and retry.seed == 1 and retry.mode == "verify"  # keeps AR's samples
    assert [r.retries for r in result.trace] == [0, 1]


async def test_extract_takes_settings_and_returns_usage():
    model = recorder('{"x": 2}')
    value, usage = await aextract({"type": "object"}, "text", model=model, return_usage=True,
                                  model_settings={"temperature": 0.3, "mode": "ar"})
    assert value == {"x": 2}
    assert isinstance(usage, RunUsage) and usage.requests == 1 and usage.output_tokens == 8
    assert model.calls[0].config.temperature == 0.3 and model.calls[0].mode == "ar"


def test_per_call_temperature_changes_a_sampled_output(tiny):
    agent = Agent(tiny, model_settings={"max_tokens": 12})
    greedy = agent.run_sync("Say hello").output
    assert agent.run_sync("Say hello").output == greedy
    hot = agent.run_sync("Say hello", model_settings={"temperature": 1.5, "seed": 1}).output
    assert hot != greedy
    assert agent.run_sync("Say hello", model_settings={"temperature": 1.5, "seed": 1}).output == hot


async def test_json_style_setting_picks_the_templates_style():
    """``json_style`` reaches the structured step's template (the extract step spaced by default: measured best on
    the extraction benchmark), per call, and a bad value is a UserError naming the styles."""
    model = recorder('{"x": 1}', '{"x":2}', '{"x": 3}')
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    agent = Agent(model, output_type=schema)
    await agent.run("a")
    await agent.run("b", model_settings={"json_style": "compact"})
    await agent.run("c")
    styles = [c.template.meta["style"] for c in model.calls]
    assert styles == ["spaced", "compact", "spaced"]
    assert model.calls[1].template.matches('{"x":2}') and not model.calls[1].template.matches('{"x": 2}')
    assert model.calls[1].config.mode == model.calls[0].config.mode  # a template setting, not a decoder one
    with pytest.raises(UserError, match=r"json_style must be one of \['compact', 'spaced', 'spaced-schema-order'\]"):
        Agent(recorder(), model_settings={"json_style": "pretty"})


def test_greedy_setting_reaches_the_decode_config():
    from agentkit.config import DecodeConfig
    from agentkit.sdk._settings import apply, merge

    assert apply(DecodeConfig(), merge({"greedy": "token"})).greedy == "token"
    assert apply(DecodeConfig(), merge({})).greedy == "byte"
    with pytest.raises(UserError, match="greedy must be 'byte' or 'token'"):
        merge({"greedy": "argmax"})


def test_copy_bias_setting_reaches_the_decode_config():
    from agentkit.config import DecodeConfig
    from agentkit.sdk._settings import apply, merge

    assert apply(DecodeConfig(), merge({"copy_bias": 2.0})).copy_bias == 2.0
    assert apply(DecodeConfig(), merge({})).copy_bias == DecodeConfig().copy_bias == 2.0
    with pytest.raises(UserError, match="copy_bias must be a finite number in \\[0, 100\\]"):
        apply(DecodeConfig(), merge({"copy_bias": -1.0}))
    assert apply(DecodeConfig(), merge({"copy_from": "user"})).copy_from == "user"
    assert apply(DecodeConfig(), merge({"copy_numbers": False})).copy_numbers is False
    with pytest.raises(UserError, match="copy_numbers must be true or false"):
        apply(DecodeConfig(), merge({"copy_numbers": 1}))
