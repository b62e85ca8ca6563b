"""The engine's torch threads: applied on the thread of each generate call, 1 by default on a small machine
(agentkit/_threads.py, docs/threads.md)."""

import os
import subprocess
import sys
import threading

import torch

from agentkit import _threads
from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine.engine import Engine
from agentkit.models.tiny import tiny_llama


def test_threads_are_set_on_the_calling_thread_of_each_generate():
    before = torch.get_num_threads()
    eng = Engine.from_loaded(tiny_llama(0), EngineConfig(threads=1))
    seen: list[int] = []

    def work() -> None:
        torch.set_num_threads(2)  # a new thread's OpenMP setting is its own
        eng.generate("hello there", DecodeConfig(max_new_tokens=2))
        seen.append(torch.get_num_threads())

    try:
        t = threading.Thread(target=work)
        t.start()
        t.join()
        assert seen == [1]
    finally:
        torch.set_num_threads(before)


def test_default_threads_is_one_on_a_small_machine(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert _threads.default_threads() == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert _threads.default_threads() is None


def _policy(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code + "; import os; print(os.environ.get('OMP_WAIT_POLICY'))"],
                         env=base | env, check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def test_importing_agentkit_sets_the_passive_wait_policy_before_torch_loads():
    assert _policy("import agentkit") == "PASSIVE"
    assert _policy("import agentkit", OMP_WAIT_POLICY="ACTIVE") == "ACTIVE"  # the user's is kept
    assert _policy("import torch; import agentkit") == "None"  # too late: libgomp has read it (the engine warns)
