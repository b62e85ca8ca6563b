"""Load a model: the embedded default, a local Hugging Face directory, or an in-memory model (tests)."""

from __future__ import annotations

import functools
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..errors import ModelNotFoundError
from .console import quiet_transformers

DIFFUSION_GEMMA = "diffusion_gemma"
CAUSAL = "causal"


@dataclass
class LoadedModel:
    """A model, its tokenizer and what the engine needs to know about it."""

    model: torch.nn.Module
    tokenizer: object
    name: str
    kind: str = CAUSAL  # causal | diffusion_gemma
    bidirectional: bool = False  # canvas attention is bidirectional (diffusion-trained weights)
    mask_token_id: int | None = None  # absorbing-mask token, when the weights were trained with one
    eos_ids: tuple[int, ...] = ()
    chat: bool = True  # has a chat template
    meta: dict = field(default_factory=dict)


def _eos_ids(model, tokenizer) -> tuple[int, ...]:
    ids: list[int] = []
    gen = getattr(model, "generation_config", None)
    for src in (getattr(gen, "eos_token_id", None), tokenizer.eos_token_id):
        for i in src if isinstance(src, (list, tuple)) else [src]:
            if i is not None and i not in ids:
                ids.append(int(i))
    return tuple(ids)


def wrap(model, tokenizer, name: str = "in-memory", **kw) -> LoadedModel:
    model.eval()
    kind = DIFFUSION_GEMMA if getattr(model.config, "model_type", "") == DIFFUSION_GEMMA else CAUSAL
    kw.setdefault("kind", kind)
    kw.setdefault("bidirectional", kind == DIFFUSION_GEMMA)
    kw.setdefault("chat", bool(getattr(tokenizer, "chat_template", None)))
    return LoadedModel(model=model, tokenizer=tokenizer, name=name, eos_ids=_eos_ids(model, tokenizer), **kw)


BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


@functools.cache
def cpu_info(field: str, path: str = "/proc/cpuinfo") -> str:
    """The first CPU's ``field`` (``flags``, ``model name``) in Linux ``/proc/cpuinfo`` ("" elsewhere), read once."""
    try:
        with open(path) as f:
            for line in f:
                if line.split(":", 1)[0].strip() == field:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU feature flags (:func:`cpu_info`'s ``flags``; empty elsewhere)."""
    return frozenset(cpu_info("flags", path).split())


def native_bf16(flags: AbstractSet[str] | None = None) -> bool:
    """Whether the CPU (``flags``, default :func:`cpu_flags`) has native bf16 dot products (avx512_bf16 / AMX)."""
    flags = cpu_flags() if flags is None else flags
    return any(f in flags for f in BF16_CPU_FLAGS)


def resolve_dtype(dtype: str, device: str = "cpu", flags: AbstractSet[str] | None = None) -> str:
    """``auto`` -> ``bfloat16`` on a GPU or on a CPU with native bf16 dot products (avx512_bf16 / AMX),
    ``float32`` otherwise (a CPU without them emulates bf16 matmuls, slower than fp32)."""
    if dtype != "auto":
        return dtype
    if not device.startswith("cpu"):
        return "bfloat16"
    return "bfloat16" if native_bf16(flags) else "float32"


def load_model(path: str | None = None, *, dtype: str = "float32", device: str = "cpu") -> LoadedModel:
    """``None`` loads the embedded default model; otherwise ``path`` must be a local HF model directory.
    ``dtype``: float32 | bfloat16 | auto (see :func:`resolve_dtype`)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    dtype = resolve_dtype(dtype, device)

    if path is None:
        from .default import default_model_dir

        directory, name = default_model_dir(), "SmolLM2-135M-Instruct (embedded, Q4_1 dequantized)"
    else:
        directory, name = Path(path).expanduser(), str(path)
        if not directory.is_dir():
            raise ModelNotFoundError(f"model path {str(directory)!r} is not a directory")
        if not (directory / "config.json").is_file():
            raise ModelNotFoundError(f"model path {str(directory)!r} has no config.json (not a Hugging Face model)")
    torch_dtype = getattr(torch, dtype)
    with quiet_transformers():
        config = AutoConfig.from_pretrained(directory, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
        if config.model_type == DIFFUSION_GEMMA:
            from transformers import DiffusionGemmaForBlockDiffusion

            model = DiffusionGemmaForBlockDiffusion.from_pretrained(directory, dtype=torch_dtype,
                                                                    local_files_only=True)
        else:
            model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch_dtype, local_files_only=True)
    model.to(device)
    weights = directory / "model.safetensors"
    return wrap(model, tokenizer, name=name,
                meta={"default": path is None, "weights": str(weights) if weights.is_file() else None})
