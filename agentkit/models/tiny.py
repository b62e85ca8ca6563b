"""Tiny random-weight models with a real byte-level BPE tokenizer, for fast unit tests (no downloads)."""

from __future__ import annotations

from functools import lru_cache

import torch

from .loader import LoadedModel, wrap

_CORPUS = [
    '{"name":"Alice","age":31,"city":"Boston","tags":["a","b"],"ok":true,"x":null}',
    "def add(a, b):\n    return a + b\n\nclass Foo:\n    pass\n",
    "The quick brown fox jumps over the lazy dog. What is the weather in Paris today?",
    "<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE\n",
    "0123456789 -+.eE, : ; ( ) [ ] { } \" ' # @ / \\ _ ! ? %",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@lru_cache(maxsize=1)
def tiny_tokenizer():
    """A ~600-token byte-level BPE trained in-process on a fixed corpus (deterministic)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", bos_token="<|im_start|>", pad_token="<|endoftext|>",
        mask_token="<|mask|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_llama(seed: int = 0, *, layers: int = 2, hidden: int = 64, mask_token: bool = False,
               context: int = 2048) -> LoadedModel:
    """A random 2-layer Llama over the tiny tokenizer (causal canvas; optional absorbing-mask token); ``context``:
    its positions (the tiny tokenizer spends about a token per character, so a long agent prompt needs more)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tiny_tokenizer()
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=context,
        eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id, pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(cfg)
    model.generation_config.eos_token_id = tok.eos_token_id
    return wrap(model, tok, name=f"tiny-llama-{seed}", mask_token_id=tok.mask_token_id if mask_token else None)


def quantize_q4_1(w: torch.Tensor) -> torch.Tensor:
    """``w`` rounded to a Q4_1 group quantization (per group of 32 inputs: d * q + m, q in 0..15, d and m in
    float16, as GGUF stores them)."""
    n, k = w.shape
    g = w.view(n, k // 32, 32)
    m = g.min(-1, keepdim=True).values.half().float()
    d = ((g.max(-1, keepdim=True).values - m) / 15).half().float()
    return (d * ((g - m) / d).round().clamp(0, 15) + m).view(n, k)


def tiny_q4_llama(seed: int = 5, dtype: torch.dtype = torch.bfloat16) -> tuple[LoadedModel, dict[str, torch.Tensor]]:
    """A tiny Llama whose layer weights are 4-bit groups (as the embedded Q4_1 model's are), in ``dtype``, and its
    float32 checkpoint."""
    lm = tiny_llama(seed)
    source = {}
    with torch.no_grad():
        for name, mod in lm.model.named_modules():
            if type(mod) is torch.nn.Linear and ".layers." in f".{name}":
                mod.weight.copy_(quantize_q4_1(mod.weight))
                source[f"{name}.weight"] = mod.weight.detach().clone()
    lm.model.to(dtype)
    return lm, source


def tiny_merged_q4_lora(folder, dtype: torch.dtype = torch.bfloat16) -> tuple[LoadedModel, dict[str, torch.Tensor]]:
    """:func:`tiny_q4_llama` with its checkpoint saved in ``folder`` (as the engine reads the embedded model's), a
    random ``"ar"`` LoRA over every projection saved beside it and merged into the float32 model, then cast to
    ``dtype`` (as ``EngineConfig.lora`` does); and the checkpoint's tensors."""
    from pathlib import Path

    from safetensors.torch import save_file

    from .adapter import AdapterConfig, merge_lora, save_adapter

    folder = Path(folder)
    lm, source = tiny_q4_llama(dtype=torch.float32)
    save_file(source, folder / "w.safetensors")
    lm.meta["weights"] = str(folder / "w.safetensors")
    g = torch.Generator().manual_seed(0)
    state = {}
    for name, w in source.items():
        base = name[: -len(".weight")]
        state[f"{base}.lora_a"] = torch.randn(4, w.shape[1], generator=g) * 0.05
        state[f"{base}.lora_b"] = torch.randn(w.shape[0], 4, generator=g) * 0.05
    targets = tuple(dict.fromkeys(name.rsplit(".", 2)[-2] for name in source))  # every projection
    cfg = AdapterConfig(rank=4, alpha=8, kind="ar", calibrate=False, targets=targets)
    save_adapter(folder / "lora", state, cfg)
    merged = merge_lora(lm, folder / "lora")
    merged.model.to(dtype)
    return merged, source


def tiny_diffusion_gemma(seed: int = 0, *, canvas_length: int = 8, sliding_window: int = 24) -> LoadedModel:
    """A random ~0.9 M-parameter ``DiffusionGemmaForBlockDiffusion`` over the tiny tokenizer.

    transformers' real architecture (causal encoder writing the KV cache, bidirectional decoder reading it,
    self-conditioning, mixture-of-experts layers, tied weights), shrunk: 2 text layers 64 wide (one sliding-window,
    one full-attention, as Gemma 4 alternates them), 4 experts, and a 1-layer vision tower (the default one alone is
    ~167 M parameters). ``sliding_window`` is small so that tests cross it.
    """
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion, DiffusionGemmaTextConfig
    from transformers.models.gemma4 import Gemma4VisionConfig

    tok = tiny_tokenizer()
    text = DiffusionGemmaTextConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"], num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, global_head_dim=16, num_experts=4, top_k_experts=2, moe_intermediate_size=32,
        max_position_embeddings=2048, sliding_window=sliding_window,
        eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id, pad_token_id=tok.pad_token_id,
    )
    vision = Gemma4VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                num_key_value_heads=2, head_dim=16)
    cfg = DiffusionGemmaConfig(text_config=text, vision_config=vision, canvas_length=canvas_length)
    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(cfg)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return wrap(model, tok, name=f"tiny-diffusion-gemma-{seed}")
