"""A decoding job's outcome, and what a response reads of it: the assistant message (calls or text), OpenAI's usage
and ``agentkit_stats``; :func:`completion_body` builds a whole ``chat.completion`` from a request's outcomes."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from agentkit.engine.stats import GenerationResult

from .scheduler import Job


def usage(prompt_tokens: int, output_tokens: int, cached_tokens: int = 0) -> dict:
    """OpenAI's usage object; ``cached_tokens``: prompt tokens reused from the prefix cache, not encoded."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": output_tokens,
            "total_tokens": prompt_tokens + output_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens}}


@dataclass
class Outcome:
    """What a decoding job returns: the engine's result and, on request, the returned tokens' log-probabilities."""

    result: GenerationResult
    logprobs: list[dict[str, Any]] | None = None
    choice: GenerationResult | None = None  # tool_choice auto: the choice decode's result when a text decode followed
    decision: dict[str, Any] | None = None  # tool_choice auto: how the call / no-call decision was made
    calls: list[tuple[str, Any]] = dataclasses.field(default_factory=list)  # the reply's calls (step runner's)
    settled: list[str] | None = None  # a settled response_format: the fields settling changed (serving/settle.py)

    def usage(self) -> dict[str, int]:
        """OpenAI's usage: the choice decode's and the text decode's tokens summed (both were computed)."""
        runs = [r.stats for r in (self.choice, self.result) if r is not None]
        return usage(sum(st.prompt_tokens for st in runs), sum(st.output_tokens for st in runs),
                     sum(st.cached_prompt_tokens for st in runs))


def response_parts(text: str, finish_reason: str, calls: list[tuple[str, Any]]) -> tuple[dict[str, Any], str]:
    """(assistant message, finish_reason) for a step's outcome: its calls (as the step runner read them from the
    reply, :func:`agentkit.steps.runner.reply_of`), else its text."""
    if calls:
        tcs = [{"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}} for name, args in calls]
        return {"role": "assistant", "content": None, "tool_calls": tcs}, "tool_calls"
    return {"role": "assistant", "content": text}, ("length" if finish_reason == "length" else "stop")


def job_stats(out: Outcome, job: Job) -> dict[str, Any]:
    """``agentkit_stats``: the decode's stats with the job's queueing, preparation and batching."""
    res = out.result
    d = res.stats.to_dict()
    sizes = job.slot.sizes if job.slot is not None and job.slot.sizes else [1]
    prepare_ms = 1000 * (job.ready - job.enqueued) if job.ready is not None else 0.0
    d.update(queue_ms=round(job.queue_ms, 3), prepare_ms=round(prepare_ms, 3),
             batch_size=round(sum(sizes) / len(sizes), 3), batch_size_max=max(sizes),
             token_ids=list(res.token_ids))
    if out.decision is not None:
        d["tool_choice"] = out.decision
    if out.settled is not None:
        d["settled"] = out.settled
    return d


def total_usage(outs: list[Outcome]) -> dict[str, Any]:
    """One request's usage: the prompt counted once (OpenAI's), the completions of every choice summed."""
    first = outs[0].usage()
    done = sum(o.usage()["completion_tokens"] for o in outs)
    return usage(first["prompt_tokens"], done, first["prompt_tokens_details"]["cached_tokens"])


def completion_body(done: list[tuple[Job, Outcome]], model: str) -> dict[str, Any]:
    """The ``chat.completion`` of one request's choices (each with its own stats when there are several)."""
    choices = []
    for i, (job, out) in enumerate(done):
        res = out.result
        message, finish = response_parts(res.text, res.stats.finish_reason, out.calls)
        logprobs = {"content": out.logprobs} if out.logprobs is not None else None
        choice = {"index": i, "message": message, "logprobs": logprobs, "finish_reason": finish}
        if len(done) > 1:
            choice["agentkit_stats"] = job_stats(out, job)
        choices.append(choice)
    return {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()),
            "model": model, "system_fingerprint": None, "choices": choices,
            "usage": total_usage([o for _, o in done]), "agentkit_stats": job_stats(done[0][1], done[0][0])}
