"""Peers on BFCL: other constrained decoders on the same items, prompt, schema and weights as agentkit's modes.

Peers (the ``peers`` optional extra installs the Python ones: ``pip install -e ".[peers]"``):

- ``outlines-xgrammar``, ``outlines-llguidance``, ``outlines-core``: HF transformers ``generate`` (greedy) with an
  Outlines 1.3 ``Generator`` over the call's JSON Schema, one per backend;
- ``llama-cpp``: ``llama-cpp-python`` on the default model's Q4_1 GGUF (the file the cached safetensors were
  dequantized from), ``response_format`` with the same schema.

Every peer gets the prompt :func:`agentkit.evals.bfcl.build_prompt` writes, through the model's chat template, and
the closed call schema agentkit compiles its template from (:meth:`~agentkit.evals.bfcl.BfclItem.call_params`
under :func:`agentkit.toolcall.call_schema`). Rows carry the same ``stats`` keys as agentkit's
(:class:`~agentkit.engine.stats.DecodeStats`), so :func:`agentkit.evals.report.summarize` reports them alike;
``latency_ms`` includes the schema compile (a peer compiles per request, inside its generate call), ``forwards``
counts one per output token. A peer whose package is missing is skipped with a one-line message
(:class:`PeerUnavailable`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..toolcall import MAX_PARALLEL_CALLS, call_schema

PEERS: tuple[str, ...] = ("outlines-xgrammar", "outlines-llguidance", "outlines-core", "llama-cpp")
_OUTLINES_BACKEND = {"outlines-xgrammar": "xgrammar", "outlines-llguidance": "llguidance",
                     "outlines-core": "outlines_core"}
_PACKAGES = {"outlines-xgrammar": ("outlines", "xgrammar"), "outlines-llguidance": ("outlines", "llguidance"),
             "outlines-core": ("outlines", "outlines_core"), "llama-cpp": ("llama_cpp",)}


class PeerUnavailable(Exception):
    """A peer cannot run here (a package or the GGUF is missing); the message is one line saying which."""


def item_schema(item) -> dict:
    """The closed call schema of a BFCL item: what agentkit's call template is compiled from. A parallel category's
    item: a JSON array of 1 to ``MAX_PARALLEL_CALLS`` such calls (a peer's grammar is a JSON Schema, so its calls
    come as an array where agentkit writes one per line; the scorer reads both)."""
    one = call_schema([(n, item.call_params(n)) for n in item.names])
    if item.parallel:
        return {"type": "array", "items": one, "minItems": 1, "maxItems": MAX_PARALLEL_CALLS}
    return one


def _stats(output_tokens: int, latency_ms: float, compile_ms: float, prompt_tokens: int, finish: str) -> dict:
    return {"mode": "peer", "prompt_tokens": prompt_tokens, "output_tokens": output_tokens, "pinned_tokens": 0,
            "slot_tokens": output_tokens, "encoder_forwards": output_tokens, "decoder_forwards": 0,
            "forwards": output_tokens, "draft_forwards": 0, "verify_forwards": 0, "blocks": 0,
            "steps_per_block": [], "prefill_ms": 0.0, "denoise_ms": 0.0, "commit_ms": 0.0, "constraint_ms": 0.0,
            "compile_ms": round(compile_ms, 3), "latency_ms": round(latency_ms, 3), "finish_reason": finish}


@dataclass
class PeerOutput:
    text: str
    stats: dict


class OutlinesPeer:
    """HF ``generate`` + Outlines with one backend. ``hf_model``/``tokenizer`` may be shared between backends."""

    def __init__(self, name: str, hf_model, tokenizer) -> None:
        import outlines

        self.name, self.backend = name, _OUTLINES_BACKEND[name]
        self.tokenizer = tokenizer
        self.model = outlines.from_transformers(hf_model, tokenizer)
        self._generated = 0
        self.last_prompt_ids: list[int] = []  # what the model was last given (tests: the chat template once)
        original = hf_model.generate

        def counting_generate(*args, **kw):  # outlines decodes the ids itself: record how many were new
            out = original(*args, **kw)
            self.last_prompt_ids = kw["input_ids"][0].tolist()
            self._generated = int(out.shape[-1] - kw["input_ids"].shape[-1])
            return out

        hf_model.generate = counting_generate

    def generate(self, messages: list[dict], schema: dict, max_new_tokens: int) -> PeerOutput:
        import json

        from outlines import Generator
        from outlines.inputs import Chat
        from outlines.types import JsonSchema

        prompt = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        n_prompt = len(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        t0 = time.perf_counter()
        gen = Generator(self.model, JsonSchema(json.dumps(schema)), backend=self.backend)
        compile_ms = 1000 * (time.perf_counter() - t0)
        # a Chat, not the templated string: Outlines wraps a str in the chat template again, as one user message
        # under the model's default system prompt (so the peer saw a different, doubly wrapped prompt)
        text = gen(Chat(messages), max_new_tokens=max_new_tokens, do_sample=False)
        ms = 1000 * (time.perf_counter() - t0)
        finish = "length" if self._generated >= max_new_tokens else "stop"
        return PeerOutput(text, _stats(self._generated, ms, compile_ms, n_prompt, finish))


class LlamaCppPeer:
    """``llama-cpp-python`` on a GGUF with ``response_format`` (JSON Schema, compiled to a GBNF grammar inside)."""

    name = "llama-cpp"

    def __init__(self, gguf: str, threads: int | None = None) -> None:
        from ..engine.llama_cpp import plain_llama

        self.llm = plain_llama(gguf, n_ctx=4096, n_threads=threads or 1, verbose=False, seed=0)

    def generate(self, messages: list[dict], schema: dict, max_new_tokens: int) -> PeerOutput:
        t0 = time.perf_counter()
        out = self.llm.create_chat_completion(messages=messages, max_tokens=max_new_tokens, temperature=0.0,
                                              response_format={"type": "json_object", "schema": schema})
        ms = 1000 * (time.perf_counter() - t0)
        usage, choice = out.get("usage") or {}, out["choices"][0]
        n = int(usage.get("completion_tokens", 0))
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return PeerOutput(choice["message"]["content"] or "",
                          _stats(n, ms, 0.0, int(usage.get("prompt_tokens", 0)), finish))


def _require(name: str) -> None:
    import importlib.util

    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; known: {', '.join(PEERS)}")
    missing = [p for p in _PACKAGES[name] if importlib.util.find_spec(p) is None]
    if missing:
        extra = "llama-cpp-python" if name == "llama-cpp" else 'the "peers" extra (pip install -e ".[peers]")'
        raise PeerUnavailable(f"peer {name} skipped: {', '.join(missing)} not installed (install {extra})")


def load_peers(names: list[str], *, model_dir: str | None = None, gguf: str | None = None,
               threads: int | None = None, log=print) -> dict[str, Any]:
    """The peers in ``names`` that can run here, by name; each one that cannot is reported with one ``log`` line.

    ``model_dir``: a HF model directory (None: the default model's cached safetensors); ``gguf``: the llama.cpp
    model file (None: the default model's GGUF from its wheel)."""
    peers: dict[str, Any] = {}
    hf = None
    for name in names:
        try:
            _require(name)
            if name == "llama-cpp":
                if gguf is None:
                    from ..errors import ModelNotFoundError
                    from ..models.default import gguf_path

                    try:
                        gguf = str(gguf_path())
                    except ModelNotFoundError as e:
                        raise PeerUnavailable(f"peer llama-cpp skipped: {e}") from None
                peers[name] = LlamaCppPeer(gguf, threads)
                continue
            if hf is None:
                hf = _load_hf(model_dir)
            peers[name] = OutlinesPeer(name, *hf)
        except PeerUnavailable as e:
            log(str(e))
    return peers


def _load_hf(model_dir: str | None):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if model_dir is None:
        from ..models.default import default_model_dir

        model_dir = str(default_model_dir())
    from ..models.console import quiet_transformers

    with quiet_transformers():  # the peers' weights load without transformers' bar, as agentkit's own do
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32")
    model.eval()
    return model, tok


def run_peer(peer, item, max_new_tokens: int = 256) -> dict:
    """One BFCL item on one peer -> a row like the runner's (success, valid, error, call, text, stats)."""
    from . import bfcl

    out = peer.generate(bfcl.build_prompt(item), item_schema(item), max_new_tokens)
    value = None
    try:
        import json

        value = json.loads(out.text)
    except ValueError:
        pass
    return {"category": item.category, **bfcl.evaluate(item, out.text, value), "text": out.text[:2000],
            "finish_reason": out.stats["finish_reason"], "stats": out.stats}
