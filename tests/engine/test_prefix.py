"""Exact prompt-prefix reuse (EngineConfig.prefix_cache, agentkit/engine/prefix.py) on tiny random models."""

import threading

import pytest
import torch
from transformers import DynamicCache

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.decode import Decoder
from agentkit.engine.engine import Engine
from agentkit.engine.prefix import Chunking, PrefixCache, chunks, default_bytes, message_marks
from agentkit.errors import InvalidRequestError
from agentkit.models.tiny import tiny_llama

pytestmark = pytest.mark.usefixtures("one_thread")
SYSTEM = "You are a helpful assistant. Answer with JSON. " * 3
BLOCK = 8
TURNS = ["hello there", "The quick brown fox", "jumps over the lazy dog", "and then?"]


def _engines(seed: int = 3):
    lm = tiny_llama(seed)
    on = Engine.from_loaded(lm, EngineConfig(prompt_chunk=BLOCK))
    off = Engine.from_loaded(lm, EngineConfig(prompt_chunk=BLOCK, prefix_cache=False))
    assert on.prefixes is not None and off.prefixes is None
    return on, off


def _conversation(replies: list[str], user: str) -> list[dict]:
    msgs = [{"role": "system", "content": SYSTEM}]
    for u, r in zip(TURNS, replies):
        msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": r}]
    return msgs + [{"role": "user", "content": user}]


def _prompt_logits(eng: Engine, ids: list[int]) -> torch.Tensor:
    dec = Decoder(eng.backbone, DecodeConfig(mode="ar"), None, eng.lm.eos_ids, prefix=eng.prefixes,
                  prompt_chunk=eng.chunking)
    dec.prefill(ids)
    return dec.logits


def test_chunks_are_cut_at_multiples_of_the_block():
    assert chunks(0, 20, 8) == [(0, 8), (8, 16), (16, 20)]
    assert chunks(16, 17, 8) == [(16, 17)]
    assert chunks(8, 16, 8) == [(8, 16)]
    assert chunks(3, 9, 0) == [(3, 9)]


def test_pieces_are_also_cut_before_each_message_start_token():
    ids = [1, 5, 5, 5, 5, 1, 6, 6, 6, 6, 6, 1, 7]  # 1 starts a message
    c = Chunking(4, frozenset({1}))
    assert c.pieces(ids, 0, len(ids)) == [(0, 4), (4, 5), (5, 8), (8, 11), (11, 12), (12, 13)]
    assert c.pieces(ids, 5, 10) == [(5, 8), (8, 10)]
    assert c.cut(ids, 11) and c.cut(ids, 8) and not c.cut(ids, 10) and not c.cut(ids, 13) and c.cut(ids, 16)
    assert Chunking(4).pieces(ids, 0, 13) == chunks(0, 13, 4) and Chunking(0).pieces(ids, 2, 9) == [(2, 9)]
    assert not Chunking(0) and Chunking(4)


def test_the_message_start_token_is_found_from_the_chat_template():
    lm = tiny_llama(3)
    (mark,) = message_marks(lm.tokenizer)
    assert lm.tokenizer.convert_ids_to_tokens(mark) == "<|im_start|>"
    eng = Engine.from_loaded(lm, EngineConfig(prompt_chunk=BLOCK))
    assert eng.chunking == Chunking(BLOCK, frozenset({mark})) and "at each chat message" in eng.prefix_status

    class NoTemplate:
        all_special_ids = (0,)

        def apply_chat_template(self, *a, **k):
            raise ValueError("no chat template")
    assert message_marks(NoTemplate()) == frozenset()


