"""What a generation cost, and what it produced."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class DecodeStats:
    mode: str = "ar"
    prompt_tokens: int = 0
    # of those, copied from earlier requests' keys/values instead of encoded (EngineConfig.prefix_cache; OpenAI's
    # usage.prompt_tokens_details.cached_tokens)
    cached_prompt_tokens: int = 0
    output_tokens: int = 0
    pinned_tokens: int = 0  # placed from a template, never predicted
    slot_tokens: int = 0  # predicted under a constraint (or free tokens when unconstrained)
    encoder_forwards: int = 0  # causal passes that write the KV cache (prefill, commit, verify, AR steps)
    decoder_forwards: int = 0  # denoiser passes that only read the cache
    draft_forwards: int = 0  # of those, self-speculative draft passes (verify with the adapter drafting)
    verify_forwards: int = 0  # verify mode: causal passes that check a drafted block (part of encoder_forwards)
    accepted_slot_tokens: int = 0  # verify mode: drafted slot tokens the check kept (pinned text and each pass's exact first token not counted)
    drafter_passes: int = 0  # verify with a block drafter: its passes (one per block; not forwards of the model)
    drafter_ms: float = 0.0  # their time (part of latency_ms)
    blocks: int = 0
    steps_per_block: list[int] = field(default_factory=list)
    prefill_ms: float = 0.0
    # the passes after the prefill that decode: denoiser passes, and also AR steps and verify's checking passes (the
    # field keeps its name for the server's stats and traces); commit_ms: a finished canvas block's causal pass
    denoise_ms: float = 0.0
    commit_ms: float = 0.0
    constraint_ms: float = 0.0  # mask computation (part of denoise/commit time)
    compile_ms: float = 0.0  # template compile + its token DFAs (first use of a template; not in latency_ms)
    latency_ms: float = 0.0  # whole call: prompt encoding, prefill, decoding (excludes compile_ms)
    finish_reason: str = "length"  # stop | length | template
    backend: str = ""  # the backbone that ran the request: torch | llama.cpp (backend "auto" may pick per request)

    @property
    def forwards(self) -> int:
        """Forwards after the prompt prefill: AR steps/commits/verifies plus denoiser passes."""
        return self.encoder_forwards + self.decoder_forwards - (1 if self.prompt_tokens else 0)

    @property
    def tokens_per_forward(self) -> float:
        return self.output_tokens / max(self.forwards, 1)

    @property
    def tokens_per_forward_excl_pinned(self) -> float:
        return (self.output_tokens - self.pinned_tokens) / max(self.forwards, 1)

    @property
    def accepted_per_pass(self) -> float:
        """Verify mode: drafted slot tokens accepted per checking pass (pinned text excluded)."""
        return self.accepted_slot_tokens / max(self.verify_forwards, 1)

    @property
    def output_tokens_per_s(self) -> float:
        return 1000.0 * self.output_tokens / self.latency_ms if self.latency_ms > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["forwards"] = self.forwards
        d["tokens_per_forward"] = round(self.tokens_per_forward, 4)
        d["tokens_per_forward_excl_pinned"] = round(self.tokens_per_forward_excl_pinned, 4)
        d["output_tokens_per_s"] = round(self.output_tokens_per_s, 2)
        d["accepted_per_pass"] = round(self.accepted_per_pass, 4)
        return d


@dataclass
class GenerationResult:
    text: str
    token_ids: list[int]
    stats: DecodeStats
    value: Any = None  # parsed JSON when generated under a JSON template
    drafts: list[list[int]] = field(default_factory=list)  # canvas snapshots (for canvas-evolution plots/streams)

    @property
    def mode(self) -> str:
        return self.stats.mode

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "mode": self.mode, "value": self.value, "stats": self.stats.to_dict()}
