"""``logprobs`` / ``top_logprobs``: the returned tokens' log-probabilities under the model.

They come from one scoring pass over prompt + output with the base weights, at temperature 1 and without the
template's mask: the model's own distribution at each position (what OpenAI's field reports), whatever mode
decoded the tokens. In diffusion mode the tokens were chosen by the canvas sampler (and, with the shipped
adapter, by adapted weights), so these are the AR model's view of them, not the sampler's confidence. The pass
goes through the request's batcher seat like its other forwards; it costs one forward over prompt + output.
"""

from __future__ import annotations

from typing import Any

import torch


def _entry(tok: Any, tid: int, lp: float) -> dict[str, Any]:
    text = tok.decode([tid], skip_special_tokens=False)
    return {"token": text, "logprob": lp, "bytes": list(text.encode("utf-8", "replace"))}


def token_logprobs(engine: Any, prompt_ids: list[int], out_ids: list[int], top: int,
                   slot: Any = None) -> list[dict[str, Any]]:
    """OpenAI's ``logprobs.content``: one entry per output token, each with ``top`` alternatives."""
    if not out_ids:
        return []
    bb = engine.backbone if slot is None else slot.wrap(engine.backbone)
    ids = list(prompt_ids) + list(out_ids)
    rows = list(range(len(prompt_ids) - 1, len(ids) - 1))  # row i predicts token i + 1
    logits = bb.encode(ids, bb.new_cache(), rows=rows)  # [k, V]
    logp = torch.log_softmax(logits.float(), dim=-1)
    chosen = logp.gather(-1, torch.tensor(out_ids, dtype=torch.long)[:, None]).squeeze(-1).tolist()
    alts = torch.topk(logp, top, dim=-1) if top > 0 else None
    out = []
    with engine.lock:  # the tokenizer is shared with concurrent requests
        for i, tid in enumerate(out_ids):
            e = _entry(engine.tokenizer, tid, chosen[i])
            e["top_logprobs"] = [] if alts is None else [
                _entry(engine.tokenizer, int(t), float(v)) for v, t in zip(alts.values[i], alts.indices[i])]
            out.append(e)
    return out