def test_a_chunked_prompt_pass_gives_a_one_pass_prompts_logits_within_float_tolerance():
    lm = tiny_llama(7)
    chunked = Engine.from_loaded(lm, EngineConfig(prompt_chunk=BLOCK, prefix_cache=False))
    whole = Engine.from_loaded(lm, EngineConfig(prompt_chunk=0))
    ids = chunked.encode_prompt(_conversation(["fine, thanks", "ok"], "what next?"))
    assert len(ids) > 4 * BLOCK and whole.prompt_chunk == 0
    torch.testing.assert_close(_prompt_logits(chunked, ids), _prompt_logits(whole, ids), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", ["ar", "verify", "diffusion"])
def test_a_scripted_conversation_is_bit_identical_with_the_cache_on_and_off(mode):
    on, off = _engines()
    cfg = DecodeConfig(mode=mode, max_new_tokens=10, canvas_length=8)
    replies: list[str] = []
    cached, lengths = [], []
    for turn in TURNS:
        msgs = _conversation(replies, turn)
        ids = on.encode_prompt(msgs)
        a, b = on.generate(msgs, cfg), off.generate(msgs, cfg)
        assert torch.equal(_prompt_logits(on, ids), _prompt_logits(off, ids))  # the logits, bit for bit
        assert a.token_ids == b.token_ids and a.text == b.text
        assert b.stats.cached_prompt_tokens == 0
        c = a.stats.cached_prompt_tokens
        assert on.chunking.cut(ids, c) and c <= len(ids) - 1  # whole pieces, the last token always encoded
        cached.append(c)
        lengths.append(last_message(ids, on))
        replies.append(a.text or "ok")
    # a turn after the first reuses everything of the previous turn's prompt before its last message (the assistant
    # header): the earlier messages, not only the whole blocks
    assert cached[0] == 0 and all(c >= start > 0 for c, start in zip(cached[1:], lengths))


def last_message(ids: list[int], eng: Engine) -> int:
    return max(i for i, t in enumerate(ids) if t in eng.chunking.marks)


def test_the_same_prompt_again_reuses_its_full_blocks_before_the_last_token():
    on, _ = _engines(4)
    prompt = _conversation([], "def add(a, b): return")
    ids = on.encode_prompt(prompt)
    last_cut = max(i for i in range(1, len(ids)) if on.chunking.cut(ids, i))  # a block's or a message's start
    assert last_cut >= last_message(ids, on)
    runs = [on.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=6)) for _ in range(3)]
    assert [r.stats.cached_prompt_tokens for r in runs] == [0, last_cut, last_cut]
    assert runs[0].token_ids == runs[1].token_ids == runs[2].token_ids
    assert runs[1].to_dict()["stats"]["cached_prompt_tokens"] == last_cut


def _cache_of(ids: list[int], width: int = 4) -> DynamicCache:
    """A fake one-layer cache whose keys hold the token ids (width numbers each: 16 bytes a position)."""
    c = DynamicCache()
    k = torch.tensor(ids, dtype=torch.float32).view(1, 1, -1, 1).expand(1, 1, len(ids), width).contiguous()
    c.update(k, torch.zeros_like(k), 0)
    return c


def test_blocks_are_evicted_least_recently_used_within_the_byte_bound():
    per_block = 2 * 4 * 4 * 4  # keys + values, 4 positions of 4 float32
    pc = PrefixCache(4, max_bytes=3 * per_block)
    a, b, c = list(range(9)), list(range(100, 109)), list(range(200, 209))
    for ids in (a, b):  # two blocks each (positions 0..7): four blocks do not fit in three
        lease = pc.restore(ids, DynamicCache())
        pc.store(ids, _cache_of(ids), lease)
        pc.release(lease)
        assert pc.bytes <= pc.max_bytes
    assert pc.blocks == 3 and pc.evicted == 1  # a's second block went (a leaf, least recently used)
    restored = DynamicCache()
    lease = pc.restore(a, restored)
    assert lease.tokens == 4 and torch.equal(restored.layers[0].keys[0, 0, :, 0], torch.arange(4.0))
    pc.release(lease)
    lease = pc.restore(c, DynamicCache())
    pc.store(c, _cache_of(c), lease)
    pc.release(lease)
    assert pc.bytes <= pc.max_bytes and pc.peak_bytes <= pc.max_bytes
    assert pc.restore(b, DynamicCache()).tokens == 0  # b was the least recently used: evicted for c
    assert pc.stats()["blocks"] == pc.blocks == 3


def test_pinned_blocks_are_not_evicted_and_a_block_that_cannot_fit_is_skipped():
    per_block = 2 * 4 * 4 * 4
    pc = PrefixCache(4, max_bytes=2 * per_block)
    a, b = list(range(9)), list(range(100, 109))
    lease_a = pc.restore(a, DynamicCache())
    pc.store(a, _cache_of(a), lease_a)  # a's two blocks, still pinned by lease_a
    lease_b = pc.restore(b, DynamicCache())
    assert pc.store(b, _cache_of(b), lease_b) == 0 and pc.skipped == 1  # no room: a is pinned
    pc.release(lease_b)
    held = DynamicCache()
    assert pc.restore(a, held).tokens == 8 and pc.evicted == 0
    pc.release(lease_a)
    pc.release(lease_a)  # releasing twice is a no-op, not a negative pin count
    assert all(n.pins == 1 for n in pc._lru.values())  # only the restore above holds them now


