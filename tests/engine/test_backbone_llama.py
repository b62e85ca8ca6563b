"""The llama.cpp backbone on the default model's Q4_1 GGUF: cache semantics, exactness of verify and the causal
canvas against its own greedy AR, agreement with the torch backbone, batching, and what it refuses."""

import threading

import pytest
import torch

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.backbone import Pass
from agentkit.engine.batch import Batcher
from agentkit.engine.engine import Engine
from agentkit.engine.faces import Batching
from agentkit.engine.llama_cpp import LlamaBackbone, LlamaOptions, choose_backend
from agentkit.errors import UnsupportedModeError

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'agentkit[llama]')")
pytestmark = [pytest.mark.model, pytest.mark.usefixtures("one_thread")]

PROMPTS = ["What is the capital of France?", "Write a Python function that adds two numbers.",
           "List three colors.", "Explain what a hash map is in one sentence.", "Say hello in Spanish."]
ATOL = 0.05  # llama.cpp picks its matmul kernels by batch size; logits of one position agree to ~1e-2


@pytest.fixture(scope="module")
def eng() -> Engine:
    e = Engine(EngineConfig(backend="llama.cpp", threads=1))
    assert isinstance(e.backbone, LlamaBackbone) and e.backend == "llama.cpp"
    return e


def _ids(eng: Engine, n: int) -> list[int]:
    text = " ".join(["The history of computing spans calculators, mainframes and phones."] * 8)
    return eng.tokenizer.encode(text, add_special_tokens=False)[:n]


def test_denoise_leaves_the_cache_and_crop_rewinds(eng):
    bb, ids = eng.backbone, _ids(eng, 40)
    full = bb.encode(ids, bb.new_cache(), rows=list(range(40)))
    cache = bb.new_cache()
    bb.encode(ids[:24], cache)
    canvas = bb.denoise(ids[24:], cache, rows=list(range(16)), bidirectional=False)
    assert cache.get_seq_length() == 24
    torch.testing.assert_close(canvas, full[24:], atol=ATOL, rtol=0)
    after = bb.encode(ids[24:32], cache, rows=[-1])  # the canvas left nothing behind
    torch.testing.assert_close(after[0], full[31], atol=ATOL, rtol=0)
    bb.crop(cache, 28)
    assert cache.get_seq_length() == 28
    torch.testing.assert_close(bb.encode(ids[28:36], cache, rows=[-1])[0], full[35], atol=ATOL, rtol=0)


def test_bidirectional_canvas_is_refused(eng):
    bb = eng.backbone
    cache = bb.new_cache()
    bb.encode(_ids(eng, 8), cache)
    with pytest.raises(UnsupportedModeError, match="bidirectional"):
        bb.denoise([5, 6, 7], cache, rows=[0], bidirectional=True)
    assert cache.get_seq_length() == 8


def test_forward_many_equals_single_passes(eng):
    bb, ids = eng.backbone, _ids(eng, 48)
    caches = [bb.new_cache() for _ in range(3)]
    for c, n in zip(caches, (10, 20, 30)):
        bb.encode(ids[:n], c)
    alone = [bb.denoise(ids[10:18], caches[0], rows=[0, 7], bidirectional=False),
             bb.encode(ids[20:25], caches[1], rows=[-1])]
    bb.crop(caches[1], 20)
    many = bb.forward_many([Pass(ids[10:18], caches[0], [0, 7], False), Pass(ids[20:25], caches[1], [-1], True),
                            Pass(ids[30:31], caches[2], [0], True)])
    assert [c.get_seq_length() for c in caches] == [10, 25, 31]
    for a, m in zip(alone, many):
        torch.testing.assert_close(a, m, atol=ATOL, rtol=0)


def test_sequences_are_recycled(eng):
    bb = eng.backbone
    for _ in range(bb.options.n_seq_max + 5):  # more caches than sequences, each dropped after use
        c = bb.new_cache()
        bb.encode([1, 2, 3], c)
        del c


@pytest.mark.parametrize("mode", ["verify", "diffusion"])
def test_verify_and_causal_canvas_equal_greedy_ar(eng, mode):
    for prompt in PROMPTS:
        ar = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=40))
        other = eng.generate(prompt, DecodeConfig(mode=mode, max_new_tokens=40, weights="base"))
        assert other.token_ids == ar.token_ids, prompt


