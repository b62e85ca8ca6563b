"""Validation at the engine's door (agentkit/validate.py): a bad request is a typed error before any work."""

import pytest

from agentkit.config import DecodeConfig
from agentkit.errors import AgentkitError, InvalidRequestError
from agentkit.validate import SEED_MAX, ContextLengthError, check_prompt_length, check_seed

pytestmark = pytest.mark.usefixtures("one_thread")


class _Refused(AssertionError):
    pass


def _no_work(engine, monkeypatch):
    """Make tokenizing and decoding fail loudly: a check that passes them is too late."""
    def refuse(*a, **k):
        raise _Refused("reached the tokenizer")

    monkeypatch.setattr(engine, "encode_prompt", refuse)


def test_over_context_prompt_is_refused_before_tokenizing(tiny, monkeypatch):
    _no_work(tiny, monkeypatch)
    with pytest.raises(ContextLengthError, match="exceed the model's context of 2048 tokens") as e:
        tiny.generate("a " * 100000, DecodeConfig(max_new_tokens=4))
    assert isinstance(e.value, InvalidRequestError) and e.value.context == 2048 and e.value.at_least


def test_prompt_and_output_over_context_after_tokenizing(tiny):
    n = len(tiny.encode_prompt("hello there"))
    with pytest.raises(ContextLengthError, match=f"the prompt is {n} tokens"):
        tiny.generate("hello there", DecodeConfig(max_new_tokens=2048 - n + 1))
    assert tiny.generate("hello there", DecodeConfig(max_new_tokens=2)).stats.output_tokens <= 2


@pytest.mark.parametrize("prompt", ["a\ud800", [{"role": "user", "content": "ok"}, {"role": "user", "content": "\udfff"}]])
def test_lone_surrogate_is_refused(tiny, monkeypatch, prompt):
    _no_work(tiny, monkeypatch)
    with pytest.raises(InvalidRequestError, match="lone UTF-16 surrogate"):
        tiny.generate(prompt)


def test_seed_out_of_range_is_refused(tiny, monkeypatch):
    _no_work(tiny, monkeypatch)
    with pytest.raises(InvalidRequestError, match="seed must be in"):
        tiny.generate("hi", DecodeConfig(seed=2**70))
    cfg = DecodeConfig()
    cfg.seed = 2**70  # assigned after construction: the engine checks again
    with pytest.raises(InvalidRequestError, match="seed"):
        tiny.generate("hi", cfg)
    check_seed(SEED_MAX)
    with pytest.raises(InvalidRequestError):
        check_seed(True)


@pytest.mark.parametrize("field,value", [("temperature", float("nan")), ("top_k", 0), ("top_p", 0.0),
                                         ("stop", ["x", ""]), ("sized_passes", "yes"), ("entropy_bound", -1.0),
                                         ("final_temperature", float("inf")), ("canvas_length", 1.5),
                                         ("mode", "fast"), ("max_new_tokens", True)])
def test_every_field_checked_at_the_door(tiny, monkeypatch, field, value):
    with pytest.raises(InvalidRequestError, match=field):
        DecodeConfig(**{field: value})
    cfg = DecodeConfig()
    setattr(cfg, field, value)
    _no_work(tiny, monkeypatch)
    with pytest.raises(InvalidRequestError, match=field):
        tiny.generate("hi", cfg)


def test_context_errors_are_agentkit_errors():
    with pytest.raises(AgentkitError):
        check_prompt_length(10, 16, 7)
    check_prompt_length(10, 16, 6)
    check_prompt_length(10**9, None, 1)  # context not known: not checked


def test_server_uses_the_engine_checks():
    from agentkit.serving import prepare, protocol

    from agentkit import validate

    seed = [m for m in protocol.ChatRequest.model_fields["seed"].metadata if hasattr(m, "ge") or hasattr(m, "le")]
    assert [getattr(m, "ge", None) or getattr(m, "le", None) for m in seed] == [validate.SEED_MIN, validate.SEED_MAX]
    with pytest.raises(Exception) as e:
        prepare.check_context(10, 16, 7)
    assert e.value.code == "context_length_exceeded" and str(e.value) == str(ContextLengthError(10, 7, 16))
    with pytest.raises(protocol.FieldError, match="lone UTF-16 surrogate U\\+D800 at index 1"):
        protocol.check_json({"messages": [{"content": "a\ud800"}]})
