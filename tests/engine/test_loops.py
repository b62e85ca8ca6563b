"""An output ends at a loop (DecodeConfig.stop_loops, agentkit/engine/loops.py): the rule on token lists, the end of a
real greedy decode on a tiny model in every mode and under a template, and the typed refusal of 1."""

import pytest

from agentkit.config import DecodeConfig
from agentkit.engine.engine import Engine
from agentkit.engine.loops import MAX_PERIOD, MIN_TOKENS, LoopStop, loop_at
from agentkit.errors import InvalidRequestError
from agentkit.models.tiny import tiny_llama

pytestmark = pytest.mark.usefixtures("one_thread")
MSG = [{"role": "user", "content": "Say something about the sea and the sky."}]


def test_loop_at_finds_the_shortest_period_ending_there():
    ids = [1, 2] + [5, 6, 7, 8] * 3 + [9]
    assert loop_at(ids, 14, 3) == 4  # 5 6 7 8 three times (12 tokens) ends at index 14
    assert loop_at(ids, 15, 3) == 0  # ... 9 ends no loop
    assert loop_at(ids, 14, 4) == 0  # only three copies
    assert loop_at([9] * 12, 12, 3) == 1  # a piece of one token: 12 copies (MIN_TOKENS) make a loop
    assert loop_at([0] * 11, 11, 3) == 0  # ... 11 do not: 35000 keeps its zeros
    piece = list(range(MAX_PERIOD + 1))
    assert loop_at(piece * 3, len(piece) * 3, 3) == 0  # longer than MAX_PERIOD: not a loop
    assert MIN_TOKENS == 12


def test_cut_ends_at_the_end_of_the_first_loop():
    """The copies stay (a stream has sent them); tokens after the loop's end, committed at once, go."""
    ids = [1, 2] + [5, 6, 7, 8] * 4 + [8] * 20
    stop = LoopStop(lambda: ids, 3)
    assert stop.cut(ids) == [1, 2] + [5, 6, 7, 8] * 3
    assert LoopStop(lambda: ids, 5).cut(ids) == ids[:17 + 12]  # the 8s, from the last of 5 6 7 8: 12 of them
    assert stop.check() and stop.fired


def test_check_sees_every_end_among_tokens_committed_at_once():
    out: list[int] = [1, 2]
    stop = LoopStop(lambda: out, 3)
    assert not stop.check()
    out += [4, 3, 2, 1] * 3 + [7, 8]  # a block committed at once: the loop ends inside it
    assert stop.check()


def test_one_copy_is_not_a_loop():
    with pytest.raises(InvalidRequestError, match="stop_loops must be 0"):
        DecodeConfig(stop_loops=1)
    with pytest.raises(InvalidRequestError, match="stop_loops"):
        DecodeConfig(stop_loops=-1)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_greedy_loop_is_cut_the_same_in_every_mode(seed):
    eng = Engine.from_loaded(tiny_llama(seed))
    plain = eng.generate(MSG, DecodeConfig(mode="ar", max_new_tokens=48))
    expected = LoopStop(lambda: plain.token_ids, 3).cut(plain.token_ids)
    assert expected is not None and len(expected) < len(plain.token_ids)  # the random model loops: put to the test
    assert plain.token_ids[:len(expected)] == expected  # the loop's copies stay: what a stream sent is the output
    for mode in ("ar", "verify", "diffusion"):
        cut = eng.generate(MSG, DecodeConfig(mode=mode, max_new_tokens=48, stop_loops=3))
        assert cut.token_ids == expected, mode
        assert cut.stats.finish_reason == "loop" and cut.stats.output_tokens == len(expected)
        assert cut.text == eng.tokenizer.decode(expected, skip_special_tokens=True)


def test_a_template_output_cut_at_a_loop_is_incomplete(tiny):
    """A template's output is cut too (an edit's REPLACE that repeats a line); it is then incomplete, as one cut by
    the token budget: no value."""
    from agentkit.constrain.compiler import compile_schema

    schema = {"type": "object", "properties": {"w": {"type": "array", "items": {"type": "string"}}},
              "required": ["w"], "additionalProperties": False}
    template = compile_schema(schema)
    plain = tiny.generate(MSG, DecodeConfig(mode="ar", max_new_tokens=80), template=template)
    expected = LoopStop(lambda: plain.token_ids, 3).cut(plain.token_ids)
    assert expected is not None  # the random model loops inside the array: put to the test
    cut = tiny.generate(MSG, DecodeConfig(mode="ar", max_new_tokens=80, stop_loops=3), template=template)
    assert cut.token_ids == expected and cut.stats.finish_reason == "loop" and cut.value is None
