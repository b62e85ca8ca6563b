"""Configuration dataclasses: one for the engine, one per request."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from .errors import InvalidRequestError
from .settings import BY_NAME, DECODE, GREEDY, MODES, SAMPLERS  # noqa: F401 (MODES, GREEDY, SAMPLERS: re-exported)
from .validate import check_seed, check_text

Mode = Literal["ar", "diffusion", "verify"]
Sampler = Literal["auto", "jacobi", "mask", "uniform"]
DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16")
BACKENDS: tuple[str, ...] = ("auto", "torch", "llama.cpp")
ATTENTIONS: tuple[str, ...] = ("auto", "sdpa")
Q4_STEPS: tuple[str, ...] = ("auto", "on", "off", "int8")
PREPACK: tuple[str, ...] = ("auto", "off")
ROW_EXACT: tuple[str, ...] = ("auto", "off")
NO_LORA = "none"  # EngineConfig.lora: the weights as loaded (None: the model's own LoRA, if it has one)


@dataclass
class EngineConfig:
    """How the engine loads and runs a model."""

    model: str | None = None  # None: the embedded default model; else a local HF directory
    adapter: bool = True  # diffusion mode uses a block-diffusion adapter when one is present (--no-adapter: off)
    adapter_path: str | None = None  # None: the adapter shipped for the default model (adapters/smollm2-135m-bd)
    # "auto": bfloat16 on a GPU or on a CPU with native bf16 matmuls (avx512_bf16 / AMX), float32 otherwise
    dtype: str = "auto"
    device: str = "cpu"
    # torch threads (and llama.cpp's), set on the thread of every generate call; None: 1 on a machine of at most 4
    # cores, torch's own (one per core) on a larger one (agentkit/_threads.py, docs/threads.md)
    threads: int | None = None
    seed: int = 0
    # "auto": torch (llama.cpp writes different greedy text, so auto never picks it); "llama.cpp": the embedded
    # default model's Q4_1 GGUF on llama.cpp, needs the [llama] extra
    backend: str = "auto"
    # fixed-shape passes (torch backend): every pass after the prompt is this many positions over a cache of fixed
    # length, so no position's logits depend on how tokens were grouped into passes -- verify and the causal canvas
    # then equal AR bit for bit in bf16 too (agentkit/engine/fixed.py). None: each pass as long as its tokens
    pass_width: int | None = None
    # "auto": on CPU a one-token step without a mask (AR on a growing cache) computes attention as two float32
    # matmuls instead of torch's flash kernel, 5x cheaper there (agentkit/engine/attention.py); every other pass is
    # transformers' sdpa. "sdpa": transformers' sdpa for every pass
    attention: str = "auto"
    # "auto": where the checkpoint's layer weights are 4-bit groups (the embedded Q4_1 model) and the engine runs
    # on CPU in bf16, or in float32 chosen by dtype="auto" (a CPU without native bf16), passes of up to 8 positions
    # read those 4-bit weights (torch's int4 kernel, bf16 activations; agentkit/models/q4.py), longer ones the dense
    # weights; an explicit dtype="float32" keeps float32 arithmetic. With a LoRA merged in (``lora``), those passes
    # read 4-bit grids fitted to the merged weights (GPTQ on agent-loop text, once per adapter, cached:
    # agentkit/models/gptq.py; the checkpoint's grid would round the LoRA away). "on": the same in any CPU dtype
    # (float32 included). "int8": as "auto", but a merged LoRA's passes read an 8-bit copy of its weights (1.37x a
    # 4-bit step; no fitting). "off": dense weights for every pass
    q4_steps: str = "auto"
    # "auto": a bf16 model on CPU keeps its decoder layers' dense weights also prepacked for oneDNN (its AMX/AVX-512
    # layout, reordered once instead of on every pass; agentkit/models/packed.py): prompts and passes too long for
    # the 4-bit weights run on them. "off": nn.Linear, which reorders the weight on every call
    prepack: str = "auto"
    # "auto": where a pass's rows can be computed independently of each other (torch on CPU with the 4-bit layers,
    # the step attention and the int8 coarse head: agentkit/engine/backbone.py, Backbone.exact_rows), passes after
    # the prompt run in pieces of at most 8 positions, each position getting the logits of the one-token AR step at
    # it -- verify and the causal canvas then equal AR bit for bit whatever their pass sizes. "off": every pass in
    # one piece (longer ones on the dense weights)
    row_exact: str = "auto"
    # exact prompt-prefix reuse (agentkit/engine/prefix.py): the keys/values of earlier prompts, in pieces of at most
    # ``prompt_chunk`` tokens shared by all requests of the engine, are copied into a new request whose prompt starts
    # with them; only the rest is encoded. Exact: the prompt pass always runs in pieces cut at multiples of
    # ``prompt_chunk`` and before each chat message (cache on or off), so outputs are bit-identical with it off. Where
    # the backbone cannot (llama.cpp, DiffusionGemma, fixed-shape passes, sliding-window caches), it is off;
    # Engine.prefix_status says why
    prefix_cache: bool = True
    prefix_cache_bytes: int | None = None  # bound on the cached keys/values (LRU); None: 1/16 of RAM, at most 512 MiB
    # the prompt pass's chunk (and the cache's block) in tokens; 0: one pass (no prefix cache then). On a 2-core CPU
    # a 900-token prompt costs about 1.1x one pass in chunks of 256, 1.9x in 128, 2.1x in 64, 4x in 32
    # (docs/prefix_cache.md); longer chunks reuse less (an iteration re-encodes from the last cut before it)
    prompt_chunk: int = 128
    # a LoRA merged into the causal weights every mode decodes with (``AdapterConfig(kind="ar")``, a folder or file;
    # agentkit/training/sft.py); short passes then read 4-bit grids fitted to the merged weights (``q4_steps``).
    # None: the model's own, which for the embedded default model on torch is its loop adapter
    # (adapters/smollm2-135m-loop: taught on the agent loop's traces; BFCL single calls 0.585 against 0.49 on the
    # weights as loaded, its MODEL_CARD.md) and for any other model none. "none": the weights as loaded
    lora: str | None = None
    # verify mode's block drafter (DecodeConfig.draft="drafter"; agentkit/engine/drafter.py): a folder with
    # drafter.safetensors + drafter.json. None: the default model's (adapters/smollm2-135m-drafter), where present
    drafter_path: str | None = None

    def __post_init__(self) -> None:
        if self.lora not in (None, NO_LORA) and self.backend == "llama.cpp":
            raise InvalidRequestError("EngineConfig.lora merges a LoRA into torch weights; backend='llama.cpp' has none")
        if self.dtype not in DTYPES:
            raise InvalidRequestError(f"EngineConfig.dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.backend not in BACKENDS:
            raise InvalidRequestError(f"EngineConfig.backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.attention not in ATTENTIONS:
            raise InvalidRequestError(f"EngineConfig.attention must be one of {ATTENTIONS}, got {self.attention!r}")
        if self.q4_steps not in Q4_STEPS:
            raise InvalidRequestError(f"EngineConfig.q4_steps must be one of {Q4_STEPS}, got {self.q4_steps!r}")
        if self.prepack not in PREPACK:
            raise InvalidRequestError(f"EngineConfig.prepack must be one of {PREPACK}, got {self.prepack!r}")
        if not isinstance(self.prefix_cache, bool):
            raise InvalidRequestError(f"EngineConfig.prefix_cache must be True or False, got {self.prefix_cache!r}")
        if self.prefix_cache_bytes is not None and (not isinstance(self.prefix_cache_bytes, int)
                                                    or isinstance(self.prefix_cache_bytes, bool)
                                                    or self.prefix_cache_bytes < 0):
            raise InvalidRequestError(f"EngineConfig.prefix_cache_bytes must be an int >= 0 or None, got "
                                      f"{self.prefix_cache_bytes!r}")
        if not isinstance(self.prompt_chunk, int) or isinstance(self.prompt_chunk, bool) or self.prompt_chunk < 0:
            raise InvalidRequestError(f"EngineConfig.prompt_chunk must be an int >= 0 (tokens), got "
                                      f"{self.prompt_chunk!r}")
        if self.row_exact not in ROW_EXACT:
            raise InvalidRequestError(f"EngineConfig.row_exact must be one of {ROW_EXACT}, got {self.row_exact!r}")
        if self.pass_width is not None and not (isinstance(self.pass_width, int) and 1 <= self.pass_width <= 256):
            raise InvalidRequestError(f"EngineConfig.pass_width must be an int in 1..256 or None, got {self.pass_width!r}")
        if self.pass_width is not None and self.backend == "llama.cpp":
            raise InvalidRequestError("EngineConfig.pass_width (fixed-shape passes) is a torch backbone option; use "
                                      "backend='torch' or 'auto' with it")


@dataclass
class DecodeConfig:
    """Per-request decoding settings.

    ``canvas_length`` default 32: on this 2-core CPU a 32-position forward costs ~1.9x a 1-token forward
    (64: 2.9x, 256: 8.4x), and structured outputs here are tens of tokens, so longer canvases only add cost.
    DiffusionGemma uses 256 on GPUs, where forwards cost about the same up to hundreds of positions.
    """

    mode: Mode = "ar"
    max_new_tokens: int = 256
    temperature: float = 0.0  # 0 = greedy
    # greedy under a template: "byte" decides byte by byte, summing the probability of the tokens that start with
    # each byte, so a choice the vocabulary spells several ways ("}" before a pinned "}", and "}}") is weighed as
    # one (agentkit/engine/sampler.py greedy_by_byte); "token" is a plain argmax (docs/benchmarks.md compares them)
    greedy: str = "byte"
    # under a template: a logit bonus for tokens that continue, inside a JSON string value, a span of the prompt
    # (agentkit/engine/copy.py); 0: off. The output is still greedy (or sampled) under the constraint. BFCL 600
    # (evals/results/bfcl/copy600_s12.json.gz): 2.0 from the last user message 0.400 against 0.385 off
    copy_bias: float = 2.0
    copy_from: str = "user"  # the copy prior's source: "prompt" (all of it) or "user" (the last user message)
    # the copy prior's source text itself, when set (it replaces copy_from): ``extract`` and the server's
    # response_format set it to the text being extracted, so the schema the prompt shows is not a copy source
    copy_source: str | None = None
    # the copy prior in number slots too: after a number's first digit (the model's), digits that go on along a
    # number the source writes ("200,000" as 200000). BFCL 600: 0.405 against 0.400 off
    copy_numbers: bool = True
    # the number copy prior at a number's first digit too (tokens that begin a number the source writes). Off by
    # default (on BFCL it drew "initial_velocity": 0 to the question's 150); ``extract`` and the
    # server's response_format turn it on, where values are the text's own (docs/extraction.md)
    copy_first_digit: bool = False
    # free text (no template): the logit bonus for tokens that begin or go on along one of ``copy_source``'s values
    # (the agent's answer after tool results; agentkit/engine/copy.py bias_text); 0: off. Free text gets no prior
    # without ``copy_source``. The answer step given the right result (evals/answer_copy.py, 85 tasks): the reply
    # carries the returned value 0.235 off, 0.482 at 2, 0.577 at 3, 0.718 at 5, 0.824 at 8 (replies at the
    # token budget 4, 2, 1, 7, 11 of 85). With the reply ending at a loop (stop_loops), 8, on those
    # 85 and 110 held-out one-tool tasks, 8 carried the value on 13 more and 2 fewer than 5 (p = 0.007), 0.871 and
    # 0.864 against 0.776 and 0.836 (evals/results/agent_loop/answer_copy_{bias_loops,held_out}.json). Above 5 the value
    # is also written in odd places ("The power of NECTAR-6320 is 1."): carried, not always well put
    copy_text_bias: float = 8.0
    # OpenAI's penalties on the output so far (every token of it, pinned text included): a token's logit less
    # frequency_penalty times its count, less presence_penalty if it occurs (agentkit/engine/sampler.py penalize);
    # applied before the copy prior, in every mode's pick, so verify still reproduces AR with them
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    # OpenAI's logit_bias: token id -> a bonus added to that token's logit in every pick (-100..100; -100 bans it).
    # Keys may be given as ints or as decimal strings (JSON's), and are kept as ints; a key outside the model's
    # vocabulary is refused by the engine, which knows its size
    logit_bias: dict[int, float] = field(default_factory=dict)
    top_k: int | None = None
    top_p: float | None = None  # nucleus sampling (with temperature > 0); None or 1.0: off
    seed: int | None = None
    # canvas (diffusion / verify)
    canvas_length: int = 32
    # cut each verify block / causal-canvas pass to the length whose expected accepted tokens pay for its cost
    # (the backbone's cost curve; agentkit/engine/sizing.py); the output is the same, only the work changes
    sized_passes: bool = True
    max_denoising_steps: int = 48
    sampler: Sampler = "auto"  # auto: jacobi (causal canvas), mask (adapter / mask-token models), uniform (gemma)
    # mask sampler: accept positions above this (always >= 1 per step). 0.99, not Fast-dLLM's 0.9: on held-out
    # synthetic calls the shipped adapter got 12/20 right at 0.99 (13.5 forwards) against 6/20 at 0.9 (9.1), with
    # AR-constrained at 4/20 (51 forwards); positions unmasked together at 0.9 garble values ("meterseters")
    # (python evals/bench_adapter_sampler.py --n 20 --thresholds 0.9,0.95,0.99 --threads 1)
    confidence_threshold: float = 0.99
    entropy_bound: float = 0.1  # uniform sampler (DiffusionGemma's EntropyBoundSampler)
    stable_steps: int = 1  # adaptive stop: argmax canvas unchanged for this many steps ...
    entropy_threshold: float = 0.05  # ... and mean entropy below this
    final_temperature: float | None = None  # linear temperature schedule end (None: constant)
    stop: list[str] = field(default_factory=list)
    # the output ends at a loop: this many copies in a row of one piece of 1..32 tokens (12 tokens at least; they
    # stay in the output, which a stream has sent; agentkit/engine/loops.py; finish reason "loop"); 0: off
    stop_loops: int = 0
    # which weights decode: "auto" = the block-diffusion adapter (when the engine has one) in diffusion mode only,
    # base weights for AR and verify; "adapted" = the adapter in every mode (AR on the adapted weights, to see
    # what the adaptation costs AR); "base" = never the adapter (diffusion then runs as a causal canvas); "loaded" =
    # the weights as loaded, without a LoRA merged into them (EngineConfig.lora; a second copy, loaded on first use:
    # Engine.can_load_unmerged) and without the adapter (the SDK's plain replies, with no tool result to carry)
    weights: str = "auto"
    # verify mode: where drafts come from. "lookup" = prompt lookup, else the verifier's stale continuations (no
    # extra model); "adapter" = self-speculation, the block-diffusion adapter drafts a canvas of ``draft_steps``
    # mask-sampler passes (agentkit/engine/selfspec.py); "drafter" = prompt lookup, and the trained block drafter
    # for a block lookup has no guess for, in one pass from the base's own hidden states (agentkit/engine/drafter.py,
    # EngineConfig.drafter_path; none found: lookup, with one warning); "auto" = "drafter" for free text decoded
    # alone where the engine has a drafter, else "lookup" (as measured: the drafter's model card). The output is
    # greedy ar-constrained either way.
    draft: str = "auto"
    draft_steps: int = 1
    # the decode's keys/values stay with the engine for one reader (``Engine.kept``, agentkit/engine/kept.py):
    # ``extract`` sets it, and settling the output reads them instead of encoding the output again
    keep_cache: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Every field checked (``InvalidRequestError`` naming the first bad one): run on construction and again by
        ``Engine.generate`` before any work (a field assigned after construction is checked there too)."""
        _check_choices(self)
        _check_numbers(self)
        if not isinstance(self.stop, list) or not all(isinstance(s, str) and s for s in self.stop):
            raise InvalidRequestError(f"stop must be a list of non-empty strings, got {self.stop!r}")
        for i, s in enumerate(self.stop):
            check_text(s, f"stop[{i}]")
        if self.stop_loops == 1:
            raise InvalidRequestError("stop_loops must be 0 (off) or >= 2 (copies in a row that make a loop), got 1")
        check_seed(self.seed)
        self.logit_bias = _check_bias(self.logit_bias)
        if self.copy_source is not None:
            if not isinstance(self.copy_source, str):
                raise InvalidRequestError(f"copy_source must be a string or None, got "
                                          f"{type(self.copy_source).__name__}")
            check_text(self.copy_source, "copy_source")


