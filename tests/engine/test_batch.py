"""Continuous batching on tiny random models: batched passes equal single passes, and requests decoded
concurrently through a Batcher give exactly the tokens each gives alone (greedy), in every mode."""

from __future__ import annotations

import copy
import random
import threading

import pytest
import torch

from agentkit.config import DecodeConfig
from agentkit.engine.backbone import Backbone, Pass
from agentkit.engine.batch import Batcher, BatcherClosed
from agentkit.engine.engine import Engine
from agentkit.models.tiny import tiny_diffusion_gemma, tiny_llama

PROMPTS = ["hello there", "def add(a, b): return", "The quick brown fox jumps", '{"name":"Alice","age":']
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
                   "ok": {"type": "boolean"}},
    "required": ["name", "age", "ok"],
    "additionalProperties": False,
}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bb():
    return Backbone(tiny_llama(0))


@pytest.fixture(scope="module")
def eng():
    return Engine.from_loaded(tiny_llama(0))


@pytest.fixture(scope="module")
def person():
    from agentkit.constrain.compiler import compile_schema

    return compile_schema(PERSON, strict=True)


def _cache(bb: Backbone, n: int, rng: random.Random):
    c = bb.new_cache()
    if n:
        bb.encode([rng.randrange(5, 400) for _ in range(n)], c)
    return c


def _kv(cache):
    return [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]


# -- batched passes == single passes ------------------------------------------------------------------------------
# (cached prefix length, new tokens, encode?, bidirectional?)
SPECS = [(0, 7, True, False), (13, 3, True, False), (5, 9, False, True), (20, 1, False, False),
         (9, 6, False, False), (30, 4, True, False), (2, 11, False, True), (17, 1, True, False)]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_forward_many_equals_single_passes(attn):
    lm = tiny_llama(0)
    lm.model.set_attn_implementation(attn)
    bb = Backbone(lm)
    assert bb.batchable()
    rng = random.Random(0)
    batched, single = [], []
    for p, q, write, bidi in SPECS:
        cache = _cache(bb, p, rng)
        ids = [rng.randrange(5, 400) for _ in range(q)]
        rows = list(range(q)) if q > 1 else [-1]
        batched.append(Pass(ids, copy.deepcopy(cache), rows, write, bidi))
        single.append(Pass(ids, cache, rows, write, bidi))
    before = [_kv(it.cache) if it.cache.get_seq_length() else None for it in batched]
    out = bb.forward_many(batched)
    for it, ref_it, got, kv0 in zip(batched, single, out, before):
        ref = (bb.encode(ref_it.ids, ref_it.cache, ref_it.rows) if ref_it.write
               else bb.denoise(ref_it.ids, ref_it.cache, ref_it.rows, ref_it.bidirectional))
        assert got.shape == ref.shape
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
        assert it.cache.get_seq_length() == ref_it.cache.get_seq_length()
        if it.write:  # the row's own new keys/values (not the padding) were appended to its own cache
            for (k, v), (rk, rv) in zip(_kv(it.cache), _kv(ref_it.cache)):
                torch.testing.assert_close(k, rk, atol=1e-5, rtol=1e-5)
                torch.testing.assert_close(v, rv, atol=1e-5, rtol=1e-5)
        elif kv0 is not None:  # denoise: the cache is exactly as it was
            for (k, v), (k0, v0) in zip(_kv(it.cache), kv0):
                assert torch.equal(k, k0) and torch.equal(v, v0)


def test_encode_many_and_denoise_many(bb):
    rng = random.Random(1)
    caches = [_cache(bb, n, rng) for n in (0, 4, 19)]
    twins = [copy.deepcopy(c) for c in caches]
    ids = [[rng.randrange(5, 400) for _ in range(q)] for q in (8, 2, 5)]
    got = bb.encode_many([(i, c, [-1, 0]) for i, c in zip(ids, caches)])
    for i, c, g in zip(ids, twins, got):
        torch.testing.assert_close(g, bb.encode(i, c, [-1, 0]), atol=1e-5, rtol=1e-5)
    assert [c.get_seq_length() for c in caches] == [8, 6, 24]
    # the caches written by the batched encode serve later single passes like the single-pass ones do
    nxt = [rng.randrange(5, 400) for _ in range(3)]
    for c, t in zip(caches, twins):
        torch.testing.assert_close(bb.encode(nxt, c, [0, 1, 2]), bb.encode(nxt, t, [0, 1, 2]), atol=1e-5, rtol=1e-5)
    canvases = [[rng.randrange(5, 400) for _ in range(q)] for q in (6, 3, 8)]
    for bidi in (False, True):
        got = bb.denoise_many([(x, c, list(range(len(x))), bidi) for x, c in zip(canvases, caches)])
        for x, t, g in zip(canvases, twins, got):
            torch.testing.assert_close(g, bb.denoise(x, t, list(range(len(x))), bidi), atol=1e-5, rtol=1e-5)
    assert [c.get_seq_length() for c in caches] == [11, 9, 27]


def test_forward_many_no_rows_and_gemma_not_batchable(bb):
    c = bb.new_cache()
    out = bb.forward_many([Pass([5, 6], c, [], True), Pass([7], bb.new_cache(), [], False)])
    assert [tuple(o.shape) for o in out] == [(0, bb.head.out_features)] * 2 and c.get_seq_length() == 2
    from agentkit.engine.gemma import GemmaBackbone

    assert not GemmaBackbone(tiny_diffusion_gemma(0)).batchable()


