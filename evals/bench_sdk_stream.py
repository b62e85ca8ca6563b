"""The SDK on the default model (or --tiny): time to the first streamed text delta vs the whole reply, and how
soon ``Limits(timeout_s=...)`` stops a long generation (the engine checks a stop flag before each forward).

    python evals/bench_sdk_stream.py --n 5 --max-tokens 64 --timeout-s 1 --threads 1

Prints one line per request and the medians; then, for the timeout, the wall time from the run's start to the
``UsageLimitExceeded`` and the forwards the stopped generation ran.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

PROMPTS = ["Write a short poem about the sea.", "Explain what a hash map is.", "List three uses of copper.",
           "Describe a cat in two sentences.", "What is the capital of France and why is it famous?"]


async def _stream_once(agent, prompt: str, max_tokens: int) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    first, n = None, 0
    async with agent.run_stream(prompt, model_settings={"max_tokens": max_tokens}) as s:
        async for _ in s.stream_text(delta=True):
            n += 1
            if first is None:
                first = time.perf_counter() - t0
    return first or float("nan"), time.perf_counter() - t0, n


def _timeout_once(agent, timeout_s: float) -> tuple[float, int, int]:
    from agentkit import Limits, UsageLimitExceeded

    t0 = time.perf_counter()
    try:
        agent.run_sync("Tell a very long story about a lighthouse keeper.", limits=Limits(timeout_s=timeout_s),
                       model_settings={"max_tokens": 2000})
    except UsageLimitExceeded as e:
        rec = e.trace[-1]
        return time.perf_counter() - t0, rec.encoder_forwards + rec.decoder_forwards, rec.output_tokens
    raise SystemExit("the generation ended before the timeout: raise --timeout-s's story length")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--timeout-s", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tiny", action="store_true", help="a tiny random model instead of the default one")
    args = ap.parse_args()

    import torch

    from agentkit import Agent
    from agentkit.config import EngineConfig
    from agentkit.engine.engine import Engine

    torch.set_num_threads(args.threads)
    if args.tiny:
        from agentkit.models.tiny import tiny_llama

        engine = Engine.from_loaded(tiny_llama(1))
    else:
        engine = Engine(EngineConfig(threads=args.threads))
    agent = Agent(engine)
    asyncio.run(_stream_once(agent, "Hi", 4))  # warm-up
    firsts, totals = [], []
    for i in range(args.n):
        first, total, n = asyncio.run(_stream_once(agent, PROMPTS[i % len(PROMPTS)], args.max_tokens))
        firsts.append(first)
        totals.append(total)
        print(f"request {i}: first delta {first * 1000:.0f} ms, whole reply {total * 1000:.0f} ms, {n} deltas")
    print(f"median first delta {statistics.median(firsts) * 1000:.0f} ms vs whole reply "
          f"{statistics.median(totals) * 1000:.0f} ms (ratio {statistics.median(firsts) / statistics.median(totals):.3f})")
    wall, forwards, tokens = _timeout_once(agent, args.timeout_s)
    print(f"timeout_s={args.timeout_s}: UsageLimitExceeded after {wall:.2f} s; the stopped generation ran "
          f"{forwards} forwards, {tokens} output tokens")


if __name__ == "__main__":
    main()
