"""The engine's faces (``agentkit/engine/faces.py``): the Engine has every one; a double only what it defines."""

import importlib.util
import inspect
from pathlib import Path

import pytest

from agentkit.engine.faces import BackboneLike, Constraining, EngineLike, Scoring, Tokenizing

FACES = (EngineLike, Tokenizing, Constraining, Scoring)


def test_the_engine_has_every_face(tiny):
    assert all(isinstance(tiny, f) for f in FACES)


def test_a_double_with_generate_only_is_engine_like_only():
    class Double:
        batches = False

        def generate(self, messages, config, **kw):
            return None

    assert [isinstance(Double(), f) for f in FACES] == [True, False, False, False]


def test_every_backbone_class_is_backbone_like(tiny):
    """The passes the scoring uses (new_cache, encode, crop), on the torch, DiffusionGemma and
    llama.cpp backbones (classes: llama.cpp itself need not be installed), and on the engine's instance."""
    from agentkit.engine.backbone import Backbone
    from agentkit.engine.gemma import GemmaBackbone
    from agentkit.engine.llama_cpp import LlamaBackbone

    assert isinstance(tiny.backbone, BackboneLike)
    for cls in (Backbone, GemmaBackbone, LlamaBackbone):
        assert issubclass(cls, BackboneLike), cls

    class NoCrop:
        def new_cache(self):
            return None

        def encode(self, ids, cache, rows=(-1,)):
            return None

    assert not isinstance(NoCrop(), BackboneLike)


# EngineLike is what the server and the SDK call: the engine and every engine double of their tests take all of
# generate's keywords (a double may ignore one, through **kw)
TESTS = Path(__file__).resolve().parents[1]
KEYWORDS = {n for n, p in inspect.signature(EngineLike.generate).parameters.items() if p.kind is p.KEYWORD_ONLY}
# the engine doubles of the server's and the SDK's tests: (test module, class name)
DOUBLES = [("serving/test_server.py", "Gated"), ("serving/test_tool_choice.py", "Scripted"),
           ("serving/test_batching.py", "Held"), ("serving/test_admission.py", "Gated"),
           ("serving/test_hardening.py", "Counting")]


def takes_every_keyword(fn) -> bool:
    params = inspect.signature(fn).parameters.values()
    named = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return KEYWORDS <= named or any(p.kind is p.VAR_KEYWORD for p in params)


def test_the_engine_takes_every_keyword(tiny):
    assert tiny.batches is True and KEYWORDS <= set(inspect.signature(tiny.generate).parameters)


@pytest.mark.parametrize("path,name", DOUBLES)
def test_every_engine_double_is_engine_like(path, name):
    spec = importlib.util.spec_from_file_location(f"_double_{Path(path).stem}", TESTS / path)
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
