"""A decode's kept keys/values (agentkit/engine/kept.py): what the engine keeps is the cache of exactly the tokens it
names, only when asked, and a scorer that starts from it scores as one causal pass does while encoding only what the
decode did not write."""

import pytest
import torch
from transformers import DynamicCache

from agentkit.config import DecodeConfig
from agentkit.constrain.compiler import compile_schema
from agentkit.engine.kept import KeptSlot
from agentkit.steps.grounded import ValueScorer, spelled_prefix

pytestmark = pytest.mark.usefixtures("one_thread")

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150}},
          "required": ["name", "age"], "additionalProperties": False}
MESSAGES = [{"role": "user", "content": "Ana Ruiz is 34 years old."}]


@pytest.fixture(scope="module")
def person():
    return compile_schema(PERSON, strict=True)


def _cache(n: int, layers: int = 2) -> DynamicCache:
    c = DynamicCache()
    for i in range(layers):
        c.update(torch.randn(1, 2, n, 4), torch.randn(1, 2, n, 4), i)
    return c


def test_the_slot_hands_its_cache_to_one_reader_whose_prompt_it_begins_with():
    slot, cache = KeptSlot(), _cache(5)
    assert slot.put([1, 2, 3, 4, 5, 6], cache)  # the last token was never encoded: 5 positions, 5 tokens kept
    assert slot.take([1, 2, 9]) is None and slot  # another prompt: nothing taken, still held
    kept = slot.take([1, 2])
    assert kept is not None and kept.tokens == (1, 2, 3, 4, 5) and not slot
    assert slot.take([1, 2]) is None  # one reader
    copy = kept.prefix(3)
    assert copy.get_seq_length() == 3 and torch.equal(copy.layers[1].keys, cache.layers[1].keys[:, :, :3])
    copy.layers[1].keys.zero_()
    assert cache.layers[1].keys.abs().sum() > 0  # a copy: the reader cannot change the kept cache
    with pytest.raises(ValueError):
        kept.prefix(6)


def test_the_slot_refuses_what_it_cannot_copy_out():
    slot = KeptSlot()
    assert not slot.put([1, 2], object()) and not slot
    with pytest.raises(ValueError, match="cannot hold"):
        slot.put([1, 2], _cache(3))
    slot.put([1, 2, 3], _cache(3))
    slot.clear()
    assert not slot


@pytest.mark.parametrize("mode", ["ar", "verify"])
def test_a_decode_keeps_the_keys_and_values_of_the_tokens_it_names(tiny, person, mode):
    tiny.kept.clear()
    res = tiny.generate(MESSAGES, DecodeConfig(mode=mode, max_new_tokens=24), template=person)
    assert not tiny.kept  # not asked
    res = tiny.generate(MESSAGES, DecodeConfig(mode=mode, max_new_tokens=24, keep_cache=True), template=person)
    prompt = tiny.encode_prompt(MESSAGES)
    kept = tiny.kept.take(prompt)
    assert kept is not None
    whole = list(prompt) + list(res.token_ids)
    assert len(whole) - 2 <= len(kept.tokens) <= len(whole) and kept.tokens == tuple(whole[:len(kept.tokens)])
    fresh = tiny.backbone.new_cache()
    tiny.backbone.encode(list(kept.tokens), fresh, rows=[-1], whole=True)
    for a, b in zip(kept.cache.layers, fresh.layers):
        assert torch.allclose(a.keys, b.keys, atol=1e-4) and torch.allclose(a.values, b.values, atol=1e-4)


def test_a_decode_asked_to_keep_drops_what_an_earlier_one_kept(tiny, person):
    tiny.generate(MESSAGES, DecodeConfig(max_new_tokens=24, keep_cache=True), template=person)
    other = [{"role": "user", "content": "Bo Li is 7."}]
    tiny.generate(other, DecodeConfig(mode="diffusion", max_new_tokens=24, keep_cache=True), template=person)
    assert tiny.kept.take(tiny.encode_prompt(MESSAGES)) is None


