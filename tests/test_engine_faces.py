"""``EngineLike`` (agentkit/engine/faces.py) is what the server and the SDK call: the engine and every test double
they are given implement it, keywords included (a double may ignore one, through ``**kw``, but takes them all)."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest

from agentkit.engine.faces import EngineLike

ROOT = Path(__file__).resolve().parent
KEYWORDS = {n for n, p in inspect.signature(EngineLike.generate).parameters.items() if p.kind is p.KEYWORD_ONLY}
# the engine doubles of the server's and the SDK's tests: (test module, class name)
DOUBLES = [("serving/test_server.py", "Gated"), ("serving/test_tool_choice.py", "Scripted"),
           ("serving/test_batching.py", "Held"), ("serving/test_admission.py", "Gated"),
           ("serving/test_hardening.py", "Counting")]


def takes_every_keyword(fn) -> bool:
    params = inspect.signature(fn).parameters.values()
    named = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return KEYWORDS <= named or any(p.kind is p.VAR_KEYWORD for p in params)


def test_the_engine_is_engine_like():
    from agentkit.engine import tiny_engine

    eng = tiny_engine(0)
    assert isinstance(eng, EngineLike) and eng.batches is True
    assert KEYWORDS <= set(inspect.signature(eng.generate).parameters)


@pytest.mark.parametrize("path,name", DOUBLES)
def test_every_engine_double_is_engine_like(path, name):
    spec = importlib.util.spec_from_file_location(f"_double_{Path(path).stem}", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls = getattr(module, name)
    assert takes_every_keyword(cls.generate), f"{path}:{name}.generate does not take {sorted(KEYWORDS)}"
    assert isinstance(getattr(cls, "batches", None), bool) or "__getattr__" in vars(cls), f"{name}: no batches"


def test_something_without_the_keywords_is_refused():
    from agentkit.errors import UserError
    from agentkit.sdk import EngineGenerator

    class Partial:
        def generate(self, prompt, config=None):
            return None

    assert not isinstance(Partial(), EngineLike)
    with pytest.raises(UserError, match="EngineLike"):
        EngineGenerator(Partial())
