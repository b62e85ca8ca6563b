"""backend="auto" never changes answers: it is torch, even where llama-cpp-python is installed (its greedy text
differs from torch's); only an explicit backend="llama.cpp" decodes there."""

import dataclasses

import pytest

from agentkit.config import DecodeConfig, EngineConfig
from agentkit.engine import engine as engine_mod
from agentkit.engine import llama_cpp
from agentkit.engine.engine import Engine

pytestmark = pytest.mark.usefixtures("one_thread")
PROMPTS = ["What is the capital of France?", "Write a function that adds two numbers and explain it at length."]


@pytest.fixture()
def llama_installed(monkeypatch):
    """As if llama-cpp-python were installed, with any load of it a failure."""
    def no_llama(*a, **k):
        raise AssertionError("backend auto loaded llama.cpp")

    monkeypatch.setattr(llama_cpp, "available", lambda: True)
    monkeypatch.setattr(engine_mod, "load_default_llama", no_llama)


def test_auto_resolves_to_torch(llama_installed):
    assert llama_cpp.choose_backend(EngineConfig()) == "torch"
    assert llama_cpp.choose_backend(EngineConfig(backend="auto", device="cpu")) == "torch"


def test_auto_never_changes_greedy_text(tiny, llama_installed, monkeypatch):
    # the tiny model dressed as the embedded default (what used to route free text to llama.cpp)
    lm = dataclasses.replace(tiny.lm, meta={**tiny.lm.meta, "default": True})
    monkeypatch.setattr(engine_mod, "load_model", lambda *a, **k: lm)
    auto = Engine(EngineConfig(backend="auto", adapter=False, lora="none"))  # the tiny model takes no loop adapter
    torch_eng = Engine.from_loaded(tiny.lm, EngineConfig(backend="torch"))
    assert auto.backend == "torch"
    for prompt in PROMPTS:
        for n in (4, 96):  # short and long replies (long ones were the ones sent to llama.cpp)
            want = torch_eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=n))
            for mode in ("ar", "verify"):
                got = auto.generate(prompt, DecodeConfig(mode=mode, max_new_tokens=n))
                assert got.stats.backend == "torch" and got.token_ids == want.token_ids, (prompt, n, mode)


def test_cli_generate_takes_backend():
    from typer.testing import CliRunner

    from agentkit.cli import app

    r = CliRunner().invoke(app, ["generate", "hi", "--backend", "nope"])
    assert r.exit_code == 2 and "backend must be one of" in r.output
    for cmd in ("generate", "demo", "serve"):
        assert "--backend" in CliRunner().invoke(app, [cmd, "--help"]).output