def _one_pass(engine, prompt: list[int], head: list[int], conts: list[str]) -> list[list[float]]:
    """Each continuation's token log-probabilities from one causal pass over prompt, head and continuation."""
    bb, out = engine.backbone, []
    for cont in conts:
        ids = engine.tokenizer.encode(cont, add_special_tokens=False)
        seq = prompt + head + ids
        logits = bb.encode(seq, bb.new_cache(), rows=list(range(len(seq) - len(ids) - 1, len(seq) - 1)), whole=True)
        logp = torch.log_softmax(logits.float(), dim=-1)
        out.append([float(logp[i, t]) for i, t in enumerate(ids)])
    return out


def _upto(tiny, ids: list[int], text: str) -> int:
    """The fewest of ``ids`` that spell ``text``."""
    return next(k for k in range(len(ids) + 1) if tiny.tokenizer.decode(ids[:k]) == text)


def test_a_scorer_spells_a_head_in_the_decodes_tokens_and_encodes_only_what_it_did_not_write(tiny, person,
                                                                                            monkeypatch):
    res = tiny.generate(MESSAGES, DecodeConfig(max_new_tokens=24, keep_cache=True), template=person)
    out, prompt = list(res.token_ids), list(tiny.encode_prompt(MESSAGES))
    head = res.text[:res.text.index('"age"')] + '"age":'  # the output so far, as the decode wrote it
    conts = [" 34", " 3", " null"]
    scorer = ValueScorer(tiny, MESSAGES)
    assert scorer.source is not None and not tiny.kept
    fed: list[int] = []
    encode = tiny.backbone.encode
    monkeypatch.setattr(tiny.backbone, "encode", lambda ids, *a, **k: fed.append(len(ids)) or encode(ids, *a, **k))
    got = scorer.scores(head, conts)
    assert fed == [1]  # the head's last token: every other position is the decode's
    k = _upto(tiny, out, head)
    for g, w in zip(got, _one_pass(tiny, prompt, out[:k], conts)):
        assert g == pytest.approx(w, abs=1e-4)
    other = '{"name": "Zed Q", "age":'  # a field settled to another value: the decode's tokens up to it
    fed.clear()
    got = scorer.scores(other, conts)
    k = _upto(tiny, out, '{"name": "')
    spelled = out[:k] + tiny.tokenizer.encode(other[len('{"name": "'):], add_special_tokens=False)
    assert sum(fed) == len(spelled) - k
    for g, w in zip(got, _one_pass(tiny, prompt, spelled, conts)):
        assert g == pytest.approx(w, abs=1e-4)


def test_spelled_prefix_stops_where_the_bytes_part_and_at_a_characters_end():
    tb = [b'{"', b"name", b'":', b' "', b"Jos", b"\xc3", b"\xa9", b'"', None]
    assert spelled_prefix([0, 1, 2, 3, 4, 5, 6, 7], tb, '{"name": "José"'.encode()) == ([0, 1, 2, 3, 4, 5, 6, 7], 16)
    assert spelled_prefix([0, 1, 2, 3, 4, 5], tb, '{"name": "José"'.encode()) == ([0, 1, 2, 3, 4], 13)  # not mid-é
    assert spelled_prefix([0, 1, 2, 3, 4], tb, b'{"name": "Jo"') == ([0, 1, 2, 3], 10)
    assert spelled_prefix([8, 0], tb, b'{"') == ([], 0)


def test_extract_settles_from_its_decodes_cache_and_keeps_nothing_after(tiny, monkeypatch):
    from agentkit import extract

    seen: list[bool] = []
    init = ValueScorer.__init__

    def spy(self, *a, **k):
        init(self, *a, **k)
        seen.append(self.source is not None)

    monkeypatch.setattr(ValueScorer, "__init__", spy)
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"]}
    out = extract(schema, "Ana Ruiz is 34; her son is 7.", model=tiny, mode="ar")  # two numbers: age is scored
    assert out["age"] in (34, 7) and seen == [True] and not tiny.kept


async def test_concurrent_extracts_give_what_each_gives_alone(tiny):
    import asyncio

    from agentkit import aextract

    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"]}
    texts = ["Ana Ruiz is 34; her son is 7.", "Bo Li, 52, and his dog, 3.", "Ana Ruiz is 34; her son is 7.",
             "Cy Tan was 19 in 2004, 12 years ago."]
    alone = [await aextract(schema, t, model=tiny, mode="ar") for t in texts]
    together = await asyncio.gather(*(aextract(schema, t, model=tiny, mode="ar") for t in texts))
    assert list(together) == alone and not tiny.kept
