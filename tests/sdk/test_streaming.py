"""Streaming: text deltas as tokens are committed, partial structured outputs, cancellation and timeouts."""

import asyncio
import itertools
import time

import pytest
from pydantic import BaseModel

from agentkit.errors import UsageLimitExceeded, UserError
from agentkit.sdk import Agent, FunctionModel, Limits, TestModel


class City(BaseModel):
    name: str
    population: int


@pytest.mark.parametrize("mode", ["ar", "verify"])
async def test_stream_text_deltas_on_a_tiny_engine(tiny, mode):
    settings = {"max_tokens": 20, "stop_loops": 0, "mode": mode}  # the tiny model's loop runs on
    agent = Agent(tiny, model_settings=settings)
    async with agent.run_stream("Say hello") as s:
        deltas = [d async for d in s.stream_text(delta=True)]
    output = await s.get_output()
    assert "".join(deltas) == output
    rec = s.result.trace[0]
    assert (rec.mode, rec.output_tokens) == (mode, 20)
    if mode == "ar":  # a token at a time
        assert len(deltas) >= 5
    else:  # a run at a time: the first token, then what each checking pass commits (its own token and kept drafts)
        assert 2 <= len(deltas) <= 1 + rec.verify_forwards < 20


async def test_stream_text_cumulative_and_fake_models():
    agent = Agent(TestModel(output_text="hello world"))
    async with agent.run_stream("x", model_settings={"mode": "ar"}) as s:
        texts = [t async for t in s.stream_text()]
    assert texts[-1] == "hello world" and len(texts) == len("hello world")
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))
    async with agent.run_stream("x", model_settings={"mode": "verify"}) as s:  # a fake verify pass: VERIFY_RUN tokens
        texts = [t async for t in s.stream_text()]
    assert texts == ["hell", "hello wo", "hello world"]


async def test_stream_text_holds_back_incomplete_characters():
    agent = Agent(TestModel(output_text="né €"))
    async with agent.run_stream("x", model_settings={"mode": "ar"}) as s:
        deltas = [d async for d in s.stream_text(delta=True)]
    assert deltas == ["n", "é", " ", "€"]
    agent = Agent(TestModel(output_text="abcé€"))  # verify's first run ends inside "é"
    async with agent.run_stream("x", model_settings={"mode": "verify"}) as s:
        deltas = [d async for d in s.stream_text(delta=True)]
    assert deltas == ["abc", "é€"]


async def test_stream_output_yields_partial_then_validated():
    agent = Agent(TestModel(output_value={"name": "Lisbon", "population": 545000}), output_type=City)
    async with agent.run_stream("x", mode="diffusion") as s:
        outputs = [o async for o in s.stream_output()]
    assert isinstance(outputs[-1], City) and outputs[-1] == City(name="Lisbon", population=545000)
    partials = outputs[:-1]
    assert partials and partials[0].population is None  # the half-settled canvas: name only
    assert partials[0].name and "Lisbon".startswith(partials[0].name)


async def test_stream_output_on_a_tiny_engine(tiny):
    agent = Agent(tiny, output_type={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                  output_retries=0)
    async with agent.run_stream("Give n", model_settings={"max_tokens": 16}) as s:
        outputs = [o async for o in s.stream_output()]
    assert isinstance(outputs[-1], dict) and set(outputs[-1]) == {"n"}


async def test_stream_misuse_is_a_user_error():
    with pytest.raises(UserError, match="has an output_type"):
        async with Agent(TestModel(), output_type=City).run_stream("x") as s:
            async for _ in s.stream_text():
                pass
    with pytest.raises(UserError, match="has no output_type"):
        async with Agent(TestModel()).run_stream("x") as s:
            async for _ in s.stream_output():
                pass


async def test_leaving_the_stream_early_cancels_the_run():
    started = asyncio.Event()

    async def slow(messages, info):
        started.set()
        await asyncio.sleep(30)

    agent = Agent(FunctionModel(slow))
    t0 = time.perf_counter()
    async with agent.run_stream("x") as s:
        await started.wait()
    assert time.perf_counter() - t0 < 5
    assert s._job is not None and s._job.cancelled()


@pytest.mark.parametrize(("mode", "forward_s"), [("ar", 0.05), ("verify", 0.2)])  # ~20 s / ~4 s uncut
def test_timeout_stops_a_long_generation_within_one_forward(tiny, monkeypatch, mode, forward_s):
    starts, prompt_pieces = [], []
    encode = tiny.backbone.encode

    def slow_encode(*args, **kwargs):
        starts.append(time.perf_counter())
        if kwargs.get("whole"):  # a piece of the prompt pass (agentkit/engine/prefix.py), counted as one forward
            prompt_pieces.append(len(args[0]))
        time.sleep(forward_s)
        return encode(*args, **kwargs)

    monkeypatch.setattr(tiny.backbone, "encode", slow_encode)
    agent = Agent(tiny, limits=Limits(timeout_s=1.0), model_settings={"max_tokens": 400, "stop_loops": 0, "mode": mode})
    t0 = time.perf_counter()
    with pytest.raises(UsageLimitExceeded, match="timeout_s=1.0 exceeded after 0 iteration") as exc:
        agent.run_sync("Tell a long story")
    elapsed = time.perf_counter() - t0
    assert max(starts) < t0 + 1.0 + forward_s + 0.1  # no forward started after the one in progress
    assert elapsed < 1.0 + 2 * forward_s + 0.5
    rec = exc.value.trace[-1]
    assert rec.finish_reason == "cancelled" and rec.error.startswith("cancelled: stopped at the engine's next")
    assert 0 < rec.output_tokens < 400 and rec.encoder_forwards == len(starts) - len(prompt_pieces) + 1


async def test_a_generator_without_token_streaming_yields_its_text_once():
    class Plain:  # an async generate() without on_tokens (e.g. a user's own Generator)
        async def generate(self, messages, config, template=None, on_draft=None):
            return await FunctionModel(lambda m, i: "all at once").generate(messages, config, template)

    async with Agent(Plain()).run_stream("x") as s:
        deltas = [d async for d in s.stream_text(delta=True)]
    assert deltas == ["all at once"]
