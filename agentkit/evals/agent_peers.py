"""Peer rows of the agent-loop benchmark: other agent loops on the same tasks through ``agentkit serve``.

- ``pydantic-ai``: pydantic-ai's own ``Agent`` (its loop) over ``OpenAIChatModel`` with an ``OpenAIProvider``
  whose ``base_url`` is the server; the task's tools via ``Tool.from_schema``; a ``fail_once`` failure is raised as
  pydantic-ai's ``ModelRetry``. Iterations = model responses.
- ``openai``: the openai client's plain tool loop: ``chat.completions.create(messages, tools)`` until a reply has
  no ``tool_calls``, each tool's result (or error) sent back as a ``tool`` message. Iterations = requests, each
  timed (per-iteration latency).

Both run with the server's defaults (its decoding mode, ``tool_choice`` unset = ``"auto"``), the same
instructions as the agentkit runs (as the system prompt) and the same iteration limit. :func:`serve` starts
``agentkit serve`` on the default model on a loopback port for the run.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import UserError
from .agent_env import ServiceUnavailable, TaskEnv, openai_tools, pydantic_ai_tools, score_run
from .agent_tasks import INSTRUCTIONS, AgentTask

PEERS: tuple[str, ...] = ("pydantic-ai", "openai")
API_KEY = "agent-loop"  # the spawned server's bearer token (loopback only)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(model: str | None = None, threads: int | None = 1, startup_s: float = 600.0,
          lora: str | None = None) -> Iterator[str]:
    """``agentkit serve`` in a subprocess for the block (``--lora lora`` when given); yields its ``/v1`` base URL.
    Stopped on exit."""
    import httpx

    port = _free_port()
    cmd = [sys.executable, "-m", "agentkit.cli", "serve", "--port", str(port), "--log-level", "warning",
           "--request-timeout-s", "600", "--api-key", API_KEY]
    if model:
        cmd += ["--model", model]
    if lora:
        cmd += ["--lora", lora]
    if threads:
        cmd += ["--threads", str(threads)]
    proc = subprocess.Popen(cmd, env={**os.environ, "OMP_NUM_THREADS": str(threads or 1)})
    try:
        t0 = time.monotonic()
        while True:
            if proc.poll() is not None:
                raise UserError(f"agentkit serve exited with {proc.returncode} during startup ({' '.join(cmd)})")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() - t0 > startup_s:
                raise UserError(f"agentkit serve did not answer /health within {startup_s:g} s")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_peer(peer: str, task: AgentTask, base_url: str, *, max_iterations: int, api_key: str = API_KEY,
             model_name: str = "agentkit") -> dict[str, Any]:
    """One task through ``peer`` against the server at ``base_url``; a row like agentkit's."""
    if peer not in PEERS:
        raise UserError(f"unknown peer {peer!r}; the peers are {', '.join(PEERS)}")
    env = TaskEnv(task)
    t0 = time.perf_counter()
    output, error, iterations, iter_ms = None, None, 0, []
    try:
        if peer == "pydantic-ai":
            output, iterations = _pydantic_ai(task, env, base_url, api_key, model_name, max_iterations)
        else:
            output, iter_ms = _openai_loop(task, env, base_url, api_key, model_name, max_iterations)
            iterations = len(iter_ms)
    except _Stopped as e:
        error, iterations, iter_ms = str(e), e.iterations, e.iter_ms
    except Exception as e:  # noqa: BLE001 (the peer's own errors: usage limits, bad model output, HTTP)
        error = f"{type(e).__name__}: {e}"
    row = score_run(task, env, output, error, 1000 * (time.perf_counter() - t0), iterations=iterations,
                    iter_ms=iter_ms)
    return {"framework": peer, "mode": "server", **row}


class _Stopped(Exception):
    def __init__(self, message: str, iterations: int, iter_ms: list[float]) -> None:
        super().__init__(message)
        self.iterations, self.iter_ms = iterations, iter_ms


def _pydantic_ai(task: AgentTask, env: TaskEnv, base_url: str, api_key: str, model_name: str,
                 max_iterations: int) -> tuple[str, int]:
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import AgentRunError
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    model = OpenAIChatModel(model_name, provider=OpenAIProvider(base_url=base_url, api_key=api_key))
    agent = Agent(model, instructions=INSTRUCTIONS, tools=pydantic_ai_tools(task, env), retries=1)
    try:
        result = agent.run_sync(task.prompt, usage_limits=UsageLimits(request_limit=max_iterations))
    except AgentRunError as e:
        raise _Stopped(f"{type(e).__name__}: {e}", max_iterations if "request_limit" in str(e) else 0, []) from e
    responses = [m for m in result.all_messages() if isinstance(m, ModelResponse)]
    return str(result.output), len(responses)


def _openai_loop(task: AgentTask, env: TaskEnv, base_url: str, api_key: str, model_name: str,
                 max_iterations: int) -> tuple[str, list[float]]:
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=600)
    messages: list[dict[str, Any]] = [{"role": "system", "content": INSTRUCTIONS},
                                      {"role": "user", "content": task.prompt}]
    iter_ms: list[float] = []
    for _ in range(max_iterations):
        t0 = time.perf_counter()
        resp = client.chat.completions.create(model=model_name, messages=messages, tools=openai_tools(task))
        iter_ms.append(round(1000 * (time.perf_counter() - t0), 1))
        msg = resp.choices[0].message
        if not msg.tool_calls:
            return msg.content or "", iter_ms
        messages.append(msg.model_dump(exclude_none=True))
        for call in msg.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": _call(env, call)})
    raise _Stopped(f"UsageLimitExceeded: no reply without tool calls in {max_iterations} requests", len(iter_ms),
                   iter_ms)


def _call(env: TaskEnv, call: Any) -> str:
    try:
        args = json.loads(call.function.arguments or "{}")
    except json.JSONDecodeError as e:
        return f"error: the arguments are not JSON ({e})"
    try:
        return json.dumps(env.call(call.function.name, args if isinstance(args, dict) else {}))
    except ServiceUnavailable as e:
        return f"error: {e}"