def test_greedy_ar_matches_the_torch_backbone_up_to_near_ties(eng):
    """The torch backbone runs the same Q4_1 values dequantized to fp32; llama.cpp quantizes activations to Q8
    and keeps its KV cache in f16, so logits differ by up to ~1 (measured: 0.66-1.08 on these prompts) and greedy
    tokens part at the first near tie: here within 0-7 tokens on every prompt, each time where torch's top two
    logits were 0.03-0.12 apart. Checked: every divergence is such a near tie, and the logits stay close."""
    torch_eng = Engine(EngineConfig(backend="torch", dtype="float32", threads=1))
    for prompt in PROMPTS:
        a = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=32)).token_ids
        b = torch_eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=32)).token_ids
        if a == b:
            continue
        k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        ids = torch_eng.encode_prompt(prompt) + b[:k]
        lt = torch_eng.backbone.encode(ids, torch_eng.backbone.new_cache(), rows=[-1])[0]
        ll = eng.backbone.encode(ids, eng.backbone.new_cache(), rows=[-1])[0]
        mine = a[k] if k < len(a) else eng.lm.eos_ids[0]
        assert lt.max() - lt[mine] < 0.3, (prompt, k)  # a near tie, not a different model
        assert (lt - ll).abs().max() < 2.0, (prompt, k)


def test_batched_requests_decode_as_alone_up_to_near_ties(eng):
    cfgs = [DecodeConfig(mode=m, max_new_tokens=24, weights="base") for m in ("ar", "verify", "diffusion")]
    alone = [eng.generate(PROMPTS[i], c).token_ids for i, c in enumerate(cfgs)]
    batcher, out = Batcher(), [None] * 3

    def run(i):
        with batcher.slot() as slot:
            out[i] = eng.generate(PROMPTS[i], cfgs[i], batch=slot).token_ids

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batcher.close()
    assert max(batcher.sizes) > 1  # some forwards really carried several requests
    for i, (a, b) in enumerate(zip(alone, out)):  # llama.cpp's kernels depend on the batch: equal up to near ties
        if a == b:
            continue
        k = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        logits = eng.backbone.encode(eng.encode_prompt(PROMPTS[i]) + a[:k], eng.backbone.new_cache(), rows=[-1])[0]
        other = b[k] if k < len(b) else eng.lm.eos_ids[0]
        assert logits.max() - logits[other] < 0.3, (i, k)


def test_backend_choice_and_the_adapter_canvas(eng):
    assert choose_backend(EngineConfig()) == "torch"  # auto never picks llama.cpp, installed or not
    assert choose_backend(EngineConfig(backend="torch")) == "torch"
    with pytest.raises(UnsupportedModeError, match="default model"):
        choose_backend(EngineConfig(backend="llama.cpp", model="/some/dir"))
    if eng.adapter_path is not None:  # explicit llama.cpp: the adapter's bidirectional canvas is refused
        with pytest.raises(UnsupportedModeError, match="adapter"):
            eng.generate(PROMPTS[0], DecodeConfig(mode="diffusion", max_new_tokens=8))
    assert isinstance(eng.backbone, Batching) and LlamaOptions().n_seq_max >= 32


def test_a_llama_model_cannot_be_shared_as_torch_weights(eng):
    from agentkit.errors import UserError

    with pytest.raises(UserError, match="backend='torch'"):
        Engine.from_loaded(eng.lm)


def test_auto_keeps_every_request_on_torch(default_engine):
    """backend "auto" with llama-cpp-python installed: free text of any length, verify and structured steps all
    decode on torch and write torch's greedy text (llama.cpp's differs)."""
    e = Engine.from_loaded(default_engine.lm, EngineConfig(backend="auto"))  # the same torch weights
    torch_eng = Engine.from_loaded(default_engine.lm, EngineConfig(backend="torch"))
    for p in PROMPTS[:2]:
        for mode in ("ar", "verify"):
            res = e.generate(p, DecodeConfig(mode=mode, max_new_tokens=48))
            assert res.stats.backend == "torch"
            assert res.token_ids == torch_eng.generate(p, DecodeConfig(mode="ar", max_new_tokens=48)).token_ids


def test_the_high_level_llama_loads_with_the_same_model_parameters():
    """The peer and the plain reference load through ``plain_llama``: no extra (AMX-repacked) weight buffers, the
    llama-cpp-python default restored afterwards, and it decodes."""
    import llama_cpp
    from llama_cpp import llama_cpp as low

    from agentkit.engine.llama_cpp import model_params, plain_llama
    from agentkit.models.default import gguf_path

    default = low.llama_model_default_params
    assert model_params(default).use_extra_bufts is False
    llm = plain_llama(gguf_path(), n_ctx=256, n_threads=1, verbose=False)
    assert low.llama_model_default_params is default and llm.model_params.use_extra_bufts is False
    assert isinstance(llm, llama_cpp.Llama)
    out = llm.create_completion("The capital of France is", max_tokens=3, temperature=0.0)
    assert out["choices"][0]["text"].strip()