def test_a_drafted_request_reuses_only_pieces_that_keep_the_bases_features():
    pc = PrefixCache(4, max_bytes=1 << 20)
    ids = list(range(13))  # three whole blocks before the last token
    feats = torch.arange(13 * 2, dtype=torch.float32).view(13, 2)
    lease = pc.restore(ids, DynamicCache())  # an undrafted request: keys/values only
    assert pc.store(ids, _cache_of(ids), lease) == 3
    pc.release(lease)
    assert pc.restore(ids, DynamicCache(), features=True).tokens == 0  # no piece has features: nothing reused
    lease = pc.restore(ids, DynamicCache(), features=True)
    before = pc.bytes
    pc.store(ids, _cache_of(ids), lease, feats=feats)  # a drafted request's prompt pass gives the held pieces theirs
    pc.release(lease)
    assert pc.bytes == before + feats[:12].numel() * feats.element_size()
    lease = pc.restore(ids, DynamicCache(), features=True)
    assert lease.tokens == 12 and torch.equal(lease.feats, feats[:12])
    pc.release(lease)
    assert pc.restore(ids, DynamicCache()).feats is None  # an undrafted request is not handed them


def test_a_cleared_cache_reuses_nothing():
    pc = PrefixCache(4, max_bytes=1 << 20)
    ids = list(range(9))
    held = pc.restore(ids, DynamicCache())
    pc.store(ids, _cache_of(ids), held)
    pc.clear()
    assert pc.blocks == pc.bytes == 0 and pc.restore(ids, DynamicCache()).tokens == 0
    pc.release(held)  # a lease taken before the clear is released without harm


def test_threads_sharing_a_system_prompt_decode_what_a_cache_off_engine_does():
    on, off = _engines(5)
    cfg = DecodeConfig(mode="ar", max_new_tokens=8)
    prompts = [_conversation([], f"question number {i} about foxes") for i in range(6)]
    want = [off.generate(p, cfg).token_ids for p in prompts]
    got: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(2):
                got[i] = on.generate(prompts[i], cfg).token_ids
        except BaseException as e:  # noqa: BLE001 -- reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [got[i] for i in range(len(prompts))] == want
    st = on.prefixes.stats()
    assert st["hits"] > 0 and st["bytes"] <= st["max_bytes"]
    assert all(n.pins == 0 for n in on.prefixes._lru.values())


def test_where_the_cache_is_off_the_engine_says_why():
    lm = tiny_llama(6)
    assert "prefix_cache=False" in Engine.from_loaded(lm, EngineConfig(prefix_cache=False)).prefix_status
    assert "prompt_chunk=0" in Engine.from_loaded(lm, EngineConfig(prompt_chunk=0)).prefix_status
    fixed = Engine.from_loaded(lm, EngineConfig(pass_width=8))
    fixed.backbone = fixed._backbone(lm)  # the fixed-shape backbone: its own passes
    assert fixed._prefix_cache()[1] is None and "FixedShapeBackbone" in fixed._prefix_cache()[2]
    on = Engine.from_loaded(lm)
    assert on.prefixes is not None and on.prefix_status.startswith("on") and on.prompt_chunk == 128


def test_bad_prefix_cache_settings_are_typed_errors():
    for kw in ({"prefix_cache": 4}, {"prefix_cache_bytes": -1}, {"prefix_cache_bytes": 1.5}, {"prompt_chunk": -8},
               {"prompt_chunk": True}):
        with pytest.raises(InvalidRequestError, match=next(iter(kw))):
            EngineConfig(**kw)
    with pytest.raises(ValueError, match="block"):
        PrefixCache(0, 100)
    assert 16 * 2 ** 20 <= default_bytes() <= 512 * 2 ** 20


def test_a_stop_asked_for_mid_prompt_ends_the_pass_at_a_piece_and_keeps_what_it_encoded():
    """``should_stop`` is asked before each piece of the prompt pass too: a request stopped there returns no output
    (finish reason "cancelled"), and the pieces it encoded stay in the prefix cache for the next request."""
    on, _ = _engines(6)
    prompt = _conversation(["ok", "sure"], "def add(a, b): return")
    ids = on.encode_prompt(prompt)
    pieces = on.chunking.pieces(ids, 0, len(ids))
    assert len(pieces) > 3
    asked = []

    def after_two() -> bool:
        asked.append(True)
        return len(asked) > 2  # two pieces encoded, then stop

    stopped = on.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=6), should_stop=after_two)
    assert stopped.token_ids == [] and stopped.stats.finish_reason == "cancelled"
    assert on.prefixes.blocks == 2  # the two pieces encoded, both ending at a cut
    full = on.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=6))
    assert full.stats.cached_prompt_tokens == pieces[1][1]  # it starts after them
    on.prefixes.clear()
    assert on.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=6)).token_ids == full.token_ids