# DecodeConfig's checks, from the settings table (agentkit/settings.py)
_CHOICES: dict[str, tuple[str, ...]] = {st.name: st.choices for st in DECODE if st.kind == "str"}
# name -> (integer?, low, high, low excluded?, None allowed?)
_NUMBERS: dict[str, tuple[bool, float, float, bool, bool]] = {
    st.name: (st.kind == "int", st.low, st.high, st.low_open, st.optional) for st in DECODE
    if st.kind in ("int", "float") and st.name != "seed"}  # seed: validate.check_seed (torch's range)
_BOOLS = tuple(st.name for st in DECODE if st.kind == "bool")


_BIAS = BY_NAME["logit_bias"]


def _check_bias(bias: object) -> dict[int, float]:
    """``logit_bias`` as ``{token id: bonus}``: keys ints >= 0 (or their decimal strings), bonuses numbers in the
    table's range; anything else an ``InvalidRequestError`` naming the key."""
    if not isinstance(bias, dict):
        raise InvalidRequestError(f"logit_bias must be an object of token id -> bias, got {type(bias).__name__}")
    out: dict[int, float] = {}
    for k, v in bias.items():
        tok = k if isinstance(k, int) and not isinstance(k, bool) else (int(k) if isinstance(k, str) and
                                                                         k.isascii() and k.isdigit() else None)
        if tok is None or tok < 0:
            raise InvalidRequestError(f"logit_bias keys must be token ids (integers >= 0), got {k!r}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not _BIAS.low <= v <= _BIAS.high:
            raise InvalidRequestError(f"logit_bias[{k!r}] must be a number in {_BIAS.low:g}..{_BIAS.high:g}, "
                                      f"got {v!r}")
        out[tok] = float(v)
    return out


def _check_choices(cfg: DecodeConfig) -> None:
    for name, choices in _CHOICES.items():
        v = getattr(cfg, name)
        if not isinstance(v, str) or v not in choices:
            one = " or ".join(map(repr, choices)) if len(choices) == 2 else f"one of {choices}"
            raise InvalidRequestError(f"{name} must be {one}, got {v!r}")
    for name in _BOOLS:
        if not isinstance(getattr(cfg, name), bool):
            raise InvalidRequestError(f"{name} must be true or false, got {getattr(cfg, name)!r}")


def _check_numbers(cfg: DecodeConfig) -> None:
    for name, (integer, lo, hi, lo_open, optional) in _NUMBERS.items():
        v = getattr(cfg, name)
        if v is None and optional:
            continue
        ok_type = isinstance(v, int) if integer else isinstance(v, int | float)
        ok = ok_type and not isinstance(v, bool) and (integer or math.isfinite(v))
        if not ok or v < lo or (lo_open and v == lo) or v > hi:
            kind = "an integer" if integer else "a finite number"
            rng = (f"> {lo}" if lo_open else f">= {lo}") if hi == math.inf else \
                f"in {'(' if lo_open else '['}{lo}, {hi}]"
            raise InvalidRequestError(f"{name} must be {kind} {rng}{' or None' if optional else ''}, got {v!r}")
