"""Prompt-prefix reuse across requests (EngineConfig.prefix_cache, agentkit/engine/prefix.py)."""

import pytest
import torch
from transformers import DynamicCache

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.engine.prefix import PrefixCache, common_prefix
from agentkit.errors import InvalidRequestError
from agentkit.models.tiny import tiny_llama

pytestmark = pytest.mark.usefixtures("one_thread")
SYSTEM = "You are a helpful assistant. Answer with JSON. " * 3


def _conversation(turns: list[tuple[str, str]]) -> list[dict]:
    msgs = [{"role": "system", "content": SYSTEM}]
    for user, reply in turns:
        msgs.append({"role": "user", "content": user})
        if reply is not None:
            msgs.append({"role": "assistant", "content": reply})
    return msgs


def test_an_agent_turn_encodes_only_what_is_new_and_decodes_what_a_fresh_engine_does():
    lm = tiny_llama(3)
    eng = Engine.from_loaded(lm, EngineConfig(prefix_cache=4))
    fresh = Engine.from_loaded(lm)
    cfg = DecodeConfig(mode="ar", max_new_tokens=12)
    first = eng.generate(_conversation([("hello there", None)]), cfg)
    assert first.stats.reused_prompt_tokens == 0  # nothing held yet
    nxt = _conversation([("hello there", first.text), ("The quick brown fox", None)])
    second = eng.generate(nxt, cfg)
    ids = eng.encode_prompt(nxt)
    held = len(eng.encode_prompt(_conversation([("hello there", None)])))
    assert held <= second.stats.reused_prompt_tokens < len(ids)  # at least the first request's prompt
    assert second.stats.prompt_tokens == len(ids)
    assert second.token_ids == fresh.generate(nxt, cfg).token_ids
    assert fresh.prefixes is None and fresh.generate(nxt, cfg).stats.reused_prompt_tokens == 0  # off by default


@pytest.mark.parametrize("mode", ["ar", "verify", "diffusion"])
def test_the_same_prompt_again_reuses_all_but_its_last_token_and_keeps_the_entry_intact(mode):
    eng = Engine.from_loaded(tiny_llama(4), EngineConfig(prefix_cache=2))
    prompt = _conversation([("def add(a, b): return", None)])
    cfg = DecodeConfig(mode=mode, max_new_tokens=16, canvas_length=8)
    runs = [eng.generate(prompt, cfg) for _ in range(3)]
    n = len(eng.encode_prompt(prompt))
    assert [r.stats.reused_prompt_tokens for r in runs] == [0, n - 1, n - 1]
    assert runs[0].token_ids == runs[1].token_ids == runs[2].token_ids  # decoding did not write into the entry


def test_restored_prompt_logits_are_a_fresh_encodes_within_float_tolerance():
    eng = Engine.from_loaded(tiny_llama(5))
    bb = eng.backbone
    ids = eng.encode_prompt(_conversation([("hello there", "general kenobi"), ("The quick brown fox", None)]))
    pc = PrefixCache(2, min_tokens=4)
    first = bb.new_cache()
    bb.encode(ids[:30], first)
    pc.store(ids[:30], first)
    cache = bb.new_cache()
    assert pc.restore(ids, cache) == 30 and cache.get_seq_length() == 30
    got = bb.encode(ids[30:], cache)
    want = bb.encode(ids, bb.new_cache())
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert (pc.hits, pc.lookups, pc.reused_tokens) == (1, 1, 30)


def _cache_of(n: int) -> DynamicCache:
    c = DynamicCache()
    c.update(torch.arange(n, dtype=torch.float32).view(1, 1, n, 1), torch.zeros(1, 1, n, 1), 0)
    return c


def test_entries_are_least_recently_used_and_prefixes_of_newer_ones_are_dropped():
    pc = PrefixCache(2, min_tokens=3)
    a, b, c = list(range(10)), list(range(100, 110)), list(range(200, 210))
    pc.store(a, _cache_of(10))
    pc.store(b, _cache_of(10))
    assert pc.restore(a + [7], DynamicCache()) == 10  # a is now the most recently used
    pc.store(c, _cache_of(10))  # evicts b
    assert pc.restore(b + [1], DynamicCache()) == 0
    assert pc.restore(c + [1], DynamicCache()) == 10
    pc.store(a + [50, 51], _cache_of(12))  # a is a prefix of it: one entry holds both
    assert len(pc._store) == 2 and tuple(a) not in pc._store
    assert pc.restore([0, 1], DynamicCache()) == 0  # shorter than min_tokens
    restored = DynamicCache()
    assert pc.restore(a + [50, 99], restored) == 11  # the longest common prefix, then a fresh token
    assert torch.equal(restored.layers[0].keys.flatten(), torch.arange(11, dtype=torch.float32))
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2


def test_bad_prefix_cache_settings_are_typed_errors():
    for bad in (-1, 1.5, True, "4"):
        with pytest.raises(InvalidRequestError, match="prefix_cache"):
            EngineConfig(prefix_cache=bad)
    with pytest.raises(ValueError, match="at least one entry"):
        PrefixCache(0)


def test_the_rest_of_a_reused_prompt_is_one_pass_on_a_row_exact_engine(monkeypatch):
    """Row-exact engines cut passes after the prompt into pieces of 8; the rest of a prompt whose start was reused
    is still the prompt: one pass."""
    from agentkit.models.head import int8_head_available
    from agentkit.models.q4 import use_q4_steps
    from agentkit.models.tiny import tiny_q4_llama

    if not int8_head_available():
        pytest.skip("no row-exact passes without torch's int8 weight kernel")
    lm, source = tiny_q4_llama(5, dtype=torch.float32)
    use_q4_steps(lm.model, source.get, float32=True)
    eng = Engine.from_loaded(lm, EngineConfig(prefix_cache=2))
    bb = eng.backbone
    assert bb.exact_rows == 8
    first = _conversation([("hello there", None)])
    eng.generate(first, DecodeConfig(mode="ar", max_new_tokens=4))
    nxt = _conversation([("hello there", "hi"), ("The quick brown fox jumps over the lazy dog", None)])
    passes = []
    run = bb._run
    monkeypatch.setattr(bb, "_run", lambda ids, *a, **k: passes.append(len(ids)) or run(ids, *a, **k))
    out = eng.generate(nxt, DecodeConfig(mode="ar", max_new_tokens=1))
    rest = len(eng.encode_prompt(nxt)) - out.stats.reused_prompt_tokens
    assert out.stats.reused_prompt_tokens > 0 and rest > 8
    assert passes[0] == rest  # one pass, not pieces of 8
