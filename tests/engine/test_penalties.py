"""OpenAI's frequency and presence penalties (DecodeConfig.frequency_penalty / presence_penalty): the arithmetic,
that they change what a greedy decode repeats, that verify still equals AR under them, and the typed refusals."""

import pytest
import torch

from agentkit.config import DecodeConfig
from agentkit.constrain.compiler import compile_schema
from agentkit.engine.engine import Engine
from agentkit.engine.gemma import gemma_sampler
from agentkit.engine.sampler import penalize
from agentkit.errors import InvalidRequestError, UnsupportedModeError
from agentkit.models.tiny import tiny_llama

pytestmark = pytest.mark.usefixtures("one_thread")
MSG = [{"role": "user", "content": "Say something about the sea and the sky."}]
SCHEMA = {"type": "object", "properties": {"words": {"type": "array", "items": {"type": "string"}}},
          "required": ["words"], "additionalProperties": False}


def test_penalize_is_openais_formula():
    logits = torch.zeros(6, dtype=torch.bfloat16)
    out = penalize(logits, [1, 1, 1, 4], frequency=0.5, presence=0.25)
    assert out.tolist() == [0.0, -1.75, 0.0, 0.0, -0.75, 0.0]  # 3 x 0.5 + 0.25; 1 x 0.5 + 0.25
    assert penalize(logits, [1, 4], 0.0, 0.0) is logits  # neutral: the same tensor, bit for bit
    assert penalize(logits, [], 1.0, 1.0) is logits
    assert penalize(logits, [2], -1.0, 0.0)[2] == 1.0  # a negative penalty favours repeats


def _ids(eng, cfg, schema=None):
    return eng.generate(MSG, cfg, template=None if schema is None else compile_schema(schema)).token_ids


@pytest.mark.parametrize("seed", [0, 1])
def test_a_presence_penalty_removes_repeats_from_a_greedy_decode(seed):
    eng = Engine.from_loaded(tiny_llama(seed))
    plain = _ids(eng, DecodeConfig(mode="ar", max_new_tokens=40))
    assert len(set(plain)) < len(plain)  # a random tiny model repeats itself: the property is put to the test
    strong = _ids(eng, DecodeConfig(mode="ar", max_new_tokens=40, presence_penalty=2.0, frequency_penalty=2.0))
    assert strong != plain
    assert len(set(strong)) / len(strong) > len(set(plain)) / len(plain)


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("schema", [None, SCHEMA])
def test_verify_equals_ar_under_the_penalties(seed, schema):
    eng = Engine.from_loaded(tiny_llama(seed))
    kw = {"max_new_tokens": 32, "frequency_penalty": 1.5, "presence_penalty": 0.5}
    ar = _ids(eng, DecodeConfig(mode="ar", **kw), schema)
    assert ar != _ids(eng, DecodeConfig(mode="ar", max_new_tokens=32), schema)  # they changed this decode
    assert _ids(eng, DecodeConfig(mode="verify", **kw), schema) == ar
    assert _ids(eng, DecodeConfig(mode="diffusion", **kw), schema) == ar  # a causal LM: the causal canvas


@pytest.mark.parametrize("field", ["frequency_penalty", "presence_penalty"])
@pytest.mark.parametrize("bad", [2.5, -2.01, float("nan")])
def test_out_of_range_is_a_typed_error(field, bad):
    with pytest.raises(InvalidRequestError, match=field):
        DecodeConfig(**{field: bad})


def test_diffusiongemmas_sampler_refuses_them():
    with pytest.raises(UnsupportedModeError, match="presence_penalty"):
        gemma_sampler(DecodeConfig(mode="diffusion", presence_penalty=0.5))
    assert gemma_sampler(DecodeConfig(mode="ar", presence_penalty=0.5)) == "uniform"


@pytest.mark.parametrize("seed", [0, 1])
def test_logit_bias_bans_and_verify_still_equals_ar(seed):
    eng = Engine.from_loaded(tiny_llama(seed))
    plain = _ids(eng, DecodeConfig(mode="ar", max_new_tokens=24))
    banned = {t: -100 for t in plain[:3]}  # the greedy decode's own first tokens
    ar = _ids(eng, DecodeConfig(mode="ar", max_new_tokens=24, logit_bias=banned))
    assert ar != plain and not set(ar) & set(banned)
    assert _ids(eng, DecodeConfig(mode="verify", max_new_tokens=24, logit_bias=banned)) == ar
    forced = _ids(eng, DecodeConfig(mode="ar", max_new_tokens=4, logit_bias={str(plain[-1]): 100}))
    assert forced == [plain[-1]] * 4  # keys as JSON gives them (strings) are token ids too


def test_a_token_id_outside_the_vocabulary_is_a_typed_error():
    eng = Engine.from_loaded(tiny_llama(0))
    with pytest.raises(InvalidRequestError, match=r"logit_bias: token id\(s\) \[999999\]"):
        _ids(eng, DecodeConfig(mode="ar", max_new_tokens=4, logit_bias={999999: 1}))