# -- concurrent requests == alone ------------------------------------------------------------------------------------
def _concurrent(eng: Engine, jobs, *, live: bool = True, stagger=None):
    """Run ``jobs`` [(prompt, cfg, template)] in threads through one batcher; results in order, and the batcher."""
    b = Batcher(max_batch=8, max_wait_s=0.05, max_delay_s=0.5)  # generous: a loaded CI machine
    slots = [b.slot(live=live) for _ in jobs]
    res: list = [None] * len(jobs)
    errs: list = []

    def go(i: int) -> None:
        if stagger is not None:
            stagger(i)
        try:
            with slots[i] as s:
                p, cfg, tpl = jobs[i]
                res[i] = eng.generate(p, cfg, template=tpl, raw=True, batch=s)
        except BaseException as e:  # noqa: BLE001
            errs.append(e)

    ts = [threading.Thread(target=go, args=(i,)) for i in range(len(jobs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    b.close()
    if errs:
        raise errs[0]
    return res, b


@pytest.mark.parametrize("with_template", [False, True], ids=["free", "json"])
@pytest.mark.parametrize("mode", ["ar", "diffusion", "verify"])
def test_concurrent_greedy_equals_alone(eng, person, mode, with_template):
    tpl = person if with_template else None
    cfgs = [DecodeConfig(mode=mode, max_new_tokens=n, canvas_length=c) for n, c in ((40, 8), (24, 8), (40, 5), (33, 16))]
    jobs = [(p, cfg, tpl) for p, cfg in zip(PROMPTS, cfgs)]
    alone = [eng.generate(p, cfg, template=t, raw=True) for p, cfg, t in jobs]
    got, b = _concurrent(eng, jobs)
    for a, g in zip(alone, got):
        assert g.token_ids == a.token_ids and g.text == a.text
        assert g.stats.forwards == a.stats.forwards and g.stats.finish_reason == a.stats.finish_reason
        if with_template:
            assert g.value == a.value and g.value is not None
    assert max(b.sizes) == len(jobs)  # requests really shared forwards
    # every pass of every request (prefill included) went through the batcher exactly once
    assert sum(n * k for n, k in b.sizes.items()) == sum(a.stats.forwards + 1 for a in alone)


def test_mixed_modes_and_late_arrivals_equal_alone(eng, person):
    """Different modes in one batch, lazy joining (a seat counts from its first forward) and requests that
    arrive while others are decoding."""
    jobs = [(PROMPTS[i % 4], DecodeConfig(mode=m, max_new_tokens=32, canvas_length=8), t)
            for i, (m, t) in enumerate([("ar", None), ("diffusion", person), ("verify", None), ("ar", person),
                                        ("diffusion", None), ("verify", person)])]
    alone = [eng.generate(p, cfg, template=t, raw=True) for p, cfg, t in jobs]
    started = [threading.Event() for _ in jobs]

    def stagger(i: int) -> None:
        if i >= 3:
            started[i - 3].wait(10)  # the second half starts once the first half is under way
        started[i].set()

    got, b = _concurrent(eng, jobs, live=False, stagger=stagger)
    assert [g.token_ids for g in got] == [a.token_ids for a in alone]
    assert b.live == 0


def test_cancelled_request_aborts_at_next_forward(eng):
    """An AR request whose check raises stops at its next forward; the others are not disturbed."""

    class Stop(Exception):
        pass

    b = Batcher(max_batch=4)
    calls = [0]

    def check() -> None:
        calls[0] += 1
        if calls[0] > 5:
            raise Stop

    cfg = DecodeConfig(mode="ar", max_new_tokens=40)
    alone = eng.generate(PROMPTS[1], cfg, raw=True)
    out: dict = {}

    def victim() -> None:
        with b.slot(check) as s:
            try:
                eng.generate(PROMPTS[0], cfg, raw=True, batch=s)
            except Stop:
                out["stopped"] = len(s.sizes)

    def other() -> None:
        with b.slot() as s:
            out["other"] = eng.generate(PROMPTS[1], cfg, raw=True, batch=s)

    ts = [threading.Thread(target=victim), threading.Thread(target=other)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    b.close()
    assert out["stopped"] == 5  # five forwards ran, the sixth was refused
    assert out["other"].token_ids == alone.token_ids
    assert b.live == 0


def test_closed_batcher_refuses(eng):
    b = Batcher()
    b.close()
    with pytest.raises(BatcherClosed), b.slot() as s:
        eng.generate("hi", DecodeConfig(max_new_tokens=2), raw=True, batch=s)


def test_diffusion_gemma_falls_back_to_single_passes():
    lm = tiny_diffusion_gemma(0)
    eng = Engine.from_loaded(lm)
    jobs = [(p, DecodeConfig(mode="diffusion", max_new_tokens=12, canvas_length=8, seed=s), None)
            for s, p in enumerate(PROMPTS[:3])]
    alone = [eng.generate(p, cfg, raw=True) for p, cfg, _ in jobs]
    got, b = _concurrent(eng, jobs)
    assert [g.token_ids for g in got] == [a.token_ids for a in alone]
    assert set(b.sizes) == {1}  # one request per forward: GemmaBackbone passes are not batched
