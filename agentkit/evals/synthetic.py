"""Held-out synthetic tool calls (the training generator with a seed training never uses), decoded and scored.

Used to tune and track the block-diffusion adapter without touching the benchmark sets: each example decodes under
its own template (pinned keys, typed value slots) and is right when the output equals the generator's answer.
"""

from __future__ import annotations

import statistics

HELD_OUT_SEED = 987_654  # the training data uses seed 0


def score_examples(engine, examples, cfg) -> dict:
    """Decode every example with ``cfg`` under its template: success rate, forwards, tokens per forward, p50 ms."""
    right, fwd, toks, lat = 0, [], 0, []
    for ex in examples:
        res = engine.generate(ex.messages, cfg, template=ex.template())
        right += res.text == ex.answer
        fwd.append(res.stats.forwards)
        toks += res.stats.output_tokens
        lat.append(res.stats.latency_ms)
    return {"n": len(examples), "right": right, "task_success": right / len(examples),
            "forwards_mean": statistics.fmean(fwd), "tokens_per_forward": toks / max(1, sum(fwd)),
            "latency_ms_p50": statistics.median(lat)}
