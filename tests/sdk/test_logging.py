"""Logging at the seams: model load, each model request, retries."""

import logging

from agentkit.sdk import Agent, FunctionModel


def test_engine_load_is_logged(caplog, tiny):
    from agentkit.engine.engine import Engine

    with caplog.at_level(logging.INFO, logger="agentkit.engine"):
        Engine.from_loaded(tiny.lm)
    assert any(r.getMessage().startswith("model tiny-llama-1 ready (causal") for r in caplog.records)


def test_requests_and_retries_are_logged(caplog):
    outputs = iter(["bad", '{"a": 1}'])
    agent = Agent(FunctionModel(lambda m, i: next(outputs)), output_type={"type": "object"})
    with caplog.at_level(logging.DEBUG, logger="agentkit.sdk"):
        result = agent.run_sync("x", mode="diffusion")
    messages = [r.getMessage() for r in caplog.records]
    rid = result.run_id
    assert messages[0] == f"run {rid}: extract step (iteration 1, diffusion) starts"
    assert messages[1].startswith(f"run {rid}: extract step done: 3 tokens, ")
    assert messages[2].startswith("extract output unusable (1 in a row), asking again: output is not JSON")
    # a diffusion step's retry decodes in AR (``_settings.for_retry``)
    assert messages[3] == f"run {rid}: extract step (iteration 2, ar) starts"
