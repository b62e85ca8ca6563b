"""Fixed-shape passes (agentkit/engine/fixed.py): a position's logits do not depend on how tokens were grouped."""

import pytest
import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.constrain.compiler import compile_schema
from agentkit.engine.backbone import Backbone
from agentkit.engine.engine import Engine
from agentkit.engine.fixed import FixedShapeBackbone
from agentkit.errors import InvalidRequestError
from agentkit.models.tiny import tiny_llama

pytestmark = pytest.mark.usefixtures("one_thread")
PROMPTS = ["hello there", "def add(a, b): return", "The quick brown fox", '{"name":"Alice","age":']
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer"}}, "required": ["name", "age"]}


def _engine(seed: int, dtype: torch.dtype, width: int | None) -> Engine:
    lm = tiny_llama(seed)
    lm.model.to(dtype)
    return Engine.from_loaded(lm, EngineConfig(pass_width=width))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_position_is_computed_the_same_in_any_grouping(dtype, grouped_logits):
    eng = _engine(3, dtype, 8)
    bb = eng.backbone
    assert isinstance(bb, FixedShapeBackbone)
    ids = list(range(5, 45))
    prompt, rest = ids[:20], ids[20:]

    def run(groups: list[int]) -> torch.Tensor:
        return grouped_logits(bb, prompt, rest, groups)

    one_by_one = run([1] * 20)
    assert torch.equal(one_by_one, run([8, 8, 4]))
    dynamic = Backbone(eng.lm)  # the same model with passes as long as their tokens: the grouping shows
    assert not torch.equal(grouped_logits(dynamic, prompt, rest, [1] * 20), grouped_logits(dynamic, prompt, rest, [8, 8, 4]))
    assert torch.equal(one_by_one, run([3, 6, 11]))  # 11: two passes (8 + 3)
    # a canvas pass leaves the cache as it was, and reads what the writing passes wrote
    cache = bb.new_cache(room=len(rest))
    bb.encode(prompt + rest[:5], cache)
    canvas = bb.denoise(rest[5:12], cache, rows=list(range(7)), bidirectional=False)
    assert cache.get_seq_length() == 25
    cache2 = bb.new_cache(room=len(rest))
    bb.encode(prompt + rest[:5], cache2)
    assert torch.equal(canvas, bb.encode(rest[5:12], cache2, rows=list(range(7))))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", [1, 2])
def test_verify_and_the_causal_canvas_equal_ar_bit_for_bit(dtype, seed):
    eng = _engine(seed, dtype, 8)
    for prompt in PROMPTS:
        for kw in ({}, {"template": compile_schema(SCHEMA)}):
            ar = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=24), raw=True, **kw)
            for mode, canvas in (("verify", 32), ("verify", 8), ("diffusion", 8)):
                other = eng.generate(prompt, DecodeConfig(mode=mode, max_new_tokens=24, canvas_length=canvas),
                                     raw=True, **kw)
                assert other.token_ids == ar.token_ids, (prompt, mode, canvas, kw)


def test_fixed_shapes_give_the_dynamic_passes_tokens_in_float32():
    dyn, fixed = _engine(1, torch.float32, None), _engine(1, torch.float32, 8)
    for prompt in PROMPTS:
        cfg = DecodeConfig(mode="ar", max_new_tokens=24)
        assert fixed.generate(prompt, cfg, raw=True).token_ids == dyn.generate(prompt, cfg, raw=True).token_ids


def test_a_request_past_its_room_still_decodes():
    eng = _engine(2, torch.float32, 4)
    bb = eng.backbone
    cache = bb.new_cache()  # no room given
    bb.encode(list(range(5, 15)), cache)
    first = cache.capacity
    for t in range(first):
        bb.encode([5 + t % 50], cache)
    assert cache.get_seq_length() == 10 + first and cache.capacity > first


def test_bad_pass_width_is_a_typed_error():
    for bad in (0, -1, 1000, 2.5, "8"):
        with pytest.raises(InvalidRequestError, match="pass_width"):
            EngineConfig(pass_width=bad)


def test_pass_width_on_llama_cpp_is_refused():
    with pytest.raises(InvalidRequestError, match="pass_width"):
        EngineConfig(backend="llama.cpp", pass_width=8)


def test_verify_blocks_fill_one_pass():
    bb = _engine(1, torch.float32, 8).backbone
    from agentkit.engine.sizing import DRAFT, EXACT, pass_length

    assert bb.cost_curve[1] == bb.cost_curve[8] < bb.cost_curve[16]
    assert pass_length([EXACT] + [DRAFT] * 31, 0.3, bb.cost_curve) == 8


@pytest.mark.parametrize("prompt_len", [305, 505])
def test_passes_whose_key_counts_differ_still_agree(prompt_len, grouped_logits):
    """A grouping whose passes start on either side of a key-count boundary (320 vs 384 keys, 512 vs 576) gives the
    same bits: attention reads whole 512-key blocks."""
    bb = _engine(4, torch.bfloat16, 8).backbone
    ids = [(7 * i) % 400 + 5 for i in range(prompt_len + 24)]
    prompt, rest = ids[:prompt_len], ids[prompt_len:]

    def run(groups: list[int]) -> torch.Tensor:
        return grouped_logits(bb, prompt, rest, groups)

    one_by_one = run([1] * 24)
    for groups in ([5, 1, 8, 2, 8], [8, 8, 8], [3, 6, 7, 8]):
        assert torch.equal(one_by_one, run(groups)), groups
